"""Search and watch benchmark: `cdc.analyst.search` and the watches on the 100,000-page synthetic store.

What is measured, in one process, on the store of 100,000 pages x 3 crawls
(`benchmarks/synthetic_store.py`, cached in data/bench/; each change with the words its
edits added and removed, as ingest stores them in `change_words`):

1. Searches, through `cdc.analyst.search.search` (50 hits and the total, as `cdc search` and the
   Search page ask), each opening its own read-only connection as the dashboard's calls do:
   a common word on either side (`--text`), the same word added (`--added`), and a rare
   phrase (three distinct words in an order few changes or none added).
   Warm: one untimed run first, then the median of `--runs`, the searches interleaved.
   Target: at most 300 ms each.
2. A watch evaluated at a 100,000-page run's end: `Store._record_watch_hits` for the last
   crawl's run (its 100,000 changes), one watch of a common word, inside a write
   transaction that is rolled back after (so every round measures the same store). Target:
   at most 300 ms.
3. A run's end, `Store.finish_run` of the last crawl (its 100,000 pages: the trim, the
   templates and flags, `page_runs`, the run's row), with no watch and with 20 watches (10
   distinct phrases of three words, 10 common words, either side), each rolled back after,
   interleaved round by round. The 20 watches saved before the run started: its batches
   matched them as they were written (`cdc.store.indexwriter`: done here as ingest does, on
   each 4,000 changes' index rows in memory, and timed: what the watches cost the batches);
   and the same 20 added during the run, matched from its index at its end. Target: the
   watches saved before the run cost its end at most 1.2x none.

Why the layout, and what it costs here: `cdc.store.wordindex`. CPU times are printed under each
wall time: the machine is shared, and the wall time says how busy it was as much as the work.

Run from the repository root:

    python benchmarks/search.py           # 7 runs (+ 2 minutes the first time, to build the store)
    python benchmarks/search.py --quick   # 3 runs
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic_store

import cdc
from cdc.analyst.search import SearchQuery, add_watch, remove_watch, search, watches
from cdc.ingest.ingester import BATCH_RECORDS
from cdc.store import Store
from cdc.store.indexwriter import copy_watches, match_appended
from cdc.store.wordindex import index_rows

PAGES = 100_000
GENERATIONS, HOSTS = 3, 50
TARGET_MS = 300.0
TARGET_WATCH_RATIO = 1.2
WATCHES = 20


class _Undo(Exception):
    """Raised at the end of a write transaction to roll it back."""


@contextmanager
def rolled_back(store: Store) -> Iterator[None]:
    """Every `store.writing()` in the block rolls back instead of committing."""
    original = store.writing

    @contextmanager
    def writing():
        try:
            with original() as connection:
                yield connection
                raise _Undo
        except _Undo:
            pass

    store.writing = writing
    try:
        yield
    finally:
        del store.writing


CPU: dict[str, list[float]] = {}  # CPU ms of each timed call (all of DuckDB's threads), by label


def timed(call: Callable[[], object], label: str = "") -> float:
    """Wall ms of `call()`; its CPU ms (this process's, DuckDB's threads included) noted under
    `label`: on a shared machine the wall time says how busy it was as much as the work."""
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    call()
    CPU.setdefault(label, []).append((time.process_time() - cpu) * 1000)
    return (time.perf_counter() - started) * 1000


def added_words(store: Store, rows: int) -> list[str]:
    """The added words of `rows` changes of the last crawl that added some 200 characters."""
    with store.reading() as connection:
        return [row[0] for row in connection.execute(
            "SELECT added_words FROM change_words WHERE run = ? AND len(added_words) > 200 LIMIT ?",
            [GENERATIONS, rows]).fetchall()]


def phrases(store: Store) -> tuple[str, str]:
    """A common word of the last crawl's added words, and a rare phrase: three words of the
    pool from three changes, in an order the texts hardly hold (the synthetic texts are slices
    of one 4 MB pool of words, so any run of its words recurs in dozens of changes)."""
    sample = added_words(store, 2000)
    counts = Counter(token for words in sample for token in words.split()
                     if token.isalpha() and len(token) > 3)
    common = counts.most_common(1)[0][0]
    picked: list[str] = []
    for words in sample:  # three distinct words (changes of the synthetic store share texts)
        word = next((token for token in words.split()[7:] if token.isalpha() and len(token) > 5), None)
        if word and word not in picked:
            picked.append(word)
        if len(picked) == 3:
            break
    return common, " ".join(picked)


def report(label: str, times: list[float], target: float | None = None, cpu: str = "") -> None:
    median = statistics.median(times)
    verdict = ("" if target is None
               else f"  target <= {target:.0f} ms: {'PASS' if median <= target else 'FAIL'}")
    print(f"  {label:<58} median {median:8.1f} ms  (min {min(times):.1f}, max {max(times):.1f}){verdict}")
    if cpu in CPU:
        print(f"  {'':<58} CPU    {statistics.median(CPU[cpu]):8.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 runs")
    parser.add_argument("--runs", type=int, help="timed runs of each measure (default 7, or 3 with --quick)")
    args = parser.parse_args(argv)
    runs = args.runs or (3 if args.quick else 7)
    print(f"cdc from {Path(cdc.__file__).parent}")
    built = synthetic_store.cached_store(PAGES, GENERATIONS, HOSTS)
    store = Store(built.path)
    for watch in watches(store):  # a run stopped midway left its watches
        remove_watch(store, watch.name)
    with store.reading() as connection:
        rows, added, removed = connection.execute(
            "SELECT count(*), sum(len(added_words)), sum(len(removed_words)) FROM change_words").fetchone()
    print(f"store {built.path.name}: {built.pages:,} pages, {rows:,} change_words rows, "
          f"{added / 1e6:.0f} MB of added words, {removed / 1e6:.0f} MB removed; "
          f"{built.file_bytes / 1e6:.0f} MB file")
    common, rare = phrases(store)
    print(f"common word {common!r}; rare phrase {rare!r}\n")

    searches = {
        f"search --text {common!r} (either side)": SearchQuery(text=common),
        f"search --added {common!r}": SearchQuery(added=common),
        f"search --added {rare!r}": SearchQuery(added=rare),
    }
    totals = {label: search(Store(store.path), query).total for label, query in searches.items()}  # warm
    times = {label: [] for label in searches}
    for _ in range(runs):
        for label, query in searches.items():
            times[label].append(timed(lambda query=query: search(Store(store.path), query), label))
    print(f"1. searches, 50 hits and the total, warm, median of {runs}:")
    for label, values in times.items():
        report(f"{label} ({totals[label]:,} hits)", values, TARGET_MS, label)

    add_watch(store, "common", SearchQuery(text=common))
    try:
        def evaluate() -> None:
            with rolled_back(store), store.writing() as connection:
                store._record_watch_hits(connection, GENERATIONS)

        evaluate()
        print(f"\n2. one watch ({common!r}, either side) at the end of run {GENERATIONS} "
              f"({PAGES:,} changes), warm, median of {runs}:")
        watched = [timed(evaluate, "watch") for _ in range(runs)]
        report("Store._record_watch_hits", watched, TARGET_MS, "watch")
    finally:
        remove_watch(store, "common")

    keys = store.page_keys()
    counts = {"records": PAGES, "pages": PAGES, "changed": PAGES}

    def run_end() -> None:
        with rolled_back(store):
            store.finish_run(GENERATIONS, counts, keys)

    sample = added_words(store, 200)
    # Distinct phrases: a watch's phrase is matched once however many watches ask for it.
    phrases_of = list(dict.fromkeys(" ".join(words.split()[5:8]) for words in sample))
    queries = [SearchQuery(text=phrase) for phrase in phrases_of[:WATCHES // 2]]
    queries += [SearchQuery(text=word) for word, _ in Counter(
        token for words in sample for token in words.split() if token.isalpha()).most_common(WATCHES // 2)]
    none, before, during = "no watch", f"{len(queries)} watches saved before the run", \
        f"{len(queries)} watches added during the run"
    ends: dict[str, list[float]] = {none: [], before: [], during: []}
    batches: list[float] = []

    def with_watches(label: str) -> None:
        for watch in watches(store):
            remove_watch(store, watch.name)
        for number, query in enumerate(queries if label != none else []):
            add_watch(store, f"w{number}", query)
        if label == before:
            batches.append(matched_in_batches(store))

    try:
        run_end()  # warm
        for round_ in range(runs):
            order = (none, before, during)
            for label in order[round_ % 3:] + order[:round_ % 3]:
                with_watches(label)
                ends[label].append(timed(run_end, label))
    finally:
        with_watches(none)
    print(f"\n3. the end of run {GENERATIONS} ({PAGES:,} pages), rolled back after, interleaved, "
          f"median of {runs}:")
    report(f"the watches matched in the run's batches ({PAGES // BATCH_RECORDS} of "
           f"{BATCH_RECORDS:,} changes), all", batches, cpu="batches")
    for label, values in ends.items():
        report(f"Store.finish_run, {label}", values, cpu=label)
    for label in (before, during):
        ratio = statistics.median(ends[label]) / statistics.median(ends[none])
        cpu_ratio = statistics.median(CPU[label]) / statistics.median(CPU[none])
        verdict = (f"  target <= {TARGET_WATCH_RATIO}: {'PASS' if ratio <= TARGET_WATCH_RATIO else 'FAIL'}"
                   if label == before else "")
        print(f"  ratio {label} / none: {ratio:.3f} (CPU {cpu_ratio:.3f}){verdict}")
    return 0


def matched_in_batches(store: Store) -> float:
    """The watches copied for the last crawl's run, as it would have started with them, and
    matched as its batches would have matched them (`match_appended`, on the index rows of each
    `BATCH_RECORDS` changes, built here as the workers build them beside the words); the
    matching's wall ms, all batches, its CPU noted under "batches"."""
    spent, cpu = 0.0, 0.0
    with store.writing() as connection:
        copy_watches(connection, GENERATIONS)
        words = connection.sql("SELECT natural_key, generation, run, added_words, removed_words "
                               "FROM change_words WHERE run = ?", params=[GENERATIONS]).to_arrow_table()
        for start in range(0, words.num_rows, BATCH_RECORDS):
            batch = words.slice(start, BATCH_RECORDS)
            tokens = index_rows(batch)
            started, began = time.perf_counter(), time.process_time()
            match_appended(connection, batch, tokens)
            spent += time.perf_counter() - started
            cpu += time.process_time() - began
    CPU.setdefault("batches", []).append(cpu * 1000)
    return spent * 1000


if __name__ == "__main__":
    raise SystemExit(main())
