"""A deterministic crawl that reads like real pages, for the dashboard's demo store and for benchmarks.

`demo_records` yields crawl records in the seed's shape (url, fetched_at, title,
description, sections), crawl by crawl, one crawl a day. `cdc.demo.build.build_demo` runs
each crawl through the normal ingest path (`Ingester`, one run per crawl) into a new store.

The text is real sentences (`cdc.demo.text`), so a newcomer can read an edit and judge
whether cdc found it: a shop's product pages with prices, a local paper's articles with
datelines, a cookery blog (sentences written for the project), a documentation site made
of the Python standard library's own docstrings (the most real text that ships with every
install, and the kind of page crawled most), a Japanese shop and a Chinese paper (so the
character-level edits of scripts written without spaces are on show). Sentences are
templates whose slots name one product, city or dish per page, so paragraphs stay about
one thing while a hundred thousand pages stay distinct.

What an analyst meets is in it, spread over pages and crawls:

- Six hosts, each with its own long navigation menu, cookie notice and footer, shared by
  all its pages; every page ends with one legal notice (English, Japanese and Chinese)
  syndicated to all hosts. `_recurring` makes sure each frame holds whole chunks that
  recur on every page, so the Boilerplate view finds them.
- Between crawls a page gets one of: a price change on a shop page (`$19.99` to `$24.99`,
  `2,480円` to `2,980円`, up a ladder), a date change on a news page (`Updated 3 March
  2026`), an inserted paragraph, a deleted paragraph, a typo fix (two letters swapped back,
  a wrong kanji replaced), a moved section, a rewrite of its main content, a recycled URL
  (a different site's page, without the host's frame), or nothing: an unchanged recrawl,
  which makes no new generation. Each kind is placed at least once in every crawl (pages
  allowing), the rest drawn at random.
- Half the hosts change their template (navigation and footer) at one crawl, on every
  page of the host; another host adds a site-wide banner at one crawl.
- Some pages disappear: fetched up to one crawl and never again.
- Some text holds HTML-like strings as literal text (`<script>alert("x")</script>`,
  `<b>bold</b>`, `&amp;`): the dashboard must show them as text.

Everything comes from `random.Random` seeded with `seed` and the host, page or crawl (and,
for the sentences of a paragraph, from a key drawn that way): the same arguments give the
same records, never the time or the global generator (the docs pages follow the running
Python's docstrings). Records are made one at a time: a page's state in a crawl is rebuilt
from its first version and the edits of the crawls before (a few small list operations
each), so however many pages there are, one page is held at a time, besides each host's
frame and the disappearing pages' numbers.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from cdc.core.chunking import chunk_content
from cdc.core.gear import DEFAULT_PARAMS, MAX_SIZE_CEILING, WINDOW, ChunkParams
from cdc.demo import text as demotext
from cdc.demo.text import Writer, joiner

__all__ = ["DEFAULT_GENERATIONS", "DEFAULT_PAGES", "DEFAULT_SEED", "demo_records"]

DEFAULT_PAGES = 300
DEFAULT_GENERATIONS = 8
DEFAULT_SEED = 7

START = datetime(2026, 1, 5, 2, 0, tzinfo=UTC)
CRAWL_INTERVAL = timedelta(days=1)
CRAWL_SPREAD = 20 * 3600  # seconds over which one crawl's fetches are spread

MAIN_BYTES = {"shop": (1_000, 3_500), "news": (1_200, 4_500), "blog": (1_200, 4_500),
              "docs": (2_000, 14_000)}  # main content of a first version, drawn log-uniform
REWRITE_BYTES = (4_000, 9_000)  # docs content after a rewrite: enough to outweigh the frame
REWRITTEN_BYTES = (1_000, 1_800)  # elsewhere: a rewrite draws on a pool of its own, kept short
RECYCLED_BYTES = (800, 2_000)
PARAGRAPH_BYTES = 430  # about, on average, in any script: turns a size into a paragraph count
NAVIGATION_BYTES = 2_400
FOOTER_MENU_BYTES = 1_200  # the footer's own menu, after its sentences
TYPO_SHARE = 0.2  # paragraphs written with one typo
MARKUP_SHARE = 0.3  # pages of the English hosts with a paragraph that quotes HTML-like text
GONE_SHARE = 0.03  # pages that disappear at some crawl
BATCH_TARGET = 10  # progress reports a build aims for: sets the ingest batch size
MIN_BATCH = 50  # records: below this a batch costs more in store round trips than it reports

PRICES = {"en": ("$9.99", "$14.99", "$19.99", "$24.99", "$29.99", "$34.99", "$39.99", "$44.99"),
          "ja": ("980円", "1,480円", "1,980円", "2,480円", "2,980円", "3,480円", "3,980円", "4,980円")}
FIRST_PRICES = (1, 2, 2, 2, 3)  # indexes into PRICES: most products start at $19.99 or 1,980円
# The product's name is in its price line: the line is the page's own, as on a real shop
# page. (Without it, the products that share a price would share the line, a chunk on more
# than 5% of the host's pages: boilerplate by the seed's rule, and a price change a
# "template change".)
PRICE_LINE = {
    "en": "{}: {} each, including VAT. Free delivery on orders over $50 and free returns within 30 days.",
    "ja": "{}：{}（税込）。五千円以上のご注文で送料無料、三十日以内の返品を承ります。",
}
CONSENT = {"en": " Accept all | Reject all | Settings", "ja": "すべて許可 | すべて拒否 | 設定",
           "zh": "全部接受 | 全部拒绝 | 设置"}
NEW_MENU = {"en": "New this season", "ja": "今季の新作", "zh": "新栏目"}
COPYRIGHT = {"en": "Copyright 2026 {} Ltd. All rights reserved.", "ja": "© 2026 {}",
             "zh": "© 2026 {} 版权所有"}

# Edits between crawls.
UNCHANGED, PRICE, DATE, INSERT, DELETE, TYPO, MOVE, REWRITE, RECYCLE = range(9)
WEIGHTS = {"shop": (33, 20, 0, 12, 6, 13, 8, 7, 1), "news": (35, 0, 20, 12, 6, 12, 8, 6, 1),
           "other": (42, 0, 0, 16, 8, 16, 10, 7, 1)}
GUARANTEED = (PRICE, DATE, INSERT, DELETE, TYPO, MOVE, REWRITE, RECYCLE, UNCHANGED)  # in every crawl

HOSTS = (  # name, language, kind, brand, path
    ("shop.example", "en", "shop", "Example Shop", "/products/"),
    ("news.example", "en", "news", "Example News", "/articles/"),
    ("docs.example", "en", "docs", "Example Docs", "/library/"),
    ("blog.example", "en", "blog", "Example Kitchen Notes", "/posts/"),
    ("shop.example.jp", "ja", "shop", "エグザンプル商店", "/shouhin/"),
    ("news.example.cn", "zh", "news", "示例新闻网", "/xinwen/"),
)
PARTNER = Writer("en", "partner")  # the site a recycled URL now belongs to


@dataclass(frozen=True)
class _Host:
    name: str
    language: str
    kind: str  # a key of MAIN_BYTES
    brand: str
    path: str
    writer: Writer
    navigation: tuple[str, str]  # before and after its template change
    cookies: str
    footer: tuple[str, str]
    banner: str
    template_change: int | None  # the crawl (0-based) where the template changes, if it does
    banner_from: int | None  # the crawl where the site-wide banner appears, if it does


@dataclass
class _Paragraph:
    key: int  # picks its sentences (a docstring paragraph's index on the docs host)
    typo: bool = False
    markup: bool = False


@dataclass
class _Section:
    key: int  # picks its heading (a documented object's index on the docs host)
    paragraphs: list[_Paragraph]


@dataclass
class _Page:
    subject: int  # fixes the product, city or dish (the module on the docs host)
    sections: list[_Section]
    price: int | None = None  # index into PRICES: shop products only
    published: date | None = None  # news only
    updated: date | None = None
    recycled: bool = False
    rewritten: bool = False  # its text comes from the rewrite pool


@dataclass(frozen=True)
class _Plan:
    """What every crawl of one demo shares: hosts, legal notice, placed edits, vanishings."""

    pages: int
    generations: int
    seed: int
    hosts: list[_Host]
    legal: str
    forced: list[dict[int, int]]
    gone: dict[int, int]  # page number: the first crawl that no longer finds it


# --- frames ----------------------------------------------------------------------------------


# Finds (nearly) every boundary position: the smallest minimum size, no maximum to speak of.
_BOUNDARY_PARAMS = ChunkParams(avg_size=DEFAULT_PARAMS.avg_size, min_size=WINDOW, max_size=MAX_SIZE_CEILING)


def _recurs(text: str) -> bool:
    """Whether every page holding `text` cuts a whole chunk of it at the same place.

    Whether a position is a boundary depends only on the `WINDOW` bytes up to it, and a
    chunk's end is searched for from `min_size` bytes past its start. So if the text has a
    boundary x, past the first window, with none in the `min_size` bytes before it, every
    cut before x leads to a cut at x; and if another boundary follows, the chunk between
    them is the same bytes on every page. Boundaries are found with a small minimum size,
    which hides one that follows another within a window: the margins allow for it.
    """
    found = [chunk.end - 1 for chunk in chunk_content(text.encode(), _BOUNDARY_PARAMS)[:-1]]
    gap = DEFAULT_PARAMS.min_size + WINDOW
    return any(x >= WINDOW + gap and (i == 0 or found[i - 1] <= x - gap)
               and found[-1] >= x + DEFAULT_PARAMS.min_size
               for i, x in enumerate(found))


def _recurring(make: Callable[[], tuple[str, ...]], joined: Callable[[tuple[str, ...]], list[str]]) -> tuple:
    """`make()` again until each text `joined` gives from it `_recurs`: boilerplate that shows."""
    for _ in range(1_000):
        made = make()
        if all(_recurs(text) for text in joined(made)):
            return made
    raise RuntimeError("no recurring boilerplate in 1,000 tries: the chunk parameters changed?")


def _hosts(seed: int, generations: int, count: int) -> list[_Host]:
    rng = random.Random(f"{seed}/hosts")
    changing = set(rng.sample(range(count), max(1, count // 2))) if generations > 1 else set()
    steady = [number for number in range(count) if number not in changing]
    bannered = rng.choice(steady) if generations > 1 and steady else None
    text = demotext.lists()
    hosts = []
    for number, (name, language, kind, brand, path) in enumerate(HOSTS[:count]):
        writer = Writer(language, kind)
        if kind == "docs":
            labels = tuple(module for module, *_ in demotext.docs().modules)
        else:
            labels = text[f"{language}.{kind}.nav"]

        def frame(labels=labels, brand=brand, language=language, kind=kind) -> tuple[str, str, str]:
            menu = demotext.menu(rng, labels, NAVIGATION_BYTES)
            navigation = f"{brand} | " + " | ".join(menu)
            new = f"{NEW_MENU[language]}: " + ", ".join(rng.sample(labels, 6))
            redesigned = f"{brand} | {new} | " + " | ".join(menu[1:])
            if kind == "docs":  # literal markup in a template: boilerplate samples show it as text
                navigation = navigation.replace(" | ", " | Reference &amp; API | <b>New</b> | ", 1)
                redesigned = redesigned.replace(" | ", " | Reference &amp; API | ", 1)
            cookies = joiner(language).join(
                s.replace("{BRAND}", brand) for s in text[f"{language}.cookie"]) + CONSENT[language]
            return navigation, redesigned, cookies

        def footers(labels=labels, brand=brand, language=language) -> tuple[str, str]:
            glue = joiner(language)
            about = demotext.shuffled(rng, (s.replace("{BRAND}", brand) for s in text[f"{language}.footer"]))
            links = " | ".join(demotext.shuffled(rng, text[f"{language}.footer.links"]))
            popular = " | ".join(demotext.menu(rng, labels, FOOTER_MENU_BYTES))
            copyright_line = COPYRIGHT[language].format(brand)
            half = len(about) // 2
            redesign = glue.join([*text[f"{language}.footer.redesign"], *about[half:]])
            return (" ".join([glue.join(about), popular, links, copyright_line]),
                    " ".join([redesign, popular, links, copyright_line]))

        navigation, redesigned, cookies = _recurring(
            frame, lambda made: [f"{made[0]}\n{made[2]}", f"{made[1]}\n{made[2]}"])
        footer = _recurring(footers, list)
        banners = text[f"{language}.banner"]
        change = rng.randint(1, generations - 1) if number in changing else None
        banner_from = rng.randint(1, generations - 1) if number == bannered else None
        hosts.append(_Host(name, language, kind, brand, path, writer, (navigation, redesigned), cookies,
                           footer, banners[0 if kind == "shop" else -1], change, banner_from))
    return hosts


def _legal(seed: int) -> str:
    """The notice syndicated to every host: the same text on every page, in three languages."""
    rng = random.Random(f"{seed}/legal")
    text = demotext.lists()

    def notice() -> tuple[str, ...]:
        blocks = []
        for language in ("en", "ja", "zh"):
            first, *middle, last = text[f"{language}.legal"]
            blocks.append(joiner(language).join([first, *demotext.shuffled(rng, middle), last]))
        return tuple(blocks)

    return "\n\n".join(_recurring(notice, lambda made: ["\n".join(made)]))


# --- pages and their edits -----------------------------------------------------------------


def _paragraph_count(rng: random.Random, size_range: tuple[int, int]) -> int:
    low, high = size_range
    return max(3, round(math.exp(rng.uniform(math.log(low), math.log(high))) / PARAGRAPH_BYTES))


def _docs_main(rng: random.Random, subject: int, size_range: tuple[int, int]) -> list[_Section]:
    """Consecutive documented objects of the page's module: a reference page."""
    docs = demotext.docs()
    _, _, first, end = docs.modules[subject % len(docs.modules)]
    wanted = _paragraph_count(rng, size_range)
    start = rng.randrange(first, end)
    sections = []
    for step in range(end - first):
        item = first + (start - first + step) % (end - first)
        _, low, high = docs.items[item]
        typos = [rng.random() < TYPO_SHARE for _ in range(low, high)]
        sections.append(_Section(item, [_Paragraph(key, typo) for key, typo in zip(range(low, high), typos)]))
        wanted -= high - low
        if wanted <= 0 and len(sections) >= 2:
            break
    return sections


