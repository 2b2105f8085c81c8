"""The chunk layout: a list row per retained generation (`chunk_lists`), the seed's
`content_chunks` a view of it, and stores of the row-per-chunk layout (schema 1) upgraded."""

from __future__ import annotations

import shutil
from dataclasses import replace

import duckdb
import pyarrow as pa
import pytest

from cdc import spec_for
from cdc.analyst.boilerplate import host_boilerplate, shared_across_hosts
from cdc.analyst.queries import compare_generations
from cdc.cli.main import main
from cdc.core.chunking import chunk_content
from cdc.core.gear import ChunkParams
from cdc.core.urls import surt_key
from cdc.errors import PageNotFoundError
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import SourceRecord
from cdc.store import SCHEMA_VERSION, TABLES, RetentionPolicy, Store, schema
from cdc.store.layout import _digests_of, digest_rows
from tests import crawlgen
from tests.storerows import (
    as_schema_1,
    as_schema_2,
    as_schema_3,
    as_schema_4,
    consistency_problems,
    layout,
    store_rows,
    without_runs,
)

LISTS = (str(SCHEMA_VERSION), {"chunk_lists": "BASE TABLE", "content_chunks": "VIEW"})  # this layout


def _ingest(store: Store, records: list[dict], params: ChunkParams | None = None) -> None:
    sources = (SourceRecord("crawl", n, r) for n, r in enumerate(records, start=1))
    (Ingester(store, params) if params else Ingester(store)).run(sources)


@pytest.fixture
def crawl() -> tuple[list[dict], list[dict]]:
    """Two rounds of a small crawl of 2 hosts: the second adds each page's next versions."""
    records = crawlgen.crawl(hosts=2, pages=4, versions=5)
    first = [r for r in records if r["fetched_at"] < crawlgen.START.replace(day=4).isoformat()]
    return first, [r for r in records if r not in first]


def test_content_chunks_are_the_chunks_of_every_retained_text(tmp_path, crawl):
    store = Store(tmp_path / "cdc.duckdb")
    _ingest(store, crawl[0] + crawl[1])
    assert layout(store.path) == LISTS
    with store.reading() as connection:
        texts = connection.execute(
            "SELECT natural_key, generation, encode(text) FROM generations WHERE text IS NOT NULL").fetchall()
        rows = connection.execute("SELECT * FROM content_chunks ORDER BY ALL").fetchall()
        types = connection.execute("DESCRIBE content_chunks").fetchall()
    # The seed's columns and types, a row per chunk, as chunk_content cuts the retained texts
    # (the generation a BIGINT: its number is a capture time, YYYYMMDDhhmmss).
    assert [(name, kind) for name, kind, *_ in types] == [
        ("natural_key", "VARCHAR"), ("generation", "BIGINT"), ("chunk_index", "INTEGER"),
        ("digest", "BLOB"), ("length", "INTEGER")]
    expected = sorted((key, generation, c.index, c.digest, c.length)
                      for key, generation, text in texts for c in chunk_content(text))
    assert rows == expected and len(texts) == 8 * 3
    assert store.stats()["content_chunks"] == len(rows)
    assert consistency_problems(store.path) == dict.fromkeys(consistency_problems(store.path), 0)


