"""Compare benchmark: `cdc.compare` with exact edits against fast-diff-match-patch (C++).

On the three revision histories of the shared corpus (`../shared/corpus/`: the Rust book in
English, Chinese and Japanese), every consecutive pair of versions of a page that differ,
normalised with `cdc.content_for_chunking`. Chunks are made beforehand (a store keeps them);
then, pair by pair and interleaved (so a load on the machine weighs on both alike):

- cdc: `cdc.compare(old_chunks, new_chunks, old_text=old, new_text=new)`, the exact edits;
- fdmp: `fast_diff_match_patch.diff(old, new, cleanup="Semantic", counts_only=True)` on the
  same bytes (the issue's call); its lengths are those of the full diff's ops, in bytes.

Printed per history: median and mean ms per pair of both and their ratios (cdc / fdmp: at
most 1.0 is the target), and precision and recall of both against the word alignment of
`benchmarks/edits.py` (fdmp's changed bytes: the non-whitespace bytes of its inserted and
deleted ops; cdc's: the non-whitespace bytes inside its edits). `--str` times fdmp on the
decoded strings as well (its other way in; not the target's).

Run from the repository root (about a minute; `--every N` takes every N-th pair; `--clock
cpu` times each call by this thread's CPU time, which a machine loaded by other jobs
inflates less than the wall clock):

    python benchmarks/compare.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import fast_diff_match_patch
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # edits.py: the corpus and the reference
from edits import CORPUS, LANGUAGES, load, pairs, reported, truly_changed

import cdc
import cdc.core.compiled

TARGET_RATIO = 1.0  # cdc's median and mean at most fdmp's
TARGET_PRECISION, TARGET_RECALL = 0.95, 0.985


def fdmp_changed(old: bytes, new: bytes, ops: list[tuple[str, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the non-whitespace bytes of fdmp's deleted (old) and inserted (new) ops."""
    masks = (np.zeros(len(old), bool), np.zeros(len(new), bool))
    i = j = 0
    for op, length in ops:
        if op == "=":
            i, j = i + length, j + length
        elif op == "-":
            masks[0][i:i + length] = True
            i += length
        else:
            masks[1][j:j + length] = True
            j += length
    for mask, text in zip(masks, (old, new)):
        raw = np.frombuffer(text, np.uint8)
        mask &= ~((raw == 32) | ((raw >= 9) & (raw <= 13)))
    return masks


class Score:
    """Changed bytes found against the truly changed ones, summed over pairs."""

    def __init__(self) -> None:
        self.both = self.found = self.truth = 0

    def add(self, found: tuple[np.ndarray, np.ndarray], truth: tuple[np.ndarray, np.ndarray]) -> None:
        for mine, true in zip(found, truth):
            self.both += int(np.count_nonzero(mine & true))
            self.found += int(np.count_nonzero(mine))
            self.truth += int(np.count_nonzero(true))

    @property
    def precision(self) -> float:
        return self.both / self.found if self.found else 1.0

    @property
    def recall(self) -> float:
        return self.both / self.truth if self.truth else 1.0


CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def measure(versions: dict[str, list[bytes]], every: int, with_str: bool, clock_name: str = "wall") -> dict:
    times: dict[str, list[float]] = {"cdc": [], "fdmp": [], "fdmp str": []}
    scores = {"cdc": Score(), "fdmp": Score()}
    clock = CLOCKS[clock_name]
    for old, new in pairs(versions, every):
        old_chunks, new_chunks = cdc.chunk_content(old), cdc.chunk_content(new)
        started = clock()
        report = cdc.compare(old_chunks, new_chunks, old_text=old, new_text=new)
        middle = clock()
        ops = fast_diff_match_patch.diff(old, new, cleanup="Semantic", counts_only=True)
        ended = clock()
        times["cdc"].append(middle - started)
        times["fdmp"].append(ended - middle)
        if with_str:
            a, b = old.decode(), new.decode()
            started = clock()
            fast_diff_match_patch.diff(a, b, cleanup="Semantic", counts_only=True)
            times["fdmp str"].append(clock() - started)
        truth = truly_changed(old, new)
        scores["cdc"].add(reported(old, new, report.edits), truth)
        scores["fdmp"].add(fdmp_changed(old, new, ops), truth)
    return {"times": times, "scores": scores}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the folder of the three histories")
    parser.add_argument("--every", type=int, default=1, help="take every N-th pair (default all)")
    parser.add_argument("--str", dest="with_str", action="store_true",
                        help="also time fdmp on the decoded strings")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or this thread's CPU time (on a loaded machine, a time "
                             "slice lost to another process is counted in neither)")
    args = parser.parse_args(argv)
    if args.every < 1:
        parser.error("--every must be at least 1")
    started = time.perf_counter()
    print(f"kernels: {'ahead of time' if cdc.core.compiled.AHEAD_OF_TIME is not None else 'JIT'}; "
          f"fast-diff-match-patch {getattr(fast_diff_match_patch, '__version__', '?')}; targets: "
          f"cdc/fdmp median and mean <= {TARGET_RATIO}, precision >= {TARGET_PRECISION}, "
          f"recall >= {TARGET_RECALL}; clock: {args.clock}")
    print(f"{'history':<8} {'pairs':>6} {'cdc med':>8} {'fdmp med':>8} {'ratio':>6} {'cdc mean':>8} "
          f"{'fdmp mean':>9} {'ratio':>6} {'cdc P':>6} {'cdc R':>6} {'fdmp P':>6} {'fdmp R':>6}  targets")
    verdicts = []
    for name, filename in LANGUAGES:
        path = args.corpus / filename
        if not path.is_file():
            raise SystemExit(f"corpus not found: {path} (pass --corpus FOLDER)")
        result = measure(load(path), args.every, args.with_str, args.clock)
        times, scores = result["times"], result["scores"]
        ms = {k: [s * 1000 for s in v] for k, v in times.items() if v}
        median = {k: statistics.median(v) for k, v in ms.items()}
        mean = {k: statistics.fmean(v) for k, v in ms.items()}
        median_ratio, mean_ratio = median["cdc"] / median["fdmp"], mean["cdc"] / mean["fdmp"]
        ours, theirs = scores["cdc"], scores["fdmp"]
        met = (median_ratio <= TARGET_RATIO and mean_ratio <= TARGET_RATIO
               and ours.precision >= TARGET_PRECISION and ours.recall >= TARGET_RECALL)
        verdicts.append(f"{name}: {'PASS' if met else 'FAIL'}")
        print(f"{name:<8} {len(ms['cdc']):>6,} {median['cdc']:>8.3f} {median['fdmp']:>8.3f} "
              f"{median_ratio:>6.2f} {mean['cdc']:>8.3f} {mean['fdmp']:>9.3f} {mean_ratio:>6.2f} "
              f"{ours.precision:>6.3f} {ours.recall:>6.3f} {theirs.precision:>6.3f} {theirs.recall:>6.3f}  "
              f"{'met' if met else 'NOT met'}", flush=True)
        if "fdmp str" in ms:
            print(f"{'':<8} fdmp on str: median {median['fdmp str']:.3f} ms, mean {mean['fdmp str']:.3f} ms")
    print("  ".join(verdicts))
    print(f"total benchmark time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
