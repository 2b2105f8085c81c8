"""A deterministic synthetic crawl, for the dashboard's demo store and for benchmarks.

`demo_records` yields crawl records in the seed's shape (url, fetched_at, title,
description, sections), crawl by crawl: every page once in crawl 1, then every page in
crawl 2, one crawl a day. `build_demo` runs them through the normal ingest path
(`Ingester`) into a new store.

What an analyst meets is in it, spread over pages and crawls:

- Six hosts, each with its own long navigation, cookie notice and footer, written from a
  vocabulary of plain words, so they are not periodic: content-defined boundaries fall
  inside them at the same places on every page, and whole chunks of them recur (periodic
  text has no boundaries at all). Every page ends with one legal notice syndicated to all
  hosts.
- Between crawls a page gets one of: a price change on a shop page (`$19.99` to `$24.99`
  and so on up a ladder), an inserted paragraph, a typo fix (one word), a moved section,
  a rewrite of its main content, a recycled URL (a different page, without the host's
  frame), or nothing: an unchanged recrawl, which makes no new generation. Each kind is
  placed at least once in every crawl (pages allowing), the rest drawn at random.
- Half the hosts change their template (navigation and footer) at one crawl, on every
  page of the host.
- Some text holds HTML-like strings as literal text (`<script>alert("x")</script>`,
  `<b>bold</b>`, `&amp;`): the dashboard must show them as text.

Everything comes from `random.Random` seeded with `seed` and the host, page or crawl (and,
for the sentences of a paragraph, from a key drawn that way): the same arguments give the
same records on every machine, never the time or the global generator. Records are made
one at a time: a page's state in a crawl is rebuilt from its first version and the edits
of the crawls before (a few small list operations each), so however many pages there are,
one page is held at a time, besides each host's frame and pool of sentences.
"""

from __future__ import annotations

import glob
import math
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cdc.chunking import DEFAULT_PARAMS, MAX_SIZE_CEILING, WINDOW, ChunkParams, chunk_content
from cdc.errors import StoreError
from cdc.ingest import BATCH_RECORDS, Ingester, IngestSummary
from cdc.lifeline import process_exists
from cdc.sources import SourceRecord
from cdc.store import Store

__all__ = ["DEFAULT_GENERATIONS", "DEFAULT_PAGES", "DEFAULT_SEED", "build_demo", "demo_records"]

DEFAULT_PAGES = 300
DEFAULT_GENERATIONS = 8
DEFAULT_SEED = 7

START = datetime(2026, 1, 5, 2, 0, tzinfo=UTC)
CRAWL_INTERVAL = timedelta(days=1)
CRAWL_SPREAD = 20 * 3600  # seconds over which one crawl's fetches are spread

MAIN_BYTES = (1_500, 16_000)  # main content of a first version, drawn log-uniform
REWRITE_BYTES = (6_000, 16_000)  # main content after a rewrite: enough to outweigh the frame
POOL_SENTENCES = 8_192  # per host
PARAGRAPH_BYTES = 430  # about, on average: turns a size into a paragraph count
TYPO_SHARE = 0.2  # paragraphs written with one misspelt word
MARKUP_SHARE = 0.3  # pages with a paragraph that quotes HTML-like text
BATCH_TARGET = 10  # progress reports a build aims for: sets the ingest batch size
MIN_BATCH = 50  # records: below this a batch costs more in store round trips than it reports

VOCABULARY = tuple("""
the of and to in is that for it as was with be by on not this are or from at which but have an they
you were there been one all we their has would when will can more about into than them these some
other only new time people year way day work life part place case week company system program
question government number night point home water room mother area money story fact month lot right
study book eye job word business issue side kind head house service friend father power hour game
line end member law car city community name president team minute idea kid body information back
parent face others level office door health person art war history party result change morning
reason research girl guy moment air teacher force education foot boy age policy process music market
sense nation plan college interest death experience effect use class control care field development
role effort rate heart drug show leader light voice wife police mind price report decision son view
relationship town road arm difference value building action model season society tax director
position player record paper space ground form event official matter center couple site project
activity star table need court oil situation cost industry figure street image phone data picture
practice piece land product doctor wall patient worker news test movie north love support technology
step baby computer type attention film tree source organization hair window evidence population
quickly slowly carefully between through against during without before after under around often
early late small large long short open clear simple public private local national recent common
""".split())