def test_digest_rows_cut_chunk_lists_as_the_sql_cuts_them(tmp_path, crawl):
    """The run's end cuts the chunk lists into digest rows in NumPy (`digest_rows`): the same
    rows, types and places as `_digests_of` cuts them in SQL, empty lists included."""
    store = Store(tmp_path / "cdc.duckdb")
    _ingest(store, crawl[0] + crawl[1])
    with store.reading() as connection:
        lists = connection.execute("SELECT p.host, l.natural_key, l.generation, l.digests FROM chunk_lists l "
                                   "JOIN pages p USING (natural_key) ORDER BY ALL").fetchall()
        lists += [("shop9.example", "https://shop9.example/empty", 20240101000000, b"")]
        connection.register("cut", digest_rows(lists))
        connection.register("given", pa.table(dict(zip(["host", "natural_key", "generation", "digests"],
                                                        map(list, zip(*lists))))))
        in_sql = connection.execute(
            f"SELECT * FROM {_digests_of('SELECT * FROM given', in_order=True)} ORDER BY ALL").fetchall()
        cut = connection.execute("SELECT * FROM cut ORDER BY ALL").fetchall()
        types = connection.execute("DESCRIBE SELECT * FROM cut").fetchall()
        sql_types = connection.execute(
            f"DESCRIBE SELECT * FROM {_digests_of('SELECT * FROM given', in_order=True)}").fetchall()
    assert cut == in_sql and len(cut) == sum(len(digests) // 16 for *_, digests in lists) > 0
    assert [row[:2] for row in types] == [row[:2] for row in sql_types]
    assert digest_rows([]).num_rows == 0


@pytest.mark.parametrize(("version", "rewrite"), [("1", as_schema_1), ("2", as_schema_2)])
def test_an_older_store_is_upgraded_when_first_opened_and_reads_as_a_store_made_now(
        tmp_path, crawl, version, rewrite):
    new = Store(tmp_path / "new.duckdb")
    _ingest(new, crawl[0])
    old = Store(shutil.copy(new.path, tmp_path / "old.duckdb"))
    rewrite(old.path)
    assert layout(old.path)[0] == version
    with duckdb.connect(str(old.path), read_only=True) as connection:  # numbered 1, 2, 3 then
        assert connection.execute("SELECT DISTINCT generation FROM generations ORDER BY 1").fetchall() == [
            (1,), (2,), (3,)]

    # A reader opens it: it is upgraded first, in one transaction, and reads the same.
    key = new.page_keys()[0]
    host = new.page(key).host
    assert old.stats()["content_chunks"] == new.stats()["content_chunks"]
    assert layout(old.path) == LISTS
    assert without_runs(store_rows(old.path), True) == without_runs(store_rows(new.path), True)
    numbers = [g.generation for g in new.generations(key)]
    assert [g.generation for g in old.generations(key)] == numbers
    assert old.versions(key, numbers) == new.versions(key, numbers)
    assert host_boilerplate(old, host, 0.05, 3) == host_boilerplate(new, host, 0.05, 3)
    assert shared_across_hosts(old) == shared_across_hosts(new)
    digest = old.version(key, numbers[-1]).chunks[0][0]
    assert old.pages_with_digest(digest) == new.pages_with_digest(digest)
    assert old.template_digests(host) == new.template_digests(host)
    assert [replace(row, measure=None) for row in old.changes()] == [
        replace(row, measure=None) for row in new.changes()]
    with duckdb.connect(str(old.path), read_only=True) as connection:
        fetches = connection.execute("SELECT count(*), min(run), max(run) FROM fetches").fetchone()
        runs = connection.execute("SELECT run, label FROM runs").fetchall()
        indexes = {row[0] for row in connection.execute("SELECT index_name FROM duckdb_indexes()").fetchall()}
    assert fetches == (len(crawl[0]), 0, 0) and runs == [(0, "before runs were recorded")]
    assert indexes == {"pages_key", "generations_key", "chunk_lists_key", "changes_key", "fetches_key",
                       "change_words_key"}

    # The next crawl goes in as into a store made now.
    for store in (old, new):
        _ingest(store, crawl[1])
    assert without_runs(store_rows(old.path), True) == without_runs(store_rows(new.path), True)
    assert compare_generations(old, key).report == compare_generations(new, key).report
    assert consistency_problems(old.path) == dict.fromkeys(consistency_problems(old.path), 0)


def test_a_store_of_schema_3_gets_its_templates_and_flags_counted_when_first_opened(tmp_path, crawl):
    new = Store(tmp_path / "new.duckdb")
    for records in crawl[:2]:
        _ingest(new, records)
    assert any(row.template_only is not None for row in new.changes())
    old = Store(shutil.copy(new.path, tmp_path / "old.duckdb"))
    as_schema_3(old.path)
    assert layout(old.path)[0] == "3"
    assert old.changes() == new.changes()  # a reader upgrades it: the flags as a store made now
    assert layout(old.path)[0] == str(SCHEMA_VERSION)
    assert store_rows(old.path) == store_rows(new.path)
    with duckdb.connect(str(old.path), read_only=True) as connection:
        upgraded = connection.execute("SELECT * FROM host_templates ORDER BY ALL").fetchall()
    with duckdb.connect(str(new.path), read_only=True) as connection:
        assert upgraded == connection.execute("SELECT * FROM host_templates ORDER BY ALL").fetchall() != []


def test_a_store_of_schema_4_gets_each_pages_surt_when_first_opened(tmp_path, crawl):
    """Ingest gives a new page its SURT (cdc.core.urls.surt_key, as CDX indexes key captures);
    the upgrade gives every page of an older store the same, and the store reads as one made now."""
    new = Store(tmp_path / "new.duckdb")
    _ingest(new, crawl[0])
    old = Store(shutil.copy(new.path, tmp_path / "old.duckdb"))
    as_schema_4(old.path)
    assert layout(old.path)[0] == "4"
    assert old.page("https://shop1.example/item/2").surt == "example,shop1)/item/2"  # upgraded on reading
    assert layout(old.path)[0] == str(SCHEMA_VERSION)
    assert store_rows(old.path, ("meta", *TABLES)) == store_rows(new.path, ("meta", *TABLES))
    with duckdb.connect(str(new.path), read_only=True) as connection:
        surts = dict(connection.execute("SELECT natural_key, surt FROM pages").fetchall())
    assert len(surts) == 8 and surts == {key: surt_key(key) for key in surts}
    for store in (old, new):  # the next crawl, pages stored before keep theirs
        _ingest(store, crawl[1] + [crawlgen.record("https://www.Shop2.example/A/b?z=1&a=2", 9, "New.")])
    assert store_rows(old.path, ("meta", *TABLES)) == store_rows(new.path, ("meta", *TABLES))
    assert new.page("https://www.shop2.example/A/b?a=2&z=1").surt == "example,shop2)/a/b?a=2&z=1"


def test_an_upgrade_stopped_midway_leaves_the_store_as_it_was(tmp_path, crawl, monkeypatch):
    store = Store(tmp_path / "cdc.duckdb")
    _ingest(store, crawl[0])
    as_schema_1(store.path)
    tables = ("meta", "pages", "generations", "content_chunks", "changes")
    before = store_rows(store.path, tables)
    # The upgrade fails at its last statement, everything else done: nothing of it stays.
    failing = [*schema.UPGRADE_TO_CAPTURE_IDS, "SELECT error('stop')"]
    monkeypatch.setattr(schema, "UPGRADE_TO_CAPTURE_IDS", failing)
    with pytest.raises(duckdb.Error, match="stop"):
        _ingest(Store(store.path), crawl[1])
    assert layout(store.path) == ("1", {"content_chunks": "BASE TABLE"})
    assert store_rows(store.path, tables) == before
    monkeypatch.undo()
    _ingest(Store(store.path), crawl[1])  # and then it upgrades
    assert layout(store.path)[0] == str(SCHEMA_VERSION)


def test_numbers_held_from_before_an_upgrade_say_they_name_no_generation(tmp_path, crawl):
    store = Store(tmp_path / "cdc.duckdb")
    _ingest(store, crawl[0])
    as_schema_2(store.path)
    key = Store(store.path).page_keys()[0]
    with pytest.raises(PageNotFoundError, match="has no generation 2: its generations are"):
        compare_generations(store, key, 1, 2)


def test_a_round_1_store_migrates_to_this_layout_and_spec(tmp_path, crawl, capsys):
    old_params = ChunkParams(avg_size=4096, min_size=1024, max_size=16384)  # another spec
    old = Store(tmp_path / "old.duckdb", spec=spec_for(old_params))
    old.set_retention(RetentionPolicy(keep=2))
    _ingest(old, crawl[0] + crawl[1], old_params)
    as_schema_1(old.path)  # rows per chunk, chunked under another spec: as round 1 left stores
    fresh = Store(tmp_path / "fresh.duckdb")
    fresh.set_retention(RetentionPolicy(keep=2))
    _ingest(fresh, crawl[0] + crawl[1])

    assert main(["--db", str(old.path), "migrate"]) == 0
    assert "re-chunked 16 retained generations of 8 pages" in capsys.readouterr().out
    assert layout(old.path) == LISTS
    assert store_rows(old.path, ("content_chunks",)) == store_rows(fresh.path, ("content_chunks",))
    assert consistency_problems(old.path) == dict.fromkeys(consistency_problems(old.path), 0)


def test_erasure_counts_and_removes_every_chunk_of_the_page(tmp_path, crawl):
    store = Store(tmp_path / "cdc.duckdb")
    _ingest(store, crawl[0])
    key = store.page_keys()[0]
    with store.reading() as connection:
        rows = {table: connection.execute(f"SELECT count(*) FROM {table} WHERE natural_key = ?",
                                          [key]).fetchone()[0]
                for table in ("pages", "generations", "content_chunks", "changes", "fetches", "page_runs",
                              "change_words", "watch_hits")}
    assert store.erase(key) == sum(rows.values())
    with store.reading() as connection:
        left = connection.execute("SELECT count(*) FROM chunk_lists WHERE natural_key = ?", [key]).fetchone()
    assert left == (0,)
