"""The demo crawl: deterministic records with every kind of edit, and a store built from them
through the normal ingest path that shows each one."""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import re
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import pytest

from cdc import CdcError
from cdc.analyst.boilerplate import host_boilerplate, shared_across_hosts
from cdc.analyst.queries import compare_generations
from cdc.demo import text as demotext
from cdc.demo.build import build_demo
from cdc.demo.crawl import DEFAULT_PAGES, HOSTS, demo_records
from cdc.ingest.ingester import Ingester
from cdc.store import Store

PAGES, GENERATIONS = 40, 6
FRAME = ("Site navigation", "Site banner", "Cookie notice", "Site footer", "Legal notice")
PLACED = ("Price and availability", "Dates")  # the page's own, but not its paragraphs
CJK = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def digest(records) -> str:
    return hashlib.sha256(json.dumps(list(records), sort_keys=True).encode()).hexdigest()


def main_sections(record: dict) -> list[tuple[str, str]]:
    """(heading, text) of the page's own paragraphs: no frame, no price, no dates."""
    return [(s["heading"], s["text"]) for s in record["sections"] if s["heading"] not in FRAME + PLACED]


def section(record: dict, heading: str) -> str | None:
    return next((s["text"] for s in record["sections"] if s["heading"] == heading), None)


def paragraphs(sections: list[tuple[str, str]]) -> list[str]:
    return [paragraph for _, text in sections for paragraph in text.split("\n\n")]


def host(record: dict) -> str:
    return urlsplit(record["url"]).hostname


def crawls(records) -> list[list[dict]]:
    """Records in crawl order, cut where a URL comes round again."""
    found: list[list[dict]] = [[]]
    seen: set[str] = set()
    for record in records:
        if record["url"] in seen:
            found.append([])
            seen.clear()
        seen.add(record["url"])
        found[-1].append(record)
    return found


def a_typo(a: str, b: str) -> bool:
    """Whether `a` and `b` differ by one typo: letters swapped, a character doubled, a word."""
    start = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a, end_b = end_a - 1, end_b - 1
    return max(end_a - start, end_b - start) <= 3


def classify(old: dict, new: dict) -> set[str]:
    """What happened to a page between two crawls, read off the two records."""
    framed = section(old, "Site navigation") is not None
    if framed and section(new, "Site navigation") is None:
        return {"recycle"}
    if (old["title"], old["description"], old["sections"]) == (new["title"], new["description"],
                                                               new["sections"]):
        return {"unchanged"}
    kinds = set()
    if framed and section(old, "Site navigation") != section(new, "Site navigation"):
        kinds.add("template")
    if section(old, "Site banner") != section(new, "Site banner"):
        kinds.add("banner")
    if section(old, "Price and availability") != section(new, "Price and availability"):
        kinds.add("price")
    if section(old, "Dates") != section(new, "Dates"):
        kinds.add("date")
    before, after = main_sections(old), main_sections(new)
    if before == after:
        return kinds
    if sorted(before) == sorted(after):
        return kinds | {"move"}
    if not set(paragraphs(before)) & set(paragraphs(after)):
        return kinds | {"rewrite"}
    old_paragraphs, new_paragraphs = paragraphs(before), paragraphs(after)
    if len(new_paragraphs) == len(old_paragraphs) + 1:
        return kinds | {"insert"}
    if len(new_paragraphs) == len(old_paragraphs) - 1:
        return kinds | {"delete"}
    changed = [(a, b) for a, b in zip(old_paragraphs, new_paragraphs, strict=True) if a != b]
    assert len(changed) == 1 and a_typo(*changed[0]), changed
    return kinds | {"typo"}


# --- records ---------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_records_and_another_seed_others():
    first = digest(itertools.islice(demo_records(PAGES, GENERATIONS, seed=7), 120))
    assert digest(itertools.islice(demo_records(PAGES, GENERATIONS, seed=7), 120)) == first
    assert digest(itertools.islice(demo_records(PAGES, GENERATIONS, seed=8), 120)) != first


