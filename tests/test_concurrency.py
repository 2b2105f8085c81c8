"""Real processes sharing one DuckDB store: a reader with a writer, two writers, kill -9, a held lock.

Every process here is real (`sys.executable`), every store a real DuckDB file in tmp_path; no
mocks. The input is built by `write_crawl`: pages with versions that change paragraph by
paragraph (text from `tests.textgen`), some versions rechecks of unchanged content.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from cdc.errors import CdcError
from cdc.store import RetentionPolicy, Store, StoreBusyError
from tests import textgen
from tests.storerows import assert_same_rows, consistency_problems, without_file_bytes

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
BATCH = 50  # records per batch in the writer children: many small transactions
# A backfill's stores, before it and the one it is held against, are ingested in batches of
# this many records: any split of the records gives the same rows (tests/test_history.py),
# and 80 batches of 50 cost 14 s where one of 4,000 costs 4. (A store compared by its stats
# is ingested as the one it is held against: its texts trimmed at the run's end, still in
# the file, differ with the split.)
WHOLE = 4_000
# Records of the reader's writer, and of each of the two writers: 40 and 30 batches of 50,
# enough for many reads and interleaved commits (60 and 40: the two tests took 66 s, these 49 s).
READ_RECORDS, WRITER_RECORDS = 2_000, 1_500
# Time limits that only tell a hang from a slow run: a loaded 2-core machine (other suites
# beside this one) took 52.6 s of the 55 s these tests once allowed. Nothing here measures speed.
HANG = 240
SEEN_WITHIN = 5.0  # seconds: a polling reader sees a batch at most this long after its commit

pytestmark = pytest.mark.slow
# The tests of `crash_crawl` (4,000 records and a clean run of them) run in one xdist worker,
# so that it is built once; the others may run in either (docs/testing.md).
ONE_CRAWL = pytest.mark.xdist_group("concurrency")

# A writer: ingests files into a store in batches, printing a line after each committed batch.
WRITER = r"""
import sys
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import iter_records
from cdc.store import Store

def report(summary):
    print(f"batch {summary.batches} committed with {summary.new_generations} generations", flush=True)

path, batch_records = sys.argv[1], int(sys.argv[2])
ingester = Ingester(Store(path), batch_records=batch_records, on_batch=report)
for name in sys.argv[3:]:
    ingester.run(iter_records(name))
s = ingester.summary
print(f"done {s.records} records {s.new_generations} generations {len(s.bad)} bad {s.older} older",
      flush=True)
"""

# Holds the store's write lock (cdc's and DuckDB's) for a while.
HOLDER = r"""
import sys, time
from cdc.store import Store
with Store(sys.argv[1]).writing():
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
print("released", flush=True)
"""

BATCH_LINE = re.compile(r"batch (\d+) committed with (\d+) generations")


# --- input --------------------------------------------------------------------------------


def write_crawl(path: Path, pages: int, versions: int, first_page: int = 0) -> int:
    """JSONL of `pages` pages x `versions` versions, version by version; returns the record count.

    Each version after the first changes one of four paragraphs, except that one page in five
    is a recheck with unchanged content, so every batch of 50 records makes new generations.
    Fetch times increase per page (a day per version, a minute per page).
    """
    base = datetime(2024, 1, 1)
    state: dict[int, list[str]] = {}
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for version in range(versions):
            for page in range(first_page, first_page + pages):
                if version == 0:
                    state[page] = textgen.paragraphs(page * 7919, 4)
                elif (version + page) % 5:
                    state[page][version % 4] = textgen.paragraphs(page * 7919 + 1000 * version + 1, 1)[0]
                record = {
                    "url": f"https://host{page % 3}.example/page/{page}",
                    "fetched_at": (base + timedelta(days=version, minutes=page)).isoformat() + "Z",
                    "title": f"Page {page}",
                    "sections": [{"text": paragraph} for paragraph in state[page]],
                }
                out.write(json.dumps(record) + "\n")
                count += 1
    return count


def head(source: Path, target: Path, lines: int) -> None:
    with open(source, encoding="utf-8") as src, open(target, "w", encoding="utf-8") as out:
        for _, line in zip(range(lines), src):
            out.write(line)


# --- processes ----------------------------------------------------------------------------


class Child:
    """A child Python process; a thread collects its stdout lines with their arrival times."""

    def __init__(self, args: list[str], stderr_path: Path):
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=ENV, text=True,
                                        stdout=subprocess.PIPE, stderr=self._stderr)
        self.lines: list[tuple[float, str]] = []
        self.eof = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self._changed:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self._changed.notify_all()
        with self._changed:
            self.eof = True
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[list[tuple[float, str]]], bool], timeout: float) -> bool:
        """Wait until `predicate(lines)` holds; False at end of output or timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.lines):
                left = deadline - time.monotonic()
                if self.eof or left <= 0:
                    return predicate(self.lines)
                self._changed.wait(left)
            return True

    def finish(self, timeout: float) -> int:
        """Wait for the process to exit and for its output to be read; its exit code."""
        code = self.process.wait(timeout=timeout)
        self._thread.join(timeout=10)
        return code

    def batches(self) -> list[tuple[float, int, int]]:
        """(arrival time, batch number, generations) of each committed batch it reported."""
        with self._changed:
            lines = list(self.lines)
        return [(t, int(m[1]), int(m[2])) for t, line in lines if (m := BATCH_LINE.fullmatch(line))]

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._thread.join(timeout=10)
        self.process.stdout.close()
        self._stderr.close()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Child]]:
    """Start children; every one still running at the end of the test is killed."""
    children: list[Child] = []

    def start(*args: str, name: str = "child") -> Child:
        child = Child(list(args), tmp_path / f"{name}-{len(children)}.stderr")
        children.append(child)
        return child

    try:
        yield start
    finally:
        for child in children:
            child.close()


