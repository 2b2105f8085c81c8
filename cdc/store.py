"""The chunk store: one DuckDB file, and every SQL string of the project.

Tables (all times UTC):

- `meta`: schema version, the chunker `SPEC`, the retention policy.
- `pages`: one row per natural key (canonical URL): host, last URL seen, retention class,
  latest generation, when it was first seen, last fetched with new content, last checked.
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
  excerpt): the measures of the change from the previous generation, and its verdict.

**Readers and writers.** DuckDB lets one process at a time open a file for writing, and
none may hold it open meanwhile, not even to read. So no connection lives long: a writer
opens the file for one batch (one transaction) and closes it; a reader opens it read-only
for one query and closes it. Each waits, with backoff, while another process holds a
conflicting lock. The dashboard therefore sees every batch a running ingest commits, and
the ingest never fails because someone is looking.

Values are always bound parameters; table contents arrive in bulk as Arrow tables.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc.errors import SpecMismatchError, StoreBusyError, StoreError, StoreNotFoundError
from cdc.writelock import holding

# 1: a row per chunk in the table `content_chunks` (round 1 and the first block-aligned
#    chunks); 2: a list row per generation in `chunk_lists`, `content_chunks` a view of it.
SCHEMA_VERSION = 2
DEFAULT_KEEP = 3
LOCK_TIMEOUT = 30.0  # seconds a call waits for another process's lock
RETRY_CEILING = 0.03  # seconds between tries at a locked file, at most
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
#   with the workers, which its second thread only slowed.
# - A checkpoint at every commit. A writer's connection lasts one transaction, and closing
#   it checkpoints anyway; checkpointing at the commit skips writing the rows to the WAL
#   first (a cluster run's 8,117-row transaction: 54 ms instead of 63, with the connection).
WRITER_CONFIG = {**CONNECTION_CONFIG, "index_scan_max_count": 1 << 20, "max_vacuum_tasks": 0, "threads": 1,
                 "checkpoint_threshold": "0B"}
KEYS_PER_LOOKUP = 256
# The seed's boilerplate rule: a digest on more than this share of a host's pages (in their
# latest generations), and on at least this many of them (`cdc.boilerplate`).
BOILERPLATE_SHARE = 0.05
BOILERPLATE_MIN_PAGES = 3
# Up to this many pages a batch, ingest reads their state through the index; beyond, in one
# scan. Fetching rows one by one costs about as much as the scan at 500 random pages of a
# 100,000-page store, and four times as much at 4,000 (a full JSONL batch).
INDEXED_LOOKUP_KEYS = 1024


CHUNK_LISTS_TABLE = """CREATE TABLE IF NOT EXISTS chunk_lists (
        natural_key VARCHAR NOT NULL,
        generation INTEGER NOT NULL,
        digests BLOB NOT NULL,
        lengths INTEGER[] NOT NULL
    )"""
DIGEST_BYTES = 16


def _chunks_of(lists: str) -> str:
    """A row per chunk of the `chunk_lists` rows of `lists` (a table, or a subquery with its
    alias): their other columns, `chunk_index`, `digest` and `length`."""
    return f"""(SELECT * EXCLUDE (digests, lengths),
               digests[{DIGEST_BYTES} * chunk_index + 1 : {DIGEST_BYTES} * (chunk_index + 1)] AS digest,
               lengths[chunk_index + 1] AS length
        FROM (SELECT *, unnest(range(len(lengths)))::INTEGER AS chunk_index FROM {lists}))"""


# The seed's `content_chunks`, a row per chunk, from the list rows.
CONTENT_CHUNKS_VIEW = f"""CREATE VIEW IF NOT EXISTS content_chunks AS
    SELECT natural_key, generation, chunk_index, digest, length FROM {_chunks_of("chunk_lists")}"""
# The chunks the boilerplate queries count, the lists joined with their pages first:
# of one host's latest generations (binds the host);
_HOST_CHUNKS = _chunks_of("""(
    SELECT c.natural_key, c.generation, c.digests, c.lengths
    FROM chunk_lists c JOIN pages p
      ON p.natural_key = c.natural_key AND c.generation = p.latest_generation
    WHERE p.host = ?)""")
# of every page's latest generation, with its host;
_LATEST_CHUNKS = _chunks_of("""(
    SELECT p.host, l.natural_key, l.generation, l.digests, l.lengths
    FROM chunk_lists l JOIN pages p
      ON p.natural_key = l.natural_key AND l.generation = p.latest_generation)""")
# of every retained generation of the hosts in a query's `host_size` (host, pages);
_HOSTS_CHUNKS = _chunks_of("""(
    SELECT p.host, l.natural_key, l.generation, l.digests, l.lengths
    FROM chunk_lists l JOIN pages p ON p.natural_key = l.natural_key
    WHERE p.host IN (SELECT host FROM host_size))""")
# of the pages of a query's `picked` change rows.
_PICKED_CHUNKS = _chunks_of("""(
    SELECT l.* FROM chunk_lists l SEMI JOIN (SELECT natural_key FROM picked) k USING (natural_key))""")

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR NOT NULL, value VARCHAR NOT NULL)",
    """CREATE TABLE IF NOT EXISTS pages (
        natural_key VARCHAR NOT NULL,
        url VARCHAR NOT NULL,
        host VARCHAR NOT NULL,
        retention_class VARCHAR,
        latest_generation INTEGER NOT NULL,
        first_seen TIMESTAMP NOT NULL,
        last_fetched TIMESTAMP NOT NULL,
        last_checked TIMESTAMP NOT NULL,
        etag VARCHAR,
        last_modified VARCHAR
    )""",
    """CREATE TABLE IF NOT EXISTS generations (
        natural_key VARCHAR NOT NULL,
        generation INTEGER NOT NULL,
        fetched_at TIMESTAMP NOT NULL,
        content_digest BLOB NOT NULL,
        length INTEGER NOT NULL,
        chunk_count INTEGER NOT NULL,
        text VARCHAR USING COMPRESSION uncompressed
    )""",
    CHUNK_LISTS_TABLE,
    CONTENT_CHUNKS_VIEW,
    """CREATE TABLE IF NOT EXISTS changes (
        natural_key VARCHAR NOT NULL,
        generation INTEGER NOT NULL,
        previous_generation INTEGER,
        fetched_at TIMESTAMP NOT NULL,
        similarity DOUBLE,
        unchanged_ratio DOUBLE,
        retained_ratio DOUBLE,
        bytes_added INTEGER NOT NULL,
        bytes_removed INTEGER NOT NULL,
        regions INTEGER NOT NULL,
        verdict VARCHAR NOT NULL,
        excerpt VARCHAR
    )""",
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
]

# The seed's tables, as readers see them (`content_chunks` a view), and the tables that hold
# the rows (what an erasure deletes from).
TABLES = ("pages", "generations", "content_chunks", "changes")
STORED_TABLES = ("pages", "generations", "chunk_lists", "changes")

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
# A reader of a schema-1 store (read-only: it cannot upgrade it) sees its chunk rows as lists.
LISTS_OF_CHUNK_ROWS = f"CREATE OR REPLACE TEMP VIEW chunk_lists AS {_LISTS_OF_ROWS}"


@dataclass(frozen=True)
class RetentionPolicy:
    """How many generations keep their text and chunk rows: per class, else `keep`."""

    keep: int = DEFAULT_KEEP
    classes: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        for name, value in (("keep", self.keep), *self.classes):
            if type(value) is not int or value < 1:
                raise StoreError(
                    f"a retention limit must be a whole number of at least 1, got {name}={value!r}")

    def for_class(self, retention_class: str | None) -> int:
        return dict(self.classes).get(retention_class, self.keep) if retention_class else self.keep

    def to_json(self) -> str:
        return json.dumps({"keep": self.keep, "classes": dict(self.classes)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RetentionPolicy:
        data = json.loads(text)
        return cls(int(data["keep"]), tuple(sorted((k, int(v)) for k, v in data["classes"].items())))


@dataclass(frozen=True)
class PageState:
    """What ingest needs to know of a page's latest generation to compare a new one."""

    natural_key: str
    retention_class: str | None
    latest_generation: int
    last_fetched: datetime
    last_checked: datetime
    content_digest: bytes
    text: bytes | None
    chunk_digests: list[bytes]
    chunk_lengths: list[int]


