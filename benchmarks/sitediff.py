"""Site-diff benchmark: how fast the store answers the dashboard's site view and the reads
that carry the template-only flag, on a store you give it (it only reads).

What is measured, between the store's latest two finished runs:

1. `Store.site_diff(a, b)` for the whole store and for one host (the largest), cold: the
   first call in a new Python process (imports and the process's start not counted; the
   OS file cache is whatever earlier runs left, so run it twice for a cache-warm "cold");
2. the same calls warm, in one process, after a first call;
3. warm, `Store.history` of one changed page and `Store.changes(limit=50)`.

Targets (the dashboard's issue): the site view at most 1 s cold, every view at most 300 ms
warm. Reported, not enforced: timings on a shared machine are noisy.

Run from the repository root, on a store with two or more runs, e.g. the demo store of
`cdc demo --pages 100000 --generations 3`:

    python benchmarks/sitediff.py --db /tmp/bench/demo100k.duckdb
    python benchmarks/sitediff.py --db PATH --runs 9
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this working tree's cdc, before any installed copy

from cdc.store import Store  # noqa: E402

TARGET_COLD_S = 1.0
TARGET_WARM_S = 0.300


def timed(call: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def latest_two_runs(store: Store) -> tuple[int, int]:
    """The runs a site diff compares by default: the latest two crawls (`Store.latest_crawls`)."""
    crawls = store.latest_crawls(2)
    if len(crawls) < 2:
        raise SystemExit(f"{store.path} has {len(crawls)} finished crawl run(s); a site diff needs two")
    return crawls[0].run, crawls[1].run


def largest_host(store: Store) -> str:
    return max(store.hosts(), key=lambda row: (row.pages, row.host)).host


def cold_call(db: Path, host: str | None) -> float:
    """Seconds of one site diff in a new process (this script, `--cold`)."""
    command = [sys.executable, __file__, "--db", str(db), "--cold"]
    if host:
        command += ["--host", host]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.splitlines()[-1])["seconds"]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f} ms"


def report(name: str, seconds: list[float], target: float) -> None:
    median = statistics.median(seconds)
    verdict = "PASS" if median <= target else "FAIL"
    print(f"{name:<44} {ms(median):>10}   {ms(min(seconds))} - {ms(max(seconds))}"
          f"   target {ms(target)}: {verdict}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="the store (only read)")
    parser.add_argument("--runs", type=int, default=5, help="timed calls of each kind")
    parser.add_argument("--host", help="with --cold: the host to diff")
    parser.add_argument("--cold", action="store_true", help=argparse.SUPPRESS)  # one call, as JSON
    args = parser.parse_args(argv)
    store = Store(args.db)
    if args.cold:
        a, b = latest_two_runs(store)
        print(json.dumps({"seconds": timed(lambda: store.site_diff(a, b, args.host))}))
        return

    a, b = latest_two_runs(store)
    host = largest_host(store)
    diff = store.site_diff(a, b)
    page = diff.pages[0].natural_key if diff.pages else store.page_keys()[0]
    print(f"cdc site-diff benchmark: {args.db} ({store.stats()['pages']:,} pages), runs {a} -> {b}: "
          f"{diff.changed:,} changed, {diff.template_only:,} template-only; host {host}")
    print(f"{'':<44} {'median':>10}   spread (min-max)")
    report("site_diff, whole store, cold (new process)", [cold_call(args.db, None) for _ in range(args.runs)],
           TARGET_COLD_S)
    report(f"site_diff, host {host}, cold", [cold_call(args.db, host) for _ in range(args.runs)],
           TARGET_COLD_S)
    warm = {
        "site_diff, whole store, warm": lambda: store.site_diff(a, b),
        f"site_diff, host {host}, warm": lambda: store.site_diff(a, b, host),
        "history of a changed page, warm": lambda: store.history(page),
        "changes(limit=50), warm": lambda: store.changes(limit=50),
    }
    for name, call in warm.items():
        call()
        report(name, [timed(call) for _ in range(args.runs)], TARGET_WARM_S)


if __name__ == "__main__":
    main()
