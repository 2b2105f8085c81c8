"""Query helpers the writer and the reads share: lookups by key in bounded groups of bound
parameters, Arrow tables registered for one statement, the one row of a query.

Values are always bound parameters; table contents arrive in bulk as Arrow tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import duckdb
import pyarrow as pa

KEYS_PER_LOOKUP = 256


def _key_table(keys: Sequence[str]) -> pa.Table:
    return pa.table({"natural_key": pa.array(list(keys), pa.string())})


@contextmanager
def _registered(connection: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> Iterator[None]:
    connection.register(name, table)
    try:
        yield
    finally:
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
    `{keys}` and `{generations}` become bound parameters, and rows of a page's other
    generations that the group's numbers also match are dropped here."""
    keys = sorted(key for key, generations in wanted.items() if generations)
    rows: list[tuple] = []
    for start in range(0, len(keys), KEYS_PER_LOOKUP):
        part = keys[start:start + KEYS_PER_LOOKUP]
        numbers = sorted({generation for key in part for generation in wanted[key]})
        found = connection.execute(query.format(keys=", ".join("?" * len(part)),
                                                generations=", ".join("?" * len(numbers))), [*part, *numbers])
        rows += [row for row in found.fetchall() if row[1] in wanted[row[0]]]
    return rows


def _one(result: duckdb.DuckDBPyConnection) -> tuple | None:
    """The first row of a query, reading the result to its end (DuckDB wants it finished)."""
    rows = result.fetchall()
    return rows[0] if rows else None
