"""Every row of a store's data tables, for tests that compare two stores row for row, and
the invariants a store keeps however its writers end (killed, say)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from cdc.store import TABLES, Store


def store_rows(path, tables=TABLES) -> dict[str, list[tuple]]:
    """The rows of each table in `tables`, in a stable order."""
    with duckdb.connect(str(path), read_only=True) as connection:
        return {table: sorted(connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                for table in tables}


def assert_same_rows(actual: Path, expected: Path) -> None:
    """Every table of `actual` holds exactly the rows of `expected`, every column compared."""
    got, want = (store_rows(path, ("meta", *TABLES)) for path in (actual, expected))
    for table in want:
        a, b = got[table], want[table]
        if a != b:
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            shown = [repr(rows[first])[:400] if first < len(rows) else "(none)" for rows in (a, b)]
            pytest.fail(f"{table}: {len(a)} rows, expected {len(b)}; first difference at row {first}:\n"
                        f"  got      {shown[0]}\n  expected {shown[1]}")


def without_file_bytes(stats: dict[str, int]) -> dict[str, int]:
    return {name: value for name, value in stats.items() if name != "file_bytes"}


def consistency_problems(path: Path) -> dict[str, int]:
    """Counts of rows that break the store's invariants; all zero in a consistent store."""
    checks = {
        "generation without change": """
            SELECT count(*) FROM generations g ANTI JOIN changes c USING (natural_key, generation)""",
        "change without generation": """
            SELECT count(*) FROM changes c ANTI JOIN generations g USING (natural_key, generation)""",
        "retained generation without all its chunks": """
            SELECT count(*) FROM generations g
            WHERE g.text IS NOT NULL AND g.chunk_count <> (
                SELECT count(*) FROM content_chunks c
                WHERE c.natural_key = g.natural_key AND c.generation = g.generation)""",
        "chunk of a generation that is not retained": """
            SELECT count(*) FROM content_chunks c
            ANTI JOIN (SELECT * FROM generations WHERE text IS NOT NULL) g USING (natural_key, generation)""",
        "page whose latest_generation is not its last generation": """
            SELECT count(*) FROM pages p
            LEFT JOIN (SELECT natural_key, max(generation) AS last, count(*) AS n
                       FROM generations GROUP BY natural_key) g USING (natural_key)
            WHERE g.last IS NULL OR p.latest_generation <> g.last OR g.n <> g.last""",
        "generation without its page": """
            SELECT count(*) FROM generations g ANTI JOIN pages p USING (natural_key)""",
    }
    with Store(path).reading() as connection:
        return {name: connection.execute(query).fetchone()[0] for name, query in checks.items()}
