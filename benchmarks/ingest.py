"""Ingest and store benchmark: cdc's pipeline against a naive one, bytes on disk, queries.

What is measured, in one process:

1. Ingest of the real revision corpus (`../shared/corpus/rustbook.jsonl.gz`) into an empty
   store, everything included: `Ingester(Store(path)).run(iter_records(corpus))` with a
   fresh DuckDB file in a temporary directory each run. MB/s are of uncompressed JSONL
   (1 MB = 10^6 bytes), the median over rounds; records/s too. A warm-up ingest runs
   first and is left out of the medians, so one-time costs (Numba's cache load when the
   kernels are not compiled ahead of time, the first fork) are not in them;
   its time is reported on its own line.
2. The naive pipeline, "the seed's code with one INSERT per row": per record, the seed's
   `content_for_chunking`, its pure-Python `chunk_content` and its `compare` with the
   previous version of the URL (kept in a dict), then one INSERT per chunk row (the seed's
   columns) and one per generation, each executed alone with bound parameters on a DuckDB
   connection to a fresh file, committed at the end. Its tables have no keys or indexes,
   like cdc's (the seed's PostgreSQL DDL has a primary key and a digest index, which would
   only slow it further). The seed chunks at about 3 MB/s, so it runs on a prefix of the
   corpus (whole records), read from memory; cdc runs on the same prefix too, for context.
   The three peers run round-robin, each once per round, with gc.collect() before each.
3. Bytes on disk per chunk row and per generation, for the store of the warm-up ingest
   (default retention: keep 3) and for a store that retains every generation (keep 1000).
4. Queries on a synthetic store of 100,000 pages with 3 generations each
   (`benchmarks/synthetic_store.py`, built in bulk and cached in data/bench/), through the
   public `Store` methods, each of which opens and closes its own read-only connection, as
   the dashboard's calls will: median of 20 runs, a different random (seeded) page or host
   each round, the queries interleaved. A pair of versions is read both ways: one call each
   (`store.version` at g-1, a number that names the generation before g, and at g), and both
   through one connection (`store.versions`, by their own numbers: what Compare reads).

Target lines print PASS or FAIL; the exit status is 0 unless a correctness check fails
(targets are reported, not enforced: timings on a shared machine are noisy).

Run from the repository root:

    python benchmarks/ingest.py             # about a minute on two cores (the first run
                                            # builds the synthetic store: 25 s more)
    python benchmarks/ingest.py --quick     # fewer rounds, smaller prefix and store
    python benchmarks/ingest.py --corpus PATH --runs 7
"""

from __future__ import annotations

import argparse
import gc
import gzip
import inspect
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numba
import pyarrow as pa
import seed_reference as seed  # benchmarks/ is on sys.path when this file is run
import synthetic_store

import cdc
from cdc.analyst import boilerplate
from cdc.core.chunking import default_threads
from cdc.core.compiled import AHEAD_OF_TIME
from cdc.core.normalize import content_digest, content_for_chunking
from cdc.ingest.ingester import Ingester, IngestSummary
from cdc.sources import jsonl as sources
from cdc.sources.jsonl import iter_jsonl, iter_records
from cdc.store import RetentionPolicy, Store

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/rustbook.jsonl.gz"
NAIVE_PREFIX_BYTES = 2_000_000  # of JSONL, whole records: the seed chunks at about 3 MB/s
QUICK_PREFIX_BYTES = 500_000
SYNTHETIC_PAGES = 100_000
QUICK_PAGES = 10_000
SYNTHETIC_GENERATIONS = 3
SYNTHETIC_HOSTS = 50
QUERY_SEED = 20250106  # picks the pages and hosts queried

# Targets from the project's brief.
TARGET_INGEST_MBPS = 40.0
TARGET_NAIVE_RATIO = 30.0  # issue 21: "at least 30x the seed's naive pipeline"
TARGET_QUERY_MS = 100.0
TARGET_BACKFILL_RATIO = 0.5  # issue 14: a backfill at least half the in-order throughput


