"""The demo store: each crawl of `cdc.demo.crawl` through the normal ingest path, one run per
crawl, into a new store built under another name and moved into place whole."""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from cdc.demo.crawl import (
    BATCH_TARGET,
    DEFAULT_GENERATIONS,
    DEFAULT_PAGES,
    DEFAULT_SEED,
    MIN_BATCH,
    check_sizes,
    crawl_records,
    plan_crawls,
)
from cdc.errors import StoreError
from cdc.ingest.ingester import BATCH_RECORDS, Ingester, IngestSummary
from cdc.runtime.lifeline import process_exists
from cdc.sources.jsonl import SourceRecord
from cdc.store import Store


def _ingest_crawl(store: Store, crawl: int, records: Iterable[dict], batch: int, workers: int,
                  on_batch: Callable[[IngestSummary], None]) -> IngestSummary:
    """One crawl's records (crawl 0-based) through one ingest run: the one place a crawl is ingested."""
    name = f"demo crawl {crawl + 1}"
    items = (SourceRecord(name, line, record) for line, record in enumerate(records, start=1))
    return Ingester(store, batch_records=batch, on_batch=on_batch, workers=workers, label=name,
                    inputs=[name]).run(items)


def build_demo(path: str | Path, pages: int = DEFAULT_PAGES, generations: int = DEFAULT_GENERATIONS,
               seed: int = DEFAULT_SEED, progress: Callable[[float], None] | None = None,
               workers: int = 1) -> IngestSummary:
    """Build a new store at `path` from `demo_records`, through the normal ingest path, a run per crawl.

    `progress`, when given, is called after each ingest batch with the share of records
    done (0 to 1; the last call is 1.0). Raises StoreError (a CdcError) when `path` exists.
    """
    check_sizes(pages, generations)
    path = Path(path)
    if path.exists():
        raise StoreError(f"{path} already exists; the demo builds a new store: remove the file "
                         "or give another path")
    plan = plan_crawls(pages, generations, seed)
    total = pages * generations - sum(generations - crawl for crawl in plan.gone.values())
    # Whole crawls in as few batches as the target allows: a batch costs a commit.
    per_crawl = max(1, round(BATCH_TARGET / generations))
    batch = min(BATCH_RECORDS, max(MIN_BATCH, math.ceil(pages / per_crawl)))
    summary = IngestSummary()

    def on_batch(run: IngestSummary) -> None:
        if progress is not None:
            progress(min(1.0, (summary.records + run.records) / total))

    # Built under another name and moved into place whole: a store at `path` is complete.
    _remove_abandoned_builds(path)
    building = path.with_name(f"{path.name}.building-{os.getpid()}")
    try:
        store = Store(building)
        for crawl in range(generations):
            summary.merge(_ingest_crawl(store, crawl, crawl_records(plan, crawl), batch, workers, on_batch))
        store.compact()  # drop the space that trimming old generations freed: about half the file
        os.replace(building, path)
    finally:
        _remove_build_files(building)
    return summary


def _remove_build_files(building: Path) -> None:
    for leftover in (building, building.with_name(building.name + ".wal"),
                     building.with_name(building.name + ".lock")):
        leftover.unlink(missing_ok=True)


def _remove_abandoned_builds(path: Path) -> None:
    """The files of builds whose process is gone (killed, say): they are never finished."""
    for leftover in path.parent.glob(f"{glob.escape(path.name)}.building-*"):
        pid = leftover.name.rpartition("-")[2].split(".")[0]
        if pid.isdigit() and not process_exists(int(pid)):
            leftover.unlink(missing_ok=True)
