"""The store and ingest: generations, idempotence, stale and bad records, retention,
erasure, boilerplate, spec checks. A real DuckDB file in a temporary directory."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from collections import defaultdict

import duckdb
import pyarrow as pa
import pytest
import xxhash

from cdc import SPEC
from cdc.analyst.annotations import annotate
from cdc.analyst.boilerplate import host_boilerplate, shared_across_hosts
from cdc.analyst.queries import PageNotFoundError, compare_generations, find_page
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import iter_jsonl, iter_records
from cdc.store import RetentionPolicy, SpecMismatchError, Store, StoreNotFoundError, lookups
from tests import crawlgen, storerows, textgen
from tests.test_template import _template_change


def ingest(store: Store, records: list[dict], **kwargs):
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    return Ingester(store, **kwargs).run(iter_jsonl(io.BytesIO(data), "test.jsonl"))


def table_rows(store: Store, table: str) -> list[tuple]:
    with store.reading() as connection:
        return connection.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "cdc.duckdb")


def test_ingest_builds_generations_chunks_and_changes(store):
    records = crawlgen.crawl(hosts=2, pages=3, versions=4)
    summary = ingest(store, records)
    assert (summary.records, len(summary.pages), summary.new_pages) == (24, 6, 6)
    assert summary.new_generations == 24 and summary.unchanged == 0 and not summary.bad
    stats = store.stats()
    assert stats["pages"] == 6 and stats["generations"] == 24 and stats["changes"] == 24
    assert stats["hosts"] == 2
    assert stats["retained_generations"] == 6 * 3  # the newest 3 of 4 by default
    page = find_page(store, "HTTPS://SHOP0.example/item/1?utm_source=mail#top")
    assert page.natural_key == "https://shop0.example/item/1"
    assert page.latest_generation == crawlgen.generation(3)
    history = store.generations(page.natural_key)
    assert [g.generation for g in history] == [crawlgen.generation(v) for v in range(4)]
    assert history[0].verdict == "new" and not history[0].retained
    assert all(g.verdict == "minor" for g in history[1:])
    assert history[1].excerpt.startswith(history[1].excerpt.split(" → ")[0])
    assert "EDIT1" in history[1].excerpt


def test_a_change_row_holds_the_exact_edit(store):
    body = crawlgen.page_versions(5, 1)[0]
    old = crawlgen.record("https://a.example/p", 0, body.replace("crawl", "price $19.99", 1))
    new = crawlgen.record("https://a.example/p", 1, body.replace("crawl", "price $24.99", 1))
    ingest(store, [old, new])
    change = store.history("https://a.example/p")[-1]
    assert change.excerpt == "$19.99 → $24.99"
    assert (change.bytes_added, change.bytes_removed, change.verdict) == (6, 6, "minor")
    result = compare_generations(store, "https://a.example/p")
    assert [(e.kind, e.old_length) for e in result.report.edits] == [("replace", 6)]


def test_reingesting_the_same_records_changes_nothing(store):
    records = crawlgen.crawl(hosts=1, pages=3, versions=3)
    ingest(store, records)
    tables = ("pages", "generations", "content_chunks", "changes")
    before = {table: table_rows(store, table) for table in tables}
    again = ingest(store, records)
    assert again.new_generations == 0 and again.unchanged == len(records) and not again.older
    after = {table: table_rows(store, table) for table in before}
    assert after == before


def test_identical_content_updates_last_checked_only(store):
    body = crawlgen.page_versions(1, 1)[0]
    ingest(store, [crawlgen.record("https://a.example/p", 0, body)])
    summary = ingest(store, [crawlgen.record("https://a.example/p", 5, body)])
    assert summary.unchanged == 1 and summary.new_generations == 0
    page = store.page("https://a.example/p")
    assert page.latest_generation == crawlgen.generation(0)
    assert page.last_checked > page.last_fetched
    assert (page.last_checked - page.last_fetched).days == 5


def test_records_older_than_the_stored_history_are_put_in_place_and_counted(store):
    bodies = crawlgen.page_versions(2, 3)
    ingest(store, [crawlgen.record("https://a.example/p", 5, bodies[0])])
    summary = ingest(store, [crawlgen.record("https://a.example/p", 1, bodies[1])])
    assert summary.new_generations == 1 and summary.older == 1
    assert [g.generation for g in store.generations("https://a.example/p")] == [
        crawlgen.generation(1), crawlgen.generation(5)]
    assert store.page("https://a.example/p").latest_generation == crawlgen.generation(5)


def test_versions_in_one_batch_are_ordered_by_fetch_time(store):
    bodies = crawlgen.page_versions(3, 3)
    records = [crawlgen.record("https://a.example/p", v, bodies[v]) for v in (2, 0, 1)]
    ingest(store, records)
    history = store.generations("https://a.example/p")
    assert [g.fetched_at.day for g in history] == [1, 2, 3]


def test_bad_records_are_skipped_with_their_line_and_good_ones_kept(store):
    good = crawlgen.crawl(hosts=1, pages=2, versions=1)
    lines = [json.dumps(good[0]), "{not json", json.dumps({"title": "no url"}),
             json.dumps({"url": "ftp://x.example/", "fetched_at": "2026-01-01"}),
             json.dumps({"url": "https://x.example/", "fetched_at": "yesterday"}),
             json.dumps({"url": "https://x.example/", "title": "no time"}), json.dumps(good[1])]
    data = ("\n".join(lines) + "\n").encode()
    summary = Ingester(store).run(iter_jsonl(io.BytesIO(data), "mixed.jsonl"))
    assert summary.new_generations == 2
    assert [bad.line for bad in summary.bad] == [2, 3, 4, 5, 6]
    assert all(bad.source == "mixed.jsonl" and bad.reason for bad in summary.bad)


def test_retention_keeps_text_and_chunks_of_the_newest_generations(store):
    store.set_retention(RetentionPolicy(keep=2, classes=(("archive", 5),)))
    records = []
    for v, body in enumerate(crawlgen.page_versions(4, 6)):
        records.append(crawlgen.record("https://a.example/plain", v, body))
        records.append(
            crawlgen.record("https://a.example/kept", v, body + " kept", retention_class="archive"))
    ingest(store, records)
    plain = store.generations("https://a.example/plain")
    kept = store.generations("https://a.example/kept")
    assert [g.retained for g in plain] == [False] * 4 + [True] * 2
    assert [g.retained for g in kept] == [False] + [True] * 5
    with store.reading() as connection:
        rows = connection.execute("SELECT natural_key, count(DISTINCT generation) FROM content_chunks "
                                  "GROUP BY ALL ORDER BY ALL").fetchall()
    assert rows == [("https://a.example/kept", 5), ("https://a.example/plain", 2)]
    assert len(store.history("https://a.example/plain")) == 6  # change rows are kept for trends
    store.prune(RetentionPolicy(keep=1))
    assert [g.retained for g in store.generations("https://a.example/kept")] == [False] * 5 + [True]
    assert store.retention() == RetentionPolicy(keep=1)


def test_a_later_batch_trims_what_earlier_batches_retained(store):
    store.set_retention(RetentionPolicy(keep=2))
    bodies = crawlgen.page_versions(4, 5)
    ingest(store, [crawlgen.record("https://a.example/p", v, body) for v, body in enumerate(bodies[:3])]
           + [crawlgen.record("https://a.example/once", 0, "a page seen in the first batch only")])
    ingest(store, [crawlgen.record("https://a.example/p", v, bodies[v]) for v in (3, 4)])
    assert [g.retained for g in store.generations("https://a.example/p")] == [False] * 3 + [True] * 2
    assert [g.retained for g in store.generations("https://a.example/once")] == [True]
    with store.reading() as connection:
        rows = connection.execute("SELECT natural_key, generation FROM content_chunks "
                                  "GROUP BY ALL ORDER BY ALL").fetchall()
    assert rows == [("https://a.example/once", crawlgen.generation(0)),
                    ("https://a.example/p", crawlgen.generation(3)),
                    ("https://a.example/p", crawlgen.generation(4))]


def test_page_states_read_by_index_and_by_scan_agree(store, monkeypatch):
    """Ingest reads the page states of a batch small next to the store through the index,
    else in one scan: the two agree, for pages with older retained generations and unknown
    keys too."""
    store.set_retention(RetentionPolicy(keep=2))
    records = crawlgen.crawl(hosts=2, pages=3, versions=4)
    records.append(crawlgen.record("https://a.example/once", 0, "a page seen once"))
    ingest(store, records)
    keys = [*store.page_keys(), "https://never.example/seen"]
    monkeypatch.setattr(lookups, "KEYS_PER_LOOKUP", 3)  # several lookups, a short last one
    read = {}
    for rows_per_key in (0, 10**12):
        monkeypatch.setattr(lookups, "LOOKUP_ROWS_PER_KEY", defaultdict(lambda n=rows_per_key: n))
        with store.writing() as connection:
            read[rows_per_key] = store.page_states(connection, keys), store.page_histories(connection, keys)
    (states, histories), scanned = read[0], read[10**12]
    assert (states, histories) == scanned
    assert len(states) == len(histories) == 7 and "https://never.example/seen" not in states
    page = states["https://shop0.example/item/1"]
    history = histories[page.natural_key]
    assert page.latest_generation == crawlgen.generation(3) and len(history.generations) == 4
    assert [row.text is not None for row in history.generations] == [False, False, True, True]
    assert [fetch[0].day for fetch in history.fetches] == [1, 2, 3, 4]
    assert page.text and len(page.chunk_digests) == len(page.chunk_lengths) > 1
    assert sum(page.chunk_lengths) == len(page.text)


def test_a_store_written_by_key_holds_the_rows_of_one_written_by_scans(tmp_path, monkeypatch):
    """Every statement over a batch's or a run's pages looks them up by key in a store large
    next to them, else joins whole tables: both ways give the same store, row for row
    (generations trimmed past retention, pages re-fetched unchanged and late, template-only
    flags, a site-wide template change), and the same page runs."""
    records = crawlgen.crawl(hosts=2, pages=6, versions=4)
    late = crawlgen.record("https://shop0.example/item/2", 1, crawlgen.page_versions(2, 2)[1] + " late")
    unchanged = crawlgen.record("https://shop1.example/item/0", 5, crawlgen.page_versions(100, 4)[3])
    navigation = {**records[0]["sections"][0], "text": _template_change(crawlgen.NAVIGATION)}
    moved = [{**r, "fetched_at": crawlgen.record("x", 6, "")["fetched_at"],
              "sections": [navigation, *r["sections"][1:]]}
             for r in records if r["fetched_at"] == records[-1]["fetched_at"]]
    stores = {}
    for name, rows_per_key in (("keyed", 0), ("scanned", 10**12)):
        monkeypatch.setattr(lookups, "LOOKUP_ROWS_PER_KEY", defaultdict(lambda n=rows_per_key: n))
        monkeypatch.setattr(lookups, "KEYS_PER_LOOKUP", 4)  # several groups a statement
        stores[name] = Store(tmp_path / f"{name}.duckdb")
        stores[name].set_retention(RetentionPolicy(keep=2, classes=(("long", 3),)))
        ingest(stores[name], records[:30], batch_records=7)
        ingest(stores[name], [*records[30:], late, unchanged], batch_records=5)
        ingest(stores[name], moved)
    assert any(row.template_only for row in stores["keyed"].changes())
    storerows.assert_same_rows(stores["keyed"].path, stores["scanned"].path)
    assert storerows.store_rows(stores["keyed"].path, ("page_runs",)) == storerows.store_rows(
        stores["scanned"].path, ("page_runs",))


def test_erasure_removes_the_page_from_every_table_and_from_the_file(store):
    records = crawlgen.crawl(hosts=1, pages=3, versions=2)
    secret = "Sensitive sentence about Jane Example living at 12 Harbour Road"
    body = f"{textgen.text(77, 3_000).decode()} {secret}. {textgen.text(78, 3_000).decode()}"
    records.append(crawlgen.record("https://shop0.example/private", 0, body))
    ingest(store, records)
    # An analyst's note on the page's change is erased with it, byte for byte too.
    note = "Called Jane Example at home about her address on this page"
    annotate(store, "https://shop0.example/private", crawlgen.generation(0), "significant", note, "ann")
    annotate(store, "https://shop0.example/item/0", crawlgen.generation(1), "noise", "another page's", "ann")
    assert secret.encode() in store.path.read_bytes(), "the test must see the text before erasure"
    assert note.encode() in store.path.read_bytes(), "the test must see the note before erasure"
    removed = store.erase("https://shop0.example/private")
    assert removed > 0
    assert secret.encode() not in store.path.read_bytes()
    assert note.encode() not in store.path.read_bytes()
    for table in ("pages", "generations", "content_chunks", "changes", "annotations", "change_words"):
        assert all(row[0] != "https://shop0.example/private" for row in table_rows(store, table))
    assert [row.natural_key for row in store.annotations()] == ["https://shop0.example/item/0"]
    assert store.stats()["pages"] == 3
    with pytest.raises(PageNotFoundError):
        find_page(store, "https://shop0.example/private")


def test_erasure_removes_the_words_a_change_removed_after_its_text_is_trimmed(store):
    """A sentence deleted in the second version lives on only in the change's words once the
    first version's text is trimmed (keep 1); erasing the page takes it out of the file."""
    store.set_retention(RetentionPolicy(keep=1))
    url = "https://shop0.example/private"
    secret = "Sensitive sentence about Jane Example living at 12 Harbour Road"
    before = f"{textgen.text(77, 3_000).decode()}\n{secret}.\n{textgen.text(78, 3_000).decode()}"
    after = f"{textgen.text(77, 3_000).decode()}\n{textgen.text(78, 3_000).decode()}"
    ingest(store, [*crawlgen.crawl(hosts=1, pages=2, versions=2), crawlgen.record(url, 0, before),
                   crawlgen.record(url, 1, after)])
    store.compact()  # the trimmed text's freed blocks gone: what is left of the secret is the words
    words = b" sensitive sentence about jane example living at 12 harbour road . "
    assert secret.encode() in store.path.read_bytes(), "the change's removed text holds it"
    assert words in store.path.read_bytes(), "the change's removed words hold it"
    with store.reading() as connection:
        assert connection.execute("SELECT count(*) FROM generations WHERE natural_key = ? AND text LIKE ?",
                                  [url, f"%{secret}%"]).fetchone() == (0,)
    store.erase(url)
    assert secret.encode() not in store.path.read_bytes()
    assert words not in store.path.read_bytes()
    left = table_rows(store, "change_words")
    assert left and all(row[0] != url for row in left)