def test_records_have_the_seed_shape_in_crawl_order():
    records = list(demo_records(60, 4))
    by_crawl = crawls(records)
    assert len(by_crawl) == 4 and len(by_crawl[0]) == 60
    urls = [r["url"] for r in by_crawl[0]]
    assert len(set(urls)) == 60
    for crawl in by_crawl[1:]:  # the same pages in the same order, save those that disappeared
        assert [r["url"] for r in crawl] == [url for url in urls if url in {r["url"] for r in crawl}]
    assert len(by_crawl[-1]) < 60  # some pages disappear
    for record in records:
        assert set(record) == {"url", "fetched_at", "title", "description", "sections"}
        assert record["fetched_at"].endswith("Z") and record["title"] and record["description"]
        assert all(set(s) == {"heading", "text"} and s["text"] for s in record["sections"])
    times = [datetime.fromisoformat(r["fetched_at"]) for r in records]
    assert times == sorted(times)
    for url in urls:  # one crawl a day
        visits = [datetime.fromisoformat(r["fetched_at"]) for r in records if r["url"] == url]
        assert all(timedelta(hours=20) < b - a < timedelta(hours=28) for a, b in itertools.pairwise(visits))
    assert len({urlsplit(url).hostname for url in urls}) == 6


def test_records_are_made_lazily():
    records = demo_records(100_000, 3)
    assert inspect.isgenerator(records)
    first = list(itertools.islice(records, 50))  # 300,000 records are not made first
    assert len({r["url"] for r in first}) == 50


@pytest.mark.parametrize(("pages", "generations"), [(0, 3), (3, 0), (-1, 2), (2.5, 2), (True, 2)])
def test_sizes_are_checked_at_the_call(pages, generations):
    with pytest.raises(ValueError, match="whole number"):
        demo_records(pages, generations)


def test_the_default_demo_holds_every_kind_of_edit_several_times():
    latest: dict[str, dict] = {}
    kinds: Counter[str] = Counter()
    frame_crawls: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    main_sizes = []
    by_crawl = crawls(demo_records())
    for crawl, records in enumerate(by_crawl):
        for record in records:
            if section(record, "Site navigation") is not None:
                main_sizes.append(sum(len(text.encode()) for _, text in main_sections(record)))
            old = latest.get(record["url"])
            latest[record["url"]] = record
            if old is None:
                continue
            found = classify(old, record)
            kinds.update(found)
            for kind in {"template", "banner"} & found:
                frame_crawls[kind][host(record)].add(crawl)
    assert len(latest) == DEFAULT_PAGES
    for kind in ("unchanged", "price", "date", "insert", "delete", "typo", "move", "rewrite", "recycle",
                 "template", "banner"):
        assert kinds[kind] >= 3, (kind, kinds)
    # A template changes on one crawl, on every page of its host (save recycled ones); so
    # does a banner appear, on another host.
    templates, banners = frame_crawls["template"], frame_crawls["banner"]
    assert len(templates) >= 2 and all(len(c) == 1 for c in templates.values())
    assert len(banners) == 1 and all(len(c) == 1 for c in banners.values())
    assert not set(banners) & set(templates)
    assert min(main_sizes) >= 300 and max(main_sizes) <= 20_000  # deletes shrink some
    # Pages disappear: found by the first crawl, gone from the last.
    assert 0 < DEFAULT_PAGES - len(by_crawl[-1]) < DEFAULT_PAGES // 10


def test_pages_are_in_two_scripts_and_japanese_and_chinese_pages_change():
    records = list(demo_records(PAGES, GENERATIONS))
    by_host: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        if section(record, "Site navigation") is not None:  # not a recycled URL's new page
            by_host[host(record)].append(record)
    for name in ("shop.example.jp", "news.example.cn"):
        texts = [text for r in by_host[name] for _, text in main_sections(r)]
        assert texts and all(CJK.search(text) for text in texts)
        assert any(a != b for a, b in itertools.pairwise(json.dumps(r["sections"]) for r in by_host[name]))
    for name in ("shop.example", "news.example", "docs.example", "blog.example"):
        assert not any(CJK.search(text) for r in by_host[name] for _, text in main_sections(r))