TOPICS = {
    "shop": "order delivery basket size colour stock discount warranty cotton steel garden kitchen",
    "news": "minister council election weather match court report inquiry budget storm harbour",
    "docs": "function parameter install configure module return error version command option file",
    "blog": "travel recipe weekend garden photo journey coffee morning notes reading autumn walk",
    "forum": "reply thread member question solved answer post moderator upgrade driver firmware",
    "travel": "hotel beach museum train island mountain ferry village hiking harbour breakfast",
}

# (right, wrong): a typo fix turns the second into the first.
TYPOS = (("receive", "recieve"), ("separate", "seperate"), ("definitely", "definately"),
         ("occurred", "occured"), ("government", "goverment"), ("environment", "enviroment"),
         ("necessary", "neccessary"), ("beginning", "begining"), ("calendar", "calender"),
         ("address", "adress"), ("tomorrow", "tommorow"), ("accommodate", "accomodate"),
         ("library", "libary"), ("until", "untill"), ("their", "thier"), ("which", "wich"))

# Literal text that looks like markup: shown as text, never interpreted.
MARKUP = (
    'The old theme printed <script>alert("x")</script> into every comment box.',
    "Type <b>bold</b> in the editor and it is saved as <b>bold</b>, tags and all.",
    "The feed writes Fish &amp; Chips where it means Fish & Chips.",
    'Paste <a href="https://example.com">this link</a> &amp; check that <i>nothing</i> runs.',
)

PRICES = ("$9.99", "$14.99", "$19.99", "$24.99", "$29.99", "$34.99", "$39.99", "$44.99")
FIRST_PRICES = (1, 2, 2, 2, 3)  # indexes into PRICES: most products start at $19.99

# Edits between crawls.
UNCHANGED, PRICE, INSERT, TYPO, MOVE, REWRITE, RECYCLE = range(7)
SHOP_WEIGHTS = (35, 20, 13, 14, 9, 8, 1)
OTHER_WEIGHTS = (43, 0, 18, 18, 11, 9, 1)
GUARANTEED = (PRICE, INSERT, TYPO, MOVE, REWRITE, RECYCLE, UNCHANGED)  # in every crawl


@dataclass(frozen=True)
class _Host:
    name: str
    kind: str  # a key of TOPICS
    brand: str
    path: str
    words: tuple[str, ...]  # the vocabulary of its pages
    sentences: tuple[str, ...]  # what its paragraphs are drawn from
    navigation: tuple[str, str]  # before and after its template change
    cookies: str
    footer: tuple[str, str]
    template_change: int | None  # the crawl (0-based) where the template changes, if it does


HOSTS = (  # name, kind, brand, path
    ("shop.example", "shop", "Example Shop", "/products/"),
    ("news.example", "news", "Example News", "/articles/"),
    ("docs.example", "docs", "Example Docs", "/guide/"),
    ("blog.example", "blog", "Example Blog", "/posts/"),
    ("forum.example", "forum", "Example Forum", "/threads/"),
    ("travel.example", "travel", "Example Travel", "/places/"),
)


@dataclass
class _Paragraph:
    key: int  # picks its sentences
    typo: bool = False
    markup: bool = False


@dataclass
class _Section:
    key: int  # seeds its heading
    paragraphs: list[_Paragraph]


@dataclass
class _Page:
    title: str
    description: str
    sections: list[_Section]
    price: int | None = None  # index into PRICES: shop products only
    recycled: bool = False


# --- text ------------------------------------------------------------------------------------