def test_boilerplate_per_host_across_hosts_and_reverse_lookup(store):
    ingest(store, crawlgen.crawl(hosts=2, pages=6, versions=2))
    chunks = host_boilerplate(store, "shop0.example")
    assert chunks, "navigation and footer recur on every page"
    assert all(c.pages == 6 and c.share == 1.0 for c in chunks)
    frame = " ".join((crawlgen.NAVIGATION + " " + crawlgen.FOOTER).split())
    assert all(c.sample.rstrip("…") in frame for c in chunks)
    # Each sample is cut at its chunk's own offset: its bytes are what the digest is of.
    samples = store.host_boilerplate("shop0.example", 0.05, 3, with_samples=True)
    assert samples and all(xxhash.xxh3_128_digest(row[-1]) == row[0] for row in samples)
    shared = shared_across_hosts(store)
    assert {tuple(c.hosts) for c in shared} == {("shop0.example", "shop1.example")}
    holders = store.pages_with_digest(chunks[0].digest)
    # Every retained generation of every page of both hosts holds the shared navigation.
    assert {(key, generation) for key, generation, _ in holders} == {
        (f"https://shop{h}.example/item/{p}", crawlgen.generation(v)) for h in range(2) for p in range(6)
        for v in (0, 1)}
    plain = compare_generations(store, "https://shop0.example/item/2")
    without = compare_generations(store, "https://shop0.example/item/2", ignore_boilerplate=True)
    assert without.ignored and without.report.similarity < plain.report.similarity


