"""Template-only changes: every changed chunk is the host's boilerplate.

A crawl of twelve pages of one host whose shared navigation changes on every page between
two crawls (a site-wide template change), and on one page the content changes too.
"""

from __future__ import annotations

import csv
import io
import sys
from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from cdc.analyst.queries import compare_generations
from cdc.cli.main import main
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import SourceRecord
from cdc.store import BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE, RetentionPolicy, Store, templates
from cdc.store.templates import unflagged_pages
from tests import crawlgen, textgen
from tests.test_dashboard import open_page

ROOT = Path(__file__).resolve().parents[1]

PAGES = 12
HOST = "https://shop.example"
EDITED = f"{HOST}/item/3"  # its content changes as well


def _template_change(navigation: str) -> str:
    """The navigation with one word replaced a quarter of the way in: inside a chunk of navigation alone."""
    middle = len(navigation) // 4
    at = navigation.index(" ", middle) + 1
    end = navigation.index(" ", at)
    return navigation[:at] + "Sale" + navigation[end:]


@pytest.fixture
def store(tmp_path, monkeypatch) -> Store:
    records = [crawlgen.record(f"{HOST}/item/{n}", 0, crawlgen.page_versions(n, 1)[0]) for n in range(PAGES)]
    changed = []
    for n, first in enumerate(records):
        record = {**first, "fetched_at": crawlgen.record("x", 1, "")["fetched_at"],
                  "sections": [dict(section) for section in first["sections"]]}
        record["sections"][0]["text"] = _template_change(crawlgen.NAVIGATION)
        if record["url"] == EDITED:
            record["sections"][1]["text"] = crawlgen.page_versions(n, 2)[1]
        changed.append(record)
    store = Store(tmp_path / "cdc.duckdb")
    Ingester(store).run(SourceRecord("crawl", number, record)
                        for number, record in enumerate(records + changed, start=1))
    return store


def test_a_template_change_is_template_only_and_a_content_change_is_not(store):
    for n in range(PAGES):
        first, second = store.history(_key(store, n))
        assert first.template_only is None, "a first sighting has nothing to compare"
        assert second.verdict != "unchanged"
        assert second.template_only is (f"{HOST}/item/{n}" != EDITED), _key(store, n)


def _key(store: Store, n: int) -> str:
    return next(key for key in store.page_keys() if key.endswith(f"/item/{n}"))


def test_with_boilerplate_left_out_a_template_only_change_compares_unchanged(store):
    template_page, content_page = f"{HOST}/item/1", EDITED
    assert compare_generations(store, template_page).report.verdict != "unchanged"
    assert compare_generations(store, template_page, ignore_boilerplate=True).report.verdict == "unchanged"
    assert compare_generations(store, content_page, ignore_boilerplate=True).report.verdict != "unchanged"