@dataclass(frozen=True)
class WriteBatch:
    """Everything one ingest batch writes, as Arrow tables, in one transaction."""

    pages: pa.Table  # new and updated pages, all columns of `pages`
    generations: pa.Table
    chunks: pa.Table  # the columns of `chunk_lists`: a row per retained generation
    changes: pa.Table
    checked: pa.Table  # natural_key, last_checked: pages seen again with identical content

    @property
    def rows(self) -> int:
        """Rows appended: generations, chunk list rows and change rows."""
        return self.generations.num_rows + self.chunks.num_rows + self.changes.num_rows

    @property
    def chunk_rows(self) -> int:
        """Chunks appended: the rows they add to the `content_chunks` view."""
        return len(pc.list_flatten(self.chunks.column("lengths")))

    def content_chunks(self) -> pa.Table:
        """The batch's chunks as the seed's rows (natural_key, generation, chunk_index,
        digest, length), as the `content_chunks` view shows them: for the Parquet lake."""
        return content_chunk_rows(self.chunks)


def content_chunk_rows(lists: pa.Table) -> pa.Table:
    """`chunk_lists` rows as `content_chunks` rows, a row per chunk, in list order."""
    lengths = lists.column("lengths").combine_chunks()
    parents = pc.list_parent_indices(lengths)
    starts = pc.take(lengths.offsets, parents)
    index = pc.subtract(pa.array(np.arange(len(parents), dtype=np.int32)), pc.cast(starts, pa.int32()))
    # The digests end to end, cut into 16-byte values (a BLOB a chunk, as the view shows).
    joined = b"".join(lists.column("digests").to_pylist())
    digests = pa.FixedSizeBinaryArray.from_buffers(pa.binary(DIGEST_BYTES), len(parents),
                                                   [None, pa.py_buffer(joined)]).cast(pa.binary())
    return pa.table({
        "natural_key": pc.take(lists.column("natural_key"), parents),
        "generation": pc.take(lists.column("generation"), parents),
        "chunk_index": index,
        "digest": digests,
        "length": lengths.flatten(),
    })


def digest_list(digests: bytes) -> list[bytes]:
    """The digests of a `chunk_lists` row, one per chunk."""
    return [digests[at:at + DIGEST_BYTES] for at in range(0, len(digests), DIGEST_BYTES)]


def _versions(connection: duckdb.DuckDBPyConnection, natural_key: str,
              wanted: set[int]) -> dict[int, Version]:
    """The retained generations among `wanted` of one page (lookups by key alone: indexed)."""
    texts = {generation: text for generation, text in connection.execute(
        "SELECT generation, text FROM generations WHERE natural_key = ?", [natural_key]).fetchall()
        if generation in wanted and text is not None}
    chunks: dict[int, list[tuple[bytes, int]]] = {g: [] for g in texts}
    for generation, digests, lengths in connection.execute(
            "SELECT generation, digests, lengths FROM chunk_lists WHERE natural_key = ?",
            [natural_key]).fetchall():
        if generation in chunks:
            chunks[generation] = list(zip(digest_list(digests), lengths))
    return {generation: Version(natural_key, generation, text.encode("utf-8"), chunks[generation])
            for generation, text in texts.items()}


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