def ingest(store: Path, *files: Path, batch: int = BATCH, timeout: float = HANG) -> list[int]:
    """Ingest in a child in batches of `batch`; the generation count after each committed batch."""
    result = subprocess.run([sys.executable, "-c", WRITER, str(store), str(batch), *map(str, files)],
                            cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-4000:]
    return [int(m[2]) for line in result.stdout.splitlines() if (m := BATCH_LINE.fullmatch(line))]


# --- 1. a reader while a writer ingests ----------------------------------------------------


@dataclass(frozen=True)
class Read:
    start: float
    end: float  # when stats() returned
    stats: dict[str, int]
    latest: list  # changes(limit=5), read right after


def test_a_reader_polling_the_store_sees_every_batch_and_the_writer_loses_nothing(tmp_path, spawn):
    crawl = tmp_path / "crawl.jsonl"
    assert write_crawl(crawl, pages=200, versions=10) == READ_RECORDS
    store = tmp_path / "store.duckdb"
    # The dashboard reads a store that exists. (A reader that opens the file in the instant the
    # first writer has created it but not yet written DuckDB's header gets a StoreError "not a
    # valid DuckDB database file" instead of waiting: a separate, rarer race, not tested here.)
    Store(store).set_retention(RetentionPolicy())

    writer = spawn("-c", WRITER, str(store), str(BATCH), str(crawl), name="writer")
    reads: list[Read] = []
    deadline = time.monotonic() + HANG
    writer_exited = None
    while True:  # the dashboard: reads back to back, each call opening the store on its own
        now = time.monotonic()
        if writer_exited is None and writer.process.poll() is not None:
            writer_exited = now
        if writer_exited is not None and now > writer_exited + 1.0:
            break
        assert now < deadline, f"the writer did not finish in time; stderr:\n{writer.stderr()}"
        stats = Store(store).stats()  # any exception fails the test: the reader never raises
        seen = time.monotonic()
        latest = Store(store).changes(limit=5)
        reads.append(Read(now, seen, stats, latest))

    assert writer.finish(timeout=10) == 0, writer.stderr()
    batches = writer.batches()
    assert len(batches) == READ_RECORDS // BATCH
    total = batches[-1][2]
    assert writer.lines[-1][1] == f"done {READ_RECORDS} records {total} generations 0 bad 0 older"
    committed = {0} | {n for _, _, n in batches}

    during = [r for r in reads if r.start < batches[-1][0]]
    assert len(during) >= 10, f"only {len(during)} reads while the writer ran"
    seen_during = sorted({r.stats["generations"] for r in during})
    assert len(seen_during) >= 2, f"the reader saw no intermediate states: {seen_during}"
    # (Retained texts fall once, at the run's end, when retention trims them.)
    for name in ("pages", "generations", "changes", "hosts"):
        values = [r.stats[name] for r in reads]
        assert values == sorted(values), f"{name} went down between reads"
    for r in reads:
        # One read is one snapshot: a whole number of committed batches, never part of one.
        assert r.stats["generations"] in committed, r.stats
        assert r.stats["changes"] == r.stats["generations"], r.stats
        # changes() opens the store after stats() has closed it: it may see a later batch.
        assert min(5, r.stats["changes"]) <= len(r.latest) <= 5
        times = [row.fetched_at for row in r.latest]
        assert times == sorted(times, reverse=True)
    assert reads[-1].stats["generations"] == total

    # The reader sees each committed batch within SEEN_WITHIN seconds of the writer reporting it.
    lags = []
    for reported, number, generations in batches:
        seen_at = min(r.end for r in reads if r.stats["generations"] >= generations)
        lags.append(seen_at - reported)
        assert lags[-1] <= SEEN_WITHIN, f"batch {number} ({generations} generations) seen after " \
            f"{lags[-1]:.2f} s; lags of all batches: {[round(lag, 1) for lag in lags]}"
    print(f"\n{len(during)} reads during the ingest, {len(seen_during)} distinct generation counts, "
          f"worst lag {max(lags):.2f} s")

    # Nothing lost, nothing doubled: the same rows as one clean ingest with no reader around.
    clean = tmp_path / "clean.duckdb"
    assert ingest(clean, crawl)[-1] == total
    assert without_file_bytes(Store(store).stats()) == without_file_bytes(Store(clean).stats())
    assert_same_rows(store, clean)


