"""Every row of a store's data tables, for tests that compare two stores row for row."""

from __future__ import annotations

import duckdb

from cdc.store import TABLES


def store_rows(path, tables=TABLES) -> dict[str, list[tuple]]:
    """The rows of each table in `tables`, in a stable order."""
    with duckdb.connect(str(path), read_only=True) as connection:
        return {table: sorted(connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                for table in tables}
