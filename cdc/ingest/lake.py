"""The lake output: what each ingest batch writes, also as Parquet files partitioned by host.

One DuckDB file has one writer; past what that writer can append, the same rows can go to a
directory any lake engine (DuckDB, Spark, Trino) reads as tables:

    DIR/generations/host=example.com/<run>-<batch>-0.parquet
    DIR/content_chunks/host=.../...
    DIR/changes/host=.../...

`content_chunks` holds a row per chunk, the seed's columns (natural_key, generation,
chunk_index, digest, length), as the store's `content_chunks` view shows them: the store
keeps a list row per generation for its single writer's sake, and a lake engine, with no
such writer, reads rows per chunk more simply (Parquet stores the repeated keys in runs).

`changes` holds the rows as a batch writes them, without `template_only`: that flag is set
at the run's end, from the templates of the whole store (`cdc.store.templates`).

Files are only ever added (each batch's have their own names), so several runs into one
directory add up. A batch's files are written after the store commits it: a run stopped
between the two leaves the lake a batch short of the store.

The lake is a log of what each batch wrote, and two things the store does later stay out of
it: a fetch put in place before a page's latest can replace the page's generation and change
rows (their keys are written to `removed_generations` and `removed_changes`: a reader drops
a row whose natural_key and generation a later file removed), and the retention limit, which
the store applies at each run's end, never drops a text from the lake.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from cdc.core.urls import host_of
from cdc.store import WriteBatch

LAKE_TABLES = ("generations", "content_chunks", "changes", "removed_generations", "removed_changes")
_BY_HOST = ds.partitioning(pa.schema([("host", pa.string())]), flavor="hive")


class ParquetLake:
    """Appends each batch's generations, chunk rows and change rows under `directory`."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.run = uuid.uuid4().hex[:12]  # file names of this run never collide with another's
        self.batches = 0
        self.rows = 0

    def write(self, batch: WriteBatch) -> None:
        tables = (batch.generations, batch.content_chunks(), batch.changes, batch.removed_generations,
                  batch.removed_changes)
        for name, table in zip(LAKE_TABLES, tables):
            if not table.num_rows:
                continue
            host = pa.array([host_of(key) for key in table.column("natural_key").to_pylist()], pa.string())
            ds.write_dataset(table.append_column("host", host), self.directory / name, format="parquet",
                             partitioning=_BY_HOST,
                             basename_template=f"{self.run}-{self.batches:06d}-{{i}}.parquet",
                             existing_data_behavior="overwrite_or_ignore")
            self.rows += table.num_rows
        self.batches += 1