def _source_patterns() -> dict[str, list[re.Pattern]]:
    """Per language and kind, a pattern for each sentence of the project's text file."""
    text = demotext.lists()

    def values(language: str, kind: str, slot: str) -> tuple[str, ...]:
        return text.get(f"{language}.{kind}.{slot}") or text[f"{language}.{slot}"]

    patterns: dict[str, list[re.Pattern]] = {}
    for name, sentences in text.items():
        language, kind, last = [*name.split("."), ""][:3]
        if last not in ("sentence", "rewrite"):
            continue
        for sentence in sentences:
            parts = re.split(r"\{(\w+)\}", sentence)
            pattern = "".join(re.escape(part) if i % 2 == 0 else
                              "(?:" + "|".join(map(re.escape, values(language, kind, part))) + ")"
                              for i, part in enumerate(parts))
            patterns.setdefault(f"{language}.{kind}", []).append(re.compile(pattern))
    return patterns


def _sentences(paragraph: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.?!。])\s*", paragraph) if s]


def test_every_paragraph_is_real_text_from_the_sources():
    """Sentences of the project's text file (slots filled from its lists) and the standard
    library's docstrings, word for word, save one deliberate typo in a paragraph."""
    patterns = _source_patterns()
    markup = {s.removesuffix(".") for s in demotext.lists()["en.markup"]}
    docs = set(demotext.docs().paragraphs)
    kinds = {name: f"{language}.{kind}" for name, language, kind, _, _ in HOSTS}
    checked = Counter()
    for record in demo_records(PAGES, GENERATIONS):
        framed = section(record, "Site navigation") is not None
        kind = kinds[host(record)] if framed else "en.partner"
        for paragraph in paragraphs(main_sections(record)):
            for literal in markup:  # a quoted HTML-like sentence, put among the others
                paragraph = paragraph.replace(literal + ". ", "").replace(". " + literal, "")
            if kind == "en.docs":
                assert paragraph in docs or any(len(p) in (len(paragraph), len(paragraph) - 1)
                                                and a_typo(p, paragraph) for p in docs), paragraph
                checked["docs"] += 1
                continue
            unmatched = [s for s in _sentences(paragraph)
                         if not any(p.fullmatch(s) for p in patterns[kind])]
            assert len(unmatched) <= 1, (kind, unmatched)
            for sentence in unmatched:  # the typo: one sentence a character or two away
                assert _near_a_source_sentence(sentence, patterns[kind]), (kind, sentence)
                checked["typo"] += 1
            checked[kind] += 1
    assert {"docs", "typo", "en.shop", "en.news", "en.blog", "ja.shop", "zh.news"} <= set(checked)


def _near_a_source_sentence(sentence: str, patterns: list[re.Pattern]) -> bool:
    """Whether undoing one typo (two letters swapped, a character doubled, a CJK misspelling)
    gives a source sentence."""
    ends = range(len(sentence) - 1)
    candidates = {sentence[:i] + sentence[i + 1] + sentence[i] + sentence[i + 2:] for i in ends}
    candidates |= {sentence[:i] + sentence[i + 1:] for i in ends if sentence[i] == sentence[i + 1]}
    for pairs in demotext.CJK_TYPOS.values():
        candidates |= {sentence.replace(wrong, right) for right, wrong in pairs}
    return any(p.fullmatch(candidate) for candidate in candidates for p in patterns)


def test_some_text_is_html_like_and_stays_literal():
    text = json.dumps(list(demo_records(PAGES, 1)))
    for literal in ('<script>alert(\\"x\\")</script>', "<b>bold</b>", "&amp;"):
        assert literal in text


# --- the store ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    progress: list[float] = []
    summary = build_demo(path, PAGES, GENERATIONS, progress=progress.append)
    return Store(path), summary, progress


def test_the_store_counts_match_the_summary(demo):
    store, summary, _ = demo
    stats = store.stats()
    assert summary.records == len(list(demo_records(PAGES, GENERATIONS))) < PAGES * GENERATIONS
    assert not summary.bad and not summary.older
    assert stats["pages"] == len(summary.pages) == summary.new_pages == PAGES
    assert stats["generations"] == stats["changes"] == summary.new_generations
    assert summary.new_generations + summary.unchanged == summary.records
    assert summary.unchanged > 0  # unchanged recrawls made no generation
    assert stats["hosts"] == len(store.hosts()) == 6


def test_every_verdict_occurs(demo):
    store, _, _ = demo
    verdicts = Counter(change.verdict for change in store.changes())
    assert {"new", "minor", "rewrite", "different_page"} <= set(verdicts)
    assert verdicts["new"] == PAGES