def _main(rng: random.Random, host: _Host, subject: int, size_range: tuple[int, int], markup: bool,
          recycled: bool = False) -> list[_Section]:
    if host.kind == "docs" and not recycled:
        sections = _docs_main(rng, subject, size_range)
    else:
        paragraphs = [_Paragraph(rng.getrandbits(63), rng.random() < TYPO_SHARE)
                      for _ in range(_paragraph_count(rng, size_range))]
        sections = []
        while paragraphs:
            take = min(len(paragraphs), rng.randint(1, 4))
            sections.append(_Section(rng.getrandbits(63), paragraphs[:take]))
            del paragraphs[:take]
        if len(sections) == 1:  # a move needs two sections
            first = sections[0]
            sections.append(_Section(rng.getrandbits(63), first.paragraphs[1:]))
            del first.paragraphs[1:]
    if markup:
        rng.choice([p for section in sections for p in section.paragraphs]).markup = True
    return sections


def _first_version(rng: random.Random, host: _Host, *, recycled: bool = False) -> _Page:
    subject = rng.getrandbits(63)
    markup = host.language == "en" and rng.random() < (0.6 if host.kind == "docs" else MARKUP_SHARE)
    size = RECYCLED_BYTES if recycled else MAIN_BYTES[host.kind]
    sections = _main(rng, host, subject, size, markup and not recycled, recycled)
    price = rng.choice(FIRST_PRICES) if host.kind == "shop" and not recycled else None
    published = None
    if host.kind == "news" and not recycled:
        published = START.date() - timedelta(days=1 + rng.randrange(90))
    return _Page(subject, sections, price, published, None, recycled)


