"""Annotations benchmark: what reading change rows with their annotations costs the reads
the dashboard and the export make, and what writing annotations costs, on the synthetic
store (`benchmarks/synthetic_store.py`, 100,000 pages by default, built once and cached).

The store is copied first (the cache stays as built). Side by side in one process, round
robin, medians of `--rounds`:

1. the reads before annotations (the queries as they were: no annotation join) against the
   same reads now (`Store.changes(limit=200)`, `Store.biggest_changes(25)`,
   `Store.history`), on the store with no annotations and then with `--annotations` of them;
   and `Store.site_diff` of the latest two runs, with and without a label filter, and the
   annotations alone (the subquery every read joins);
2. one annotation written (`Store.put_annotations`, the write `cdc annotate` makes), an
   import of `--annotations` rows (`cdc.analyst.annotations.import_annotations`), and what an ingest
   batch that moved 1,000 generations' starts (a backfill) spends moving their annotations.

    python benchmarks/annotations.py
    python benchmarks/annotations.py --pages 10000 --rounds 9
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this working tree's cdc, before any installed copy
sys.path.insert(0, str(ROOT / "benchmarks"))

from dashboard import ms, round_robin  # noqa: E402
from synthetic_store import cached_store, copy_at_rest  # noqa: E402

from cdc.analyst.annotations import annotations_csv, import_annotations  # noqa: E402
from cdc.store import LABELS, Annotation, Store  # noqa: E402
from cdc.store.annotations import annotations_of  # noqa: E402
from cdc.store.lookups import _registered  # noqa: E402

# The reads as they were before annotations (cdc/store/reads.py at 7381770).
_OLD_COLUMNS = ("c.natural_key, p.host, c.generation, c.previous_generation, c.fetched_at, "
                "c.verdict, c.similarity, c.unchanged_ratio, c.retained_ratio, c.bytes_added, "
                "c.bytes_removed, c.regions, c.excerpt, c.measure, c.template_only")
_ORDER = "ORDER BY c.fetched_at DESC, c.natural_key, c.generation DESC"
OLD_CHANGES = f"""SELECT {_OLD_COLUMNS}
    FROM (SELECT * FROM changes c {_ORDER} LIMIT ?) c JOIN pages p USING (natural_key) {_ORDER}"""
OLD_BIGGEST = f"""SELECT {_OLD_COLUMNS} FROM changes c JOIN pages p USING (natural_key)
    WHERE c.verdict NOT IN ('new', 'unchanged') AND c.generation = p.latest_generation
    ORDER BY 1 - least(c.unchanged_ratio, c.retained_ratio) DESC,
             c.bytes_added + c.bytes_removed DESC, c.natural_key
    LIMIT ?"""
OLD_HISTORY = f"""SELECT {_OLD_COLUMNS} FROM changes c JOIN pages p USING (natural_key)
    WHERE c.natural_key = ? ORDER BY c.generation"""


def old_read(store: Store, query: str, values: list) -> Callable[[], object]:
    def read() -> object:
        with store.reading() as connection:
            return connection.execute(query, values).fetchall()
    return read


def annotations_alone(store: Store) -> object:
    with store.reading() as connection:
        return connection.execute(f"SELECT count(*) FROM {annotations_of()}").fetchall()


class Rollback(Exception):
    """Ends a timed write's transaction without committing it."""


def follow_moved(store: Store, removed: list[tuple[str, int]]) -> float:
    """Seconds `_follow_moved_generations` takes for a batch that removed these generations
    (as a backfill that moves their starts does), in a transaction rolled back after."""
    table = pa.table({"natural_key": pa.array([key for key, _ in removed], pa.string()),
                      "generation": pa.array([number for _, number in removed], pa.int64())})
    try:
        with store.writing() as connection, _registered(connection, "removed_generations", table):
            started = time.perf_counter()
            store._follow_moved_generations(connection)
            elapsed = time.perf_counter() - started
            raise Rollback
    except Rollback:
        return elapsed