def _sentences(rng: random.Random, words: tuple[str, ...], count: int) -> list[str]:
    lengths = [rng.randint(5, 17) for _ in range(count)]
    drawn = rng.choices(words, k=sum(lengths))
    sentences = []
    start = 0
    for length in lengths:
        sentence = drawn[start:start + length]
        start += length
        sentence[0] = sentence[0].capitalize()
        if length > 9 and rng.random() < 0.3:
            sentence[length // 2] += ","
        sentences.append(" ".join(sentence) + ("?" if rng.random() < 0.05 else "."))
    return sentences


def _draw(key: int, pool: tuple[str, ...], count: int) -> list[str]:
    """`count` items of `pool` picked by `key`: a 64-bit LCG, cheaper than seeding a Random."""
    picked = []
    for _ in range(count):
        key = (key * 6364136223846793005 + 1442695040888963407) & 0xFFFF_FFFF_FFFF_FFFF
        picked.append(pool[(key >> 32) % len(pool)])
    return picked


def _paragraph_text(paragraph: _Paragraph, pool: tuple[str, ...]) -> str:
    """Sentences drawn from the host's pool: fast, and as unrepeating as drawing words."""
    key = paragraph.key
    sentences = _draw(key, pool, 4 + key % 5)
    right, wrong = TYPOS[(key >> 8) % len(TYPOS)]
    at = (key >> 12) % len(sentences)
    sentence = sentences[at].split(" ")
    sentence.insert(1 + (key >> 16) % len(sentence), wrong if paragraph.typo else right)
    sentences[at] = " ".join(sentence)
    if paragraph.markup:
        sentences.insert((key >> 24) % len(sentences), MARKUP[(key >> 28) % len(MARKUP)])
    return " ".join(sentences)


def _heading(key: int, words: tuple[str, ...]) -> str:
    return " ".join(_draw(key, words, 1 + key % 4)).capitalize()


def _menu(rng: random.Random, words: tuple[str, ...], size: int) -> str:
    """Link labels of a mega-menu, about `size` characters: long and not periodic."""
    labels: list[str] = []
    total = 0
    while total < size:
        label = " ".join(rng.choices(words, k=rng.randint(1, 3))).title()
        labels.append(label)
        total += len(label) + 3
    return " | ".join(labels)


def _prose(rng: random.Random, words: tuple[str, ...], size: int) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        sentence = _sentences(rng, words, 1)[0]
        parts.append(sentence)
        total += len(sentence) + 1
    return " ".join(parts)


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
    hosts = []
    for number, (name, kind, brand, path) in enumerate(HOSTS[:count]):
        words = VOCABULARY + tuple(TOPICS[kind].split()) * 4

        def frame(words=words, brand=brand, kind=kind) -> tuple[str, str, str]:
            menu = [_menu(rng, words, 1_000) for _ in range(3)]
            navigation = f"{brand} | Home | " + " | ".join(menu)
            redesigned = f"{brand} | Home | New this season | {_menu(rng, words, 400)} | " \
                + " | ".join(menu[1:])
            if kind == "docs":  # literal markup in a template: boilerplate samples show it as text
                navigation = navigation.replace(" | Home | ", " | Home | Reference &amp; API | <b>New</b> | ")
                redesigned = redesigned.replace(" | Home | ", " | Home | Reference &amp; API | ")
            cookies = (f"{brand} uses cookies to remember your settings and to count visits. "
                       + _prose(rng, words, 500) + " Accept all | Reject all | Settings")
            return navigation, redesigned, cookies

        def footers(words=words, brand=brand) -> tuple[str, str]:
            blocks = [_prose(rng, words, 900) for _ in range(3)]
            copyright_line = f"Copyright 2026 {brand} Ltd. All rights reserved."
            return (" ".join([*blocks, copyright_line]),
                    " ".join([blocks[0], _prose(rng, words, 800), blocks[2], copyright_line]))

        navigation, redesigned, cookies = _recurring(
            frame, lambda made: [f"{made[0]}\n{made[2]}", f"{made[1]}\n{made[2]}"])
        footer = _recurring(footers, list)
        change = rng.randint(1, generations - 1) if number in changing else None
        sentences = tuple(_sentences(random.Random(f"{seed}/sentences/{name}"), words, POOL_SENTENCES))
        hosts.append(_Host(name, kind, brand, path, words, sentences, (navigation, redesigned), cookies,
                           footer, change))
    return hosts


def _legal(seed: int) -> str:
    """The notice syndicated to every host: the same text on every page."""
    rng = random.Random(f"{seed}/legal")

    def notice() -> tuple[str]:
        return ("Legal notice. This site is part of the Example Network. " + _prose(rng, VOCABULARY, 3_500)
                + " Example Network Holdings, 1 Example Street, Exampleton.",)

    return _recurring(notice, list)[0]


# --- pages and their edits -----------------------------------------------------------------


def _main(rng: random.Random, size_range: tuple[int, int], markup: bool) -> list[_Section]:
    low, high = size_range
    size = math.exp(rng.uniform(math.log(low), math.log(high)))
    count = max(3, round(size / PARAGRAPH_BYTES))
    paragraphs = [_Paragraph(rng.getrandbits(63), rng.random() < TYPO_SHARE) for _ in range(count)]
    if markup:
        rng.choice(paragraphs).markup = True
    sections = []
    while paragraphs:
        take = min(len(paragraphs), rng.randint(1, 4))
        sections.append(_Section(rng.getrandbits(63), paragraphs[:take]))
        del paragraphs[:take]
    if len(sections) == 1:  # a move needs two sections
        first = sections[0]
        sections.append(_Section(rng.getrandbits(63), first.paragraphs[1:]))
        del first.paragraphs[1:]
    return sections


def _first_version(rng: random.Random, host: _Host, *, recycled: bool = False) -> _Page:
    words = host.words
    name = " ".join(rng.choices(words, k=rng.randint(2, 5))).title()
    if not recycled and rng.random() < 0.1:
        name = name.replace(" ", " &amp; ", 1) if " " in name else name + " &amp; More"
    title = f"{name} | {'Example Partners' if recycled else host.brand}"
    description = _sentences(rng, words, 1)[0]
    if rng.random() < 0.1:
        description = description[:-1] + ", in <b>bold</b>."
    markup = rng.random() < (0.6 if host.kind == "docs" else MARKUP_SHARE)
    sections = _main(rng, MAIN_BYTES, markup)
    price = rng.choice(FIRST_PRICES) if host.kind == "shop" and not recycled else None
    return _Page(title, description, sections, price, recycled)


def _fix_typo(rng: random.Random, page: _Page) -> bool:
    misspelt = [p for section in page.sections for p in section.paragraphs if p.typo]
    if not misspelt:
        return False
    rng.choice(misspelt).typo = False
    return True


def _edit(rng: random.Random, page: _Page, host: _Host, kind: int) -> _Page:
    """The page after one crawl's edit (in place where that is simpler)."""
    if kind == PRICE:
        if page.price is None:
            kind = TYPO
        else:  # up the ladder; from the top, a sale
            page.price = page.price + 1 if page.price + 1 < len(PRICES) else 1
            return page
    if kind == TYPO and not _fix_typo(rng, page):
        kind = INSERT
    if kind == MOVE:
        sections = page.sections
        origin = rng.randrange(len(sections))
        moved = sections.pop(origin)
        sections.insert(rng.choice([i for i in range(len(sections) + 1) if i != origin]), moved)
    elif kind == INSERT:
        section = rng.choice(page.sections)
        section.paragraphs.insert(rng.randint(0, len(section.paragraphs)),
                                  _Paragraph(rng.getrandbits(63), rng.random() < TYPO_SHARE))
    elif kind == REWRITE:
        page.sections = _main(rng, REWRITE_BYTES, rng.random() < MARKUP_SHARE)
    elif kind == RECYCLE:
        page = _first_version(rng, host, recycled=True)
    return page


def _kind(rng: random.Random, host: _Host, forced: int | None) -> int:
    if forced is not None:
        return forced
    weights = SHOP_WEIGHTS if host.kind == "shop" else OTHER_WEIGHTS
    return rng.choices(range(len(weights)), weights)[0]


def _forced(seed: int, pages: int, generations: int, hosts: int) -> list[dict[int, int]]:
    """For each crawl, pages given an edit of each kind, so that every kind occurs."""
    forced: list[dict[int, int]] = [{}]
    for crawl in range(1, generations):
        rng = random.Random(f"{seed}/crawl/{crawl}")
        placed = {rng.randrange(0, pages, hosts): PRICE}  # on a shop page
        for kind in GUARANTEED[1:]:
            if len(placed) == pages:
                break
            page = rng.randrange(pages)
            while page in placed:
                page = rng.randrange(pages)
            placed[page] = kind
        forced.append(placed)
    return forced


def _render(page: _Page, host: _Host, crawl: int, url: str, fetched_at: str, legal: str) -> dict:
    main = []
    if page.price is not None:
        main.append({"heading": "Price and availability",
                     "text": f"Price: {PRICES[page.price]} each, including VAT. Free delivery on orders "
                             "over $50 &amp; free returns within 30 days."})
    for section in page.sections:
        main.append({"heading": _heading(section.key, host.words),
                     "text": "\n\n".join(_paragraph_text(p, host.sentences) for p in section.paragraphs)})
    if page.recycled:
        sections = main
    else:
        redesigned = host.template_change is not None and crawl >= host.template_change
        sections = [
            {"heading": "Site navigation", "text": host.navigation[redesigned]},
            {"heading": "Cookie notice", "text": host.cookies},
            *main,
            {"heading": "Site footer", "text": host.footer[redesigned]},
            {"heading": "Legal notice", "text": legal},
        ]
    return {"url": url, "fetched_at": fetched_at, "title": page.title,
            "description": page.description, "sections": sections}


def _check_sizes(pages: int, generations: int) -> None:
    for name, value in (("pages", pages), ("generations", generations)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


def demo_records(pages: int = DEFAULT_PAGES, generations: int = DEFAULT_GENERATIONS,
                 seed: int = DEFAULT_SEED) -> Iterator[dict]:
    """`generations` crawls of `pages` pages as records, crawl by crawl, made one at a time.

    A crawl that finds a page unchanged yields the same content again (with a later
    `fetched_at`): ingest counts it as unchanged and makes no generation.
    """
    _check_sizes(pages, generations)
    return _records(pages, generations, seed)


def _records(pages: int, generations: int, seed: int) -> Iterator[dict]:
    hosts = _hosts(seed, generations, min(len(HOSTS), pages))
    legal = _legal(seed)
    forced = _forced(seed, pages, generations, len(hosts))
    for crawl in range(generations):
        day = START + crawl * CRAWL_INTERVAL
        for number in range(pages):
            host = hosts[number % len(hosts)]
            page = _first_version(random.Random(f"{seed}/page/{number}"), host)
            slug = "-".join(page.title.split(" | ")[0].lower().replace("&amp;", "and").split())
            url = f"https://{host.name}{host.path}{slug}-{number}"  # kept when the page is recycled
            for past in range(1, crawl + 1):
                rng = random.Random(f"{seed}/page/{number}/{past}")
                page = _edit(rng, page, host, _kind(rng, host, forced[past].get(number)))
            fetched = day + timedelta(seconds=number * CRAWL_SPREAD // pages)
            yield _render(page, host, crawl, url, fetched.strftime("%Y-%m-%dT%H:%M:%SZ"), legal)


def build_demo(path: str | Path, pages: int = DEFAULT_PAGES, generations: int = DEFAULT_GENERATIONS,
               seed: int = DEFAULT_SEED, progress: Callable[[float], None] | None = None,
               workers: int = 1) -> IngestSummary:
    """Build a new store at `path` from `demo_records`, through the normal ingest path.

    `progress`, when given, is called after each ingest batch with the share of records
    done (0 to 1; the last call is 1.0). Raises StoreError (a CdcError) when `path` exists.
    """
    _check_sizes(pages, generations)
    path = Path(path)
    if path.exists():
        raise StoreError(f"{path} already exists; the demo builds a new store: remove the file "
                         "or give another path")
    total = pages * generations
    batch = min(BATCH_RECORDS, max(MIN_BATCH, math.ceil(total / BATCH_TARGET)))

    def on_batch(summary: IngestSummary) -> None:
        if progress is not None:
            progress(min(1.0, summary.records / total))

    items = (SourceRecord("demo", number, record)
             for number, record in enumerate(_records(pages, generations, seed), start=1))
    # Built under another name and moved into place whole: a store at `path` is complete.
    _remove_abandoned_builds(path)
    building = path.with_name(f"{path.name}.building-{os.getpid()}")
    try:
        store = Store(building)
        summary = Ingester(store, batch_records=batch, on_batch=on_batch, workers=workers).run(items)
        store.compact()  # drop the space that trimming old generations freed: about half the file
        os.replace(building, path)
    finally:
        _remove_build_files(building)
    return summary


def _remove_build_files(building: Path) -> None:
    for leftover in (building, building.with_name(building.name + ".wal"),
                     building.with_name(building.name + ".lock")):
        leftover.unlink(missing_ok=True)


def _remove_abandoned_builds(path: Path) -> None:
    """The files of builds whose process is gone (killed, say): they are never finished."""
    for leftover in path.parent.glob(f"{glob.escape(path.name)}.building-*"):
        pid = leftover.name.rpartition("-")[2].split(".")[0]
        if pid.isdigit() and not process_exists(int(pid)):
            leftover.unlink(missing_ok=True)

