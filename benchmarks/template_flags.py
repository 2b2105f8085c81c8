"""What the template-only rule of issue 22 costs: every change row's flag counted again by the
rule before it (the page's own chunks compared as a sorted multiset: blind to a moved
paragraph; the query as it was at commit `BASE`) and by the rule now (in chunk order, and the
texts read of the rows where one block of the page's own changed beside the template, to see
whether only a line end moved), side by side in one process, interleaved, medians, ratio.

The store is the synthetic one (`benchmarks/synthetic_store.py`, cached under `--cache`).
Each round copies it, clears every flag (as `cdc migrate` and the schema upgrade leave
them) and times `Store.refresh_templates`: every host's template and every row's flag
counted again, the largest refresh there is. Wall and CPU time (`time.process_time`, this
process: DuckDB's threads included). Also printed: how many flags the two rules set
differently (the synthetic store has no moves and no line-end artefacts: none), and how many
rows the rule now read the texts of.

The refresh has since learnt to measure again, on the page's own text, the rows that changed
both the template and the page's own blocks (`templates._measure_own`, commit 650a208). It
reads columns the rule before does not make, and it is not the rule's cost: it is left out of
both rules' rounds, and timed with the rule now as a third peer ("now, whole refresh"), what a
run's end of every page runs.

    python benchmarks/template_flags.py --pages 20000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import synthetic_store
from cdc.store import Store, templates

ROOT = Path(__file__).resolve().parents[1]
BASE = "7381770"  # the last commit with the rule before
NOW = templates.FRESH_FLAGS
SETTLE_NOW = templates._settle_line_ends
MEASURE_OWN = templates._measure_own


def rule_before() -> str:
    """`FRESH_FLAGS` as it was at `BASE` (this cdc's helpers build it as they built it then)."""
    source = subprocess.run(["git", "show", f"{BASE}:cdc/store/templates.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    namespace: dict = {"__name__": "templates_before"}
    exec(compile(source, f"{BASE}:cdc/store/templates.py", "exec"), namespace)
    return namespace["FRESH_FLAGS"]


def refresh(source: Path, workdir: Path, rule: str, measure_own: bool = False
            ) -> tuple[float, float, list[tuple], int]:
    """Wall and CPU seconds of one full refresh of a copy of `source` under `rule` (the rule
    before reads no texts), with the rows measured again on their own text if `measure_own`,
    and the flags."""
    path = workdir / "copy.duckdb"
    synthetic_store.copy_at_rest(source, path)  # on disk, as a store at rest is
    store = Store(path)
    with store.writing() as connection:
        connection.execute("UPDATE changes SET template_only = NULL, template_edit = NULL")
    templates.FRESH_FLAGS = rule
    checked: list[int] = []

    def settle(connection) -> None:  # the rule now, counting the rows whose texts it reads
        checked.append(len(connection.execute(templates.LINE_END_CHECK).fetchall()))
        SETTLE_NOW(connection)

    templates._settle_line_ends = settle if rule == NOW else (lambda connection: None)
    templates._measure_own = MEASURE_OWN if measure_own else (lambda connection: None)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        with store.writing() as connection:
            store.refresh_templates(connection)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        templates.FRESH_FLAGS, templates._settle_line_ends = NOW, SETTLE_NOW
        templates._measure_own = MEASURE_OWN
    with store.reading() as connection:
        flags = connection.execute("SELECT natural_key, generation, template_only, template_edit "
                                   "FROM changes ORDER BY ALL").fetchall()
    path.unlink()
    return wall, cpu, flags, sum(checked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=synthetic_store.CACHE_DIR)
    parser.add_argument("--db", type=Path, help="another store (only copied), e.g. of the docs crawls")
    args = parser.parse_args()
    if args.db:
        source = args.db
        print(f"store: {source}")
    else:
        built = synthetic_store.cached_store(args.pages, directory=args.cache)
        source = Path(built.path)
        print(f"store: {source} ({args.pages:,} pages, 3 crawls){' cached' if built.cached else ''}")
    rules = {"before (sorted multiset)": (rule_before(), False), "now (chunk order, line ends)": (NOW, False),
             "now, whole refresh": (NOW, True)}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in rules}
    flags: dict[str, list[tuple]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.rounds):
            for name, (rule, measure_own) in rules.items():
                wall, cpu, flags[name], read = refresh(source, Path(workdir), rule, measure_own)
                times[name].append((wall, cpu))
    medians = {name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
               for name, runs in times.items()}
    for name, (wall, cpu) in medians.items():
        print(f"{name:<30} full refresh: median {wall * 1000:8.1f} ms wall, {cpu * 1000:8.1f} ms CPU "
              f"({args.rounds} rounds)")
    (before_wall, before_cpu), (now_wall, now_cpu), _ = medians.values()
    print(f"ratio now / before: {now_wall / before_wall:.2f}x wall, {now_cpu / before_cpu:.2f}x CPU")
    before, now, _ = flags.values()
    differ = sum(a != b for a, b in zip(before, now))
    print(f"flags set differently: {differ:,} of {len(now):,} change rows; rows whose texts the rule "
          f"now read: {read:,}")


if __name__ == "__main__":
    main()