def _title(page: _Page, host: _Host) -> str:
    if page.recycled:
        return PARTNER.title(page.subject)
    if host.kind == "docs":
        module, summary, _, _ = demotext.docs().modules[page.subject % len(demotext.docs().modules)]
        return f"{module}: {summary} | {host.brand}"
    return f"{host.writer.title(page.subject)} | {host.brand}"


def _description(page: _Page, host: _Host) -> str:
    if page.recycled:
        return PARTNER.description(page.subject)
    if host.kind == "docs":
        module = demotext.docs().modules[page.subject % len(demotext.docs().modules)][0]
        return f"The functions and classes of Python's {module} module, with their documentation."
    return host.writer.description(page.subject)


def _fix_typo(rng: random.Random, page: _Page) -> bool:
    misspelt = [p for section in page.sections for p in section.paragraphs if p.typo]
    if not misspelt:
        return False
    rng.choice(misspelt).typo = False
    return True


def _delete(rng: random.Random, page: _Page) -> bool:
    """Drop a paragraph from a section that keeps another; else a section, if three are left."""
    sections = [s for s in page.sections if len(s.paragraphs) > 1]
    if sections:
        section = rng.choice(sections)
        del section.paragraphs[rng.randrange(len(section.paragraphs))]
    elif len(page.sections) > 2:
        del page.sections[rng.randrange(len(page.sections))]
    else:
        return False
    return True


