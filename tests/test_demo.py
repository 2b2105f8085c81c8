"""The demo crawl: deterministic records with every kind of edit, and a store built from them
through the normal ingest path that shows each one."""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import pytest

from cdc import CdcError
from cdc.boilerplate import host_boilerplate, shared_across_hosts
from cdc.demo import DEFAULT_PAGES, build_demo, demo_records
from cdc.store import Store

PAGES, GENERATIONS = 40, 6
FRAME = ("Site navigation", "Cookie notice", "Site footer", "Legal notice")


def digest(records) -> str:
    return hashlib.sha256(json.dumps(list(records), sort_keys=True).encode()).hexdigest()


def main_sections(record: dict) -> list[tuple[str, str]]:
    """(heading, text) of the page's own sections: no frame, no price."""
    return [(s["heading"], s["text"]) for s in record["sections"]
            if s["heading"] not in FRAME and not s["text"].startswith("Price: $")]


def section(record: dict, heading: str) -> str | None:
    return next((s["text"] for s in record["sections"] if s["heading"] == heading), None)


def paragraphs(sections: list[tuple[str, str]]) -> set[str]:
    return {paragraph for _, text in sections for paragraph in text.split("\n\n")}


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
    if section(old, "Price and availability") != section(new, "Price and availability"):
        kinds.add("price")
    before, after = main_sections(old), main_sections(new)
    if before == after:
        return kinds
    if sorted(before) == sorted(after):
        return kinds | {"move"}
    if not paragraphs(before) & paragraphs(after):
        return kinds | {"rewrite"}
    changed = [(a, b) for (_, a), (_, b) in zip(before, after) if a != b]
    assert len(before) == len(after) and len(changed) == 1, (before, after)
    (a, b), = changed
    if len(b.split("\n\n")) == len(a.split("\n\n")) + 1:
        return kinds | {"insert"}
    words_a, words_b = a.split(" "), b.split(" ")
    assert len(words_a) == len(words_b) and sum(x != y for x, y in zip(words_a, words_b)) == 1
    return kinds | {"typo"}


# --- records ---------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_records_and_another_seed_others():
    first = digest(itertools.islice(demo_records(PAGES, GENERATIONS, seed=7), 120))
    assert digest(itertools.islice(demo_records(PAGES, GENERATIONS, seed=7), 120)) == first
    assert digest(itertools.islice(demo_records(PAGES, GENERATIONS, seed=8), 120)) != first


def test_records_have_the_seed_shape_in_crawl_order():
    records = list(demo_records(30, 4))
    assert len(records) == 30 * 4
    urls = [r["url"] for r in records[:30]]
    assert len(set(urls)) == 30
    assert [r["url"] for r in records] == urls * 4  # all of crawl 1, then all of crawl 2, ...
    for record in records:
        assert set(record) == {"url", "fetched_at", "title", "description", "sections"}
        assert record["fetched_at"].endswith("Z") and record["title"] and record["description"]
        assert all(set(s) == {"heading", "text"} and s["text"] for s in record["sections"])
    times = [datetime.fromisoformat(r["fetched_at"]) for r in records]
    assert times == sorted(times)
    for i in range(30):  # one crawl a day
        visits = times[i::30]
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
    template_crawls: dict[str, set[int]] = defaultdict(set)
    main_sizes = []
    for number, record in enumerate(demo_records()):
        crawl = number // DEFAULT_PAGES
        if section(record, "Site navigation") is not None:
            main_sizes.append(sum(len(text) for _, text in main_sections(record)))
        old = latest.get(record["url"])
        latest[record["url"]] = record
        if old is None:
            continue
        found = classify(old, record)
        kinds.update(found)
        if "template" in found:
            template_crawls[urlsplit(record["url"]).hostname].add(crawl)
    assert len(latest) == DEFAULT_PAGES
    for kind in ("unchanged", "price", "insert", "typo", "move", "rewrite", "recycle", "template"):
        assert kinds[kind] >= 3, (kind, kinds)
    # A template changes on one crawl, on every page of its host (save recycled ones).
    assert len(template_crawls) >= 2 and all(len(c) == 1 for c in template_crawls.values())
    assert min(main_sizes) >= 1_000 and max(main_sizes) <= 20_000


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
    assert summary.records == PAGES * GENERATIONS and not summary.bad and not summary.stale
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

