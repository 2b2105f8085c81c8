"""A batch's rows as the Arrow tables `Store.write` appends, built column by column."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from cdc.core.editwords import COLUMNS as EDIT_WORDS_COLUMNS
from cdc.ingest.versions import PageOutcome
from cdc.runtime.collector import collector_paused
from cdc.store import WriteBatch


def chunk_table(rows: list[tuple]) -> pa.Table:
    """`chunk_lists` rows (natural_key, generation, digests, lengths) as Arrow."""
    return _table(rows, _CHUNKS_SCHEMA)


def change_table(rows: list[tuple]) -> pa.Table:
    """`changes` rows (`cdc.ingest.versions.change_row`) as Arrow."""
    return _table(rows, _CHANGES_SCHEMA)


def words_table(rows: list[tuple]) -> pa.Table:
    """`change_words` rows (`cdc.core.editwords.EditWords`) as Arrow."""
    return _table(rows, _WORDS_SCHEMA)


@collector_paused
def outcome_tables(outcomes: Iterable[PageOutcome]) -> WriteBatch:
    """The rows of built pages as the Arrow tables `Store.write` appends."""
    columns = _Columns()
    for outcome in outcomes:
        columns.add(outcome)
    return columns.tables()


class _Columns:
    """Rows of one batch, gathered as columns for Arrow."""

    def __init__(self) -> None:
        self.generations: list[tuple] = []
        self.chunks: list[tuple] = []
        self.changes: list[tuple] = []
        self.pages: list[tuple] = []
        self.checked: list[tuple] = []
        self.fetches: list[tuple] = []
        self.seen: list[tuple] = []  # natural_key, run, fetched_at, content_digest
        self.removed_generations: list[tuple] = []
        self.removed_changes: list[tuple] = []
        self.words: list[tuple] = []

    def add(self, outcome: PageOutcome) -> None:
        self.generations += outcome.generations
        self.chunks += outcome.chunks
        self.changes += outcome.changes
        self.words += outcome.words
        self.fetches += outcome.fetches
        key = outcome.natural_key
        if outcome.seen is not None:
            self.seen.append((key, *outcome.seen))
        self.removed_generations += [(key, generation) for generation in outcome.removed_generations]
        self.removed_changes += [(key, generation) for generation in outcome.removed_changes]
        if outcome.page is not None:
            self.pages.append(outcome.page)
        elif outcome.last_checked is not None:
            self.checked.append((outcome.natural_key, outcome.last_checked))

    def tables(self) -> WriteBatch:
        generations = _table(self.generations, _GENERATIONS_SCHEMA, text_column=6)
        return WriteBatch(pages=_table(self.pages, _PAGES_SCHEMA), generations=generations,
                          chunks=_table(self.chunks, _CHUNKS_SCHEMA),
                          changes=_table(self.changes, _CHANGES_SCHEMA),
                          checked=_table(self.checked, _CHECKED_SCHEMA),
                          fetches=_table(self.fetches, _FETCHES_SCHEMA),
                          seen=_table(self.seen, _SEEN_SCHEMA),
                          removed_generations=_table(self.removed_generations, _REMOVED_SCHEMA),
                          removed_changes=_table(self.removed_changes, _REMOVED_SCHEMA),
                          words=words_table(self.words))


def _table(rows: list[tuple], schema: pa.Schema, text_column: int | None = None) -> pa.Table:
    """Rows as an Arrow table of `schema`, built column by column."""
    columns = list(zip(*rows)) if rows else [[] for _ in schema]
    arrays = []
    for i, (values, column) in enumerate(zip(columns, schema)):
        if i == text_column:  # UTF-8 already: checked and converted in C++, not decoded here
            arrays.append(pa.array(values, pa.binary()).cast(pa.string()))
        else:
            arrays.append(pa.array(values, column.type))
    return pa.Table.from_arrays(arrays, schema=schema)


_CHECKED_SCHEMA = pa.schema([("natural_key", pa.string()), ("last_checked", pa.timestamp("us"))])
_PAGES_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("url", pa.string()), ("host", pa.string()),
    ("retention_class", pa.string()), ("latest_generation", pa.int64()),
    ("first_seen", pa.timestamp("us")), ("last_fetched", pa.timestamp("us")),
    ("last_checked", pa.timestamp("us")), ("etag", pa.string()), ("last_modified", pa.string()),
])
_GENERATIONS_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int64()), ("fetched_at", pa.timestamp("us")),
    ("content_digest", pa.binary()), ("length", pa.int32()), ("chunk_count", pa.int32()),
    ("text", pa.string()), ("first_run", pa.int32()),
])
_CHUNKS_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int64()),
    ("digests", pa.binary()), ("lengths", pa.list_(pa.int32())),
])
_CHANGES_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int64()), ("previous_generation", pa.int64()),
    ("fetched_at", pa.timestamp("us")), ("similarity", pa.float64()), ("unchanged_ratio", pa.float64()),
    ("retained_ratio", pa.float64()), ("bytes_added", pa.int32()), ("bytes_removed", pa.int32()),
    ("regions", pa.int32()), ("verdict", pa.string()), ("excerpt", pa.string()), ("measure", pa.string()),
])
_FETCHES_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("fetched_at", pa.timestamp("us")), ("content_digest", pa.binary()),
    ("run", pa.int32()), ("sequence", pa.int64()),
])
_SEEN_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("run", pa.int32()), ("fetched_at", pa.timestamp("us")),
    ("content_digest", pa.binary()),
])
_WORDS_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int64()), ("run", pa.int32()),
    *((name, pa.string()) for name in EDIT_WORDS_COLUMNS[3:]),
])
_REMOVED_SCHEMA = pa.schema([("natural_key", pa.string()), ("generation", pa.int64())])
