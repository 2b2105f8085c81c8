"""The rows the store keeps, each defined once, with named fields.

A stored row is a named tuple whose fields are its table's columns, in the table's order.
Each field's annotation gives its Python type and, beside it, its Arrow type (the aliases
below: `generation: Int64`); a field that may be None is a column that may be NULL, and a
column stored with a compression of its own says so (`Annotated[..., ZSTD]`). From the class
come the Arrow schema of the tables ingest appends (`arrow_schema`), a table built from rows
column by column (`arrow_table`) and the table's CREATE TABLE statement (`create_table`), so
a column added, moved or retyped changes all three at once.

Ingest builds the rows (`cdc.ingest.versions`), the store writes them: this module is the
store's floor, so both import it. Named tuples are tuples: a batch still becomes columns by
one `zip(*rows)`, and building one costs a fraction of a microsecond more than a bare tuple.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Annotated, NamedTuple

import pyarrow as pa

from cdc.core.editwords import EditWords
from cdc.core.excerpts import change_excerpt

if typing.TYPE_CHECKING:
    from cdc.core.compare import ChangeReport


@dataclass(frozen=True)
class Compression:
    """A column's own compression in the file (DuckDB's `USING COMPRESSION`)."""

    name: str


ZSTD, UNCOMPRESSED = Compression("zstd"), Compression("uncompressed")

# The column types, by their Arrow type: the Python value, and the Arrow type it is written as.
String = Annotated[str, pa.string()]
Int32 = Annotated[int, pa.int32()]
Int64 = Annotated[int, pa.int64()]
Float64 = Annotated[float, pa.float64()]
Bool = Annotated[bool, pa.bool_()]
Binary = Annotated[bytes, pa.binary()]
Timestamp = Annotated[datetime, pa.timestamp("us")]
Int32List = Annotated[list[int], pa.list_(pa.int32())]
# Text held as UTF-8 bytes (a page's normalised text): written as a string column from the
# bytes, which Arrow's cast checks in C++, never decoded into Python strings.
Utf8 = Annotated[bytes, pa.string()]

_SQL_TYPES = {pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.float64(): "DOUBLE",
              pa.bool_(): "BOOLEAN", pa.binary(): "BLOB", pa.timestamp("us"): "TIMESTAMP",
              pa.list_(pa.int32()): "INTEGER[]"}


class PagesRow(NamedTuple):
    """A `pages` row as ingest writes it (the store adds each new page's SURT, `surt`)."""

    natural_key: String
    url: String  # the URL of the page's latest fetch
    host: String
    retention_class: String | None
    latest_generation: Int64
    first_seen: Timestamp
    last_fetched: Timestamp  # the latest generation's first fetch
    last_checked: Timestamp  # the latest fetch
    etag: String | None  # the validators of the latest HTTP fetch (`cdc fetch`)
    last_modified: String | None


class GenerationsRow(NamedTuple):
    """A `generations` row: one version of a page, with its text while it is retained."""

    natural_key: String
    generation: Int64  # its capture time, YYYYMMDDhhmmss (`cdc.core.captures.capture_id`)
    fetched_at: Timestamp  # its first fetch
    content_digest: Binary
    length: Int32
    chunk_count: Int32
    text: Annotated[Utf8 | None, UNCOMPRESSED]  # uncompressed: an erasure is checked in the file
    first_run: Int32 | None


class ChunkListsRow(NamedTuple):
    """A `chunk_lists` row: a retained generation's chunks, their digests end to end."""

    natural_key: String
    generation: Int64
    digests: Binary
    lengths: Int32List


class ExpiredText(NamedTuple):
    """A generation's text and chunk list that a run's end would trim, kept beside the store
    while a later batch may need it (`cdc.store.expired`), by its page and content digest (a
    page that went back to an earlier content has two generations of one text)."""

    natural_key: str
    digest: bytes
    text: bytes  # UTF-8, as a build makes it
    digests: bytes  # its chunks' digests end to end
    lengths: list[int]


# How a change row was measured (`changes.measure`): with the exact edits of its two texts;
# by its chunks alone; by its digests alone (the previous text was gone); or, at a run's end,
# with the exact edits of the page's own text, its host's template left out (a change of
# both: `cdc.store.templates`).
EDITS, CHUNKS, DIGESTS, OWN_EDITS = "edits", "chunks", "digests", "own_edits"


class ChangesRow(NamedTuple):
    """A `changes` row as ingest measures it (`cdc.ingest.versions.change_row`); a run's end
    adds its `TemplateFlags`."""

    natural_key: String
    generation: Int64
    previous_generation: Int64 | None  # None: the page's first generation
    fetched_at: Timestamp
    similarity: Float64 | None  # None where not measured: a first generation, or `digests`
    unchanged_ratio: Float64 | None
    retained_ratio: Float64 | None
    bytes_added: Int32 | None
    bytes_removed: Int32 | None
    regions: Int32 | None
    verdict: String
    excerpt: String | None
    measure: String | None  # edits, chunks, digests or own_edits


# A change row's measures: what `changes` says of how much and how it changed, beside the
# page, generations and time it is of. Written by ingest, and again by a migration's new
# chunks (`Writer.replace_chunks`) and a run's end's own measure (`cdc.store.templates`).
CHANGE_MEASURES = ChangesRow._fields[4:]
MEASURES_SET = ", ".join(f"{name} = m.{name}" for name in CHANGE_MEASURES)  # an UPDATE from `m`


def changed_share_sql(alias: str = "") -> str:
    """`cdc.core.verdicts.changed_share` of a change row, in SQL (`alias`: its table's name in
    the query, a name of this package's, never input). DuckDB's `least` passes over a NULL,
    as `kept_share` does, and is NULL where both are."""
    prefix = f"{alias}." if alias else ""
    return f"(1 - least({prefix}unchanged_ratio, {prefix}retained_ratio))"


def report_measures(report: ChangeReport, old: bytes, new: bytes, measure: str) -> tuple:
    """A change row's measures (`CHANGE_MEASURES`, in order) from `report`, the comparison of
    its texts `old` and `new`, measured as `measure` says: what ingest stores
    (`cdc.ingest.versions.change_row`), and a run's end's own measure (`cdc.store.templates`)."""
    return (report.similarity, report.unchanged_ratio, report.retained_ratio, report.bytes_added,
            report.bytes_removed, len(report.changed_regions) + len(report.removed_regions),
            report.verdict, change_excerpt(report, old, new), measure)


# A change row's measures taken again at a run's end: of the page's own text where the change
# was of its host's template and of its own blocks (`cdc.store.templates`).
Remeasured = NamedTuple("Remeasured", [(name, ChangesRow.__annotations__[name])
                                       for name in ("natural_key", "generation", *CHANGE_MEASURES)])


class TemplateFlags(NamedTuple):
    """The last columns of `changes`, set at a run's end (`cdc.store.templates`)."""

    template_only: Bool | None
    template_edit: String | None


class FetchesRow(NamedTuple):
    """A `fetches` row: one fetch of a page, kept for good."""

    natural_key: String
    fetched_at: Timestamp
    content_digest: Binary
    run: Int32
    sequence: Int64  # its place in the run's input


class PageRunsRow(NamedTuple):
    """A `page_runs` row: a page's latest fetch in a run, and its content digest."""

    natural_key: String
    run: Int32
    fetched_at: Timestamp
    content_digest: Binary


class ChangeWordsRow(NamedTuple):
    """A `change_words` row: what a change's exact edits added and removed (the text, and its
    words for search). Built by `cdc.core.editwords` as an `EditWords`, the same fields."""

    natural_key: String
    generation: Int64
    run: Int32  # the run that measured the change
    added_text: Annotated[String | None, ZSTD]  # what excerpts show: compressed
    removed_text: Annotated[String | None, ZSTD]
    added_words: Annotated[String | None, UNCOMPRESSED]  # what is searched: checkable in the file
    removed_words: Annotated[String | None, UNCOMPRESSED]


class CheckedRow(NamedTuple):
    """A page seen again with its stored content: its `last_checked` moves forward."""

    natural_key: String
    last_checked: Timestamp


class RemovedRow(NamedTuple):
    """A generation (or change row) a batch removes, to write again: a late fetch moved it."""

    natural_key: String
    generation: Int64


if ChangeWordsRow._fields != EditWords._fields:  # core builds these rows: a field moved in one alone
    raise ImportError(f"change_words columns {ChangeWordsRow._fields} differ from "
                      f"cdc.core.editwords.EditWords {EditWords._fields}")


@dataclass(frozen=True)
class Column:
    """One field of a row class, as a column: what `arrow_schema` and `create_table` make."""

    name: str
    arrow: pa.DataType
    nullable: bool
    compression: Compression | None
    from_utf8: bool  # its values are UTF-8 bytes, cast to the string type in Arrow


def _column(name: str, hint: object) -> Column:
    arrow, nullable, compression, python = None, False, None, None
    while python is None:
        if typing.get_origin(hint) is Annotated:
            for extra in hint.__metadata__:
                if isinstance(extra, pa.DataType):
                    arrow = extra
                elif isinstance(extra, Compression):
                    compression = extra
            hint = hint.__origin__
        elif typing.get_origin(hint) in (typing.Union, types.UnionType):
            others = [arg for arg in typing.get_args(hint) if arg is not type(None)]
            nullable, hint = len(others) < len(typing.get_args(hint)), others[0]
        else:
            python = hint
    if arrow is None:
        raise TypeError(f"column {name} states no Arrow type")
    return Column(name, arrow, nullable, compression, python is bytes and arrow == pa.string())


@cache
def columns(row: type[tuple]) -> tuple[Column, ...]:
    """The columns of a row class, in its fields' order."""
    hints = typing.get_type_hints(row, include_extras=True)
    return tuple(_column(name, hints[name]) for name in row._fields)


@cache
def arrow_schema(row: type[tuple]) -> pa.Schema:
    """The Arrow schema of a row class's tables."""
    return pa.schema([(column.name, column.arrow) for column in columns(row)])


def arrow_table(row: type[tuple], rows: Sequence[tuple]) -> pa.Table:
    """Rows of a row class as an Arrow table of its schema, built column by column."""
    schema = arrow_schema(row)
    values = zip(*rows) if rows else ([] for _ in schema)
    arrays = [pa.array(column_values, pa.binary()).cast(pa.string()) if column.from_utf8
              else pa.array(column_values, column.arrow)
              for column_values, column in zip(values, columns(row))]
    return pa.Table.from_arrays(arrays, schema=schema)


def _sql(column: Column) -> str:
    return (f"{column.name} {_SQL_TYPES[column.arrow]}" + ("" if column.nullable else " NOT NULL")
            + (f" USING COMPRESSION {column.compression.name}" if column.compression else ""))


def create_table(table: str, *rows: type[tuple]) -> str:
    """The CREATE TABLE statement of a table whose columns are the fields of `rows`, in order."""
    definitions = [_sql(column) for row in rows for column in columns(row)]
    return f"CREATE TABLE IF NOT EXISTS {table} (\n        " + ",\n        ".join(definitions) + "\n    )"