def _latest_by_index(connection: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> tuple[list, dict, dict]:
    """Page rows, latest generations (digest, UTF-8 text) and their chunk lists, for a few keys.

    Each table is looked up alone, by key, so DuckDB answers from its index and reads only
    the blocks that hold these pages. (Joined, it scans every generation's text: on a 1 GB
    WARC ingest that grew to 130 MB a batch by the end, and it grows with the store.) A
    page's older retained generations are read too, and dropped here.
    """
    pages = _by_keys(connection, """
        SELECT natural_key, retention_class, latest_generation, last_fetched, last_checked
        FROM pages WHERE natural_key IN ({keys})
    """, keys)
    latest = {row[0]: row[2] for row in pages}

    def of_latest(row: tuple) -> bool:
        return latest.get(row[0]) == row[1]

    generations = {key: (digest, text) for key, _, digest, text in _by_keys(connection, """
        SELECT natural_key, generation, content_digest, encode(text) FROM generations
        WHERE natural_key IN ({keys})
    """, keys, of_latest)}
    chunks = {key: (digests, lengths) for key, _, digests, lengths in _by_keys(connection, """
        SELECT natural_key, generation, digests, lengths FROM chunk_lists
        WHERE natural_key IN ({keys})
    """, keys, of_latest)}
    return pages, generations, chunks


def _latest_by_scan(connection: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> tuple[list, dict, dict]:
    """The same as `_latest_by_index`, by joining the keys with whole tables: for many keys,
    one scan costs less time than thousands of row fetches, though it reads every text."""
    with _registered(connection, "wanted_keys", _key_table(keys)):
        rows = connection.execute("""
            SELECT p.natural_key, p.retention_class, p.latest_generation, p.last_fetched,
                   p.last_checked, g.content_digest, encode(g.text)
            FROM pages p
            JOIN wanted_keys w USING (natural_key)
            JOIN generations g ON g.natural_key = p.natural_key
                              AND g.generation = p.latest_generation
        """).fetchall()
        chunks = connection.execute("""
            SELECT c.natural_key, c.digests, c.lengths
            FROM chunk_lists c
            JOIN pages p ON p.natural_key = c.natural_key AND c.generation = p.latest_generation
            JOIN wanted_keys w ON w.natural_key = c.natural_key
        """).fetchall()
    return [row[:5] for row in rows], {row[0]: row[5:] for row in rows}, {row[0]: row[1:] for row in chunks}


def _one(result: duckdb.DuckDBPyConnection) -> tuple | None:
    """The first row of a query, reading the result to its end (DuckDB wants it finished)."""
    rows = result.fetchall()
    return rows[0] if rows else None


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    return "lock" in str(exc).lower()


class Store:
    """A chunk store file. Cheap to make: it opens the file only for each call."""

    def __init__(self, path: str | os.PathLike, *, spec: str | None = None,
                 lock_timeout: float = LOCK_TIMEOUT):
        self.path = Path(path)
        self.spec = spec
        self.lock_timeout = lock_timeout
        self._lock_depth = 0
        self._schema_checked: tuple[int, int] | None = None  # the file whose schema is known good

    # --- connections --------------------------------------------------------------------

    @contextmanager
    def _connect(self, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if not write and not self.path.exists():
            raise StoreNotFoundError(f"no store at {self.path}; build one with `cdc ingest FILE`")
        if write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                connection = duckdb.connect(str(self.path), read_only=not write,
                                            config=WRITER_CONFIG if write else CONNECTION_CONFIG)
                break
            except duckdb.IOException as exc:
                if not _is_lock_conflict(exc):
                    raise StoreError(f"cannot open the store {self.path}: {exc}") from exc
                if time.monotonic() > deadline:
                    raise StoreBusyError(
                        f"the store {self.path} is locked by another process that is writing to "
                        f"it; wait for it to finish and try again ({exc})") from exc
                time.sleep(delay * (1 + random.random()))
                # A writer releases its lock between batches for only milliseconds: a reader
                # that backed off for long would keep missing those gaps.
                delay = min(delay * 2, RETRY_CEILING)
            except duckdb.Error as exc:
                raise StoreError(f"cannot open the store {self.path}: {exc}") from exc
        try:
            yield connection
        finally:
            connection.close()

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """cdc's own lock for writers, held across a whole batch or a file swap.

        DuckDB's lock lasts as long as a connection; this one lets a writer read page
        states, compute, then write without another writer slipping in between, and lets
        a compaction close the database and swap files while no writer can open it.
        Readers do not take it. Re-entrant within one Store object.
        """
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        with holding(self.path.with_name(self.path.name + ".lock"), self.path, self.lock_timeout):
            self._lock_depth = 1
            try:
                yield
            finally:
                self._lock_depth = 0

    @contextmanager
    def reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection for a few queries; released at the end of the block."""
        with self._connect(write=False) as connection:
            if self._check_meta(connection) < SCHEMA_VERSION:
                # Read-only, an older layout cannot be upgraded (the next write does it):
                # its chunk rows are read as lists, a little slower.
                connection.execute(LISTS_OF_CHUNK_ROWS)
            yield connection

    def create(self) -> None:
        """Make the store if it is missing, as the first write would: a writer that waits
        for its first rows can take that cost off its first write."""
        with self.write_lock():
            if not self.path.exists():
                self._create()

    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A write connection with the schema in place, inside one transaction."""
        with self.write_lock():
            self.create()
            with self._connect(write=True) as connection:
                # Checked once per file: a store replaced since (a compaction, another
                # process's new store) is a new inode, and is checked again.
                identity = (stat := os.stat(self.path)).st_dev, stat.st_ino
                if identity != self._schema_checked:
                    self._ensure_schema(connection)
                    self._schema_checked = identity
                connection.execute("BEGIN TRANSACTION")
                try:
                    yield connection
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
                connection.execute("COMMIT")

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

    # --- meta and schema -------------------------------------------------------------------

    def _ensure_schema(self, connection: duckdb.DuckDBPyConnection) -> None:
        tables = {row[0] for row in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
        if "meta" not in tables:
            if tables:
                raise StoreError(f"{self.path} is a DuckDB file but not a cdc store; give another path")
            for statement in SCHEMA + INDEXES:
                connection.execute(statement)
            connection.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("schema_version", str(SCHEMA_VERSION)),
                ("spec", self.spec or _default_spec()),
                ("retention", RetentionPolicy().to_json()),
            ])
            return
        if self._check_meta(connection) < SCHEMA_VERSION:
            self._upgrade(connection)
        for statement in INDEXES:  # a store made before an index was added gets it now
            connection.execute(statement)

    def _upgrade(self, connection: duckdb.DuckDBPyConnection) -> None:
        """Schema 1 to 2 in one transaction: each generation's chunk rows become one list row
        (killed midway, the store is as it was). A rewrite of the chunk rows: seconds for a
        million of them."""
        connection.execute("BEGIN TRANSACTION")
        try:
            for statement in UPGRADE_TO_LISTS:
                connection.execute(statement)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

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

    # --- re-chunking (cdc.migrate) ----------------------------------------------------------

    def retained_keys(self, connection: duckdb.DuckDBPyConnection) -> list[str]:
        """Pages with at least one retained text, in key order."""
        return [row[0] for row in connection.execute(
            "SELECT DISTINCT natural_key FROM generations WHERE text IS NOT NULL ORDER BY 1").fetchall()]

    def retained_texts(self, connection: duckdb.DuckDBPyConnection,
                       keys: Sequence[str]) -> list[tuple[str, int, datetime, bytes]]:
        """(natural_key, generation, fetched_at, UTF-8 text) of the retained generations of
        `keys`, by key and generation."""
        rows = _by_keys(connection, """
            SELECT natural_key, generation, fetched_at, encode(text) FROM generations
            WHERE natural_key IN ({keys}) AND text IS NOT NULL
        """, keys)
        return sorted(rows, key=lambda row: (row[0], row[1]))

    def replace_chunks(self, connection: duckdb.DuckDBPyConnection, keys: Sequence[str],
                       chunks: pa.Table, changes: pa.Table) -> None:
        """The chunk lists of `keys` replaced by `chunks` (`chunk_lists` rows; chunk counts
        follow), and the change rows in `changes` replaced, matched by page and generation."""
        with (_registered(connection, "migrated_keys", _key_table(keys)),
              _registered(connection, "migrated_chunks", chunks),
              _registered(connection, "migrated_changes", changes)):
            connection.execute("DELETE FROM chunk_lists WHERE natural_key IN "
                               "(SELECT natural_key FROM migrated_keys)")
            connection.execute("INSERT INTO chunk_lists SELECT * FROM migrated_chunks")
            connection.execute("""
                UPDATE generations SET chunk_count = n.chunks
                FROM (SELECT natural_key, generation, len(lengths) AS chunks FROM migrated_chunks) n
                WHERE generations.natural_key = n.natural_key AND generations.generation = n.generation
            """)
            connection.execute("""
                UPDATE changes SET similarity = m.similarity, unchanged_ratio = m.unchanged_ratio,
                       retained_ratio = m.retained_ratio, bytes_added = m.bytes_added,
                       bytes_removed = m.bytes_removed, regions = m.regions, verdict = m.verdict,
                       excerpt = m.excerpt
                FROM migrated_changes m
                WHERE changes.natural_key = m.natural_key AND changes.generation = m.generation
            """)

    def meta(self) -> dict[str, str]:
        with self.reading() as connection:
            return dict(connection.execute("SELECT key, value FROM meta").fetchall())

    def set_meta(self, connection: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
        connection.execute("DELETE FROM meta WHERE key = ?", [key])
        connection.execute("INSERT INTO meta VALUES (?, ?)", [key, value])

    def retention(self, connection: duckdb.DuckDBPyConnection | None = None) -> RetentionPolicy:
        if connection is None:
            with self.reading() as connection:
                return self.retention(connection)
        row = _one(connection.execute("SELECT value FROM meta WHERE key = 'retention'"))
        return RetentionPolicy.from_json(row[0]) if row else RetentionPolicy()

    # --- ingest ------------------------------------------------------------------------------

    def page_states(self, connection: duckdb.DuckDBPyConnection,
                    keys: Sequence[str]) -> dict[str, PageState]:
        """The latest generation of each page among `keys` that the store has."""
        if not keys:
            return {}
        if len(keys) <= INDEXED_LOOKUP_KEYS:
            pages, generations, chunks = _latest_by_index(connection, keys)
        else:
            pages, generations, chunks = _latest_by_scan(connection, keys)
        states = {}
        for key, retention_class, generation, fetched, checked in pages:
            if key not in generations:
                continue
            content_digest, text = generations[key]
            digests, lengths = chunks.get(key, (b"", []))
            states[key] = PageState(key, retention_class, generation, fetched, checked, content_digest, text,
                                    digest_list(digests), lengths)
        return states

    def known_versions(self, connection: duckdb.DuckDBPyConnection,
                       keys: Sequence[str]) -> dict[str, set[bytes]]:
        """The content digest of every generation of the pages among `keys`."""
        if not keys:
            return {}
        if len(keys) <= INDEXED_LOOKUP_KEYS:
            rows = _by_keys(connection, """
                SELECT natural_key, content_digest FROM generations WHERE natural_key IN ({keys})
            """, keys)
        else:
            with _registered(connection, "wanted_keys", _key_table(keys)):
                rows = connection.execute("""
                    SELECT g.natural_key, g.content_digest
                    FROM generations g JOIN wanted_keys w USING (natural_key)
                """).fetchall()
        known: dict[str, set[bytes]] = {}
        for key, digest in rows:
            known.setdefault(key, set()).add(digest)
        return known

    def write(self, connection: duckdb.DuckDBPyConnection, batch: WriteBatch) -> None:
        """Append one batch: rows in bulk, pages upserted, old generations trimmed."""
        for name, table in (("batch_pages", batch.pages), ("batch_generations", batch.generations),
                            ("batch_chunks", batch.chunks), ("batch_changes", batch.changes),
                            ("batch_checked", batch.checked)):
            connection.register(name, table)
        try:
            # Only pages stored before can have generations to trim: a batch's own generations
            # past the limit come without text or chunk lists (cdc.versions). The trim scans the
            # whole generations and chunk list tables, so a batch of new pages only, as in a
            # first crawl, skips it.
            seen_before = _one(connection.execute("SELECT count(*) FROM batch_pages "
                                                  "WHERE natural_key IN (SELECT natural_key FROM pages)"))[0]
            connection.execute("INSERT INTO generations SELECT * FROM batch_generations")
            connection.execute("INSERT INTO chunk_lists SELECT * FROM batch_chunks")
            connection.execute("INSERT INTO changes SELECT * FROM batch_changes")
            if seen_before:
                connection.execute("""
                    UPDATE pages SET url = b.url,
                           retention_class = coalesce(b.retention_class, pages.retention_class),
                           latest_generation = b.latest_generation, last_fetched = b.last_fetched,
                           last_checked = greatest(pages.last_checked, b.last_checked)
                    FROM batch_pages b WHERE pages.natural_key = b.natural_key
                """)
                connection.execute("""
                    INSERT INTO pages SELECT b.* FROM batch_pages b
                    WHERE NOT EXISTS (SELECT 1 FROM pages p WHERE p.natural_key = b.natural_key)
                """)
            else:  # new pages only: nothing to update, nothing to look for (each a scan of pages)
                connection.execute("INSERT INTO pages SELECT * FROM batch_pages")
            if batch.checked.num_rows:
                connection.execute("""
                    UPDATE pages SET last_checked = greatest(pages.last_checked, c.last_checked)
                    FROM batch_checked c WHERE pages.natural_key = c.natural_key
                """)
            if seen_before:
                self._trim(connection, "SELECT natural_key FROM batch_pages")
        finally:
            for name in ("batch_pages", "batch_generations", "batch_chunks", "batch_changes",
                         "batch_checked"):
                connection.unregister(name)

    # --- live fetching: conditional-request validators --------------------------------------

    def page_validators(self, connection: duckdb.DuckDBPyConnection,
                        keys: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """(etag, last_modified) of each page among `keys` the store has."""
        if not keys:
            return {}
        connection.register("wanted_keys", pa.table({"natural_key": pa.array(list(keys), pa.string())}))
        try:
            rows = connection.execute("""
                SELECT p.natural_key, p.etag, p.last_modified
                FROM pages p JOIN wanted_keys w USING (natural_key)
            """).fetchall()
        finally:
            connection.unregister("wanted_keys")
        return {key: (etag, last_modified) for key, etag, last_modified in rows}


    def save_validators(self, connection: duckdb.DuckDBPyConnection,
                        rows: Sequence[tuple[str, str | None, str | None]]) -> None:
        """Set (natural_key, etag, last_modified) of pages the store has."""
        if not rows:
            return
        keys, etags, modified = zip(*rows)
        connection.register("batch_validators", pa.table({
            "natural_key": pa.array(keys, pa.string()), "etag": pa.array(etags, pa.string()),
            "last_modified": pa.array(modified, pa.string())}))
        try:
            connection.execute("""
                UPDATE pages SET etag = v.etag, last_modified = v.last_modified
                FROM batch_validators v WHERE pages.natural_key = v.natural_key
            """)
        finally:
            connection.unregister("batch_validators")


    def mark_checked(self, connection: duckdb.DuckDBPyConnection,
                     rows: Sequence[tuple[str, datetime]]) -> None:
        """Move `last_checked` of pages forward (a 304: the page is as stored)."""
        if not rows:
            return
        keys, times = zip(*rows)
        connection.register("batch_checked", pa.table({
            "natural_key": pa.array(keys, pa.string()), "last_checked": pa.array(times, pa.timestamp("us"))}))
        try:
            connection.execute("""
                UPDATE pages SET last_checked = greatest(pages.last_checked, c.last_checked)
                FROM (SELECT natural_key, max(last_checked) AS last_checked
                      FROM batch_checked GROUP BY natural_key) c
                WHERE pages.natural_key = c.natural_key
            """)
        finally:
            connection.unregister("batch_checked")

    def _trim(self, connection: duckdb.DuckDBPyConnection, keys_query: str) -> None:
        """Drop text and chunk lists of generations past each page's retention limit."""
        policy = self.retention(connection)
        limits = pa.table({
            "retention_class": pa.array([name for name, _ in policy.classes], pa.string()),
            "keep": pa.array([keep for _, keep in policy.classes], pa.int32()),
        })
        connection.register("class_limits", limits)
        try:
            # keys_query is one of this module's own constant queries, never user input.
            expired = f"""
                SELECT p.natural_key, p.latest_generation - coalesce(l.keep, ?) AS last_expired
                FROM pages p LEFT JOIN class_limits l USING (retention_class)
                WHERE p.natural_key IN ({keys_query})
            """
            connection.execute(f"""
                DELETE FROM chunk_lists USING ({expired}) e
                WHERE chunk_lists.natural_key = e.natural_key
                  AND chunk_lists.generation <= e.last_expired
            """, [policy.keep])
            connection.execute(f"""
                UPDATE generations SET text = NULL FROM ({expired}) e
                WHERE generations.natural_key = e.natural_key
                  AND generations.generation <= e.last_expired AND generations.text IS NOT NULL
            """, [policy.keep])
        finally:
            connection.unregister("class_limits")

    def prune(self, policy: RetentionPolicy) -> None:
        """Apply a new retention policy to every page, and keep it for later ingests."""
        with self.writing() as connection:
            self.set_meta(connection, "retention", policy.to_json())
            self._trim(connection, "SELECT natural_key FROM pages")
        self.compact()

    def claim_extraction_mode(self, mode: str) -> None:
        """Record how HTML is turned into text in this store, or refuse another way: pages
        extracted two ways would compare as changed when only the extraction differs."""
        with self.writing() as connection:
            row = _one(connection.execute("SELECT value FROM meta WHERE key = 'extraction'"))
            if row is None:
                self.set_meta(connection, "extraction", mode)
            elif row[0] != mode:
                raise StoreError(
                    f"{self.path} holds pages extracted with --extract {row[0]}, not {mode}: use "
                    f"--extract {row[0]}, or another store (--db PATH) for {mode} extraction")

    def set_retention(self, policy: RetentionPolicy) -> None:
        with self.writing() as connection:
            self.set_meta(connection, "retention", policy.to_json())

    # --- erasure -----------------------------------------------------------------------------

    def erase(self, natural_key: str) -> int:
        """Remove a page from every table, then rewrite the file so its text is gone.

        DuckDB leaves deleted rows' bytes in freed blocks, so a delete and a checkpoint are
        not enough: the live data is copied to a fresh file that replaces the old one.
        Returns the number of rows removed (chunks counted as `content_chunks` rows).
        """
        removed = 0
        with self.writing() as connection:
            for table in STORED_TABLES:
                rows = "sum(len(lengths))" if table == "chunk_lists" else "count(*)"  # as the view counts
                (count,) = _one(connection.execute(
                    f"SELECT coalesce({rows}, 0) FROM {table} WHERE natural_key = ?", [natural_key]))
                connection.execute(f"DELETE FROM {table} WHERE natural_key = ?", [natural_key])
                removed += count
        self.compact()
        return removed

    def compact(self) -> None:
        """Rewrite the store into a new file holding only live rows, and swap it in."""
        if not self.path.exists():  # a write connection would make an empty file to compact
            raise StoreNotFoundError(f"no store at {self.path}; build one with `cdc ingest FILE`")
        fresh = self.path.with_name(self.path.name + ".compact")
        with self.write_lock():
            for leftover in (fresh, fresh.with_name(fresh.name + ".wal")):
                leftover.unlink(missing_ok=True)
            with self._connect(write=True) as connection:
                connection.execute("CHECKPOINT")
                connection.execute("ATTACH ? AS fresh", [str(fresh)])
                connection.execute(f"COPY FROM DATABASE {_database_name(connection)} TO fresh")
                connection.execute("DETACH fresh")
            # Closed and checkpointed, so no WAL belongs to the old file; no writer can open
            # it while we hold the write lock, and readers that have it open keep reading it.
            os.replace(fresh, self.path)

    # --- reading -----------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        with self.reading() as connection:
            counts = {table: _one(connection.execute(f"SELECT count(*) FROM {table}"))[0]
                      for table in TABLES if table != "content_chunks"}
            counts["content_chunks"] = _one(connection.execute(
                "SELECT coalesce(sum(len(lengths)), 0)::BIGINT FROM chunk_lists"))[0]
            counts["hosts"] = _one(connection.execute("SELECT count(DISTINCT host) FROM pages"))[0]
            counts["retained_generations"] = _one(connection.execute(
                "SELECT count(*) FROM generations WHERE text IS NOT NULL"))[0]
        counts["file_bytes"] = self.path.stat().st_size
        return counts

    def page(self, natural_key: str) -> PageInfo | None:
        with self.reading() as connection:
            row = _one(connection.execute(f"SELECT {_PAGE_COLUMNS} FROM pages WHERE natural_key = ?",
                                          [natural_key]))
        return PageInfo(*row) if row else None

    def find_pages(self, fragment: str, limit: int = 20) -> list[str]:
        """Natural keys that contain `fragment`, for "did you mean" and type-ahead."""
        with self.reading() as connection:
            rows = connection.execute(
                "SELECT natural_key FROM pages WHERE contains(natural_key, ?) ORDER BY natural_key LIMIT ?",
                [fragment, limit]).fetchall()
        return [row[0] for row in rows]

    def generations(self, natural_key: str) -> list[GenerationInfo]:
        """Every generation of a page, oldest first, with the change that made it."""
        with self.reading() as connection:
            rows = connection.execute("""
                SELECT generation, fetched_at, length, chunk_count, text IS NOT NULL
                FROM generations WHERE natural_key = ?
            """, [natural_key]).fetchall()
            changes = {row[0]: row[1:] for row in connection.execute("""
                SELECT generation, verdict, similarity, unchanged_ratio, retained_ratio,
                       bytes_added, bytes_removed, excerpt
                FROM changes WHERE natural_key = ?
            """, [natural_key]).fetchall()}
        blank = (None,) * 7
        return [GenerationInfo(*row, *changes.get(row[0], blank)) for row in sorted(rows)]

    def version(self, natural_key: str, generation: int) -> Version | None:
        """A retained generation's text and chunks; None when it is not retained."""
        return self.versions(natural_key, [generation]).get(generation)

    def versions(self, natural_key: str, generations: Sequence[int],
                 connection: duckdb.DuckDBPyConnection | None = None) -> dict[int, Version]:
        """Retained generations of one page, by number, read through one connection (the
        given one: a caller reading many pages opens one, not one per page)."""
        if connection is None:
            with self.reading() as connection:
                return _versions(connection, natural_key, set(generations))
        return _versions(connection, natural_key, set(generations))

    def history(self, natural_key: str) -> list[ChangeRow]:
        """The page's change rows, oldest first, each marked template-only or not."""
        with self.reading() as connection:
            rows = connection.execute(_with_template_only(f"""
                SELECT {_CHANGE_COLUMNS} FROM changes c JOIN pages p USING (natural_key)
                WHERE c.natural_key = ?
            """, "ORDER BY generation"), [natural_key, BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE]).fetchall()
        return [ChangeRow(*row) for row in rows]

    @staticmethod
    def _change_filters(host: str | None, since: datetime | None, until: datetime | None,
                        verdicts: Sequence[str], min_change: float) -> tuple[str, list]:
        """A WHERE clause of this module's fixed conditions, and the values to bind."""
        conditions, values = [], []
        if host:
            conditions.append("p.host = ?")
            values.append(host)
        if since:
            conditions.append("c.fetched_at >= ?")
            values.append(since)
        if until:
            conditions.append("c.fetched_at < ?")
            values.append(until)
        if verdicts:
            conditions.append("list_contains(?, c.verdict)")
            values.append(list(verdicts))
        if min_change > 0:
            conditions.append("(1 - coalesce(least(c.unchanged_ratio, c.retained_ratio), 0)) >= ?")
            values.append(min_change)
        return ("WHERE " + " AND ".join(conditions)) if conditions else "", values

    def changes(self, *, host: str | None = None, since: datetime | None = None,
                until: datetime | None = None, verdicts: Sequence[str] = (),
                min_change: float = 0.0, limit: int | None = None) -> list[ChangeRow]:
        """Change summaries, newest first, filtered; what the CSV export writes."""
        where, values = self._change_filters(host, since, until, verdicts, min_change)
        tail = "LIMIT ?" if limit is not None else ""
        if limit is not None:
            values.append(limit)
        with self.reading() as connection:
            rows = connection.execute(_with_template_only(f"""
                SELECT {_CHANGE_COLUMNS} FROM changes c JOIN pages p USING (natural_key)
                {where} ORDER BY c.fetched_at DESC, c.natural_key, c.generation DESC {tail}
            """, "ORDER BY fetched_at DESC, natural_key, generation DESC"),
                [*values, BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE]).fetchall()
        return [ChangeRow(*row) for row in rows]

    def count_changes(self, *, host: str | None = None, since: datetime | None = None,
                      until: datetime | None = None, verdicts: Sequence[str] = (),
                      min_change: float = 0.0) -> int:
        where, values = self._change_filters(host, since, until, verdicts, min_change)
        with self.reading() as connection:
            return _one(connection.execute(
                f"SELECT count(*) FROM changes c JOIN pages p USING (natural_key) {where}", values))[0]

    def host_pages(self, host: str) -> list[tuple]:
        """A host's pages with their latest change: url, generation, fetched_at, verdict, similarity."""
        with self.reading() as connection:
            return connection.execute("""
                SELECT p.natural_key, p.latest_generation, p.last_fetched, c.verdict,
                       c.unchanged_ratio, c.bytes_added, c.bytes_removed
                FROM pages p LEFT JOIN changes c
                  ON c.natural_key = p.natural_key AND c.generation = p.latest_generation
                WHERE p.host = ? ORDER BY p.natural_key
            """, [host]).fetchall()

    def hosts(self) -> list[tuple[str, int]]:
        with self.reading() as connection:
            return connection.execute(
                "SELECT host, count(*) FROM pages GROUP BY host ORDER BY host").fetchall()

    # --- overview and trends ------------------------------------------------------------------

    def verdict_counts(self) -> dict[str, int]:
        with self.reading() as connection:
            return dict(connection.execute(
                "SELECT verdict, count(*) FROM changes GROUP BY verdict ORDER BY verdict").fetchall())

    def biggest_changes(self, limit: int = 20) -> list[ChangeRow]:
        """The largest changes (by share changed, then bytes) among each page's latest ones."""
        with self.reading() as connection:
            rows = connection.execute(f"""
                SELECT {_CHANGE_COLUMNS} FROM changes c JOIN pages p USING (natural_key)
                WHERE c.verdict NOT IN ('new', 'unchanged') AND c.generation = p.latest_generation
                ORDER BY 1 - least(c.unchanged_ratio, c.retained_ratio) DESC,
                         c.bytes_added + c.bytes_removed DESC, c.natural_key
                LIMIT ?
            """, [limit]).fetchall()
        return [ChangeRow(*row) for row in rows]

    def host_activity(self, bucket: str = "day") -> list[tuple[str, datetime, int, int]]:
        """Per host and time bucket ("day" or "week"): bytes changed and changes (first
        generations left out: a new page is not a change)."""
        if bucket not in ("day", "week"):
            raise ValueError(f"bucket is day or week, got {bucket!r}")
        with self.reading() as connection:
            return connection.execute("""
                SELECT p.host, date_trunc(?, c.fetched_at) AS bucket,
                       sum(c.bytes_added + c.bytes_removed)::BIGINT, count(*)
                FROM changes c JOIN pages p USING (natural_key)
                WHERE c.verdict <> 'new'
                GROUP BY ALL ORDER BY p.host, bucket
            """, [bucket]).fetchall()

    def host_changes(self, host: str) -> list[tuple[datetime, float, str]]:
        """Every change on a host's pages: fetch time, share changed, verdict."""
        with self.reading() as connection:
            return connection.execute("""
                SELECT c.fetched_at, 1 - least(c.unchanged_ratio, c.retained_ratio), c.verdict
                FROM changes c JOIN pages p USING (natural_key)
                WHERE p.host = ? AND c.verdict <> 'new' ORDER BY c.fetched_at
            """, [host]).fetchall()

    def page_keys(self, host: str | None = None) -> list[str]:
        """Natural keys of every page, or of one host's, in order: for pickers."""
        with self.reading() as connection:
            if host is None:
                rows = connection.execute("SELECT natural_key FROM pages ORDER BY natural_key").fetchall()
            else:
                rows = connection.execute(
                    "SELECT natural_key FROM pages WHERE host = ? ORDER BY natural_key", [host]).fetchall()
        return [row[0] for row in rows]

    # --- boilerplate ------------------------------------------------------------------------

    def host_boilerplate(self, host: str, share: float, min_pages: int,
                         with_samples: bool = False) -> list[tuple]:
        """Digests on more than `share` of a host's pages (latest generations), at least
        `min_pages` of them: digest, pages, share, and one place to cut a sample from (and,
        `with_samples`, the sample's bytes, read through the same connection). The place
        carries the chunk's offset, summed here from the host's chunk rows that the count
        reads anyway, so a sample costs one lookup of its text."""
        with self.reading() as connection:
            rows = connection.execute("""
                WITH chunks AS (SELECT * FROM {chunks}),
                latest AS (
                    SELECT *, sum(length) OVER (PARTITION BY natural_key ORDER BY chunk_index)
                                - length AS offset
                    FROM chunks
                ),
                host_size AS (SELECT count(*) AS pages FROM pages WHERE host = ?),
                counted AS (
                    SELECT digest, count(DISTINCT natural_key) AS pages,
                           min(struct_pack(natural_key := natural_key, generation := generation,
                                           chunk_index := chunk_index, "offset" := "offset",
                                           length := length)) AS sample
                    FROM latest GROUP BY digest
                )
                SELECT c.digest, c.pages, c.pages / h.pages AS share,
                       c.sample.natural_key, c.sample.generation, c.sample.chunk_index
                       {extra}
                FROM counted c, host_size h
                WHERE c.pages >= ? AND c.pages > ? * h.pages
                ORDER BY c.pages DESC, c.digest
            """.format(extra=', c.sample."offset", c.sample.length' if with_samples else "",
                       chunks=_HOST_CHUNKS),
                [host, host, min_pages, share]).fetchall()
            if not with_samples:
                return rows
            texts = self._texts(connection, {(row[3], row[4]) for row in rows})
        return [(*row[:6], None if (text := texts.get((row[3], row[4]))) is None
                 else text[row[6]:row[6] + row[7]]) for row in rows]

    def _texts(self, connection: duckdb.DuckDBPyConnection,
               wanted: set[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        """The UTF-8 texts of retained generations, by (natural_key, generation)."""
        keys = sorted({key for key, _ in wanted})
        return {(key, generation): text for key, generation, text in _by_keys(connection, """
            SELECT natural_key, generation, encode(text) FROM generations WHERE natural_key IN ({keys})
        """, keys, lambda row: (row[0], row[1]) in wanted and row[2] is not None)}

    def boilerplate_digests(self, host: str, share: float, min_pages: int) -> set[bytes]:
        return {row[0] for row in self.host_boilerplate(host, share, min_pages)}

    def template_digests(self, host: str, share: float = BOILERPLATE_SHARE,
                         min_pages: int = BOILERPLATE_MIN_PAGES) -> set[bytes]:
        """The host's template: its boilerplate rule counted over every retained generation,
        not only the latest, so a comparison across a site-wide change leaves out both the
        template it replaced and the new one (what template-only changes are judged by)."""
        with self.reading() as connection:
            rows = connection.execute(f"""
                WITH host_size AS (SELECT host, count(*) AS pages FROM pages WHERE host = ? GROUP BY host)
                {_template_digests()}
            """, [host, min_pages, share]).fetchall()
        return {row[1] for row in rows}

    def shared_across_hosts(self, min_hosts: int = 2, limit: int = 1000,
                            with_samples: bool = False) -> list[tuple]:
        """Digests in the latest generations of pages on `min_hosts` or more hosts (and,
        `with_samples`, each one's sample bytes, read through the same connection)."""
        with self.reading() as connection:
            rows = connection.execute(f"""
                WITH c AS (SELECT * FROM {_LATEST_CHUNKS})
                SELECT c.digest, count(DISTINCT c.host) AS hosts, list(DISTINCT c.host ORDER BY c.host),
                       count(DISTINCT c.natural_key) AS pages,
                       min(struct_pack(natural_key := c.natural_key, generation := c.generation,
                                       chunk_index := c.chunk_index)) AS sample
                FROM c
                GROUP BY c.digest HAVING count(DISTINCT c.host) >= ?
                ORDER BY hosts DESC, pages DESC, c.digest LIMIT ?
            """, [min_hosts, limit]).fetchall()
            if not with_samples:
                return rows
            samples = self.chunk_texts([(s["natural_key"], s["generation"], s["chunk_index"])
                                        for *_, s in rows], connection)
        return [(*row, sample) for row, sample in zip(rows, samples)]

    def pages_with_digest(self, digest: bytes) -> list[tuple[str, int, int]]:
        """Every retained (page, generation, chunk index) that holds a digest."""
        with self.reading() as connection:
            # No index finds a digest inside a list row: one scan of them all.
            return connection.execute(f"""
                SELECT natural_key, generation, chunk_index FROM {_chunks_of("chunk_lists")}
                WHERE digest = ? ORDER BY natural_key, generation, chunk_index
            """, [digest]).fetchall()

    def chunk_texts(self, places: Sequence[tuple[str, int, int]],
                    connection: duckdb.DuckDBPyConnection | None = None) -> list[bytes | None]:
        """The bytes of retained chunks, each given as (natural_key, generation, chunk_index),
        cut from their generations' texts; None where not retained."""
        if connection is None:
            with self.reading() as connection:
                return self.chunk_texts(places, connection)
        wanted = {(key, generation) for key, generation, _ in places}
        keys = sorted({key for key, _ in wanted})
        # Two lookups by key for all the places (indexed), not two per page.
        texts = self._texts(connection, wanted)
        lengths = {(key, generation): lengths for key, generation, lengths in _by_keys(connection, """
            SELECT natural_key, generation, lengths FROM chunk_lists WHERE natural_key IN ({keys})
        """, keys, lambda row: (row[0], row[1]) in texts)}
        result = []
        for key, generation, index in places:
            chunks = lengths.get((key, generation), [])
            if (key, generation) not in texts or index >= len(chunks):
                result.append(None)
                continue
            offset = sum(chunks[:index])
            result.append(texts[key, generation][offset:offset + chunks[index]])
        return result


@dataclass(frozen=True)
class PageInfo:
    natural_key: str
    url: str
    host: str
    retention_class: str | None
    latest_generation: int
    first_seen: datetime
    last_fetched: datetime
    last_checked: datetime


_PAGE_COLUMNS = ("natural_key, url, host, retention_class, latest_generation, first_seen, "
                 "last_fetched, last_checked")


@dataclass(frozen=True)
class GenerationInfo:
    generation: int
    fetched_at: datetime
    length: int
    chunk_count: int
    retained: bool
    verdict: str | None
    similarity: float | None
    unchanged_ratio: float | None
    retained_ratio: float | None
    bytes_added: int | None
    bytes_removed: int | None
    excerpt: str | None


@dataclass(frozen=True)
class Version:
    natural_key: str
    generation: int
    text: bytes
    chunks: list[tuple[bytes, int]]  # digest, length, in order


@dataclass(frozen=True)
class ChangeRow:
    """One row of `changes` with its page's URL and host: a change summary."""

    natural_key: str
    host: str
    generation: int
    previous_generation: int | None
    fetched_at: datetime
    verdict: str
    similarity: float | None
    unchanged_ratio: float | None
    retained_ratio: float | None
    bytes_added: int
    bytes_removed: int
    regions: int
    excerpt: str | None
    # Every changed chunk is the host's boilerplate (a template change), at query time
    # against the boilerplate as it is then; None for a first sighting, or where either
    # generation's chunk rows are no longer retained.
    template_only: bool | None = None


_CHANGE_COLUMNS = ("c.natural_key, p.host, c.generation, c.previous_generation, c.fetched_at, "
                   "c.verdict, c.similarity, c.unchanged_ratio, c.retained_ratio, c.bytes_added, "
                   "c.bytes_removed, c.regions, c.excerpt")


def _template_digests(among: str = "") -> str:
    """A host's template: digests on at least `?` (minimum pages) and more than `?` (share)
    of the pages of the hosts in `host_size` (host, pages), counted over every retained
    generation; only the digests of the query `among`, if given."""
    where = f"WHERE c.digest IN ({among})" if among else ""
    return f"""
        SELECT c.host, c.digest
        FROM {_HOSTS_CHUNKS} c
        JOIN host_size h ON h.host = c.host
        {where}
        GROUP BY c.host, c.digest
        HAVING count(DISTINCT c.natural_key) >= ? AND count(DISTINCT c.natural_key) > ? * any_value(h.pages)
    """


def _with_template_only(picked: str, order: str = "") -> str:
    """`picked` (a query of `_CHANGE_COLUMNS`) with a last column, `template_only`.

    A change is template-only when every chunk digest whose count differs between the two
    generations (added, removed, or one copy of a repeated chunk more or fewer) is part of
    the host's template: on at least `?` pages and more than `?` of the host's pages (the
    rule of `host_boilerplate`), counted over every retained generation rather than the
    latest alone, so that the navigation a site-wide change replaced still counts as
    template on the old side. Only the picked rows' chunks are read, and only the digests
    that changed in them are counted over their hosts' pages. Binds, after `picked`'s own
    values: the minimum pages, then the share.
    """
    return f"""
        WITH picked AS ({picked}),
        host_size AS (
            SELECT host, count(*) AS pages FROM pages
            WHERE host IN (SELECT DISTINCT host FROM picked) GROUP BY host
        ),
        counted AS (
            SELECT x.natural_key, x.generation, x.host, cc.digest,
                   count(*) FILTER (WHERE cc.generation = x.generation) AS in_new,
                   count(*) FILTER (WHERE cc.generation = x.previous_generation) AS in_old
            FROM picked x JOIN {_PICKED_CHUNKS} cc
              ON cc.natural_key = x.natural_key
             AND (cc.generation = x.generation OR cc.generation = x.previous_generation)
            GROUP BY ALL
        ),
        template AS ({_template_digests("SELECT digest FROM counted WHERE in_new <> in_old")}),
        flags AS (
            SELECT k.natural_key, k.generation,
                   CASE WHEN sum(k.in_new) = 0 OR sum(k.in_old) = 0 THEN NULL
                        ELSE bool_or(k.in_new <> k.in_old)
                             AND bool_and(k.in_new = k.in_old OR b.digest IS NOT NULL) END AS template_only
            FROM counted k LEFT JOIN template b ON b.host = k.host AND b.digest = k.digest
            GROUP BY ALL
        )
        SELECT picked.*, flags.template_only
        FROM picked LEFT JOIN flags USING (natural_key, generation) {order}
    """


def _database_name(connection: duckdb.DuckDBPyConnection) -> str:
    (name,) = _one(connection.execute("SELECT current_database()"))
    return '"' + name.replace('"', '""') + '"'


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
    from cdc import SPEC

    return SPEC