def reads(store: Store, page: str, runs: tuple[int, int]) -> dict[str, Callable[[], object]]:
    return {
        "changes(limit=200), before": old_read(store, OLD_CHANGES, [200]),
        "changes(limit=200), now": lambda: store.changes(limit=200),
        "biggest_changes(25), before": old_read(store, OLD_BIGGEST, [25]),
        "biggest_changes(25), now": lambda: store.biggest_changes(25),
        "history(page), before": old_read(store, OLD_HISTORY, [page]),
        "history(page), now": lambda: store.history(page),
        "site_diff(latest two)": lambda: store.site_diff(*runs),
        "site_diff(latest two, labels=significant)": lambda: store.site_diff(*runs, labels=("significant",)),
        "changes(labels=significant)": lambda: store.changes(labels=("significant",)),
        "annotations alone (the subquery every read joins)": lambda: annotations_alone(store),
    }


def print_medians(times: dict[str, list[float]]) -> None:
    medians = {name: statistics.median(seconds) for name, seconds in times.items()}
    for name, median in medians.items():
        ratio = ""
        if name.endswith(", now"):
            before = medians[name.removesuffix(", now") + ", before"]
            ratio = f"  {median / before:.2f}x before"
        print(f"  {name:<46} {ms(median):>10}{ratio}")


def some_annotations(store: Store, count: int, seed: int = 7) -> list[Annotation]:
    """`count` annotations of random changes that are not first sightings."""
    rng = random.Random(seed)
    with store.reading() as connection:
        rows = connection.execute(
            "SELECT natural_key, generation FROM changes WHERE verdict <> 'new' ORDER BY 1, 2").fetchall()
    chosen = rng.sample(rows, min(count, len(rows)))
    at = datetime(2026, 6, 1)
    return [Annotation(key, generation, rng.choice(LABELS), f"note {n}", "bench", at)
            for n, (key, generation) in enumerate(chosen)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--annotations", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    built = cached_store(pages=args.pages)
    with tempfile.TemporaryDirectory(dir=ROOT / "data") as directory:
        path = Path(directory) / "annotated.duckdb"
        copy_at_rest(built.path, path)  # on disk, as a store at rest is
        store = Store(path)
        runs = tuple(run.run for run in store.latest_crawls(2))
        page = store.page_keys()[len(store.page_keys()) // 2]
        print(f"store: {args.pages:,} pages ({built.path.name}), rounds {args.rounds}, medians")
        print("no annotations:")
        print_medians(round_robin(reads(store, page, runs), args.rounds))
        wanted = some_annotations(store, args.annotations)
        started = time.perf_counter()
        result = store.put_annotations(wanted)
        print(f"put_annotations of {args.annotations:,}: {ms(time.perf_counter() - started)} "
              f"({result.added:,} added)")
        print(f"{args.annotations:,} annotations:")
        print_medians(round_robin(reads(store, page, runs), args.rounds))
        one = [Annotation(wanted[0].natural_key, wanted[0].generation, "noise", None, "bench",
                          datetime(2026, 7, 1, second)) for second in range(args.rounds)]
        written = []
        for annotation in one:
            started = time.perf_counter()
            store.put_annotations([annotation])
            written.append(time.perf_counter() - started)
        print(f"one annotation written (put_annotations): median {ms(statistics.median(written))}")
        with store.reading() as connection:
            generations = connection.execute(
                "SELECT natural_key, generation FROM generations ORDER BY random() LIMIT 1000").fetchall()
        held = {(row.natural_key, row.generation) for row in wanted}
        generations = [row for row in generations if row not in held][:990]
        annotated = [(row.natural_key, row.generation) for row in wanted[:10]]
        cases = (("none annotated", generations), ("10 annotated", generations + annotated))
        for name, removed in cases:
            seconds = [follow_moved(store, removed) for _ in range(args.rounds)]
            print(f"a batch's annotations following {len(removed):,} moved generations, {name}: median "
                  f"{ms(statistics.median(seconds))}")
        text = annotations_csv(store.annotations()).decode()
        started = time.perf_counter()
        summary = import_annotations(store, text)
        print(f"import of the {args.annotations:,} rows again (all left out, nothing newer): "
              f"{ms(time.perf_counter() - started)} ({summary.kept:,} left out)")


if __name__ == "__main__":
    main()
