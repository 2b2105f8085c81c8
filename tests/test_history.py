"""History in fetch order whatever the ingest order: versions put in their place, one store
for any split and order of the records, generation numbers that keep naming one version.
A real DuckDB file in a temporary directory."""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.ipc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.analyst.queries import compare_generations
from cdc.core.captures import capture_id
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import SourceRecord
from cdc.store import TABLES, RetentionPolicy, Store
from tests import crawlgen
from tests.storerows import consistency_problems, store_rows, without_runs

URL = "https://a.example/p"


def records_of(fetches: list[tuple[str, int, str]]) -> list[dict]:
    """Records of (url, hour, body) fetches."""
    at = crawlgen.START
    return [crawlgen.record(url, 0, body) | {"fetched_at": (at + timedelta(hours=hour)).isoformat()}
            for url, hour, body in fetches]


def ingest(store: Store, *inputs: list[dict], batch_records: int = 4_000, **kwargs):
    """One run over `inputs`, each a list of records standing for one file."""
    return Ingester(store, batch_records=batch_records, **kwargs).run_inputs(
        [[SourceRecord(f"input{n}.jsonl", line, record) for line, record in enumerate(records, 1)]
         for n, records in enumerate(inputs)])


def rows(path: Path) -> dict[str, list[tuple]]:
    return store_rows(path, TABLES)


def bodies(seed: int, count: int) -> list[str]:
    return crawlgen.page_versions(seed, count, size=1_500)