def _edit(rng: random.Random, page: _Page, host: _Host, kind: int, day: date) -> _Page:
    """The page after one crawl's edit (in place where that is simpler)."""
    if kind == PRICE:
        if page.price is None:
            kind = DATE
        else:  # up the ladder; from the top, a sale
            page.price = page.price + 1 if page.price + 1 < len(PRICES["en"]) else 1
            return page
    if kind == DATE:
        if page.published is None:
            kind = TYPO
        else:
            page.updated = day
            return page
    if kind == TYPO and not _fix_typo(rng, page):
        kind = INSERT
    if kind == DELETE and not _delete(rng, page):
        kind = INSERT
    if kind == MOVE:
        sections = page.sections
        origin = rng.randrange(len(sections))
        moved = sections.pop(origin)
        sections.insert(rng.choice([i for i in range(len(sections) + 1) if i != origin]), moved)
    elif kind == INSERT:
        section = rng.choice(page.sections)
        key = rng.getrandbits(63)
        if host.kind == "docs" and not page.recycled:  # another object's paragraph, in its words
            key %= len(demotext.docs().paragraphs)
        at = rng.randint(0, len(section.paragraphs))
        section.paragraphs.insert(at, _Paragraph(key, rng.random() < TYPO_SHARE))
    elif kind == REWRITE:  # new text about the same product, story or dish; on docs, a new module
        if host.kind == "docs":
            page.subject += 1
        page.rewritten = host.kind != "docs" and not page.recycled
        size = REWRITE_BYTES if host.kind == "docs" else REWRITTEN_BYTES
        page.sections = _main(rng, host, page.subject, size,
                              host.language == "en" and rng.random() < MARKUP_SHARE, page.recycled)
    elif kind == RECYCLE:
        page = _first_version(rng, host, recycled=True)
    return page


