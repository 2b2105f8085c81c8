"""Every row of a store's data tables, for tests that compare two stores row for row, and
the invariants a store keeps however its writers end (killed, say)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from cdc.store import TABLES, Store
from cdc.store.schema import CONTENT_CHUNKS_VIEW, DEAD_TEXT


def store_rows(path, tables=TABLES) -> dict[str, list[tuple]]:
    """The rows of each table in `tables`, in a stable order."""
    with duckdb.connect(str(path), read_only=True) as connection:
        return {table: sorted(connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                for table in tables}


def assert_same_rows(actual: Path, expected: Path, runs: bool = True) -> None:
    """Every table of `actual` holds exactly the rows of `expected`, every column compared;
    but for the run that first saw each generation, with `runs` False (stores made by other
    runs: a run stopped and started again, writers that started in another order)."""
    got, want = (store_rows(path, ("meta", *TABLES)) for path in (actual, expected))
    for rows in (got, want):  # the trimmed text still in the file: the file's, not the data's
        rows["meta"] = [row for row in rows["meta"] if row[0] != DEAD_TEXT]
    if not runs:
        got, want = without_runs(got), without_runs(want)
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
        "retained generation without its chunk list": """
            SELECT count(*) FROM generations g ANTI JOIN chunk_lists l USING (natural_key, generation)
            WHERE g.text IS NOT NULL""",
        "chunk list of a generation without its text": """
            SELECT count(*) FROM chunk_lists l ANTI JOIN (SELECT * FROM generations WHERE text IS NOT NULL) g
            USING (natural_key, generation)""",
        "page whose latest_generation is not its last generation": """
            SELECT count(*) FROM pages p
            LEFT JOIN (SELECT natural_key, max(generation) AS last, max(fetched_at) AS fetched
                       FROM generations GROUP BY natural_key) g USING (natural_key)
            WHERE g.last IS NULL OR p.latest_generation <> g.last OR p.last_fetched <> g.fetched""",
        "change not measured against the generation before it": """
            SELECT count(*) FROM changes c JOIN (
                SELECT natural_key, generation, fetched_at,
                       lag(generation) OVER (PARTITION BY natural_key ORDER BY generation) AS before,
                       lag(fetched_at) OVER (PARTITION BY natural_key ORDER BY generation) AS before_at
                FROM generations) g USING (natural_key, generation)
            WHERE c.previous_generation IS DISTINCT FROM g.before OR g.before_at >= g.fetched_at""",
        "fetch without a generation of its content": """
            SELECT count(*) FROM fetches f ANTI JOIN generations g USING (natural_key, content_digest)""",
        "generation without its page": """
            SELECT count(*) FROM generations g ANTI JOIN pages p USING (natural_key)""",
        "words of a change that is not stored": """
            SELECT count(*) FROM change_words w ANTI JOIN changes c USING (natural_key, generation)""",
        "words of a change not measured with exact edits": """
            SELECT count(*) FROM change_words w JOIN changes c USING (natural_key, generation)
            WHERE c.measure IS NULL OR c.measure NOT IN ('edits', 'own_edits')""",
        "index rows of no change's words": """
            SELECT count(*) FROM change_tokens t ANTI JOIN change_words w USING (natural_key, generation)""",
        "words of a change not in the index": """
            SELECT count(*) FROM change_words w ANTI JOIN change_tokens t USING (natural_key, generation)
            WHERE trim(w.added_words || w.removed_words) <> ''""",
    }
    with Store(path).reading() as connection:
        return {name: connection.execute(query).fetchone()[0] for name, query in checks.items()}


# The chunk table of schema 1 (round 1 and the first block-aligned chunks), as it was made.
SCHEMA_1_CHUNKS = [
    """CREATE TABLE content_chunks (
        natural_key VARCHAR NOT NULL,
        generation INTEGER NOT NULL,
        chunk_index INTEGER NOT NULL,
        digest BLOB NOT NULL,
        length INTEGER NOT NULL
    )""",
    "CREATE INDEX content_chunks_key ON content_chunks (natural_key)",
    "CREATE INDEX content_chunks_digest_idx ON content_chunks (digest)",
]


# Schema 2, as cdc before capture-time generation numbers made it: generations numbered 1, 2,
# 3 per page, no fetches, runs, first runs or measures.
SCHEMA_2 = [
    """CREATE TABLE pages (natural_key VARCHAR NOT NULL, url VARCHAR NOT NULL, host VARCHAR NOT NULL,
        retention_class VARCHAR, latest_generation INTEGER NOT NULL, first_seen TIMESTAMP NOT NULL,
        last_fetched TIMESTAMP NOT NULL, last_checked TIMESTAMP NOT NULL, etag VARCHAR,
        last_modified VARCHAR)""",
    """CREATE TABLE generations (natural_key VARCHAR NOT NULL, generation INTEGER NOT NULL,
        fetched_at TIMESTAMP NOT NULL, content_digest BLOB NOT NULL, length INTEGER NOT NULL,
        chunk_count INTEGER NOT NULL, text VARCHAR USING COMPRESSION uncompressed)""",
    """CREATE TABLE chunk_lists (natural_key VARCHAR NOT NULL, generation INTEGER NOT NULL,
        digests BLOB NOT NULL, lengths INTEGER[] NOT NULL)""",
    """CREATE TABLE changes (natural_key VARCHAR NOT NULL, generation INTEGER NOT NULL,
        previous_generation INTEGER, fetched_at TIMESTAMP NOT NULL, similarity DOUBLE,
        unchanged_ratio DOUBLE, retained_ratio DOUBLE, bytes_added INTEGER NOT NULL,
        bytes_removed INTEGER NOT NULL, regions INTEGER NOT NULL, verdict VARCHAR NOT NULL,
        excerpt VARCHAR)""",
]
NUMBERED = """CREATE TEMP TABLE numbered AS SELECT natural_key, generation AS id,
    row_number() OVER (PARTITION BY natural_key ORDER BY generation)::INTEGER AS n FROM generations"""
SCHEMA_2_ROWS = [
    """INSERT INTO pages SELECT p.natural_key, url, host, retention_class, n.n, first_seen, last_fetched,
        last_checked, etag, last_modified FROM new_pages p
        JOIN numbered n ON n.natural_key = p.natural_key AND n.id = p.latest_generation""",
    """INSERT INTO generations SELECT g.natural_key, n.n, fetched_at, content_digest, length,
        chunk_count, text FROM new_generations g
        JOIN numbered n ON n.natural_key = g.natural_key AND n.id = g.generation""",
    """INSERT INTO chunk_lists SELECT c.natural_key, n.n, digests, lengths FROM new_chunk_lists c
        JOIN numbered n ON n.natural_key = c.natural_key AND n.id = c.generation""",
    """INSERT INTO changes SELECT c.natural_key, n.n, b.n, c.fetched_at, similarity, unchanged_ratio,
        retained_ratio, bytes_added, bytes_removed, regions, verdict, excerpt FROM new_changes c
        JOIN numbered n ON n.natural_key = c.natural_key AND n.id = c.generation
        LEFT JOIN numbered b ON b.natural_key = c.natural_key AND b.id = c.previous_generation""",
]


def as_schema_4(path: Path) -> None:
    """Rewrite a store in the layout of schema 4: no SURT keys, no changes' words, no watches
    and no annotations, as the cdc of stored templates made it."""
    with duckdb.connect(str(path)) as connection:
        connection.execute("DROP INDEX IF EXISTS change_words_key")
        for table in ("change_words", "change_tokens", "watches", "watch_hits", "annotations"):
            connection.execute(f"DROP TABLE IF EXISTS {table}")
        indexes = connection.execute("SELECT sql FROM duckdb_indexes() WHERE table_name = 'pages'").fetchall()
        for (statement,) in indexes:  # DuckDB drops no column of a table under an index
            connection.execute(f"DROP INDEX {statement.split()[2]}")
        connection.execute("ALTER TABLE pages DROP COLUMN surt")
        for (statement,) in indexes:
            connection.execute(statement)
        connection.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
        connection.execute("CHECKPOINT")


def as_schema_3(path: Path) -> None:
    """Rewrite a store in the layout of schema 3: no stored templates or template-only flags,
    as the cdc of crawl runs made it."""
    as_schema_4(path)
    with duckdb.connect(str(path)) as connection:
        indexes = connection.execute(
            "SELECT sql FROM duckdb_indexes() WHERE table_name = 'changes'").fetchall()
        for (statement,) in indexes:  # DuckDB drops no column of a table under an index
            connection.execute(f"DROP INDEX {statement.split()[2]}")
        connection.execute("ALTER TABLE changes DROP COLUMN template_only")
        connection.execute("ALTER TABLE changes DROP COLUMN template_edit")
        for (statement,) in indexes:
            connection.execute(statement)
        connection.execute("DROP TABLE host_templates")
        connection.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        connection.execute("CHECKPOINT")


def as_schema_2(path: Path) -> None:
    """Rewrite a store in the layout of schema 2: generations numbered 1, 2, 3 per page in
    their order, and no fetches, runs, first runs, measures or templates, as cdc made it before."""
    as_schema_4(path)
    with duckdb.connect(str(path)) as connection:
        connection.execute(NUMBERED)
        connection.execute("DROP VIEW content_chunks")
        for (name,) in connection.execute("SELECT index_name FROM duckdb_indexes()").fetchall():
            connection.execute(f"DROP INDEX {name}")
        for table in ("pages", "generations", "chunk_lists", "changes"):
            connection.execute(f"ALTER TABLE {table} RENAME TO new_{table}")
        for statement in SCHEMA_2 + SCHEMA_2_ROWS:
            connection.execute(statement)
        for table in ("new_pages", "new_generations", "new_chunk_lists", "new_changes", "fetches", "runs",
                      "page_runs", "host_templates"):
            connection.execute(f"DROP TABLE {table}")
        connection.execute(CONTENT_CHUNKS_VIEW)
        for name in ("pages", "generations", "chunk_lists", "changes"):
            connection.execute(f"CREATE INDEX {name}_key ON {name} (natural_key)")
        connection.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        connection.execute("CHECKPOINT")


def as_schema_1(path: Path) -> None:
    """Rewrite a store in the layout of schema 1: schema 2's, with a row per chunk in a
    `content_chunks` table, as the cdc before list rows made it (the same rows, by the view)."""
    as_schema_2(path)
    with duckdb.connect(str(path)) as connection:
        rows = connection.execute("SELECT * FROM content_chunks ORDER BY ALL").fetchall()
        connection.execute("DROP VIEW content_chunks")
        connection.execute("DROP INDEX chunk_lists_key")
        connection.execute("DROP TABLE chunk_lists")
        for statement in SCHEMA_1_CHUNKS:
            connection.execute(statement)
        if rows:
            connection.executemany("INSERT INTO content_chunks VALUES (?, ?, ?, ?, ?)", rows)
        connection.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        connection.execute("CHECKPOINT")


def without_runs(tables: dict[str, list[tuple]], measures: bool = False) -> dict[str, list[tuple]]:
    """Rows with the run that first saw each generation left out, and with `measures` how
    each change was measured too: what a store upgraded from before runs holds the same as
    one made now."""
    drop = {"generations": 7, **({"changes": 12} if measures else {})}
    return {name: [row[:drop[name]] + row[drop[name] + 1:] if name in drop else row for row in rows]
            for name, rows in tables.items()}


def layout(path: Path) -> tuple[str, dict[str, str]]:
    """The store's schema version and the type of each of its chunk objects (table, view)."""
    with duckdb.connect(str(path), read_only=True) as connection:
        version = connection.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        kinds = dict(connection.execute("""
            SELECT table_name, table_type FROM information_schema.tables
            WHERE table_name IN ('content_chunks', 'chunk_lists')""").fetchall())
    return version, kinds