def test_a_version_older_than_the_latest_is_put_in_its_place(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    one, two, three = bodies(1, 3)
    ingest(store, records_of([(URL, 10, one), (URL, 30, three)]))
    summary = ingest(store, records_of([(URL, 20, two)]))
    assert summary.older == 1 and summary.new_generations == 1 and not summary.bad
    history = store.generations(URL)
    assert [g.fetched_at.hour for g in history] == [10, 20, 6]  # 30 hours is 06:00 the next day
    assert [g.verdict for g in history] == ["new", "minor", "minor"]
    changes = store.history(URL)
    assert [c.previous_generation for c in changes] == [None, history[0].generation, history[1].generation]
    assert "EDIT1" in changes[1].excerpt and "EDIT2" in changes[2].excerpt  # each against the one before
    assert store.page(URL).latest_generation == history[-1].generation
    assert not any(consistency_problems(store.path).values())


def test_generation_numbers_are_capture_times_and_keep_naming_one_version(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    one, two, three, four = bodies(2, 4)
    ingest(store, records_of([(URL, 20, two), (URL, 40, four)]))
    held = [g.generation for g in store.generations(URL)]
    assert held == [capture_id(datetime(2026, 1, 1, 20)), capture_id(datetime(2026, 1, 2, 16))]
    before = compare_generations(store, URL, held[0], held[1])
    ingest(store, records_of([(URL, 10, one), (URL, 30, three)]))
    assert len(store.generations(URL)) == 4
    after = compare_generations(store, URL, held[0], held[1])
    assert (after.old.text, after.new.text) == (before.old.text, before.new.text)
    assert [g.generation for g in store.generations(URL)][1::2] == held


def test_an_earlier_fetch_of_the_same_content_moves_the_start_and_old_numbers_still_resolve(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    one, two = bodies(3, 2)
    ingest(store, records_of([(URL, 10, one), (URL, 30, two)]))
    held = store.generations(URL)[-1].generation
    summary = ingest(store, records_of([(URL, 20, two)]))
    assert summary.new_generations == 0 and summary.older == 1
    moved = store.generations(URL)[-1]
    assert moved.generation == capture_id(datetime(2026, 1, 1, 20)) != held
    assert store.version(URL, held).generation == moved.generation  # the old number still resolves
    assert store.version(URL, held).text == store.version(URL, moved.generation).text


def test_content_seen_again_after_a_change_found_later_is_a_generation_again(tmp_path):
    """A, A fetched; then B, fetched between them, arrives: the history is A, B, A."""
    store = Store(tmp_path / "cdc.duckdb")
    a, b = bodies(4, 2)
    ingest(store, records_of([(URL, 10, a), (URL, 30, a)]))
    assert len(store.generations(URL)) == 1
    ingest(store, records_of([(URL, 20, b)]))
    history = store.generations(URL)
    assert [g.fetched_at.hour for g in history] == [10, 20, 6]
    assert history[0].content_digest == history[2].content_digest != history[1].content_digest
    assert [g.verdict for g in history] == ["new", "minor", "minor"]
    texts = [store.version(URL, g.generation).text for g in history]
    assert texts[2] == texts[0] != texts[1] and a.split(" ")[3] in texts[2].decode()


@st.composite
def histories(draw):
    """Fetches of a few pages: distinct hours a page, contents from a small pool (so a
    content comes back), with the shuffle, the split into inputs and the batch size."""
    fetches = []
    for page in range(draw(st.integers(1, 3))):
        pool = bodies(10 + page, 3)
        hours = draw(st.lists(st.integers(0, 200), min_size=1, max_size=7, unique=True))
        fetches += [(f"https://h{page % 2}.example/p{page}", hour, pool[draw(st.integers(0, 2))])
                    for hour in hours]
    seed = draw(st.integers(0, 2**32 - 1))
    inputs = draw(st.integers(1, 4))
    batch = draw(st.integers(1, 8))
    return fetches, seed, inputs, batch


@pytest.mark.slow  # 30 examples of two stores each: about a minute
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_any_order_and_split_of_the_records_gives_the_same_store(history):
    fetches, seed, inputs, batch = history
    records = records_of(fetches)
    with tempfile.TemporaryDirectory() as directory:
        in_order = Store(Path(directory) / "in-order.duckdb")
        ingest(in_order, sorted(records, key=lambda r: (r["fetched_at"], r["url"])))
        shuffled = records[:]
        random.Random(seed).shuffle(shuffled)
        parts = [shuffled[n::inputs] for n in range(inputs)]
        other = Store(Path(directory) / "shuffled.duckdb")
        ingest(other, *parts, batch_records=batch)
        assert rows(other.path) == rows(in_order.path)
        assert not any(consistency_problems(other.path).values())


def test_a_backfill_ends_in_the_store_of_the_in_order_ingest(tmp_path):
    """The newer half of each page's history first, the older half in a later run."""
    records = crawlgen.crawl(hosts=2, pages=3, versions=6)
    times = sorted({r["fetched_at"] for r in records})
    older = [r for r in records if r["fetched_at"] < times[3]]
    newer = [r for r in records if r["fetched_at"] >= times[3]]
    keep_all = RetentionPolicy(keep=10)
    in_order, backfilled = Store(tmp_path / "in-order.duckdb"), Store(tmp_path / "backfilled.duckdb")
    for store in (in_order, backfilled):
        store.set_retention(keep_all)
    ingest(in_order, older)
    ingest(in_order, newer)
    ingest(backfilled, newer)
    summary = ingest(backfilled, older)
    assert summary.older == len(older) and summary.new_generations == len(older)
    assert without_runs(rows(backfilled.path)) == without_runs(rows(in_order.path))


def test_a_backfill_past_the_retained_texts_says_which_changes_it_could_not_measure(tmp_path):
    records = crawlgen.crawl(hosts=1, pages=2, versions=6)
    times = sorted({r["fetched_at"] for r in records})
    older = [r for r in records if r["fetched_at"] < times[2]]
    newer = [r for r in records if r["fetched_at"] >= times[2]]
    in_order, backfilled = Store(tmp_path / "in-order.duckdb"), Store(tmp_path / "backfilled.duckdb")
    ingest(in_order, older)
    ingest(in_order, newer)
    ingest(backfilled, newer)
    ingest(backfilled, older)
    # Keep 3: the oldest of the newer four had lost its text when the older two came, so its
    # change from the version before is known to be a change, not measured.
    want, got = (store_rows(store.path, ("changes",))["changes"] for store in (in_order, backfilled))
    boundary = capture_id(datetime.fromisoformat(times[2]).replace(tzinfo=None))
    differing = [(a, b) for a, b in zip(got, want) if a != b]
    assert len(got) == len(want) and [a[1] for a, _ in differing] == [boundary, boundary]
    for row, _ in differing:
        assert (row[10], row[12], row[4]) == ("changed", "digests", None)
    assert all(b[12] == "edits" for _, b in differing)
    assert store_rows(backfilled.path, ("pages", "generations"))["generations"][0][:7] == \
        store_rows(in_order.path, ("pages", "generations"))["generations"][0][:7]


def test_reingesting_anything_changes_nothing(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    records = crawlgen.crawl(hosts=1, pages=2, versions=4)
    ingest(store, records[::2])
    ingest(store, records[1::2])
    before = rows(store.path)
    again = ingest(store, records[::-1], batch_records=3)
    assert again.new_generations == 0 and again.unchanged == len(records) and again.older == 0
    assert rows(store.path) == before


def test_a_fetch_time_in_the_future_is_reported_and_nothing_stored_for_it(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    one, two = bodies(5, 2)
    soon = datetime.now(UTC) + timedelta(hours=20)
    later = datetime.now(UTC) + timedelta(days=3)
    good = crawlgen.record(URL, 0, one)
    records = [good, crawlgen.record(URL, 0, two) | {"fetched_at": later.isoformat()},
               crawlgen.record("https://a.example/q", 0, two) | {"fetched_at": soon.isoformat()},
               crawlgen.record("https://a.example/r", 0, two) | {"fetched_at": "last tuesday"},
               crawlgen.record("https://a.example/s", 0, two) | {"fetched_at": None}]
    summary = ingest(store, records)
    assert [(bad.line, bad.reason.split(" ")[0]) for bad in summary.bad] == [
        (2, "fetched_at"), (4, "fetched_at"), (5, "no")]
    assert "in the future" in summary.bad[0].reason
    assert sorted(store.page_keys()) == [URL, "https://a.example/q"]
    assert len(store.generations(URL)) == 1


def test_two_contents_fetched_at_the_same_time_are_both_kept_in_input_order(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    one, two = bodies(6, 2)
    summary = ingest(store, records_of([(URL, 10, one), (URL, 10, two)]))
    assert summary.same_time == [("input0.jsonl", 2, URL)]
    history = store.generations(URL)
    assert len(history) == 2 and history[1].generation == history[0].generation + 1  # the next second
    assert [g.fetched_at for g in history] == [history[0].fetched_at] * 2
    texts = [store.version(URL, g.generation).text.decode() for g in history]
    assert one.split(" ")[3] in texts[0] and "EDIT1" in texts[1]  # in input order


def test_a_reader_never_sees_half_a_history(tmp_path):
    """Each batch's removals and insertions land in one transaction: a consistent store at
    every commit of a backfill."""
    store = Store(tmp_path / "cdc.duckdb")
    records = crawlgen.crawl(hosts=1, pages=4, versions=6)
    ingest(store, records[1::2])
    seen = []

    def check(summary):
        with duckdb.connect(str(store.path), read_only=True) as connection:
            seen.append(connection.execute("""
                SELECT count(*) FROM changes c LEFT JOIN (
                    SELECT natural_key, generation,
                           lag(generation) OVER (PARTITION BY natural_key ORDER BY generation) AS before
                    FROM generations) g USING (natural_key, generation)
                WHERE g.generation IS NULL OR c.previous_generation IS DISTINCT FROM g.before
            """).fetchone()[0])

    Ingester(store, batch_records=2, on_batch=check).run(
        [SourceRecord("older.jsonl", n, r) for n, r in enumerate(records[::2], 1)])
    assert len(seen) == len(records[::2]) // 2 and seen == [0] * len(seen)


def test_a_run_writes_no_text_its_end_would_trim_where_its_batch_has_newer_ones(tmp_path):
    """A history imported in one batch: the texts past the newest three are never written,
    so the run leaves no dead bytes to compact. In batches of two records each batch's are
    the newest yet, so they are written, and trimmed at the run's end; the store is the same."""
    records = crawlgen.crawl(hosts=1, pages=2, versions=6)
    whole, batched = Store(tmp_path / "whole.duckdb"), Store(tmp_path / "batched.duckdb")
    ingest(whole, records)
    ingest(batched, records, batch_records=2)
    assert rows(whole.path) == rows(batched.path)
    with duckdb.connect(str(whole.path), read_only=True) as connection:
        assert whole.trimmed_bytes(connection) == 0
        assert connection.execute("SELECT count(text) FROM generations").fetchone() == (6,)
    with duckdb.connect(str(batched.path), read_only=True) as connection:
        assert batched.trimmed_bytes(connection) > 0
    assert sorted(path.name for path in tmp_path.iterdir()) == [  # no texts kept beside them
        "batched.duckdb", "batched.duckdb.lock", "whole.duckdb", "whole.duckdb.lock"]


def _newest_first(seed: int) -> list[dict]:
    """Two pages of eight hourly versions: each page's newest five first (a batch of five
    writes three of their texts), then the older three, which land before them."""
    pages = [records_of([(f"https://a.example/p{page}", hour, body)
                         for hour, body in enumerate(bodies(seed + page, 8))]) for page in range(2)]
    return [*pages[0][3:], *pages[1][3:], *pages[0][:3], *pages[1][:3]]


def test_a_fetch_next_to_a_text_an_earlier_batch_expired_is_measured_with_it(tmp_path, monkeypatch):
    """Batches of five records: a later batch's fetch lands before versions an earlier batch
    did not write (three newer ones came with them). It is measured with their texts all the
    same: the same store as one batch makes, exact edits and all."""
    from cdc.store.expired import ExpiredTexts

    found = []
    original = ExpiredTexts.find
    monkeypatch.setattr(ExpiredTexts, "find",
                        lambda self, wanted: found.append(original(self, wanted)) or found[-1])
    records = _newest_first(20)
    whole, batched = Store(tmp_path / "whole.duckdb"), Store(tmp_path / "batched.duckdb")
    ingest(whole, records)
    ingest(batched, records, batch_records=5)
    assert rows(batched.path) == rows(whole.path)
    assert sum(map(len, found)) > 0  # the later batches read texts kept beside the store
    assert not any(consistency_problems(batched.path).values())
    with duckdb.connect(str(batched.path), read_only=True) as connection:
        assert connection.execute("SELECT DISTINCT measure FROM changes WHERE measure IS NOT NULL "
                                  "ORDER BY 1").fetchall() == [("edits",)]
    assert not (tmp_path / "batched.duckdb.expired").exists()


OTHER = "https://c.example/x"


def _meanwhile(store: Store, what: str) -> None:
    """What another command does to the store while a run is between two batches."""
    if what == "erasure":
        store.erase(OTHER)
    elif what == "run":  # in this process: a job server, a thread
        ingest(Store(store.path), records_of([(OTHER, 50, bodies(99, 1)[0])]))
    else:
        store.set_retention(RetentionPolicy(keep=10))


@pytest.mark.parametrize("what", ["erasure", "run", "retention"])
def test_a_run_is_built_the_same_whatever_another_command_does_between_its_batches(tmp_path, what):
    """An erasure of another page, another run (of this process: the lock of a run is not its
    pid), a retention limit raised: the texts a run kept beside the store stay its own, and
    the store ends as one batch makes it with the same done before or after."""
    records, other = _newest_first(50), records_of([(OTHER, 0, bodies(98, 1)[0])])
    whole, batched = Store(tmp_path / "whole.duckdb"), Store(tmp_path / "batched.duckdb")
    for store in (whole, batched):
        ingest(store, other)
    if what == "retention":
        _meanwhile(whole, what)
    ingest(whole, records)
    if what != "retention":
        _meanwhile(whole, what)

    def between(summary):
        if summary.batches == 1:
            _meanwhile(Store(batched.path), what)

    ingest(batched, records, batch_records=5, on_batch=between)
    assert without_runs(rows(batched.path)) == without_runs(rows(whole.path))
    assert not (tmp_path / "batched.duckdb.expired").exists()


class _Stop(Exception):
    pass


def _stopped_after_two_batches(store: Store, records: list[dict]) -> None:
    def stop(summary):
        if summary.batches == 2:
            raise _Stop

    with pytest.raises(_Stop):
        ingest(store, records, batch_records=5, on_batch=stop)


@pytest.mark.parametrize("between", [False, True])
def test_a_rerun_after_a_stopped_run_uses_the_texts_it_kept_and_deletes_them(tmp_path, between):
    """Whatever runs between (a run of other pages ends, and leaves the stopped run's texts
    of pages it did not see), the rerun is built as one whole run."""
    records = _newest_first(30)
    whole, rerun = Store(tmp_path / "whole.duckdb"), Store(tmp_path / "rerun.duckdb")
    ingest(whole, records)
    _stopped_after_two_batches(rerun, records)
    kept = tmp_path / "rerun.duckdb.expired"
    assert list(kept.glob("*.arrow"))  # the stopped run's texts past the limit
    if between:
        ingest(rerun, records_of([(OTHER, 0, bodies(97, 1)[0])]))
        assert list(kept.glob("*.arrow"))
    ingest(rerun, records, batch_records=5)
    assert {table: [row for row in found if "c.example" not in str(row)]
            for table, found in without_runs(rows(rerun.path)).items()} == without_runs(rows(whole.path))
    assert not kept.exists()


def test_an_erasure_blanks_the_texts_a_stopped_run_kept_of_the_page(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    _stopped_after_two_batches(store, _newest_first(40))
    folder = tmp_path / "cdc.duckdb.expired"

    def kept_texts() -> dict[str, list[bytes]]:
        texts: dict[str, list[bytes]] = {}
        for path in folder.glob("*.arrow"):
            for row in pa.ipc.open_file(pa.memory_map(str(path))).read_all().to_pylist():
                texts.setdefault(row["natural_key"], []).append(row["text"])
        return texts

    before = kept_texts()
    erased = [key for key in before if key.endswith("/p0")]
    assert erased and any(key.endswith("/p1") for key in before)
    store.erase("https://a.example/p0")
    after = kept_texts()
    assert not any(key.endswith("/p0") for key in after)
    assert {key: texts for key, texts in after.items() if key} == {key: texts for key, texts in before.items()
                                                                   if not key.endswith("/p0")}
    files = b"".join(path.read_bytes() for path in folder.iterdir())
    assert not any(text in files for key in erased for text in before[key])
    assert not list(folder.glob(".*"))  # nothing half-written left


def test_a_prune_deletes_the_texts_a_stopped_run_kept(tmp_path):
    """`cdc prune` trims every page: no text a killed run kept past the limit is left."""
    store = Store(tmp_path / "cdc.duckdb")
    _stopped_after_two_batches(store, _newest_first(60))
    assert list((tmp_path / "cdc.duckdb.expired").glob("*.arrow"))
    store.prune(RetentionPolicy(keep=3))
    assert not (tmp_path / "cdc.duckdb.expired").exists()


@pytest.mark.parametrize("keep", [1, 3])
def test_retention_keeps_the_newest_by_fetch_time_after_a_backfill(tmp_path, keep):
    store = Store(tmp_path / "cdc.duckdb")
    store.set_retention(RetentionPolicy(keep=keep))
    records = crawlgen.crawl(hosts=1, pages=1, versions=6)
    ingest(store, records[3:])
    ingest(store, records[:3])
    history = store.generations(crawlgen.record("https://shop0.example/item/0", 0, "")["url"])
    assert [g.retained for g in history] == [False] * (6 - keep) + [True] * keep


def test_a_fetch_put_in_place_reads_only_the_texts_next_to_it(tmp_path):
    """Of a page with six retained generations, a fetch put in place between the first two
    reads the texts around it, and the rows are those of an in-order ingest."""
    from cdc.ingest.histories import read_histories

    versions = bodies(7, 7)
    hours = [10, 30, 50, 70, 90, 110]
    store = Store(tmp_path / "late.duckdb")
    store.set_retention(RetentionPolicy(10))
    ingest(store, records_of([(URL, hour, body) for hour, body in zip(hours, versions[:6])]))
    late = records_of([(URL, 20, versions[6])])
    fetched_at = datetime.fromisoformat(late[0]["fetched_at"]).astimezone(UTC).replace(tzinfo=None)
    with store.reading() as connection:
        state = store.page_states(connection, [URL])[URL]
        read = read_histories(connection, {URL: [fetched_at]}, {URL: (state.last_checked, None)})[URL]
    assert len(read.generations) == 6
    # The one it falls in (the first) and the two after; none before it.
    assert [generation.text is not None for generation in read.generations] == [True] * 3 + [False] * 3
    assert len(read.unread) == 3
    ingest(store, late)
    in_order = Store(tmp_path / "in-order.duckdb")
    in_order.set_retention(RetentionPolicy(10))
    ingest(in_order, records_of([(URL, hour, body) for hour, body in
                                 sorted([*zip(hours, versions[:6]), (20, versions[6])])]))
    assert without_runs(rows(store.path)) == without_runs(rows(in_order.path))


def test_a_fetch_that_needs_a_text_far_from_it_is_built_again_with_the_whole_history(tmp_path, monkeypatch):
    """Content fetched again before the first generation, the same as the last one's: its
    chunks are the last generation's, which were not read around it, so the page is built
    again with every text, and the store ends as the in-order ingest's."""
    versions = bodies(8, 5)
    fetches = [(URL, 10 * (n + 1), body) for n, body in enumerate(versions)]
    store = Store(tmp_path / "late.duckdb")
    store.set_retention(RetentionPolicy(10))
    ingest(store, records_of(fetches))
    rebuilt = []
    rebuild = Ingester._rebuild

    def noting(self, pages, outcomes, again, parsed):  # the real rebuild, its pages noted
        rebuilt.extend(pages[number].natural_key for number in again)
        rebuild(self, pages, outcomes, again, parsed)

    monkeypatch.setattr(Ingester, "_rebuild", noting)
    ingest(store, records_of([(URL, 1, versions[-1])]))
    assert rebuilt == [URL]
    in_order = Store(tmp_path / "in-order.duckdb")
    in_order.set_retention(RetentionPolicy(10))
    ingest(in_order, records_of([(URL, 1, versions[-1]), *fetches]))
    assert without_runs(rows(store.path)) == without_runs(rows(in_order.path))