def _kind(rng: random.Random, host: _Host, forced: int | None) -> int:
    if forced is not None:
        return forced
    weights = WEIGHTS.get(host.kind, WEIGHTS["other"])
    return rng.choices(range(len(weights)), weights)[0]


def _gone(seed: int, pages: int, generations: int) -> dict[int, int]:
    """Pages that disappear, with the first crawl that no longer finds them."""
    if generations < 2 or pages < 2:
        return {}
    rng = random.Random(f"{seed}/gone")
    return {page: rng.randint(1, generations - 1)
            for page in sorted(rng.sample(range(pages), max(1, round(pages * GONE_SHARE))))}


def _forced(seed: int, pages: int, generations: int, hosts: int,
            gone: dict[int, int]) -> list[dict[int, int]]:
    """For each crawl, pages given an edit of each kind, so that every kind occurs."""
    forced: list[dict[int, int]] = [{}]
    for crawl in range(1, generations):
        rng = random.Random(f"{seed}/crawl/{crawl}")
        present = [page for page in range(min(pages, 64 * hosts)) if gone.get(page, generations) > crawl]
        placed: dict[int, int] = {}
        for kind, host in ((PRICE, 0), (DATE, 1)):  # on a shop page, on a news page
            candidates = [page for page in present if page % hosts == host]
            if candidates:
                placed[rng.choice(candidates)] = kind
        for kind in GUARANTEED[2:]:
            free = [page for page in present if page not in placed]
            if not free:
                break
            placed[rng.choice(free)] = kind
        forced.append(placed)
    return forced


def _paragraph_text(paragraph: _Paragraph, page: _Page, host: _Host) -> str:
    if page.recycled:
        text = PARTNER.paragraph(paragraph.key, page.subject)
    elif host.kind == "docs":
        paragraphs = demotext.docs().paragraphs
        text = paragraphs[paragraph.key % len(paragraphs)]
    else:
        text = host.writer.paragraph(paragraph.key, page.subject, "rewrite" if page.rewritten else "sentence")
    if paragraph.markup:
        sentences = text.split(". ")
        quotes = demotext.lists()["en.markup"]  # the docs host quotes the <script> one
        docs = host.kind == "docs" and not page.recycled
        markup = quotes[0] if docs else demotext.pick(quotes, paragraph.key, 29)
        at = demotext.mix(paragraph.key, 31) % len(sentences)
        text = ". ".join([*sentences[:at], markup.removesuffix("."), *sentences[at:]])
    if paragraph.typo:
        text = demotext.misspell(text, host.language, paragraph.key)
    return text