def test_compare_names_missing_pages_and_generations(store):
    ingest(store, crawlgen.crawl(hosts=1, pages=1, versions=5))
    with pytest.raises(PageNotFoundError, match="did you mean"):
        find_page(store, "https://shop0.example/item")
    first, second, *_, last = [crawlgen.generation(v) for v in range(5)]
    with pytest.raises(PageNotFoundError, match="retention"):
        compare_generations(store, "https://shop0.example/item/0", first, second)
    with pytest.raises(PageNotFoundError, match=f"no generation 4: its generations are {first} to {last}"):
        compare_generations(store, "https://shop0.example/item/0", 4, last)
    # A number is a time: one after the latest generation began names the latest.
    assert compare_generations(store, "https://shop0.example/item/0", None, last + 1).new.generation == last


def test_a_missing_store_and_a_store_of_another_spec_are_clear_errors(tmp_path):
    with pytest.raises(StoreNotFoundError, match="cdc ingest"):
        Store(tmp_path / "absent.duckdb").stats()
    other = SPEC.replace("/2048/512/8192/", "/4096/1024/16384/")
    store = Store(tmp_path / "other.duckdb", spec=other)
    ingest(store, crawlgen.crawl(hosts=1, pages=1, versions=1))
    with pytest.raises(SpecMismatchError, match="new store") as refused:
        Store(tmp_path / "other.duckdb").stats()
    assert "migrate" not in str(refused.value)
    assert Store(tmp_path / "other.duckdb", spec=other).stats()