def fail(message: str) -> None:
    """Stop the benchmark: timing code that gives wrong results is meaningless."""
    raise SystemExit(f"FAIL: {message}")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# --- input ---------------------------------------------------------------------------------


@dataclass
class Corpus:
    path: Path
    lines: list[bytes]  # each record's line, newline included

    @property
    def records(self) -> int:
        return len(self.lines)

    @property
    def jsonl_bytes(self) -> int:
        return sum(map(len, self.lines))

    def prefix(self, size: int) -> Corpus:
        """The leading whole records that make up at least `size` bytes (all if fewer)."""
        total = 0
        for count, line in enumerate(self.lines, 1):
            total += len(line)
            if total >= size:
                return Corpus(self.path, self.lines[:count])
        return self


def load_corpus(path: Path) -> Corpus:
    with gzip.open(path, "rb") as stream:
        return Corpus(path, [line for line in stream if line.strip()])


# --- the naive pipeline --------------------------------------------------------------------

NAIVE_SCHEMA = (
    """CREATE TABLE content_chunks (
        natural_key VARCHAR NOT NULL, generation INTEGER NOT NULL, chunk_index INTEGER NOT NULL,
        digest BLOB NOT NULL, length INTEGER NOT NULL)""",
    """CREATE TABLE generations (
        natural_key VARCHAR NOT NULL, generation INTEGER NOT NULL, fetched_at VARCHAR,
        similarity DOUBLE NOT NULL, changed_regions INTEGER NOT NULL)""",
)
NAIVE_INSERT_CHUNK = "INSERT INTO content_chunks VALUES (?, ?, ?, ?, ?)"
NAIVE_INSERT_GENERATION = "INSERT INTO generations VALUES (?, ?, ?, ?, ?)"


@dataclass
class NaiveSummary:
    records: int = 0
    generations: int = 0
    chunk_rows: int = 0


def naive_pipeline(lines: Sequence[bytes], path: Path) -> NaiveSummary:
    """The seed's code, record by record, with one INSERT statement per row."""
    summary = NaiveSummary()
    connection = duckdb.connect(str(path))
    try:
        for statement in NAIVE_SCHEMA:
            connection.execute(statement)
        connection.execute("BEGIN TRANSACTION")
        previous: dict[str, list[seed.Chunk]] = {}
        generation: dict[str, int] = {}
        for line in lines:
            record = json.loads(line)
            summary.records += 1
            url = record["url"]
            chunks = seed.chunk_content(seed.content_for_chunking(record))
            report = seed.compare(previous.get(url, []), chunks)
            if url in previous and not report.changed:
                continue  # the same content: no new generation
            previous[url] = chunks
            number = generation[url] = generation.get(url, 0) + 1
            connection.execute(NAIVE_INSERT_GENERATION, [url, number, record.get("fetched_at"),
                                                         report.similarity, len(report.changed_regions)])
            for chunk in chunks:
                connection.execute(NAIVE_INSERT_CHUNK, [url, number, chunk.index,
                                                        bytes.fromhex(chunk.digest), chunk.length])
            summary.generations += 1
            summary.chunk_rows += len(chunks)
        connection.execute("COMMIT")
    finally:
        connection.close()
    return summary


# --- timing --------------------------------------------------------------------------------


@dataclass
class Peer:
    """One way to ingest records into a fresh store file, timed as a whole."""

    name: str
    run: Callable[[Path], object]  # given a path that does not exist yet
    corpus: Corpus
    note: str = ""
    times: list[float] = field(default_factory=list)
    results: list[object] = field(default_factory=list)

    def timed_run(self) -> None:
        with tempfile.TemporaryDirectory(prefix="cdc-bench-") as work:
            path = Path(work) / "store.duckdb"
            gc.collect()
            start = time.perf_counter()
            result = self.run(path)
            self.times.append(time.perf_counter() - start)
            self.results.append(result)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def mbps(self) -> float:
        return self.corpus.jsonl_bytes / 1e6 / self.median


