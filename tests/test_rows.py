"""The stored rows defined once (`cdc.store.rows`): the tables made from them keep the layout
stores have always had, and the Arrow tables built from rows append to those tables."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import duckdb
import pytest

from cdc.store import Store
from cdc.store.rows import (
    ChangesRow,
    ChangeWordsRow,
    ChunkListsRow,
    FetchesRow,
    GenerationsRow,
    Int64,
    PageRunsRow,
    PagesRow,
    arrow_table,
    columns,
)

# Each table of rows as DuckDB describes it in a store made before the rows had names.
LAYOUT = {
    "pages": (
        'CREATE TABLE pages(natural_key VARCHAR NOT NULL, url VARCHAR NOT NULL, '
        'host VARCHAR NOT NULL, retention_class VARCHAR, latest_generation BIGINT NOT NULL, '
        'first_seen TIMESTAMP NOT NULL, last_fetched TIMESTAMP NOT NULL, '
        'last_checked TIMESTAMP NOT NULL, etag VARCHAR, last_modified VARCHAR, surt VARCHAR);'
    ),
    "generations": (
        'CREATE TABLE generations(natural_key VARCHAR NOT NULL, generation BIGINT NOT NULL, '
        'fetched_at TIMESTAMP NOT NULL, content_digest BLOB NOT NULL, length INTEGER NOT NULL, '
        'chunk_count INTEGER NOT NULL, "text" VARCHAR USING COMPRESSION Uncompressed, '
        'first_run INTEGER);'
    ),
    "chunk_lists": (
        'CREATE TABLE chunk_lists(natural_key VARCHAR NOT NULL, generation BIGINT NOT NULL, '
        'digests BLOB NOT NULL, lengths INTEGER[] NOT NULL);'
    ),
    "changes": (
        'CREATE TABLE changes(natural_key VARCHAR NOT NULL, generation BIGINT NOT NULL, '
        'previous_generation BIGINT, fetched_at TIMESTAMP NOT NULL, "similarity" DOUBLE, '
        'unchanged_ratio DOUBLE, retained_ratio DOUBLE, bytes_added INTEGER, '
        'bytes_removed INTEGER, regions INTEGER, verdict VARCHAR NOT NULL, excerpt VARCHAR, '
        'measure VARCHAR, template_only BOOLEAN, template_edit VARCHAR);'
    ),
    "fetches": (
        'CREATE TABLE fetches(natural_key VARCHAR NOT NULL, fetched_at TIMESTAMP NOT NULL, '
        'content_digest BLOB NOT NULL, run INTEGER NOT NULL, "sequence" BIGINT NOT NULL);'
    ),
    "page_runs": (
        'CREATE TABLE page_runs(natural_key VARCHAR NOT NULL, run INTEGER NOT NULL, '
        'fetched_at TIMESTAMP NOT NULL, content_digest BLOB NOT NULL);'
    ),
    "change_words": (
        'CREATE TABLE change_words(natural_key VARCHAR NOT NULL, generation BIGINT NOT NULL, '
        'run INTEGER NOT NULL, added_text VARCHAR USING COMPRESSION ZSTD, '
        'removed_text VARCHAR USING COMPRESSION ZSTD, '
        'added_words VARCHAR USING COMPRESSION Uncompressed, '
        'removed_words VARCHAR USING COMPRESSION Uncompressed);'
    ),
}
T = datetime(2024, 5, 1, 12, 30)
ROWS = {
    "pages": PagesRow("https://a.example/", "https://a.example/", "a.example", None, 20240501123000, T, T, T,
                      etag='"v1"', last_modified=None),
    "generations": GenerationsRow("https://a.example/", 20240501123000, T, b"\x01" * 16, 11, 1,
                                  text="Grüße, Welt".encode(), first_run=1),
    "chunk_lists": ChunkListsRow("https://a.example/", 20240501123000, b"\x02" * 16, [11]),
    "changes": ChangesRow("https://a.example/", 20240501123000, None, T, None, None, None, 11, 0, 0, "new",
                          "Grüße, Welt", None),
    "fetches": FetchesRow("https://a.example/", T, b"\x01" * 16, 1, 7),
    "page_runs": PageRunsRow("https://a.example/", 1, T, b"\x01" * 16),
    "change_words": ChangeWordsRow("https://a.example/", 20240501123000, 1, "Welt", "", " welt ", ""),
}


@pytest.fixture(scope="module")
def connection(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("rows") / "rows.duckdb")
    store.create()  # made whole, schema and all, as a first write makes it
    with duckdb.connect(str(store.path)) as connection:
        yield connection


@pytest.mark.parametrize("table", sorted(LAYOUT))
def test_the_tables_made_from_the_rows_keep_the_stores_layout(connection, table):
    found = connection.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [table]).fetchall()
    assert found == [(LAYOUT[table],)]


@pytest.mark.parametrize("table", sorted(ROWS))
def test_a_row_appends_to_its_table_as_it_was_built(connection, table):
    row = ROWS[table]
    names = ", ".join(row._fields)
    connection.register("appended", arrow_table(type(row), [row]))
    connection.execute("BEGIN TRANSACTION")
    try:
        connection.execute(f"INSERT INTO {table} ({names}) SELECT * FROM appended")
        (stored,) = connection.execute(f"SELECT {names} FROM {table}").fetchall()
    finally:
        connection.execute("ROLLBACK")
        connection.unregister("appended")
    expected = [value.decode() if isinstance(value, bytes) and column.from_utf8 else value
                for value, column in zip(row, columns(type(row)))]
    assert list(stored) == expected


def test_an_empty_batch_is_a_table_of_the_rows_columns():
    table = arrow_table(GenerationsRow, [])
    assert table.num_rows == 0 and table.column_names == list(GenerationsRow._fields)


def test_a_field_without_an_arrow_type_is_refused():
    class Untyped(NamedTuple):
        natural_key: str
        generation: Int64

    with pytest.raises(TypeError, match="natural_key"):
        columns(Untyped)
