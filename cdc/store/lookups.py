"""Query helpers the writer and the reads share: lookups by key in bounded groups of bound
parameters, Arrow tables registered for one statement, the one row of a query, and the
statements of the writer that touch a set of pages (`_for_keys`, `_gather`): by key, through
the index, where the table is large next to the set, else in one scan.

Values are always bound parameters; table contents arrive in bulk as Arrow tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress

import duckdb
import pyarrow as pa

KEYS_PER_LOOKUP = 256
# A statement over a set of pages looks them up by key, through the natural_key index, while
# the table holds more than this many rows per key; else it joins the whole table with the
# keys, in one scan. A lookup costs about as much as scanning this many rows of each table,
# as measured on a store of 1,000,000 pages (`benchmarks/store_scale.py`, 256 keys, a warm
# file): a few hundred µs a key for each, where a scan of `generations` reads every text and
# a scan of the others only narrow rows. So a batch's pages are looked up in `generations`
# from a few hundred pages a batch on, and in the other tables in stores of several million.
LOOKUP_ROWS_PER_KEY = {"generations": 100, "pages": 1000, "changes": 3000, "chunk_lists": 3000}


def _key_table(keys: Sequence[str]) -> pa.Table:
    return pa.table({"natural_key": pa.array(list(keys), pa.string())})


@contextmanager
def _registered(connection: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> Iterator[None]:
    """`table` readable as `name` within the block. Where the block failed, the error seen is
    its own: a transaction it aborted refuses the unregister too, whose error hid the cause."""
    connection.register(name, table)
    try:
        yield
    except BaseException:
        with suppress(duckdb.Error):
            connection.unregister(name)
        raise
    connection.unregister(name)


def _by_keys(connection: duckdb.DuckDBPyConnection, query: str, keys: Sequence[str],
             wanted: Callable[[tuple], bool] | None = None) -> list[tuple]:
    """The rows of `query` for `keys`, asked `KEYS_PER_LOOKUP` at a time: `{keys}` in the
    query becomes that many bound parameters. `wanted`, if given, picks the rows kept, group
    by group, so rows read only to be dropped never pile up."""
    keys = list(keys)
    rows: list[tuple] = []
    for start in range(0, len(keys), KEYS_PER_LOOKUP):
        part = keys[start:start + KEYS_PER_LOOKUP]
        found = connection.execute(query.format(keys=", ".join("?" * len(part))), part).fetchall()
        rows += found if wanted is None else filter(wanted, found)
    return rows


def _by_key_pairs(connection: duckdb.DuckDBPyConnection, query: str,
                  wanted: dict[str, set[int]]) -> list[tuple]:
    """The rows of `query` (its first two columns: natural_key, generation) for the wanted
    generations of each page, asked `KEYS_PER_LOOKUP` pages at a time through the key index:
    `{keys}` becomes the group's keys and `{pairs}` its (natural_key, generation) pairs, as
    bound parameters. The query filters the table by `natural_key IN ({keys})` alone and
    picks the generations with `(natural_key, generation) IN ({pairs})`: DuckDB uses the index
    only for a scan with one filter, and a filter on one more column (`generation IN (...)`,
    `text IS NOT NULL`) it pushes into the scan too, which then reads the whole table. A
    filter on two columns stays above the scan, on the rows the index found (DuckDB reads
    every column asked for of each of those)."""
    keys = sorted(key for key, generations in wanted.items() if generations)
    rows: list[tuple] = []
    for start in range(0, len(keys), KEYS_PER_LOOKUP):
        part = keys[start:start + KEYS_PER_LOOKUP]
        pairs = [(key, generation) for key in part for generation in sorted(wanted[key])]
        found = connection.execute(query.format(keys=", ".join("?" * len(part)),
                                                pairs=", ".join(["(?, ?)"] * len(pairs))),
                                   [*part, *(value for pair in pairs for value in pair)])
        rows += found.fetchall()
    return rows


def _rows_at(connection: duckdb.DuckDBPyConnection, table: str, columns: str,
             places: dict[tuple[str, int], int]) -> list[tuple]:
    """(natural_key, generation, `columns`...) of the rows of `table` (a table of this
    package; `columns` its SQL) whose row ids `places` gives, by (natural_key, generation):
    the rows a narrow look-up by key found, read whole. DuckDB fetches the rows of `rowid =
    ANY(?)` alone: on the 100,000-page synthetic store, 200 generations' texts in 3 ms, where
    `rowid IN (...)` scanned every text (200 ms) and a look-up of the pages by key read the
    text of each of their generations (19 ms, and more for pages of many). A row read is kept
    only if its pair is asked for, and a pair whose row moved (a writer between the look-up
    and this) is looked up by key: never another row's columns."""
    if not places:
        return []
    rows = [row for row in connection.execute(
        f"SELECT natural_key, generation, {columns} FROM {table} WHERE rowid = ANY(?)",
        [sorted(places.values())]).fetchall() if (row[0], row[1]) in places]
    missing: dict[str, set[int]] = {}
    for key, generation in places.keys() - {(row[0], row[1]) for row in rows}:
        missing.setdefault(key, set()).add(generation)
    if missing:
        rows += _by_key_pairs(connection, f"""SELECT natural_key, generation, {columns} FROM {table}
                                              WHERE natural_key IN ({{keys}})
                                              AND (natural_key, generation) IN ({{pairs}})""", missing)
    return rows


