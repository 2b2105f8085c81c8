"""Parallel ingest benchmark: `cdc ingest --processes 2` against `--processes 1`, and the
default, from the command line, with each run's peak memory.

The requirement (issue 21): with 2 processes, ingest is at least 1.6x one process where the
machine gives a second core; the default never picks a setting slower than one process for
the input at hand; peak resident memory does not grow with the input's size.

What is measured, for each input:

- corpus: `../shared/corpus/rustbook.jsonl.gz` (1,068 revisions of the Rust book, JSONL);
- crawls: two real GNU Wget crawls of Debian's python3.11-doc HTML
  (`tests/sitecrawl.py`, all 530 pages, made once in data/bench/sitecrawl/), one run of both;
- with `--interleaved`: the 8 shards of `benchmarks/interleaved.py` (239 MB of WARC, made by
  it), which a plain ingest meets out of fetch order.

Each peer is `python -m cdc --db STORE ingest --quiet FLAGS FILE...` in a fresh process into a
fresh store, the peers round-robin, `--runs` rounds, no warm-up (a first launch is what users
pay). Printed: median wall time, MB/s of the input as read (uncompressed), median CPU time of
the command and its helpers, peak resident memory (the largest process, `measured.run`), and
the 2-over-1 speed-up. Then, once each, the CPU of `--processes 1` and of `--processes 2`'s
two processes, with the CPU the command's own process spent while its worker had no task:
the serial part, which two cores cannot shorten; on two free cores the run would take about
that plus half the rest (`measured.Serial`), a figure a loaded machine changes little. The
yardstick (`measured.yardstick`) is printed before and after: how much of a second core the
machine gave pure-Python work, so a low speed-up on a machine that gave nothing can be told
from one that cdc caused. The load average is printed beside each.

Run from the repository root:

    python benchmarks/parallel.py                     # about 3 min on two cores
    python benchmarks/parallel.py --runs 3 --interleaved
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
from pathlib import Path

import measured  # benchmarks/ is on sys.path when this file is run

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import sitecrawl  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus" / "rustbook.jsonl.gz"
CRAWLS = ROOT / "data" / "bench" / "sitecrawl"
INTERLEAVED = ROOT / "data" / "bench" / "interleaved"
SPEEDUP_TARGET = 1.6
PEERS = {"--processes 1": ["--processes", "1"], "--processes 2": ["--processes", "2"], "default": []}


def inputs(interleaved: bool) -> dict[str, list[Path]]:
    found = {"corpus": [CORPUS]}
    if sitecrawl.available() is None:
        crawls = sitecrawl.cached_two_crawls(CRAWLS, None, 0)
        found["crawls"] = [crawls.crawl1, crawls.crawl2]
    else:
        print(f"crawls: skipped, {sitecrawl.available()}")
    if interleaved:
        shards = sorted(INTERLEAVED.glob("rustbooks-*-of-08.warc.gz"))
        if not shards:
            sys.exit("no interleaved shards: run benchmarks/interleaved.py once to make them")
        found["interleaved"] = shards
    return found


def unpacked_mb(files: list[Path]) -> float:
    size = 0
    for path in files:
        with gzip.open(path) as stream:
            while chunk := stream.read(1 << 22):
                size += len(chunk)
    return size / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--interleaved", action="store_true", help="also the 8 interleaved shards (minutes)")
    args = parser.parse_args()
    files = inputs(args.interleaved)
    before = measured.yardstick()
    print(f"yardstick before: 2 processes did {before:.2f}x the pure-Python work of 1 "
          f"(2.00: a free second core); {measured.load()}")
    failed = False
    for name, paths in files.items():
        size = unpacked_mb(paths)
        times: dict[str, list[measured.Measured]] = {peer: [] for peer in PEERS}
        with tempfile.TemporaryDirectory() as work:
            for round_ in range(args.runs):
                for n, (peer, flags) in enumerate(PEERS.items()):
                    store = Path(work) / f"{round_}-{n}.duckdb"
                    done = measured.run([sys.executable, "-m", "cdc", "--db", str(store), "ingest", "--quiet",
                                         *flags, *map(str, paths)], ROOT)
                    if done.returncode not in (0, 3):  # 3: some records skipped, as reported
                        print(f"{name}, {peer}: FAILED (exit {done.returncode}): "
                              f"{done.stderr.strip()[-400:]}")
                        failed = True
                        continue
                    times[peer].append(done)
        print(f"== {name}: {len(paths)} file(s), {size:.1f} MB as read; median of {args.runs}; "
              f"{measured.load()} ==")
        print(f"{'peer':<16}{'median s':>10}{'MB/s':>8}{'CPU s':>8}{'peak MB':>9}   runs")
        medians = {}
        for peer, runs in times.items():
            if not runs:
                continue
            medians[peer] = statistics.median(run.wall for run in runs)
            print(f"{peer:<16}{medians[peer]:>10.2f}{size / medians[peer]:>8.1f}"
                  f"{statistics.median(run.cpu for run in runs):>8.1f}"
                  f"{max(run.peak_mb for run in runs):>9.0f}"
                  f"   {' '.join(f'{run.wall:.2f}' for run in runs)}")
        if "--processes 1" in medians and "--processes 2" in medians:
            ratio = medians["--processes 1"] / medians["--processes 2"]
            print(f"speed-up, --processes 2 over 1: {ratio:.2f}x (target >= {SPEEDUP_TARGET} where the "
                  f"yardstick shows a second core): {'PASS' if ratio >= SPEEDUP_TARGET else 'FAIL'}")
        with tempfile.TemporaryDirectory() as work:
            one, two = (measured.serial_cpu(["--db", str(Path(work) / f"{n}.duckdb"), "ingest", "--quiet",
                                             "--processes", str(n), *map(str, paths)], ROOT) for n in (1, 2))
        estimate = two.two_core_estimate
        print(f"CPU s, load-independent: --processes 1 {one.main:.2f}; --processes 2: this process "
              f"{two.main:.2f}, its worker {two.workers:.2f}, {two.serial:.2f} of it while the worker "
              f"had no task; on two free cores about {estimate:.2f} s, {one.main / estimate:.2f}x one "
              f"({measured.load()})")
        if "--processes 1" in medians and "default" in medians:
            ratio = medians["--processes 1"] / medians["default"]
            print(f"default over --processes 1: {ratio:.2f}x (never slower than one: >= 1.0 within noise)")
    after = measured.yardstick()
    print(f"yardstick after: {after:.2f}x; {measured.load()}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