# --- 2. two writers at once ---------------------------------------------------------------


def test_two_writers_at_once_store_the_union(tmp_path, spawn):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    assert write_crawl(first, pages=150, versions=10) == WRITER_RECORDS
    assert write_crawl(second, pages=150, versions=10, first_page=150) == WRITER_RECORDS  # disjoint
    store = tmp_path / "store.duckdb"

    writers = [spawn("-c", WRITER, str(store), str(BATCH), str(path), name=f"writer-{path.stem}")
               for path in (first, second)]
    both_started = time.monotonic()
    for writer in writers:
        assert writer.finish(timeout=HANG) == 0, writer.stderr()
    (a, b) = (writer.batches() for writer in writers)
    assert len(a) == len(b) == WRITER_RECORDS // BATCH
    # Both ran at once: each had batches left to commit when both processes were running.
    assert min(a[-1][0], b[-1][0]) > both_started
    # How finely they interleave varies from run to run: cdc's write lock is polled, not
    # queued, so one writer may commit all its batches while the other waits for a gap.
    interleaved = sum(1 for t, _, _ in a if b[0][0] < t < b[-1][0])
    print(f"\n{interleaved} of the first writer's batches committed during the second's run")

    sequential = tmp_path / "sequential.duckdb"
    counts = ingest(sequential, first, second)
    assert counts[-1] == a[-1][2] + b[-1][2]
    assert without_file_bytes(Store(store).stats()) == without_file_bytes(Store(sequential).stats())
    assert_same_rows(store, sequential, runs=False)  # either writer may have been run 1
    problems = consistency_problems(store)
    assert problems == dict.fromkeys(problems, 0)


# --- 3. kill -9 during ingest -----------------------------------------------------------------


@pytest.fixture(scope="module")
def crash_crawl(tmp_path_factory) -> tuple[Path, Path, list[int]]:
    """4,000 records, and one clean run of them: its store and its count after each batch."""
    directory = tmp_path_factory.mktemp("crash")
    crawl = directory / "crawl.jsonl"
    assert write_crawl(crawl, pages=400, versions=10) == 4000
    clean = directory / "clean.duckdb"
    counts = ingest(clean, crawl)
    assert len(counts) == 4000 // BATCH
    assert counts == sorted(set(counts)), "every batch must make new generations"
    return crawl, clean, counts


@ONE_CRAWL
@pytest.mark.parametrize(("after_batches", "delay"), [(3, 0.0), (30, 0.06)],
                         ids=["early-between-batches", "later-mid-batch"])
def test_kill_9_leaves_every_committed_batch_and_a_rerun_ends_as_one_clean_run(
        tmp_path, spawn, crash_crawl, after_batches, delay):
    crawl, clean, counts = crash_crawl
    store = tmp_path / "store.duckdb"
    writer = spawn("-c", WRITER, str(store), str(BATCH), str(crawl), name="killed")
    assert writer.wait_for(lambda lines: len(lines) >= after_batches, timeout=HANG), writer.stderr()
    time.sleep(delay)
    os.kill(writer.process.pid, signal.SIGKILL)
    assert writer.finish(timeout=10) == -signal.SIGKILL, "the writer ended before it was killed"
    printed = writer.batches()
    assert printed and printed[-1][2] < counts[-1], "the writer was not mid-run"
    reported = printed[-1][2]

    # The store opens, and holds a whole number of committed batches: at least the last reported.
    stats = Store(store).stats()
    generations = stats["generations"]
    assert generations >= reported
    assert generations in counts, f"{generations} generations: not the end of any batch {counts}"
    assert stats["changes"] == generations
    problems = consistency_problems(store)
    assert problems == dict.fromkeys(problems, 0)
    committed = counts.index(generations) + 1
    print(f"\nkilled after reporting {len(printed)} batches ({reported} generations); "
          f"the store holds {committed} batches ({generations} generations); "
          f"WAL left: {store.with_name(store.name + '.wal').exists()}")
    # Exactly those batches, row for row: the same as a clean ingest of their records, once
    # the texts past the retention limit are trimmed (a run trims at its end, which the
    # killed run never reached; the next run over its pages, or a prune, does it).
    prefix_crawl, prefix = tmp_path / "prefix.jsonl", tmp_path / "prefix.duckdb"
    head(crawl, prefix_crawl, committed * BATCH)
    assert ingest(prefix, prefix_crawl)[-1] == generations
    trimmed = Store(shutil.copy(store, tmp_path / "trimmed.duckdb"))
    if store.with_name(store.name + ".wal").exists():
        shutil.copy(store.with_name(store.name + ".wal"), tmp_path / "trimmed.duckdb.wal")
    trimmed.prune(trimmed.retention())
    assert_same_rows(trimmed.path, prefix)

    # Running the same ingest again ends in the state of one clean run.
    rerun = ingest(store, crawl)
    assert rerun[-1] == counts[-1] - generations, "the rerun made generations the store had"
    assert_same_rows(store, clean, runs=False)  # the rerun first saw what the killed run had not
    assert without_file_bytes(Store(store).stats()) == without_file_bytes(Store(clean).stats())