def ingest_file(path: Path) -> Callable[[Path], IngestSummary]:
    """What a user runs: the gzip file read and ingested, everything included."""
    return lambda store_path: Ingester(Store(store_path)).run(iter_records(str(path)))


def ingest_parallel(path: Path, workers: int) -> Callable[[Path], IngestSummary] | None:
    """What `cdc ingest` runs, where this cdc has worker processes: None where it has not."""
    if "workers" not in inspect.signature(Ingester).parameters:
        return None
    read = getattr(sources, "iter_lines", iter_records)
    return lambda store_path: Ingester(Store(store_path), workers=workers).run(read(str(path)))


def ingest_lines(lines: Sequence[bytes]) -> Callable[[Path], IngestSummary]:
    """The same from JSONL bytes in memory, as the naive pipeline reads them."""
    data = b"".join(lines)
    return lambda store_path: Ingester(Store(store_path)).run(iter_jsonl(io.BytesIO(data), "prefix"))


def round_robin(peers: list[Peer], rounds: int) -> None:
    """Each peer once per round; the starting peer rotates, so no peer always follows another."""
    for r in range(rounds):
        shift = r % len(peers)
        for peer in peers[shift:] + peers[:shift]:
            peer.timed_run()


def check_ingest(peer: Peer, records: int) -> IngestSummary:
    """Every run of a cdc peer read every record and made the same generations."""
    summaries: list[IngestSummary] = peer.results  # type: ignore[assignment]
    for summary in summaries:
        # Not `older`: the corpus has 312 pairs of contents fetched at the same time, and
        # where a batch ends between the two of a pair (batches follow the worker count) the
        # second is put in place beside the first, counted as older, the same store made.
        if summary.records != records or summary.bad:
            fail(f"{peer.name}: read {summary.records} of {records} records, {len(summary.bad)} bad")
        if summary.new_generations != summaries[0].new_generations:
            fail(f"{peer.name}: runs made {summary.new_generations} and "
                 f"{summaries[0].new_generations} generations")
    return summaries[0]


def measure_ingest(corpus: Corpus, prefix: Corpus, rounds: int, work: Path) -> Path:
    """Sections 1 and 2. Returns the warm-up's store (default retention) for section 3."""
    warm_path = work / "warm-up.duckdb"
    start = time.perf_counter()
    warm = Ingester(Store(warm_path)).run(iter_records(str(corpus.path)))
    first = time.perf_counter() - start
    workers = default_threads()
    full = Peer(f"cdc ingest, workers={workers}", ingest_parallel(corpus.path, workers), corpus,
                f"what `cdc ingest` runs: {corpus.records:,} records from the .gz file")
    single = Peer("cdc ingest, workers=1", ingest_file(corpus.path), corpus,
                  "context: one process")
    same = Peer("cdc ingest, the prefix", ingest_lines(prefix.lines), prefix,
                "context: same input as the naive pipeline, from memory")
    naive = Peer("naive pipeline, the prefix", lambda path: naive_pipeline(prefix.lines, path), prefix,
                 "seed code, one INSERT per row, from memory")
    whole_corpus = [full, single]
    peers = [*whole_corpus, same, naive]
    round_robin(peers, rounds)
    summary = check_ingest(full, corpus.records)
    for peer in whole_corpus[1:]:
        if check_ingest(peer, corpus.records).new_generations != summary.new_generations:
            fail(f"{peer.name} made other generations than {full.name}")
    if summary.new_generations != warm.new_generations:
        fail(f"the warm-up made {warm.new_generations} generations, the timed runs {summary.new_generations}")
    prefix_summary = check_ingest(same, prefix.records)
    naive_summary: NaiveSummary = naive.results[0]  # type: ignore[assignment]

    print(f"== ingest into an empty store: median of {rounds} rounds, peers interleaved ==")
    print(f"{'peer':<28} {'MB/s':>7} {'(min-max)':>13} {'records/s':>10} {'median s':>9}  note")
    for peer in peers:
        rates = [peer.corpus.jsonl_bytes / 1e6 / t for t in peer.times]
        print(f"{peer.name:<28} {peer.mbps:>7.2f} {f'{min(rates):.1f}-{max(rates):.1f}':>13} "
              f"{peer.corpus.records / peer.median:>10,.0f} {peer.median:>9.3f}  {peer.note}")
    print(f"first ingest in this process (warm-up, not in the medians): {first:.2f} s, "
          f"{corpus.jsonl_bytes / 1e6 / first:.1f} MB/s: includes one-time costs "
          f"(kernels {'compiled ahead of time' if AHEAD_OF_TIME is not None else 'loaded from Numba cache'})")
    print(f"prefix: first {prefix.records} records, {prefix.jsonl_bytes / 1e6:.2f} MB of JSONL; "
          f"generations made: cdc {prefix_summary.new_generations}, naive {naive_summary.generations} "
          f"({naive_summary.chunk_rows:,} chunk rows, so "
          f"{naive_summary.chunk_rows + naive_summary.generations:,} INSERT statements)")
    print(f"whole corpus: {summary.new_generations:,} generations, {summary.unchanged} unchanged records, "
          f"{len(summary.pages)} pages, {summary.batches} batch(es)")
    print()
    print(f"target: cdc ingest >= {TARGET_INGEST_MBPS:g} MB/s of JSONL: {full.mbps:.1f} MB/s  "
          f"{verdict(full.mbps >= TARGET_INGEST_MBPS)}")
    ratio = full.mbps / naive.mbps
    print(f"target: cdc ingest >= {TARGET_NAIVE_RATIO:g}x the naive pipeline: {ratio:.1f}x "
          f"(whole corpus vs the naive prefix; on the same prefix {same.mbps / naive.mbps:.1f}x)  "
          f"{verdict(ratio >= TARGET_NAIVE_RATIO)}")
    print()
    return warm_path


