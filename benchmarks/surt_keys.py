"""SURT benchmark: what giving each new page its SURT key costs an ingest.

The store gives a page its SURT (`cdc.core.urls.surt_key`, the `surt` package's pure-Python
canonicalisation) once, when the page is first written; a page seen again costs nothing.
So the worst case is a first crawl, every page new. Measured in one process:

1. `surt_key` alone, per URL, over the crawl's URLs: median of rounds, in microseconds.
2. Ingest of a first crawl (every page new) into a fresh store, `Ingester(store).run(...)`
   in this process (`workers=1`), with the SURT as cdc makes it and without it (the
   writer's `surt_key` replaced by one that returns None), interleaved round by round:
   median wall and CPU (`time.process_time`) seconds of each and their ratio. Two crawls:
   small pages (a 2 KB body, no boilerplate: the SURT weighs most there) and pages of
   `tests/crawlgen` (a 6 KB body between 11 KB of navigation and footer).

Run from the repository root:

    python benchmarks/surt_keys.py            # about a minute
    python benchmarks/surt_keys.py --runs 7 --pages 3000
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cdc.store.writer
from cdc.core.urls import surt_key
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import SourceRecord
from cdc.store import Store
from tests import crawlgen


def first_crawl(pages: int, small: bool) -> list[SourceRecord]:
    """`pages` pages on 20 hosts, one version each, so that every page is new."""
    records = []
    for number in range(pages):
        url = f"https://www.shop{number % 20}.example/catalogue/item-{number}?colour=red&size={number % 7}"
        body = crawlgen.page_versions(number, 1, size=2_000 if small else 6_000)[0]
        records.append(crawlgen.record(url, 0, body, with_boilerplate=not small))
    return [SourceRecord("bench", line, record) for line, record in enumerate(records, start=1)]


def timed_ingest(records: list[SourceRecord], directory: Path, round_number: int,
                 make_surt: Callable[[str], str | None]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ingest into a fresh store, with `make_surt` as the
    writer's SURT maker."""
    cdc.store.writer.surt_key = make_surt
    try:
        store = Store(directory / f"{make_surt.__name__}-{round_number}.duckdb")
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        summary = Ingester(store).run(records)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        cdc.store.writer.surt_key = surt_key
    assert summary.new_pages == len(records), summary
    return wall, cpu


def no_surt(_key: str) -> None:
    return None


def compare(name: str, records: list[SourceRecord], runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="cdc-bench-surt-") as tmp:
        directory = Path(tmp)
        timed_ingest(records[:200], directory, -1, surt_key)  # warm-up: imports, kernels, DuckDB
        times: dict[str, list[tuple[float, float]]] = {"with SURT": [], "without": []}
        for round_number in range(runs):
            for label, maker in (("with SURT", surt_key), ("without", no_surt)):
                times[label].append(timed_ingest(records, directory, round_number, maker))
    medians = {label: (statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows))
               for label, rows in times.items()}
    (wall, cpu), (bare_wall, bare_cpu) = medians["with SURT"], medians["without"]
    print(f"{name}: {len(records):,} new pages, median of {runs}")
    print(f"  with SURT {wall:.3f} s wall, {cpu:.3f} s CPU; without {bare_wall:.3f} s wall, "
          f"{bare_cpu:.3f} s CPU")
    print(f"  ratio with/without: wall {wall / bare_wall:.3f}x, CPU {cpu / bare_cpu:.3f}x; "
          f"per page {(cpu - bare_cpu) / len(records) * 1e6:+.0f} us CPU")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pages", type=int, default=2_000)
    args = parser.parse_args(argv)
    small = first_crawl(args.pages, small=True)
    keys = [record.record["url"] for record in small]
    surt_key(keys[0])  # the package loads at the first call
    rounds = []
    for _ in range(args.runs):
        started = time.process_time()
        for key in keys:
            surt_key(key)
        rounds.append((time.process_time() - started) / len(keys))
    print(f"surt_key alone: median {statistics.median(rounds) * 1e6:.0f} us CPU per URL "
          f"({len(keys):,} URLs, {args.runs} rounds)")
    compare("small pages (2 KB body)", small, args.runs)
    compare("crawlgen pages (17 KB)", first_crawl(args.pages // 2, small=False), args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