@ONE_CRAWL
def test_kill_9_during_a_backfill_then_a_rerun_ends_as_one_clean_run(tmp_path, spawn, crash_crawl):
    """The newer half of every page's history stored; the older half ingested after it, killed
    mid-run: a consistent store at every commit, and the same command again converges."""
    crawl, _, _ = crash_crawl
    lines = crawl.read_text(encoding="utf-8").splitlines(keepends=True)
    newer, older = tmp_path / "newer.jsonl", tmp_path / "older.jsonl"
    newer.write_text("".join(lines[len(lines) // 2:]), encoding="utf-8")  # versions 5 to 9
    older.write_text("".join(lines[:len(lines) // 2]), encoding="utf-8")
    clean, store = tmp_path / "clean.duckdb", tmp_path / "store.duckdb"
    for path in (clean, store):
        ingest(path, newer, batch=WHOLE)
    before = Store(store).stats()["generations"]
    ingest(clean, older, batch=WHOLE)
    writer = spawn("-c", WRITER, str(store), str(BATCH), str(older), name="backfill")
    assert writer.wait_for(lambda lines: len(lines) >= 5, timeout=HANG), writer.stderr()
    os.kill(writer.process.pid, signal.SIGKILL)
    assert writer.finish(timeout=10) == -signal.SIGKILL, "the backfill ended before it was killed"
    problems = consistency_problems(store)
    assert problems == dict.fromkeys(problems, 0)
    held = Store(store).stats()["generations"]
    assert before < held < Store(clean).stats()["generations"], "the backfill was not killed mid-run"
    ingest(store, older)
    assert_same_rows(store, clean, runs=False)


# --- 4. a locked store ----------------------------------------------------------------------


def test_a_locked_store_says_what_to_do_and_waits_by_default(tmp_path, spawn):
    crawl = tmp_path / "crawl.jsonl"
    write_crawl(crawl, pages=20, versions=3)
    store = tmp_path / "store.duckdb"
    result = subprocess.run([sys.executable, "-m", "cdc", "--db", str(store), "ingest", str(crawl)],
                            cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=HANG)
    assert result.returncode == 0, result.stderr
    before = Store(store).stats()

    hold = 4.0
    holder = spawn("-c", HOLDER, str(store), str(hold), name="holder")
    assert holder.wait_for(lambda lines: any(line == "locked" for _, line in lines), timeout=20), \
        holder.stderr()
    locked_at = holder.lines[0][0]

    for attempt in (lambda: Store(store, lock_timeout=0.5).stats(),
                    lambda: Store(store, lock_timeout=0.5).set_retention(RetentionPolicy())):
        started = time.monotonic()
        with pytest.raises(StoreBusyError) as caught:
            attempt()
        assert 0.5 <= time.monotonic() - started < 2.5, "waited for lock_timeout, not much longer"
        message = str(caught.value)
        assert isinstance(caught.value, CdcError)
        assert "\n" not in message and str(store) in message
        assert "wait for it to finish and try again" in message

    # The command line and a default reader wait for the lock, and succeed once it is released.
    command = spawn("-m", "cdc", "--db", str(store), "stats", name="cli-stats")
    stats = Store(store).stats()
    waited = time.monotonic() - locked_at
    assert waited >= hold - 0.5, f"read after {waited:.2f} s while the lock was held for {hold} s"
    assert without_file_bytes(stats) == without_file_bytes(before)
    assert holder.finish(timeout=10) == 0, holder.stderr()
    assert holder.lines[-1][1] == "released"
    assert command.finish(timeout=30) == 0, command.stderr()
    output = "\n".join(line for _, line in command.lines)
    assert re.search(rf"^generations\s+{before['generations']:,}$", output, re.MULTILINE), output