def test_a_shop_page_history_holds_the_price_change(demo):
    store, _, _ = demo
    priced = [c for c in store.changes(host="shop.example") if "$19.99 → $24.99" in (c.excerpt or "")]
    assert priced
    history = store.history(priced[0].natural_key)
    assert any(c.excerpt == "$19.99 → $24.99" and c.verdict == "minor" for c in history)


def test_each_crawl_is_ingested_by_a_run_of_its_own(demo, monkeypatch, tmp_path):
    runs: list[list[str]] = []
    run = Ingester.run

    def recording(self, items):
        items = list(items)
        runs.append(sorted({item.source for item in items}))
        return run(self, items)

    monkeypatch.setattr(Ingester, "run", recording)
    build_demo(tmp_path / "runs.duckdb", 12, 3)
    assert runs == [["demo crawl 1"], ["demo crawl 2"], ["demo crawl 3"]]
    # Each run is named after its crawl, as `cdc runs` and the dashboard's pickers show it.
    listed = Store(tmp_path / "runs.duckdb").runs()
    assert [(run.label, run.inputs) for run in listed] == [
        (f"demo crawl {n}", (f"demo crawl {n}",)) for n in (3, 2, 1)]


def test_a_page_that_disappears_keeps_its_history_and_is_fetched_no_more(demo):
    store, _, _ = demo
    fetched = {key: store.page(key).last_checked for key in store.page_keys()}  # unchanged ones too
    last_crawl = max(fetched.values()).date()
    gone = [key for key, when in fetched.items() if when.date() < last_crawl]
    assert 0 < len(gone) < PAGES // 5
    assert all(store.generations(key) for key in gone)


def test_the_banner_added_across_a_host_is_found_on_its_pages(demo):
    store, _, _ = demo
    records = list(demo_records(PAGES, GENERATIONS))
    banner = next(section(r, "Site banner") for r in records if section(r, "Site banner"))
    bannered = {host(r) for r in records if section(r, "Site banner")}
    assert len(bannered) == 1
    name, = bannered
    found = [c for c in store.changes(host=name) if banner[:30] in (c.excerpt or "")]
    assert len(found) >= len(store.page_keys(name)) // 2


def test_japanese_and_chinese_edits_are_found_character_by_character(demo):
    store, _, _ = demo
    for name in ("shop.example.jp", "news.example.cn"):
        small: list[str] = []  # the text of edits of one to four characters: a typo, a price
        for key in store.page_keys(name):
            retained = [g.generation for g in store.generations(key) if g.retained]
            for old, new in itertools.pairwise(retained):
                comparison = compare_generations(store, key, old, new, ignore_boilerplate=True)
                text = comparison.new.text  # bytes: offsets and lengths count bytes
                small += [text[e.new_offset:e.new_offset + e.new_length].decode()
                          for e in comparison.report.edits if e.kind == "replace" and 0 < e.new_length <= 12]
        assert any(CJK.search(edit) for edit in small), (name, small)


def test_boilerplate_is_found_on_every_host_and_across_hosts(demo):
    store, _, _ = demo
    for host, _pages in store.hosts():
        assert host_boilerplate(store, host), host
    shared = shared_across_hosts(store)
    assert shared
    legal = section(next(demo_records(1, 1)), "Legal notice")
    syndicated = [s for s in shared if len(s.hosts) == 6]
    assert syndicated and all(s.sample.rstrip("…") in legal for s in syndicated)


def test_retained_text_holds_markup_as_literal_text(demo):
    store, _, _ = demo
    texts = []
    for host, _pages in store.hosts():
        for natural_key, generation, *_rest in store.host_pages(host):
            texts.append(store.version(natural_key, generation).text)
    assert any(b'<script>alert("x")</script>' in text for text in texts)
    assert any(b"&amp;" in text for text in texts)


def test_building_over_an_existing_path_is_refused(demo, tmp_path):
    store, _, _ = demo
    with pytest.raises(CdcError, match="already exists"):
        build_demo(store.path, 2, 2)
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    with pytest.raises(CdcError, match="already exists"):
        build_demo(taken, 2, 2)
    assert taken.read_text() == "mine"


def test_progress_rises_to_one(demo):
    _, summary, progress = demo
    assert len(progress) == summary.batches > 1
    assert all(0 < a < b for a, b in itertools.pairwise(progress))
    assert progress[-1] == 1.0