def test_a_store_made_by_an_earlier_cdc_names_cdc_migrate(tmp_path):
    """Round 1's spec (no blocks): its digests never compare with these; `cdc migrate` re-chunks."""
    earlier = "gear64-v1/2048/512/8192/xxh3-128/norm-v1"
    ingest(Store(tmp_path / "old.duckdb", spec=earlier), crawlgen.crawl(hosts=1, pages=1, versions=1))
    with pytest.raises(SpecMismatchError, match=r"made by an earlier cdc .*`cdc migrate --db \S*old.duckdb`"):
        Store(tmp_path / "old.duckdb").stats()


def test_a_store_of_a_newer_schema_is_refused_with_what_to_do(store):
    ingest(store, crawlgen.crawl(hosts=1, pages=1, versions=1))
    connection = duckdb.connect(str(store.path))
    connection.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    connection.close()
    with pytest.raises(SpecMismatchError, match="upgrade"):
        store.stats()


def test_the_store_records_the_chunker_spec(store):
    ingest(store, crawlgen.crawl(hosts=1, pages=1, versions=1))
    assert store.meta()["spec"] == SPEC


def test_gzip_input_and_reading_from_a_file(tmp_path, store):
    path = crawlgen.write_jsonl(tmp_path / "crawl.jsonl", crawlgen.crawl(hosts=1, pages=2, versions=2))
    summary = Ingester(store).run(iter_records(str(path)))
    assert summary.new_generations == 4


