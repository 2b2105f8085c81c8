"""What the template-only rule's chunk order costs: every change row's flag counted again, with
the page's own chunks compared as a sorted multiset (before: blind to a moved paragraph) and
in chunk order (now), side by side in one process, interleaved, medians and their ratio.

The store is the synthetic one (`benchmarks/synthetic_store.py`, cached under `--cache`).
Each round copies it, clears every flag (as `cdc migrate` and the schema upgrade leave
them) and times `Store.refresh_templates`: every host's template and every row's flag
counted again, the largest refresh there is. Wall and CPU time (`time.process_time`, this
process: DuckDB's threads included). Also printed: how many flags the two rules set
differently (the synthetic store has no moves: none).

    python benchmarks/template_flags.py --pages 20000 --rounds 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import synthetic_store
from cdc.store import Store, templates

NOW = templates.FRESH_FLAGS
# The rule before: the page's own digests sorted, so that a move changes nothing.
BEFORE = NOW.replace(
    "coalesce(list(c.digest ORDER BY c.chunk_index) FILTER (WHERE t.digest IS NULL), []) AS rest",
    "list_sort(coalesce(list(c.digest) FILTER (WHERE t.digest IS NULL), [])) AS rest")
assert BEFORE != NOW, "the rule's text moved: update BEFORE"
RULES = {"sorted multiset (before)": BEFORE, "chunk order (now)": NOW}


def refresh(source: Path, workdir: Path, rule: str) -> tuple[float, float, list[tuple]]:
    """Wall and CPU seconds of one full refresh of a copy of `source` under `rule`, and the flags."""
    path = workdir / "copy.duckdb"
    shutil.copyfile(source, path)
    store = Store(path)
    with store.writing() as connection:
        connection.execute("UPDATE changes SET template_only = NULL, template_edit = NULL")
    templates.FRESH_FLAGS = rule
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        with store.writing() as connection:
            store.refresh_templates(connection)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        templates.FRESH_FLAGS = NOW
    with store.reading() as connection:
        flags = connection.execute("SELECT natural_key, generation, template_only, template_edit "
                                   "FROM changes ORDER BY ALL").fetchall()
    path.unlink()
    return wall, cpu, flags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=synthetic_store.CACHE_DIR)
    args = parser.parse_args()
    built = synthetic_store.cached_store(args.pages, directory=args.cache)
    print(f"store: {built.path} ({args.pages:,} pages, 3 crawls){' cached' if built.cached else ''}")
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in RULES}
    flags: dict[str, list[tuple]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.rounds):
            for name, rule in RULES.items():
                wall, cpu, flags[name] = refresh(Path(built.path), Path(workdir), rule)
                times[name].append((wall, cpu))
    medians = {name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
               for name, runs in times.items()}
    for name, (wall, cpu) in medians.items():
        print(f"{name:<26} full refresh: median {wall * 1000:8.1f} ms wall, {cpu * 1000:8.1f} ms CPU "
              f"({args.rounds} rounds)")
    (before_wall, before_cpu), (now_wall, now_cpu) = medians.values()
    print(f"ratio now / before: {now_wall / before_wall:.2f}x wall, {now_cpu / before_cpu:.2f}x CPU")
    before, now = flags.values()
    differ = sum(a != b for a, b in zip(before, now))
    print(f"flags set differently: {differ:,} of {len(now):,} change rows")


if __name__ == "__main__":
    main()