def _table_rows(connection: duckdb.DuckDBPyConnection, table: str) -> int:
    """About how many rows `table` has (DuckDB's own count, from its storage: no scan)."""
    row = _one(connection.execute(
        "SELECT estimated_size FROM duckdb_tables() WHERE table_name = ? AND schema_name = 'main' "
        "AND database_name = current_database()", [table]))
    return row[0] if row else 0


def _looked_up(connection: duckdb.DuckDBPyConnection, table: str, keys: Sequence[str]) -> bool:
    """Whether a statement over `keys` of `table` pays to look them up by key (`LOOKUP_ROWS_PER_KEY`)."""
    return _table_rows(connection, table) > LOOKUP_ROWS_PER_KEY[table] * len(keys)


def _for_keys(connection: duckdb.DuckDBPyConnection, statement: str, keys: Sequence[str],
              table: str, values: Sequence[object] = ()) -> list[tuple]:
    """Run `statement` for the pages `keys` of `table`, and return its rows. `{keys}` in the
    statement (maybe more than once) stands for the keys: bound parameters,
    `KEYS_PER_LOOKUP` at a time, which DuckDB answers from the natural_key index (its ART
    index serves `natural_key IN (constants)`, not a join), while `table` is large next to
    the keys (`_looked_up`); else the keys as one registered Arrow table, joined in one scan.
    Each group's statement must touch only that group's pages (a window by page, an update of
    those pages), so that the groups add up to the whole. `values` bind the statement's
    other parameters, which all come after its last `{keys}`."""
    keys = list(dict.fromkeys(keys))
    if not keys:
        return []
    if not _looked_up(connection, table, keys):
        with _registered(connection, "statement_keys", _key_table(keys)):
            everything = statement.format(keys="SELECT natural_key FROM statement_keys")
            return connection.execute(everything, list(values)).fetchall()
    rows: list[tuple] = []
    uses = statement.count("{keys}")
    with _index_joins(connection):
        for start in range(0, len(keys), KEYS_PER_LOOKUP):
            part = keys[start:start + KEYS_PER_LOOKUP]
            rows += connection.execute(statement.format(keys=", ".join("?" * len(part))),
                                       [*(part * uses), *values]).fetchall()
    return rows


@contextmanager
def _index_joins(connection: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Statements that look their table up by key while they join it with a batch's rows on
    more columns (`UPDATE generations ... FROM expired e WHERE ... generation = e.generation`):
    DuckDB's join filter pushdown adds a filter on those columns to the table's scan, and a
    scan of more than one filter does not use the index, but reads the whole table. Without
    it, the scan finds the keys' rows in the index and the join picks among them. (Not reset
    after an error: the transaction is aborted, and its connection closed with it.)"""
    connection.execute("SET disabled_optimizers = 'join_filter_pushdown'")
    yield
    connection.execute("RESET disabled_optimizers")


def _gather(connection: duckdb.DuckDBPyConnection, name: str, query: str, keys: Sequence[str] | None,
            table: str) -> None:
    """A temporary table `name` of the rows of `query` for the pages `keys` of `table`
    (`_for_keys`), or for every page of the store (`keys` None)."""
    connection.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {query.format(keys='NULL')}")
    if keys is None:
        connection.execute(f"INSERT INTO {name} {query.format(keys='SELECT natural_key FROM pages')}")
    else:
        _for_keys(connection, f"INSERT INTO {name} {query}", keys, table)


def _keys_of(connection: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """The distinct natural keys of a (temporary) table, in key order."""
    return [key for (key,) in connection.execute(
        f"SELECT DISTINCT natural_key FROM {table} ORDER BY 1").fetchall()]


def _one(result: duckdb.DuckDBPyConnection) -> tuple | None:
    """The first row of a query, reading the result to its end (DuckDB wants it finished)."""
    rows = result.fetchall()
    return rows[0] if rows else None
