"""The chunk store: one DuckDB file, and every SQL string of the project.

`Store` is assembled from one mixin a job, each in its module with the SQL it runs:

- `connection`: opening the file for a read or a write batch, waiting on another process's
  lock, cdc's own write lock, and the rewrites of the whole file (`compact`, `erase`);
- `schema`: the tables, the `content_chunks` view, the indexes, the schema version and the
  connection settings; the check of a file's meta rows and the upgrade of older layouts;
- `writer`: the ingest write path: page states, a batch in one transaction, retention and
  its trim, validators, the extraction mode, and the re-chunking of `cdc migrate`;
- `reads`: what the views and the CLI read, and the dataclasses they get back;
- `boilerplate`: digests that recur across a host's pages and across hosts, where a digest is
  found, and chunks' bytes;
- `rows`: each stored row defined once, with named fields: the Arrow schemas of the tables
  ingest appends and the tables' columns are made from them;
- `runs`: crawl runs started and finished, a run's end trimming the texts of its pages and
  setting its hosts' template-only flags;
- `annotations`: the analysts' judgements of changes (significant, noise, unsure), kept
  apart from the rows ingest writes, and moved along when a backfill moves a generation's start;
- `templates`: each host's template and the change rows' template-only flags, stored, and
  refreshed where the chunk lists change (a run's end, prune, migrate, erase, an upgrade);
- `search`: the words each change added and removed, searched; the watches and their hits;
- `sitediff`: the runs as the CLI and the dashboard read them, and what changed on a site
  between two runs;
- `layout` and `lookups`: the `chunk_lists` row (digests end to end, lengths) cut into
  chunks, and the bounded lookups by key that the writer and the reads share.

Values are always bound parameters; table contents arrive in bulk as Arrow tables.

The tunable bounds live where they are read, and are set there (a test's monkeypatch too):
`cdc.store.lookups.KEYS_PER_LOOKUP`, `cdc.store.lookups.LOOKUP_ROWS_PER_KEY`,
`cdc.store.connection.RETRY_CEILING`, `cdc.store.schema.UPGRADE_TO_LISTS`.
"""

from __future__ import annotations

import os
from pathlib import Path

from cdc.errors import SpecMismatchError, StoreBusyError, StoreError, StoreNotFoundError
from cdc.store.annotations import LABELS, AnnotatedChange, Annotation, Annotations, MergeResult
from cdc.store.boilerplate import Boilerplate, ChunkPlace, HostDigest, SharedDigest
from cdc.store.connection import LOCK_TIMEOUT, Connections
from cdc.store.layout import digest_list
from cdc.store.reads import (
    ChangeRow,
    GenerationInfo,
    HostActivity,
    HostChange,
    HostPage,
    HostPages,
    PageInfo,
    PageMatch,
    PageMatches,
    Reads,
    TimeSpan,
    Version,
)
from cdc.store.runs import Runs
from cdc.store.schema import INDEXES, SCHEMA, SCHEMA_VERSION, TABLES, Schema
from cdc.store.search import ADDED, REMOVED, SIDES, Search, StoredWatch, WatchHitRow, WordsFilter, WordsMatch
from cdc.store.sitediff import ChangedPage, RunInfo, SiteDiff, SiteDiffs, TemplateChange
from cdc.store.templates import BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE, Templates
from cdc.store.writer import (
    DEFAULT_KEEP,
    PageHistory,
    PageState,
    RetainedText,
    RetentionPolicy,
    StoredFetch,
    StoredRow,
    Validators,
    WriteBatch,
    Writer,
)


class Store(Connections, Schema, Templates, Writer, Reads, Boilerplate, Runs, SiteDiffs, Annotations, Search):
    """A chunk store file. Cheap to make: it opens the file only for each call."""

    def __init__(self, path: str | os.PathLike, *, spec: str | None = None,
                 lock_timeout: float = LOCK_TIMEOUT):
        self.path = Path(path)
        self.spec = spec
        self.lock_timeout = lock_timeout
        self._lock_depth = 0
        self._schema_checked: tuple[int, int] | None = None  # the file whose schema is known good


__all__ = [
    "ADDED",
    "BOILERPLATE_MIN_PAGES",
    "BOILERPLATE_SHARE",
    "DEFAULT_KEEP",
    "INDEXES",
    "LABELS",
    "REMOVED",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SIDES",
    "TABLES",
    "AnnotatedChange",
    "Annotation",
    "ChangeRow",
    "ChangedPage",
    "ChunkPlace",
    "GenerationInfo",
    "HostActivity",
    "HostChange",
    "HostDigest",
    "HostPage",
    "HostPages",
    "MergeResult",
    "PageHistory",
    "PageInfo",
    "PageMatch",
    "PageMatches",
    "PageState",
    "RetainedText",
    "RetentionPolicy",
    "RunInfo",
    "SharedDigest",
    "SiteDiff",
    "SpecMismatchError",
    "Store",
    "StoreBusyError",
    "StoreError",
    "StoreNotFoundError",
    "StoredFetch",
    "StoredRow",
    "StoredWatch",
    "TemplateChange",
    "TimeSpan",
    "Validators",
    "Version",
    "WatchHitRow",
    "WordsFilter",
    "WordsMatch",
    "WriteBatch",
    "digest_list",
]