def test_export_and_history_show_template_only(store, capsys):
    assert main(["--db", str(store.path), "export"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    flags = {(row["url"], row["generation"]): row["template_only"] for row in rows}
    first, second = str(crawlgen.generation(0)), str(crawlgen.generation(1))
    assert flags[(_key(store, 1), second)] == "true"
    assert flags[(_key(store, 3), second)] == "false"
    assert flags[(_key(store, 1), first)] == ""

    assert main(["--db", str(store.path), "history", f"{HOST}/item/1"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()[1:]
    column = header.split().index("template")
    assert {row.split()[0]: row.split()[column + 1] for row in rows} == {first: "-", second: "yes"}


def test_the_compare_view_says_a_template_change_is_one(store, monkeypatch):
    monkeypatch.setenv("CDC_DB", str(store.path))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    for url, expected in ((_key(store, 1), True), (_key(store, 3), False)):
        app = open_page(AppTest.from_file(str(ROOT / "app.py"), default_timeout=60), "views/compare.py",
                        url=url, **{"from": str(crawlgen.generation(0)), "to": str(crawlgen.generation(1))})
        assert any("A template change" in info.value for info in app.info) is expected


def recounted_flags(path: Path) -> tuple[dict[tuple[str, int], bool | None], set[tuple[str, bytes]]]:
    """Each change row's template-only flag and each host's template, counted again in Python
    from the retained chunk lists, straight from the rule."""
    with duckdb.connect(str(path), read_only=True) as connection:
        hosts = dict(connection.execute("SELECT natural_key, host FROM pages").fetchall())
        chunks: dict[tuple[str, int], list[bytes]] = defaultdict(list)
        pieces: dict[tuple[str, int], list[tuple[bytes, bytes]]] = defaultdict(list)  # digest, its text
        texts = {(key, generation): text.encode() for key, generation, text in connection.execute(
            "SELECT natural_key, generation, text FROM generations WHERE text IS NOT NULL").fetchall()}
        for key, generation, digest, length in connection.execute(
                "SELECT natural_key, generation, digest, length FROM content_chunks "
                "ORDER BY natural_key, generation, chunk_index").fetchall():
            chunks[key, generation].append(digest)
            at = sum(len(text) for _, text in pieces[key, generation])
            pieces[key, generation].append((digest, texts.get((key, generation), b"")[at:at + length]))
        rows = connection.execute(
            "SELECT natural_key, generation, previous_generation FROM changes").fetchall()
    holders: dict[tuple[str, bytes], set[str]] = defaultdict(set)
    for (key, _), digests in chunks.items():
        for digest in digests:
            holders[hosts[key], digest].add(key)
    pages = Counter(hosts.values())
    template = {(host, digest) for (host, digest), keys in holders.items()
                if len(keys) >= BOILERPLATE_MIN_PAGES and len(keys) > BOILERPLATE_SHARE * pages[host]}
    flags = {}
    for key, generation, previous in rows:
        new_list, old_list = chunks.get((key, generation), []), chunks.get((key, previous), [])
        new, old = Counter(new_list), Counter(old_list)
        changed = set((new - old) + (old - new))
        own_blocks = [[d for d in side if (hosts[key], d) not in template] for side in (new_list, old_list)]
        template_only = (bool(changed) and all((hosts[key], digest) in template for digest in changed)
                         and own_blocks[0] == own_blocks[1])  # none of the page's own blocks moved
        own_delta = sorted(new[d] - old[d] for d in changed if (hosts[key], d) not in template)
        if not template_only and own_delta == [-1, 1] and len(changed) > 2:
            # One block of its own lost and one gained beside a template change: the same words?
            words = [b"".join(text for digest, text in pieces[key, g] if (hosts[key], digest) not in template)
                     .split() for g in (generation, previous)]
            template_only = words[0] == words[1]
        flags[key, generation] = None if not new or not old else template_only
    return flags, template


def assert_flags_are_recounted(store: Store) -> dict[tuple[str, int], bool | None]:
    flags, template = recounted_flags(store.path)
    with duckdb.connect(str(store.path), read_only=True) as connection:
        stored = {(key, generation): flag for key, generation, flag in connection.execute(
            "SELECT natural_key, generation, template_only FROM changes").fetchall()}
        templates = set(connection.execute("SELECT host, digest FROM host_templates").fetchall())
    assert templates == template
    assert stored == flags
    return stored


@pytest.mark.parametrize("cut_in_arrow", [templates.CUT_IN_ARROW, 0], ids=["digests cut in Arrow", "in SQL"])
def test_the_stored_flags_are_the_rule_counted_again_after_runs_a_backfill_an_erasure_and_a_prune(
        tmp_path, monkeypatch, cut_in_arrow):
    """Whether a refresh cuts the chunk lists in Arrow or, past `CUT_IN_ARROW` lists, in SQL."""
    monkeypatch.setattr(templates, "CUT_IN_ARROW", cut_in_arrow)
    store = Store(tmp_path / "cdc.duckdb")
    sale = _template_change(crawlgen.NAVIGATION)
    bodies = {n: crawlgen.page_versions(n, 2) for n in range(PAGES)}

    def ingest(day: int, pages: dict[int, str], edited=()) -> dict[tuple[str, int], bool | None]:
        """A run of `pages` (number: navigation) fetched on `day`, the `edited` ones' content changed."""
        records = []
        for n, navigation in pages.items():
            record = crawlgen.record(f"{HOST}/item/{n}", day, bodies[n][1 if n in edited else 0])
            record["sections"][0]["text"] = navigation
            records.append(record)
        Ingester(store).run(SourceRecord("crawl", number, record) for number, record in enumerate(records, 1))
        return assert_flags_are_recounted(store)

    def flag(flags, n: int, day: int) -> bool | None:
        return flags[_key(store, n), crawlgen.generation(day)]

    first = ingest(0, dict.fromkeys(range(PAGES), crawlgen.NAVIGATION))
    assert set(first.values()) == {None}, "first sightings"
    # The sale on two pages is on too few pages to be the template yet: both are changes.
    early = ingest(2, dict.fromkeys([0, 1], sale))
    assert (flag(early, 0, 2), flag(early, 1, 2)) == (False, False)
    # On every page, and on page 3 a content change too: the two earlier pages, not in this
    # run, are template-only now.
    everywhere = ingest(2, dict.fromkeys(range(2, PAGES), sale), edited={3})
    assert {flag(everywhere, n, 2) for n in range(PAGES) if n != 3} == {True}
    assert flag(everywhere, 3, 2) is False
    # A backfill between the two crawls: page 5 had the sale a day earlier (so the later
    # fetch is no new generation), page 6 a content change under the old navigation (so the
    # later change row, measured again, is the sale and the content change back).
    backfilled = ingest(1, {5: sale, 6: crawlgen.NAVIGATION}, edited={6})
    assert flag(backfilled, 5, 1) is True and (_key(store, 5), crawlgen.generation(2)) not in backfilled
    assert (flag(backfilled, 6, 1), flag(backfilled, 6, 2)) == (False, False)

    store.erase(_key(store, 7))
    assert_flags_are_recounted(store)
    store.prune(RetentionPolicy(keep=1))  # no change row has both its generations now
    assert set(assert_flags_are_recounted(store).values()) == {None}


def test_the_rows_a_killed_run_left_unflagged_are_flagged_by_the_next_run_once(store):
    flagged = [(row.natural_key, row.generation, row.template_only) for row in store.changes()]
    assert any(flag for *_, flag in flagged)
    with store.writing() as connection:  # as a run killed before its end leaves its rows
        connection.execute("UPDATE changes SET template_only = NULL, template_edit = NULL")
    assert {row.template_only for row in store.changes()} == {None}
    other = crawlgen.record("https://elsewhere.example/page", 0, crawlgen.page_versions(99, 1)[0])
    Ingester(store).run([SourceRecord("next", 1, other)])  # a run over another host's page
    assert sorted((row.natural_key, row.generation, row.template_only) for row in store.changes()
                  if row.natural_key != other["url"]) == sorted(flagged)
    with store.reading() as connection:  # nothing left for a later run's end to count again
        assert unflagged_pages(connection) == []


def test_a_moved_paragraph_with_a_template_change_is_the_pages_own_change(tmp_path):
    """Every page gets the new navigation; on one, a paragraph of its own also moves down. A
    move changes no chunk's count, only the order: the page is not template-only."""
    paragraphs = [textgen.text(500 + n, 700).decode() for n in range(4)]

    def record(n: int, day: int, navigation: str, order: list[int]) -> dict:
        sections = [{"heading": "nav", "text": navigation},
                    *({"heading": "main", "text": f"Item {n}. {paragraphs[at]}"} if at == 0 else
                      {"heading": "main", "text": paragraphs[at] + f" (item {n})"} for at in order),
                    {"heading": "footer", "text": crawlgen.FOOTER}]
        return {**crawlgen.record(f"{HOST}/item/{n}", day, ""), "sections": sections}

    sale, kept, moved = _template_change(crawlgen.NAVIGATION), [0, 1, 2, 3], [0, 2, 3, 1]
    records = [record(n, 0, crawlgen.NAVIGATION, kept) for n in range(PAGES)]
    records += [record(n, 1, sale, moved if n == 3 else kept) for n in range(PAGES)]
    store = Store(tmp_path / "cdc.duckdb")
    Ingester(store).run(SourceRecord("crawl", number, record) for number, record in enumerate(records, 1))
    flags = {n: store.history(_key(store, n))[-1].template_only for n in range(PAGES)}
    assert flags == {n: n != 3 for n in range(PAGES)}
    assert assert_flags_are_recounted(store)[_key(store, 3), crawlgen.generation(1)] is False
