"""The store's layout: its tables, the `content_chunks` view and the indexes, the schema
version, the connection settings, and the check and upgrade of a file's schema and meta rows.

Tables (all times UTC):

- `meta`: schema version, the chunker `SPEC`, the retention policy, and the bytes of text trimmed
  since the file was last compacted (`dead_text`, `cdc.store.runs`).
- `pages`: one row per natural key (canonical URL): host, last URL seen, retention class,
  latest generation, when it was first seen, last fetched with new content, last checked;
  and its SURT (`cdc.core.urls.surt_key`), the key a crawl's CDX index sorts captures by.
- `generations`: one row per distinct version of a page: fetched_at, content digest, length,
  chunk count, and the normalised text while the generation is retained. The text is stored
  uncompressed: retention bounds its size, and an erasure can then be checked byte for byte
  in the file (compressed, a page's sentences are not visible to such a check).
- `chunk_lists`: one row per retained generation: its chunks in order, as their 16-byte
  digests end to end in one BLOB (`digests`) and a list of their lengths. Block-aligned
  chunks give about 75 chunks a page: a row per chunk made the single writer append 75 rows
  (and 150 index entries) per page version; a list row is one row and one index entry, and
  one BLOB of digests is written three times as fast as a list of 75 BLOBs.
- `content_chunks`: a view of `chunk_lists` with the seed's columns (natural_key,
  generation, chunk_index, digest, length), a row per chunk, for queries written to the
  seed's schema. The store's own queries read `chunk_lists`.
- `changes`: one row per generation, kept for good (it holds no content beyond a short
  excerpt): the measures of the change from the previous generation, its verdict, and how it
  was measured (`measure`: edits, chunks, or digests when the previous text was gone; own_edits), and
  whether it is template-only (`template_only`) and which edit of the template it makes
  (`template_edit`), both kept by `cdc.store.templates`.
- `host_templates`: one row per digest of a host's template (the boilerplate rule over every
  retained generation), as of the last run's end: what `template_only` is judged by.
- `fetches`: one row per fetch of a page (time, content digest, the run that brought it and
  its place in that run's input), kept for good: a page's history is its fetches in fetch
  order, so a fetch that arrives late is put in its place (`cdc.ingest.versions`).
- `runs`: one row per ingest or fetch run: label, start and end, inputs, counts.
- `page_runs`: one row per page and run that saw it: the latest fetch of the page in that run
  and its content digest. What changed on a site between two runs is a join of two runs' rows.
- `annotations`: one row per change an analyst judged (significant, noise, unsure), keyed by
  page and generation, with a note, who and when (`cdc.store.annotations`); kept for good,
  erased with the page.
- `change_words`: one row per change measured with exact edits that added or removed words:
  the text and the words of each side (`cdc.core.editwords`), and the run that measured it. Kept
  with the change row (retention trims texts, not what a change said), erased with the page.
  The words are uncompressed, as the texts are, so an erasure can be checked in the file; the
  text as on the page (what excerpts show) is compressed (zstd): half the table's bytes.
- `change_tokens`: the index a search reads (`cdc.store.wordindex`): one row per distinct
  token (`cdc.core.editwords`) of each side of each `change_words` row, with its run, side
  and places in the side's words; each batch's rows appended sorted by token, so DuckDB's
  zone maps find a token reading about one row group a batch. Erased with its page.
- `watches`: one row per saved search (`cdc.analyst.search.Watch`): its name and query as JSON.
- `watch_hits`: one row per hit of a watch at a run's end: the run, the change and the side.
- `run_watches`, `watch_matches`: the watches a run started with, and the sides of its changes
  that hold their phrases, found as its batches were written (`cdc.store.indexwriter`); read
  and deleted by the run's end that records its hits.

A generation's number is its capture time, YYYYMMDDhhmmss (`cdc.core.captures.capture_id`), so
numbers order as fetch times do and never come to name another version.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb
import pyarrow as pa

from cdc.errors import SpecMismatchError, StoreError
from cdc.store import rows as stored_rows
from cdc.store.annotations import ANNOTATIONS_TABLE
from cdc.store.layout import _chunks_of
from cdc.store.writer import RetentionPolicy

# 1: a row per chunk in the table `content_chunks` (round 1 and the first block-aligned
#    chunks); 2: a list row per generation in `chunk_lists`, `content_chunks` a view of it;
# 3: generations numbered by capture time, the fetches and runs recorded; 4: the hosts'
#    templates and the change rows' template-only flags stored; 5: round 3's additions (each
#    page's SURT key, the analysts' annotations, the changes' words and the watches), each an
#    idempotent entry of `VERSION_5`.
SCHEMA_VERSION = 5
# The meta row counting the bytes of text trimmed since the file was last compacted (`cdc.store.runs`).
DEAD_TEXT = "dead_text"
# DuckDB's own default is 80% of the machine's memory, and it keeps what it reads cached:
# a large ingest grew past 8 GB. Beyond this it spills to disk.
CONNECTION_CONFIG = {"memory_limit": "1GB"}
# Writers differ in two settings:
# - Ingest looks pages up by key, a few hundred keys per query (KEYS_PER_LOOKUP). DuckDB
#   answers such a query from the natural_key index only while it matches fewer rows than
#   `index_scan_max_count` (2048 by default), else it scans the whole table, on the
#   generations table with every text: a writer raises the bound, as its lookups are by key.
# - No merging of row groups ("vacuum") at checkpoints. DuckDB merges a table's last row
#   groups whenever they add up to twice the one before them, rewriting them in memory: with
#   the generations' texts, that put peaks of 114 MB on a 1 GB WARC ingest, and the merges
#   grow with the store (up to 122,880 rows of text). Unmerged, memory stays flat and ingest
#   is faster; the cost is a row group per table per batch: a file up to a quarter larger and
#   scans up to 1.8x slower on a store built in many batches, until `compact()`.
# - One thread: a writer's batches are small, and on a cluster ingest it shares the machine
#   with the workers, which its second thread only slowed. A run's end, when the workers are
#   done, takes every core (`Store.finish_run`).
# - A checkpoint at every commit. A writer's connection lasts one transaction, and closing
#   it checkpoints anyway; checkpointing at the commit skips writing the rows to the WAL
#   first (a cluster run's 8,117-row transaction: 54 ms instead of 63, with the connection).
WRITER_CONFIG = {**CONNECTION_CONFIG, "index_scan_max_count": 1 << 20, "max_vacuum_tasks": 0, "threads": 1,
                 "checkpoint_threshold": "0B"}


CHUNK_LISTS_TABLE = stored_rows.create_table("chunk_lists", stored_rows.ChunkListsRow)

# The seed's `content_chunks`, a row per chunk, from the list rows.
CONTENT_CHUNKS_VIEW = f"""CREATE VIEW IF NOT EXISTS content_chunks AS
    SELECT natural_key, generation, chunk_index, digest, length FROM {_chunks_of("chunk_lists")}"""

# Search (`cdc.analyst.search`): the words each change added and removed, and the saved searches
# with their hits per run.
SEARCH_TABLES = [
    stored_rows.create_table("change_words", stored_rows.ChangeWordsRow),
    # The index of `change_words`: a row per distinct token of each side of each change
    # (`cdc.store.wordindex.index_rows`), appended a batch at a time in token order.
    """CREATE TABLE IF NOT EXISTS change_tokens (
        token VARCHAR NOT NULL,
        natural_key VARCHAR NOT NULL,
        generation BIGINT NOT NULL,
        run INTEGER NOT NULL,
        added BOOLEAN NOT NULL,
        positions INTEGER[] NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS watches (
        name VARCHAR NOT NULL,
        query VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS watch_hits (
        name VARCHAR NOT NULL,
        run INTEGER NOT NULL,
        natural_key VARCHAR NOT NULL,
        generation BIGINT NOT NULL,
        side VARCHAR NOT NULL
    )""",
]
# The watches' matches made as a run's batches are written (`cdc.store.indexwriter`): the
# watches each run started with, and the sides of its changes that hold their phrases, kept
# until the run's end records them as hits. Made if missing at every first write to a file,
# so a store of this schema made before them gets them then.
WATCH_MATCH_TABLES = [
    """CREATE TABLE IF NOT EXISTS run_watches (
        run INTEGER NOT NULL,
        name VARCHAR NOT NULL,
        query VARCHAR NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS watch_matches (
        name VARCHAR NOT NULL,
        run INTEGER NOT NULL,
        natural_key VARCHAR NOT NULL,
        generation BIGINT NOT NULL,
        added BOOLEAN NOT NULL
    )""",
]

# The tables of the rows ingest writes are made from those rows' definitions (`cdc.store.rows`):
# their columns, types and order are the fields', so the Arrow tables appended match them.
SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR NOT NULL, value VARCHAR NOT NULL)",
    stored_rows.create_table("pages", stored_rows.PagesRow),
    stored_rows.create_table("generations", stored_rows.GenerationsRow),
    CHUNK_LISTS_TABLE,
    CONTENT_CHUNKS_VIEW,
    stored_rows.create_table("changes", stored_rows.ChangesRow, stored_rows.TemplateFlags),
    """CREATE TABLE IF NOT EXISTS host_templates (
        host VARCHAR NOT NULL,
        digest BLOB NOT NULL
    )""",
    stored_rows.create_table("fetches", stored_rows.FetchesRow),
    """CREATE TABLE IF NOT EXISTS runs (
        run INTEGER NOT NULL,
        label VARCHAR NOT NULL,
        started_at TIMESTAMP NOT NULL,
        ended_at TIMESTAMP,
        inputs VARCHAR[] NOT NULL,
        records BIGINT,
        pages BIGINT,
        new_pages BIGINT,
        changed BIGINT,
        unchanged BIGINT,
        older BIGINT,
        skipped BIGINT,
        failed BIGINT
    )""",
    stored_rows.create_table("page_runs", stored_rows.PageRunsRow),
    ANNOTATIONS_TABLE,
    *SEARCH_TABLES,
    *WATCH_MATCH_TABLES,
]

# Every per-page lookup is an equality on natural_key, the one predicate DuckDB answers from
# an ART index (a generation filter is applied in Python: a page has few generations).
# The seed's digest index is gone with the row per chunk: a list cannot be indexed, and
# finding the pages that hold a digest scans the lists (`pages_with_digest`), as the
# boilerplate counts scan them anyway.
INDEXES = [
    "CREATE INDEX IF NOT EXISTS pages_key ON pages (natural_key)",
    "CREATE INDEX IF NOT EXISTS generations_key ON generations (natural_key)",
    "CREATE INDEX IF NOT EXISTS chunk_lists_key ON chunk_lists (natural_key)",
    "CREATE INDEX IF NOT EXISTS changes_key ON changes (natural_key)",
    "CREATE INDEX IF NOT EXISTS fetches_key ON fetches (natural_key)",
    "CREATE INDEX IF NOT EXISTS change_words_key ON change_words (natural_key)",
]

# The seed's tables, as readers see them (`content_chunks` a view), and the tables that hold
# the rows (what an erasure deletes from).
TABLES = ("pages", "generations", "content_chunks", "changes")
STORED_TABLES = ("pages", "generations", "chunk_lists", "changes", "fetches", "page_runs", "annotations",
                 "change_words", "watch_hits")
# Tables that index the stored rows: erased and copied with them, not counted as rows of a page.
INDEX_TABLES = ("change_tokens", "watch_matches")

# Schema 1's chunk rows as `chunk_lists` rows, a retained generation with no chunks (an
# empty text) included, as ingest writes it.
_LISTS_OF_ROWS = """
    SELECT g.natural_key, g.generation, coalesce(c.digests, ''::BLOB) AS digests,
           coalesce(c.lengths, []::INTEGER[]) AS lengths
    FROM main.generations g LEFT JOIN (
        SELECT natural_key, generation,
               list_reduce(list(digest ORDER BY chunk_index), lambda a, b: a || b) AS digests,
               list(length ORDER BY chunk_index) AS lengths
        FROM main.content_chunks GROUP BY natural_key, generation
    ) c USING (natural_key, generation)
    WHERE g.text IS NOT NULL"""
# Schema 1 to 2, in one transaction: the chunk rows become a list row per generation.
UPGRADE_TO_LISTS = [
    CHUNK_LISTS_TABLE,
    f"INSERT INTO chunk_lists {_LISTS_OF_ROWS}",
    "DROP INDEX IF EXISTS content_chunks_digest_idx",
    "DROP INDEX IF EXISTS content_chunks_key",
    "DROP TABLE content_chunks",
    CONTENT_CHUNKS_VIEW,
    "CREATE INDEX IF NOT EXISTS chunk_lists_key ON chunk_lists (natural_key)",
    "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
]
# Schema 2 to 3: the tables whose generation numbers become capture times are made again
# under the new layout (DuckDB cannot change a column's type under an index or a view).
RENUMBERED_TABLES = ("pages", "generations", "chunk_lists", "changes")
UPGRADE_TO_CAPTURE_IDS = [
    """INSERT INTO generations SELECT g.natural_key, r.generation, g.fetched_at, g.content_digest,
           g.length, g.chunk_count, g.text, 0 FROM old_generations g
       JOIN renumbered r ON r.natural_key = g.natural_key AND r.old = g.generation""",
    """INSERT INTO chunk_lists SELECT c.natural_key, r.generation, c.digests, c.lengths FROM old_chunk_lists c
       JOIN renumbered r ON r.natural_key = c.natural_key AND r.old = c.generation""",
    """INSERT INTO changes SELECT c.natural_key, r.generation, p.generation, c.fetched_at, c.similarity,
           c.unchanged_ratio, c.retained_ratio, c.bytes_added, c.bytes_removed, c.regions, c.verdict,
           c.excerpt, NULL, NULL, NULL FROM old_changes c
       JOIN renumbered r ON r.natural_key = c.natural_key AND r.old = c.generation
       LEFT JOIN renumbered p ON p.natural_key = c.natural_key AND p.old = c.previous_generation""",
    """INSERT INTO pages SELECT p.natural_key, p.url, p.host, p.retention_class, r.generation,
           p.first_seen, p.last_fetched, p.last_checked, p.etag, p.last_modified FROM old_pages p
       JOIN renumbered r ON r.natural_key = p.natural_key AND r.old = p.latest_generation""",
    # The fetches a schema-2 store knew of: each generation's first, and the latest check.
    """INSERT INTO fetches SELECT natural_key, fetched_at, content_digest, 0, 0 FROM generations""",
    """INSERT INTO fetches SELECT p.natural_key, p.last_checked, g.content_digest, 0, 0
       FROM pages p JOIN generations g
         ON g.natural_key = p.natural_key AND g.generation = p.latest_generation
       WHERE p.last_checked > g.fetched_at""",
    """INSERT INTO runs SELECT 0, 'before runs were recorded', min(first_seen), max(last_checked), [],
           NULL, count(*), NULL, NULL, NULL, NULL, NULL, NULL FROM pages HAVING count(*) > 0""",
    # Run 0 saw every page at its latest check, so a site diff can start from it.
    """INSERT INTO page_runs SELECT p.natural_key, 0, p.last_checked, g.content_digest
       FROM pages p JOIN generations g
         ON g.natural_key = p.natural_key AND g.generation = p.latest_generation""",
    "UPDATE meta SET value = '3' WHERE key = 'schema_version'",
]
# Schema 3 to 4: the flag's column and the templates' table (both there already after a
# renumbering, which makes the tables as this cdc does); `_upgrade` then counts them.
UPGRADE_TO_TEMPLATES = [
    "ALTER TABLE changes ADD COLUMN IF NOT EXISTS template_only BOOLEAN",
    "ALTER TABLE changes ADD COLUMN IF NOT EXISTS template_edit VARCHAR",
    "UPDATE changes SET template_only = NULL, template_edit = NULL",  # every row counted anew
    next(statement for statement in SCHEMA if "host_templates" in statement),
    "UPDATE meta SET value = '4' WHERE key = 'schema_version'",
]

# Schema 4 to 5, and a new store's additions to SCHEMA: idempotent statements (a table made if
# missing, a column added if missing), so they compose in any order and a store made by any cdc
# of version 5 reads the same. Filled on upgrade by `_fill_surt_keys` and
# `Search.fill_change_words` (the words of the changes whose two texts are retained).
SURT_COLUMN = "ALTER TABLE pages ADD COLUMN IF NOT EXISTS surt VARCHAR"
VERSION_5 = [SURT_COLUMN, ANNOTATIONS_TABLE, *SEARCH_TABLES, *WATCH_MATCH_TABLES]
SURT_BATCH = 10_000  # pages given their SURT per statement on upgrade


def _fill_surt_keys(connection: duckdb.DuckDBPyConnection) -> None:
    """Give every page stored without one its SURT (`cdc.core.urls.surt_key`), as ingest gives a
    new page: about 25 us of CPU a page (`benchmarks/surt_keys.py`), 3 s for 100,000."""
    from cdc.core.urls import surt_key

    keys = [row[0] for row in connection.execute(
        "SELECT natural_key FROM pages WHERE surt IS NULL ORDER BY natural_key").fetchall()]
    for start in range(0, len(keys), SURT_BATCH):
        part = keys[start:start + SURT_BATCH]
        surts = pa.array([surt_key(key) for key in part], pa.string())
        keyed = pa.table({"natural_key": pa.array(part, pa.string()), "surt": surts})
        connection.register("page_surts", keyed)
        connection.execute("UPDATE pages SET surt = s.surt FROM page_surts s "
                           "WHERE pages.natural_key = s.natural_key")
        connection.unregister("page_surts")


SPEC_VERSIONS = re.compile(r"gear64-v(\d+)/.*/norm-v(\d+)")  # chunker and normalisation versions


def _made_earlier(stored: str | None, current: str) -> bool:
    """Whether a store's spec names older chunker or normalisation versions than `current`."""
    old, new = SPEC_VERSIONS.fullmatch(stored or ""), SPEC_VERSIONS.fullmatch(current)
    if not old or not new:
        return False
    (old_chunker, old_norm), (new_chunker, new_norm) = map(int, old.groups()), map(int, new.groups())
    return (old_chunker <= new_chunker and old_norm <= new_norm
            and (old_chunker, old_norm) != (new_chunker, new_norm))


def _default_spec() -> str:
    from cdc.core.spec import SPEC

    return SPEC


class Schema:
    """The store's schema, mixed into `Store`: makes a new file whole, checks an existing
    file's meta rows (schema version, chunker spec) against this cdc, upgrades older layouts
    (counting the templates with `Templates`), and reads and sets meta rows."""

    path: Path
    spec: str | None
    _schema_checked: tuple[int, int] | None

    def _create(self) -> None:
        """Make a new store under another name and move it into place whole, so a reader
        never opens a file DuckDB has created but not yet written."""
        fresh = self.path.with_name(self.path.name + ".new")
        for leftover in (fresh, fresh.with_name(fresh.name + ".wal")):
            leftover.unlink(missing_ok=True)
        connection = duckdb.connect(str(fresh))
        try:
            self._ensure_schema(connection)
        finally:
            connection.close()
        os.replace(fresh, self.path)
        stat = os.stat(self.path)  # the same file (a rename keeps the inode): checked already
        self._schema_checked = stat.st_dev, stat.st_ino

    def _ensure_schema(self, connection: duckdb.DuckDBPyConnection) -> None:
        tables = {row[0] for row in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_catalog = current_database()").fetchall()}  # not another file's attached beside
        if "meta" not in tables:
            if tables:
                raise StoreError(f"{self.path} is a DuckDB file but not a cdc store; give another path")
            for statement in SCHEMA + VERSION_5 + INDEXES:
                connection.execute(statement)
            connection.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("schema_version", str(SCHEMA_VERSION)),
                ("spec", self.spec or _default_spec()),
                ("retention", RetentionPolicy().to_json()),
            ])
            return
        version = self._check_meta(connection)
        if version < SCHEMA_VERSION:
            self._upgrade(connection, version)
        for statement in WATCH_MATCH_TABLES + INDEXES:  # a store made before these gets them now
            connection.execute(statement)

    def _upgrade(self, connection: duckdb.DuckDBPyConnection, version: int) -> None:
        """An older layout made current in one transaction (killed midway, the store is as it
        was). Schema 1 to 2: each generation's chunk rows become one list row. Schema 2 to 3:
        generations are numbered by capture time (`cdc.core.captures.capture_id`) in their order,
        and the fetches the store knew of are recorded. Schema 3 to 4: the hosts' templates
        and the template-only flags are counted (`cdc.store.templates`). Schema 4 to 5: the
        `VERSION_5` additions (the round-3 tables, a column), each page's SURT, and the words
        of the changes whose two texts are retained. A rewrite of the tables: seconds for a
        million rows."""
        connection.execute("BEGIN TRANSACTION")
        try:
            if version < 2:
                for statement in UPGRADE_TO_LISTS:
                    connection.execute(statement)
            if version < 3:
                self._renumber(connection)
            if version < 4:
                for statement in UPGRADE_TO_TEMPLATES:
                    connection.execute(statement)
                self._refresh_templates(connection, None)
            for statement in VERSION_5:
                connection.execute(statement)
            _fill_surt_keys(connection)
            self.fill_change_words(connection)
            connection.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                               [str(SCHEMA_VERSION)])
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def _renumber(self, connection: duckdb.DuckDBPyConnection) -> None:
        from cdc.core.captures import renumbered

        rows = connection.execute("SELECT natural_key, generation, fetched_at FROM generations "
                                  "ORDER BY natural_key, generation").fetchall()
        connection.execute("DROP VIEW content_chunks")
        for statement in INDEXES:
            connection.execute(f"DROP INDEX IF EXISTS {statement.split()[5]}")
        for table in RENUMBERED_TABLES:
            connection.execute(f"ALTER TABLE {table} RENAME TO old_{table}")
        for statement in SCHEMA:
            connection.execute(statement)
        keys, old, new = renumbered(rows)
        connection.register("renumbered", pa.table({
            "natural_key": pa.array(keys, pa.string()), "old": pa.array(old, pa.int64()),
            "generation": pa.array(new, pa.int64())}))
        for statement in UPGRADE_TO_CAPTURE_IDS:  # a failure rolls back, registration and all
            connection.execute(statement)
        connection.unregister("renumbered")
        for table in RENUMBERED_TABLES:
            connection.execute(f"DROP TABLE old_{table}")

    def _check_meta(self, connection: duckdb.DuckDBPyConnection) -> int:
        """The store's schema version, once its meta rows are checked against this cdc."""
        try:
            meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
        except duckdb.CatalogException as exc:
            raise StoreError(f"{self.path} is not a cdc store (it has no meta table)") from exc
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise SpecMismatchError(
                f"{self.path} was written by a newer cdc (schema {version}, this one reads "
                f"{SCHEMA_VERSION}); upgrade cdc with `pip install -r requirements.txt`")
        expected = self.spec or _default_spec()
        if meta.get("spec") != expected and _made_earlier(meta.get("spec"), expected):
            raise SpecMismatchError(
                f"{self.path} was made by an earlier cdc (chunker spec {meta.get('spec')}; this cdc "
                f"makes {expected}): digests of two specs never compare. Run `cdc migrate --db "
                f"{self.path}` to re-chunk its retained texts under the new spec, or ingest into a "
                "new store (--db NEWPATH)")
        if meta.get("spec") != expected:
            raise SpecMismatchError(
                f"{self.path} holds digests made under chunker spec {meta.get('spec')}, and this "
                f"cdc makes {expected}: digests of two specs never compare. Ingest into a new "
                "store (--db NEWPATH), or re-ingest the crawl there")
        return version

    def stored_spec(self) -> str | None:
        """The chunker spec the store's digests were made under, read without the spec check."""
        with self._connect(write=False) as connection:
            try:
                return dict(connection.execute("SELECT key, value FROM meta").fetchall()).get("spec")
            except duckdb.CatalogException as exc:
                raise StoreError(f"{self.path} is not a cdc store (it has no meta table)") from exc

    def needs_upgrade(self) -> bool:
        """Whether the store's layout is older than this cdc's. The first read upgrades it, in
        one transaction, which on a large store takes a while (a recount of every page's
        template flags: 4.5 s for 100,000): a caller with a user waiting can say so first."""
        with self._connect(write=False) as connection:
            return self._check_meta(connection) < SCHEMA_VERSION

    def meta(self) -> dict[str, str]:
        with self.reading() as connection:
            return dict(connection.execute("SELECT key, value FROM meta").fetchall())

    @staticmethod
    def meta_value(connection: duckdb.DuckDBPyConnection, key: str) -> str | None:
        row = connection.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def trimmed_bytes(self, connection: duckdb.DuckDBPyConnection) -> int:
        """Bytes of text trimmed since the file was last compacted, still in it (`DEAD_TEXT`)."""
        return int(self.meta_value(connection, DEAD_TEXT) or 0)

    def set_meta(self, connection: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
        connection.execute("DELETE FROM meta WHERE key = ?", [key])
        connection.execute("INSERT INTO meta VALUES (?, ?)", [key, value])