# --- a backfill ----------------------------------------------------------------------------


def halves(corpus: Corpus) -> tuple[list[bytes], list[bytes]]:
    """Each page's older and newer half of its history (its records before and from its
    middle version), each half in the corpus's order."""
    times: dict[str, list[str]] = {}
    parsed = [json.loads(line) for line in corpus.lines]
    for record in parsed:
        times.setdefault(record["url"], []).append(record["fetched_at"])
    middle = {url: sorted(values)[len(values) // 2] for url, values in times.items()}
    before = [record["fetched_at"] < middle[record["url"]] for record in parsed]
    older = [line for line, early in zip(corpus.lines, before) if early]
    newer = [line for line, early in zip(corpus.lines, before) if not early]
    return older, newer


def two_runs(first: list[bytes], second: list[bytes]) -> Callable[[Path], list[IngestSummary]]:
    """Two `cdc ingest` runs into one store, from JSONL in memory, with cdc's default workers."""
    def run(store_path: Path) -> list[IngestSummary]:
        store = Store(store_path)
        workers = default_threads()
        return [Ingester(store, workers=workers).run(iter_jsonl(io.BytesIO(b"".join(lines)), name))
                for name, lines in (("first", first), ("second", second))]
    return run


def measure_backfill(corpus: Corpus, rounds: int) -> None:
    """The older half of each page's history ingested after the newer half, against the same
    two halves in order: throughput of the two runs together."""
    older, newer = halves(corpus)
    in_order = Peer("in order: older, then newer", two_runs(older, newer), corpus)
    backfill = Peer("backfill: newer, then older", two_runs(newer, older), corpus)
    round_robin([in_order, backfill], rounds)
    placed = backfill.results[0][1]
    # A record of the same page, time and content as another is one fetch, stored once.
    fetches = {(record["url"], record["fetched_at"], content_digest(content_for_chunking(record)))
               for record in map(json.loads, older)}
    if placed.older != len(fetches) or placed.bad:
        fail(f"the backfill put {placed.older} of {len(fetches)} older fetches in place")
    ratio = backfill.mbps / in_order.mbps
    print(f"== a backfill: median of {rounds} rounds, peers interleaved ==")
    print(f"{len(older):,} older and {len(newer):,} newer records of {corpus.records:,}; "
          f"the backfill's second run put {placed.older:,} fetches in place "
          f"({len(older) - len(fetches)} records repeat another's page, time and content)")
    for peer in (in_order, backfill):
        print(f"{peer.name:<30} {peer.mbps:>7.2f} MB/s  {peer.median:>7.2f} s  "
              + " ".join(f"{t:.2f}" for t in peer.times))
    print(f"target: a backfill >= {TARGET_BACKFILL_RATIO:g}x the throughput of the in-order ingest: "
          f"{ratio:.2f}x  {verdict(ratio >= TARGET_BACKFILL_RATIO)}")
    print()


# --- bytes on disk -------------------------------------------------------------------------


def file_facts(path: Path) -> tuple[int, tuple[int, int, int]]:
    """Bytes of retained text, and DuckDB's block size, used and free blocks, of a store file."""
    connection = duckdb.connect(str(path), read_only=True)
    try:
        (text,) = connection.execute("SELECT coalesce(sum(strlen(text)), 0) FROM generations").fetchone()
        blocks = connection.execute(
            "SELECT block_size, used_blocks, free_blocks FROM pragma_database_size()").fetchone()
    finally:
        connection.close()
    return text, blocks


def size_row(label: str, stats: dict[str, int], text: int, blocks: tuple[int, int, int]) -> None:
    size = stats["file_bytes"]
    chunks = stats["content_chunks"]
    print(f"{label:<28} {size / 1e6:>8.2f} {stats['generations']:>11,} "
          f"{stats['retained_generations']:>9,} {chunks:>11,} {text / 1e6:>8.2f} "
          f"{size / chunks:>9,.0f} {size / stats['generations']:>9,.0f} {(size - text) / chunks:>9,.0f}"
          f"   {blocks[1]} used, {blocks[2]} free")


def measure_sizes(corpus: Corpus, default_store: Path, work: Path) -> None:
    """Section 3: the warm-up's store (keep 3) and one that keeps every generation."""
    everything = Store(work / "keep-all.duckdb")
    everything.set_retention(RetentionPolicy(keep=1000))
    start = time.perf_counter()
    Ingester(everything).run(iter_records(str(corpus.path)))
    seconds = time.perf_counter() - start
    print("== bytes on disk after ingesting the corpus ==")
    print(f"{'store':<28} {'file MB':>8} {'generations':>11} {'retained':>9} {'chunk rows':>11} "
          f"{'text MB':>8} {'B/chunk':>9} {'B/gen':>9} {'B/chunk-t':>9}   DuckDB blocks")
    block_size = 0
    for label, path in (("default retention (keep 3)", default_store),
                        ("every generation (keep 1000)", everything.path)):
        stats = Store(path).stats()
        text, blocks = file_facts(path)
        block_size = blocks[0]
        size_row(label, stats, text, blocks)
    print(f"B/chunk = file size / chunk rows; B/gen = file size / generations; B/chunk-t = (file size - "
          f"retained text) / chunk rows. The file holds all of it: the text of retained generations, "
          f"stored uncompressed (by design, so an erasure can be checked in the file), the chunk, "
          f"generation, change and page rows, and DuckDB's {block_size // 1024} KiB blocks; so these are "
          f"the file's cost per row, not a row's own size.")
    print(f"(the keep-1000 ingest took {seconds:.2f} s, "
          f"{corpus.jsonl_bytes / 1e6 / seconds:.1f} MB/s, one run)")
    print()


# --- queries on a synthetic store ----------------------------------------------------------


@dataclass
class Query:
    name: str
    run: Callable[[str, str, int, int], object]  # host, natural key, generation, the one before
    check: Callable[[object], str | None]  # a problem with the result, or None
    target: bool = True
    times: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)


def build_queries(store: Store, generations: int, pages_per_host: int) -> list[Query]:
    def versions(host: str, key: str, generation: int, before: int):
        return store.version(key, generation - 1), store.version(key, generation)

    def compared(host: str, key: str, generation: int, before: int):
        """What Compare reads (`cdc.analyst.queries.compare_generations`): both through one connection."""
        held = store.versions(key, [before, generation])
        return held.get(before), held.get(generation)

    def check_versions(pair) -> str | None:
        for version in pair:
            if version is None or len(version.text) != sum(length for _, length in version.chunks):
                return "a retained version is missing, or its chunks do not tile its text"
        return None

    def rows(expected: int | None = None, at_least: int = 1):
        def check(result) -> str | None:
            if expected is not None and len(result) != expected:
                return f"{len(result)} rows, expected {expected}"
            return None if len(result) >= at_least else f"{len(result)} rows, expected {at_least} or more"
        return check

    return [
        Query("store.meta() (open + meta check)", lambda h, k, g, b: store.meta(), rows(3), target=False),
        Query("store.host_pages(host)", lambda h, k, g, b: store.host_pages(h), rows(pages_per_host)),
        Query("store.generations(key)", lambda h, k, g, b: store.generations(k), rows(generations)),
        Query("store.version(key, g-1), (key, g)", versions, check_versions),
        Query("store.versions(key, [g0, g])", compared, check_versions),
        Query("store.history(key)", lambda h, k, g, b: store.history(k), rows(generations)),
        Query("store.host_boilerplate(host, .05, 3)", lambda h, k, g, b: store.host_boilerplate(h, 0.05, 3),
              rows(at_least=2)),
        Query("boilerplate.host_boilerplate(...)", lambda h, k, g, b: boilerplate.host_boilerplate(store, h),
              rows(at_least=2)),
    ]


def result_size(result: object) -> int:
    return len(result) if isinstance(result, (list, tuple, dict)) else 1


def measure_queries(pages: int, runs: int, rebuild: bool) -> None:
    """Section 4."""
    built = synthetic_store.cached_store(pages, SYNTHETIC_GENERATIONS, SYNTHETIC_HOSTS, rebuild=rebuild)
    how = "cached; built by an earlier run in" if built.cached else "built now in"
    print(f"== queries on a synthetic store: {built.pages:,} pages x {SYNTHETIC_GENERATIONS} generations, "
          f"{SYNTHETIC_HOSTS} hosts ==")
    print(f"store: {built.path}")
    print(f"  {how} {built.seconds:.1f} s; {built.file_bytes / 1e6:,.0f} MB on disk: {built.generations:,} "
          f"generations, {built.chunk_rows:,} chunk rows, {built.text_bytes / 1e6:,.0f} MB of retained text "
          f"(B/chunk {built.file_bytes / built.chunk_rows:,.0f}, "
          f"B/gen {built.file_bytes / built.generations:,.0f}, "
          f"B/chunk-t {(built.file_bytes - built.text_bytes) / built.chunk_rows:,.0f})")
    store = Store(built.path)
    keys = synthetic_store.page_keys(built.pages, SYNTHETIC_HOSTS)
    queries = build_queries(store, SYNTHETIC_GENERATIONS, built.pages // SYNTHETIC_HOSTS)
    rng = random.Random(QUERY_SEED)
    for r in range(runs):
        host, key = rng.choice(keys)
        # A generation after the first, by its number (its capture time): any smaller number,
        # such as `generation - 1`, names the generation current before it began.
        picked = rng.randint(1, SYNTHETIC_GENERATIONS - 1)
        before, generation = (info.generation for info in store.generations(key)[picked - 1:picked + 1])
        shift = r % len(queries)
        for query in queries[shift:] + queries[:shift]:
            gc.collect()
            start = time.perf_counter()
            result = query.run(host, key, generation, before)
            query.times.append(time.perf_counter() - start)
            problem = query.check(result)
            if problem:
                fail(f"{query.name} for {host} / {key} / {generation}: {problem}")
            query.sizes.append(result_size(result))
    print(f"median of {runs} runs, each with its own page and host (random, seeded), queries interleaved; "
          "every call opens and closes its own read-only connection")
    print(f"{'query':<38} {'median ms':>9} {'(min-max)':>15} {'rows':>6}")
    for query in queries:
        ms = [t * 1e3 for t in query.times]
        note = "" if query.target else "   context: the floor of every call"
        print(f"{query.name:<38} {statistics.median(ms):>9.1f} {f'{min(ms):.1f}-{max(ms):.1f}':>15} "
              f"{statistics.median(query.sizes):>6.0f}{note}")
    print("boilerplate.host_boilerplate is store.host_boilerplate plus a sample text per digest, "
          "read through the same connection")
    print()
    for query in queries:
        if query.target:
            median = statistics.median(query.times) * 1e3
            print(f"target: {query.name} <= {TARGET_QUERY_MS:g} ms median: {median:.1f} ms  "
                  f"{verdict(median <= TARGET_QUERY_MS)}")
    print()


# --- main ----------------------------------------------------------------------------------


def print_header(corpus: Corpus, prefix: Corpus) -> None:
    print("cdc ingest and store benchmark")
    print(f"  Python {sys.version.split()[0]}, duckdb {duckdb.__version__}, pyarrow {pa.__version__}, "
          f"numba {numba.__version__}, cdc {cdc.__version__}, spec {cdc.SPEC}")
    workers = getattr(Ingester(Store(Path(tempfile.gettempdir()) / "unused.duckdb")), "workers", "n/a")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"  CPUs: {os.cpu_count()}; load average at start {load}; Ingester default workers: {workers}")
    print(f"  corpus: {corpus.path}")
    print(f"  {corpus.records:,} records, {corpus.jsonl_bytes / 1e6:.1f} MB of JSONL uncompressed, "
          f"{corpus.path.stat().st_size / 1e6:.1f} MB gzip; naive prefix: {prefix.records} records, "
          f"{prefix.jsonl_bytes / 1e6:.2f} MB")
    print()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help="JSON lines (gzip) of page records (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke check: 2 rounds, a 0.5 MB prefix, 5 query runs on 10,000 pages")
    parser.add_argument("--runs", type=int, default=None,
                        help="ingest rounds (default: 5, or 2 with --quick)")
    parser.add_argument("--query-runs", type=int, default=None,
                        help="runs per query (default: 20, or 5 with --quick)")
    parser.add_argument("--pages", type=int, default=None,
                        help=f"pages of the synthetic store (default: {SYNTHETIC_PAGES:,}, "
                             f"or {QUICK_PAGES:,} with --quick)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached synthetic store")
    args = parser.parse_args(argv)
    args.runs = args.runs or (2 if args.quick else 5)
    args.query_runs = args.query_runs or (5 if args.quick else 20)
    args.pages = args.pages or (QUICK_PAGES if args.quick else SYNTHETIC_PAGES)
    args.prefix_bytes = QUICK_PREFIX_BYTES if args.quick else NAIVE_PREFIX_BYTES
    if min(args.runs, args.query_runs) < 1 or args.pages < SYNTHETIC_HOSTS:
        parser.error(f"--runs and --query-runs must be at least 1, --pages at least {SYNTHETIC_HOSTS}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if numba.config.DISABLE_JIT:
        raise SystemExit("NUMBA_DISABLE_JIT is set: cdc would run as plain Python; unset it to benchmark")
    if not args.corpus.is_file():
        raise SystemExit(f"corpus not found: {args.corpus} (pass --corpus PATH)")
    started = time.perf_counter()
    corpus = load_corpus(args.corpus)
    if not corpus.lines:
        raise SystemExit(f"corpus is empty: {args.corpus}")
    prefix = corpus.prefix(args.prefix_bytes)
    print_header(corpus, prefix)
    with tempfile.TemporaryDirectory(prefix="cdc-bench-") as work:
        default_store = measure_ingest(corpus, prefix, args.runs, Path(work))
        measure_sizes(corpus, default_store, Path(work))
    if hasattr(IngestSummary, "counts"):  # a cdc that puts older versions in place
        measure_backfill(corpus, args.runs)
    measure_queries(args.pages, args.query_runs, args.rebuild)
    print(f"total benchmark time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