def _heading(section: _Section, page: _Page, host: _Host) -> str:
    if page.recycled:
        return PARTNER.heading(section.key, page.subject)
    if host.kind == "docs":
        docs = demotext.docs()
        return docs.items[section.key % len(docs.items)][0]
    return host.writer.heading(section.key, page.subject)


def _render(page: _Page, host: _Host, crawl: int, url: str, fetched_at: str, legal: str) -> dict:
    main = []
    if page.price is not None:
        main.append({"heading": "Price and availability",
                     "text": PRICE_LINE[host.language].format(host.writer.title(page.subject),
                                                              PRICES[host.language][page.price])})
    if page.published is not None:
        main.append({"heading": "Dates",
                     "text": demotext.dates_line(host.language, page.published, page.updated)})
    for section in page.sections:
        main.append({"heading": _heading(section, page, host),
                     "text": "\n\n".join(_paragraph_text(p, page, host) for p in section.paragraphs)})
    if page.recycled:
        sections = main
    else:
        redesigned = host.template_change is not None and crawl >= host.template_change
        banner = [{"heading": "Site banner", "text": host.banner}] \
            if host.banner_from is not None and crawl >= host.banner_from else []
        sections = [
            {"heading": "Site navigation", "text": host.navigation[redesigned]},
            *banner,
            {"heading": "Cookie notice", "text": host.cookies},
            *main,
            {"heading": "Site footer", "text": host.footer[redesigned]},
            {"heading": "Legal notice", "text": legal},
        ]
    return {"url": url, "fetched_at": fetched_at, "title": _title(page, host),
            "description": _description(page, host), "sections": sections}


def check_sizes(pages: int, generations: int) -> None:
    for name, value in (("pages", pages), ("generations", generations)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


def plan_crawls(pages: int, generations: int, seed: int) -> _Plan:
    hosts = _hosts(seed, generations, min(len(HOSTS), pages))
    gone = _gone(seed, pages, generations)
    return _Plan(pages, generations, seed, hosts, _legal(seed),
                 _forced(seed, pages, generations, len(hosts), gone), gone)


def crawl_records(plan: _Plan, crawl: int) -> Iterator[dict]:
    """The records of one crawl (0-based), page by page, made one at a time."""
    seed, pages, hosts = plan.seed, plan.pages, plan.hosts
    day = START + crawl * CRAWL_INTERVAL
    for number in range(pages):
        if plan.gone.get(number, plan.generations) <= crawl:
            continue
        host = hosts[number % len(hosts)]
        page = _first_version(random.Random(f"{seed}/page/{number}"), host)
        slug = "-".join(re.sub(r"[^a-z0-9]+", " ", _title(page, host).split(" | ")[0].lower()).split()[:6])
        url = f"https://{host.name}{host.path}{slug + '-' if slug else ''}{number}"  # kept when recycled
        for past in range(1, crawl + 1):
            rng = random.Random(f"{seed}/page/{number}/{past}")
            when = (START + past * CRAWL_INTERVAL).date()
            page = _edit(rng, page, host, _kind(rng, host, plan.forced[past].get(number)), when)
        fetched = day + timedelta(seconds=number * CRAWL_SPREAD // pages)
        yield _render(page, host, crawl, url, fetched.strftime("%Y-%m-%dT%H:%M:%SZ"), plan.legal)


def demo_records(pages: int = DEFAULT_PAGES, generations: int = DEFAULT_GENERATIONS,
                 seed: int = DEFAULT_SEED) -> Iterator[dict]:
    """`generations` crawls of up to `pages` pages as records, crawl by crawl, made one at a time.

    A crawl that finds a page unchanged yields the same content again (with a later
    `fetched_at`): ingest counts it as unchanged and makes no generation. A page that has
    disappeared yields nothing.
    """
    check_sizes(pages, generations)
    return _records(pages, generations, seed)


def _records(pages: int, generations: int, seed: int) -> Iterator[dict]:
    plan = plan_crawls(pages, generations, seed)
    for crawl in range(generations):
        yield from crawl_records(plan, crawl)