def test_threads_of_one_process_take_turns_as_processes_do(tmp_path):
    """A reader in another thread waits while a writer's transaction is open, then sees its
    commit; two readers read at once; and once both are done the file is free: another
    process (here a new DuckDB database, as one would open it) opens it for writing. The
    store is attached once per process, so a thread never holds a second handle on the file,
    whose lock POSIX would neither enforce between the two nor keep once either closed."""
    store = Store(tmp_path / "cdc.duckdb")
    store.create()
    in_write, seen, both_reading = threading.Event(), [], threading.Barrier(2, timeout=10)

    def writer():
        with store.writing() as connection:
            connection.execute("INSERT INTO meta VALUES ('turns', 'written')")
            in_write.set()
            time.sleep(0.3)

    def reader():
        in_write.wait(10)
        with store.reading() as connection:
            seen.append(connection.execute("SELECT value FROM meta WHERE key = 'turns'").fetchall())
            both_reading.wait()  # the other reader holds the file at the same time

    threads = [threading.Thread(target=task) for task in (writer, reader, reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert seen == [[("written",)], [("written",)]]
    other = subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).close()",
                            str(store.path)], capture_output=True, text=True, timeout=60)
    assert other.returncode == 0, other.stderr


def test_two_stores_open_at_once_each_read_their_own_tables(tmp_path):
    """Both files attached to the process's one database: each connection's queries read its
    own file's tables, and so does a writer's check of what a file is (another store's
    tables beside an empty DuckDB file do not make it a store already)."""
    first, second = Store(tmp_path / "first.duckdb"), Store(tmp_path / "second.duckdb")
    for store, value in ((first, "one"), (second, "two")):
        with store.writing() as connection:
            connection.execute("INSERT INTO meta VALUES ('which', ?)", [value])
    empty = Store(tmp_path / "empty.duckdb")
    duckdb.connect(str(empty.path)).close()  # a DuckDB file of no tables, made elsewhere
    with first.reading() as a, second.reading() as b:
        assert a.execute("SELECT value FROM meta WHERE key = 'which'").fetchall() == [("one",)]
        assert b.execute("SELECT value FROM meta WHERE key = 'which'").fetchall() == [("two",)]
        with empty.writing() as connection:  # made a store, as it would be alone
            assert connection.execute("SELECT count(*) FROM pages").fetchall() == [(0,)]


def test_a_failed_query_over_a_registered_table_raises_its_own_error(tmp_path):
    """A query that fails inside a write transaction aborts it, and DuckDB then refuses to
    unregister the table the query read: the error raised is the query's, not that one."""
    store = Store(tmp_path / "store.duckdb")
    given = pa.table({"x": ["not-a-number"]})
    with (pytest.raises(duckdb.ConversionException, match="not-a-number"), store.writing() as connection,
          lookups._registered(connection, "given", given)):
        connection.execute("SELECT CAST(x AS INTEGER) FROM given").fetchall()
    assert store.meta()  # the store is there and readable after the rollback
