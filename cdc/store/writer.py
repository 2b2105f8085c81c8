"""The ingest write path: page states read to compare a new version, a batch written in
one transaction, generations past the retention limit trimmed, conditional-request
validators, the store's extraction mode, and the re-chunking of retained texts (cdc.ingest.migrate).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from cdc.core.urls import surt_key
from cdc.errors import StoreError
from cdc.store.expired import drop_dead_runs
from cdc.store.indexwriter import append_words, unindex_words
from cdc.store.layout import content_chunk_rows, digest_list
from cdc.store.lookups import (
    _by_keys,
    _for_keys,
    _gather,
    _key_table,
    _keys_of,
    _looked_up,
    _one,
    _registered,
    _rows_at,
)
from cdc.store.rows import MEASURES_SET

DEFAULT_KEEP = 3
_GIVEN_TEXT = "wet"  # cdc.sources.extract.GIVEN_TEXT: the store does not import the extraction
_MODE_WORDS = {"main": "HTML extracted with --extract main", "whole": "HTML extracted with --extract whole",
               _GIVEN_TEXT: "WET text (Common Crawl's own extraction)"}


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

    def most_kept(self) -> int:
        """The most generations any page keeps its text for, whatever its class."""
        return max([self.keep, *(keep for _, keep in self.classes)])

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
    length: int
    chunk_count: int
    first_run: int | None


@dataclass(frozen=True)
class StoredRow:
    """One generation of a page's whole history, as ingest reads it to put a fetch in place:
    its text and chunk list when retained, and the generation its change row was measured
    against."""

    generation: int
    fetched_at: datetime
    content_digest: bytes
    length: int
    chunk_count: int
    first_run: int | None
    text: bytes | None
    digests: bytes | None
    lengths: list[int] | None
    previous: int | None


class StoredFetch(NamedTuple):
    """One fetch of a page's whole history (a `fetches` row of the page)."""

    fetched_at: datetime
    content_digest: bytes
    run: int
    sequence: int


@dataclass(frozen=True)
class PageHistory:
    generations: list[StoredRow]  # in order
    fetches: list[StoredFetch]


class RetainedText(NamedTuple):
    """A retained generation's text, as `cdc migrate` re-chunks it."""

    natural_key: str
    generation: int
    fetched_at: datetime
    text: bytes  # UTF-8
    previous: int | None  # the generation its change row was measured against


class Validators(NamedTuple):
    """A page's conditional-request validators, from its latest HTTP fetch."""

    etag: str | None
    last_modified: str | None


@dataclass(frozen=True)
class WriteBatch:
    """Everything one ingest batch writes, as Arrow tables, in one transaction."""

    pages: pa.Table  # new and updated pages, all columns of `pages`
    generations: pa.Table
    chunks: pa.Table  # the columns of `chunk_lists`: a row per retained generation
    changes: pa.Table
    checked: pa.Table  # natural_key, last_checked: pages seen again with identical content
    fetches: pa.Table  # the columns of `fetches`: fetches not stored before
    seen: pa.Table  # the columns of `page_runs`: each page's latest fetch in the batch
    removed_generations: pa.Table  # natural_key, generation: rows (and chunk lists) replaced
    removed_changes: pa.Table  # natural_key, generation: change rows measured again (and their words)
    words: pa.Table  # the columns of `change_words`: the words of the new change rows
    tokens: pa.Table  # their index rows (`cdc.store.wordindex.index_rows`), built with them

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


def _latest_rows(connection: duckdb.DuckDBPyConnection, table: str, columns: str,
                 latest: dict[str, int]) -> dict[str, tuple]:
    """`columns` of the row of `table` of each page's generation in `latest` (natural_key:
    generation), by page: found by key without them, then read alone (`_rows_at`).

    Looked up by key with them, DuckDB reads the columns asked for of every generation of
    the pages before the latest is picked: where pages hold many (a run that imports long
    histories retains every text until its end), a batch's peak memory grew with the run
    (50 MB more by the end of 20 pages of 300 versions, tests/test_memory.py), as did its
    time; and in a store of three a page, two of the three texts read were dropped."""
    places = {(key, generation): rowid for key, generation, rowid in _by_keys(
        connection, f"SELECT natural_key, generation, rowid FROM {table} WHERE natural_key IN ({{keys}})",
        sorted(latest), lambda row: latest[row[0]] == row[1])}
    return {key: rest for key, _, *rest in _rows_at(connection, table, columns, places)}


def _latest_by_index(connection: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> tuple[list, dict, dict]:
    """Page rows, latest generations (digest, UTF-8 text) and their chunk lists, for keys
    few next to the store's generations.

    The generations are looked up alone (`_latest_rows`), so DuckDB reads only the
    blocks that hold these pages. (Joined, it scans every generation's text: on a 1 GB WARC
    ingest that grew to 130 MB a batch by the end, and it grows with the store.) Only the
    latest generation's rows are asked for: within a run every text is retained, and reading
    a page's older ones too made a batch's peak memory grow with the run's input; so are the
    chunk lists. The pages are narrow rows: looked up by key or joined whole, whichever costs
    less (`_for_keys`).
    """
    pages = _for_keys(connection, """
        SELECT natural_key, retention_class, latest_generation, last_fetched, last_checked
        FROM pages WHERE natural_key IN ({keys})
    """, keys, "pages")
    latest = {key: generation for key, _, generation, *_ in pages}
    generations = _latest_rows(connection, "generations",
                               "content_digest, encode(text), length, chunk_count, first_run", latest)
    chunks = _latest_rows(connection, "chunk_lists", "digests, lengths", latest)
    return pages, generations, chunks


def _latest_by_scan(connection: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> tuple[list, dict, dict]:
    """The same as `_latest_by_index`, by joining the keys with whole tables: for many keys,
    one scan costs less time than thousands of row fetches, though it reads every text."""
    with _registered(connection, "wanted_keys", _key_table(keys)):
        rows = connection.execute("""
            SELECT p.natural_key, p.retention_class, p.latest_generation, p.last_fetched,
                   p.last_checked, g.content_digest, encode(g.text), g.length, g.chunk_count, g.first_run
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


class Writer:
    """The ingest write path, mixed into `Store`: reads what ingest compares against, and
    writes through a connection from `Store.writing()`."""

    path: Path

    # --- re-chunking (cdc.ingest.migrate) ----------------------------------------------------------

    def retained_keys(self, connection: duckdb.DuckDBPyConnection) -> list[str]:
        """Pages with at least one retained text, in key order."""
        return [row[0] for row in connection.execute(
            "SELECT DISTINCT natural_key FROM generations WHERE text IS NOT NULL ORDER BY 1").fetchall()]

    def retained_texts(self, connection: duckdb.DuckDBPyConnection,
                       keys: Sequence[str]) -> list[RetainedText]:
        """The retained generations of `keys`, by key and generation."""
        rows = _by_keys(connection, """
            SELECT natural_key, generation, fetched_at, encode(text) FROM generations
            WHERE natural_key IN ({keys}) AND text IS NOT NULL
        """, keys)
        previous = {(key, generation): before for key, generation, before in _by_keys(
            connection, "SELECT natural_key, generation, previous_generation FROM changes "
                        "WHERE natural_key IN ({keys})", keys)}
        rows = [RetainedText(*row, previous.get((row[0], row[1]))) for row in rows]
        return sorted(rows, key=lambda row: (row.natural_key, row.generation))

    def replace_chunks(self, connection: duckdb.DuckDBPyConnection, keys: Sequence[str],
                       chunks: pa.Table, changes: pa.Table) -> None:
        """The chunk lists of `keys` replaced by `chunks` (`chunk_lists` rows; chunk counts
        follow), and the change rows in `changes` replaced, matched by page and generation.
        The pages' template-only flags are cleared, to be counted again from the new digests
        (`refresh_templates`)."""
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
            connection.execute("UPDATE changes SET template_only = NULL, template_edit = NULL "
                               "WHERE natural_key IN (SELECT natural_key FROM migrated_keys)")
            connection.execute(f"""
                UPDATE changes SET {MEASURES_SET}
                FROM migrated_changes m
                WHERE changes.natural_key = m.natural_key AND changes.generation = m.generation
            """)

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
        if _looked_up(connection, "generations", keys):  # a large store next to the batch
            pages, generations, chunks = _latest_by_index(connection, keys)
        else:
            pages, generations, chunks = _latest_by_scan(connection, keys)
        states = {}
        for key, retention_class, generation, fetched, checked in pages:
            if key not in generations:
                continue
            content_digest, text, length, chunk_count, first_run = generations[key]
            digests, lengths = chunks.get(key, (b"", []))
            states[key] = PageState(key, retention_class, generation, fetched, checked, content_digest, text,
                                    digest_list(digests), lengths, length, chunk_count, first_run)
        return states

    def page_histories(self, connection: duckdb.DuckDBPyConnection,
                       keys: Sequence[str]) -> dict[str, PageHistory]:
        """Every generation (retained texts and chunk lists included) and every fetch of the
        pages among `keys`: what ingest reads of a page whose batch reaches back before its
        latest fetch. Looked up by key, table by table, as `page_states` does."""
        if not keys:
            return {}
        generations = _by_keys(connection, """
            SELECT natural_key, generation, fetched_at, content_digest, length, chunk_count, first_run,
                   encode(text) FROM generations WHERE natural_key IN ({keys})
        """, keys)
        lists = {(key, generation): (digests, lengths) for key, generation, digests, lengths in _by_keys(
            connection, "SELECT natural_key, generation, digests, lengths FROM chunk_lists "
                        "WHERE natural_key IN ({keys})", keys)}
        previous = {(key, generation): before for key, generation, before in _by_keys(
            connection, "SELECT natural_key, generation, previous_generation FROM changes "
                        "WHERE natural_key IN ({keys})", keys)}
        histories = {key: PageHistory([], []) for key in keys}
        for key, generation, *columns, text in sorted(generations, key=lambda row: (row[0], row[1])):
            digests, lengths = lists.get((key, generation), (None, None))
            histories[key].generations.append(StoredRow(generation, *columns, text, digests, lengths,
                                                        previous.get((key, generation))))
        for key, *fetch in _by_keys(connection, """
                SELECT natural_key, fetched_at, content_digest, run, sequence FROM fetches
                WHERE natural_key IN ({keys})""", keys):
            histories[key].fetches.append(StoredFetch(*fetch))
        return {key: history for key, history in histories.items() if history.generations}

    def write(self, connection: duckdb.DuckDBPyConnection, batch: WriteBatch) -> None:
        """One batch in one transaction: the rows a late fetch replaces removed, rows appended
        in bulk, pages upserted. Texts past the retention limit are trimmed at the end of the
        run (`finish_run`): a fetch arriving later in the run may need them to be measured."""
        tables = {"batch_pages": batch.pages, "batch_generations": batch.generations,
                  "batch_chunks": batch.chunks, "batch_changes": batch.changes,
                  "batch_checked": batch.checked, "batch_fetches": batch.fetches, "batch_seen": batch.seen,
                  "removed_generations": batch.removed_generations, "removed_changes": batch.removed_changes,
                  "batch_words": batch.words}
        with ExitStack() as registered:
            for name, table in tables.items():
                registered.enter_context(_registered(connection, name, table))
            self._write_tables(connection, batch)

    def _write_tables(self, connection: duckdb.DuckDBPyConnection, batch: WriteBatch) -> None:
        """`write`'s statements, with the batch's tables registered. Each touches only the
        batch's pages: appends, and updates and deletes by key (`_for_keys`), so a batch costs
        as much in a store of a million pages as in a small one."""
        for table in ("generations", "chunk_lists"):
            _for_keys(connection, f"""
                DELETE FROM {table} USING removed_generations r
                WHERE {table}.natural_key = r.natural_key AND {table}.generation = r.generation
                  AND {table}.natural_key IN ({{keys}})""",
                      batch.removed_generations.column("natural_key").to_pylist(), table)
        for table in ("changes", "change_words"):
            _for_keys(connection, f"""
                DELETE FROM {table} USING removed_changes r
                WHERE {table}.natural_key = r.natural_key AND {table}.generation = r.generation
                  AND {table}.natural_key IN ({{keys}})""",
                      batch.removed_changes.column("natural_key").to_pylist(), "changes")
        connection.execute("INSERT INTO generations SELECT * FROM batch_generations")
        connection.execute("INSERT INTO chunk_lists SELECT * FROM batch_chunks")
        # Their template-only flags are set at the run's end (`cdc.store.templates`).
        connection.execute("INSERT INTO changes BY NAME SELECT * FROM batch_changes")
        if batch.removed_changes.num_rows:  # their index rows: one join, as the table has no key index
            unindex_words(connection, "removed_changes")
        if batch.words.num_rows:
            append_words(connection, batch.words, batch.tokens)
        connection.execute("INSERT INTO fetches SELECT * FROM batch_fetches")
        connection.execute("INSERT INTO page_runs SELECT * FROM batch_seen")
        # The pages stored before are updated (the URL and class of the page's latest fetch:
        # a late fetch changes neither), and the others, the ones no row was updated for,
        # inserted.
        keys = batch.pages.column("natural_key")
        updated = _for_keys(connection, """
            UPDATE pages SET
                   url = CASE WHEN b.last_checked >= pages.last_checked THEN b.url ELSE pages.url END,
                   retention_class = coalesce(b.retention_class, pages.retention_class),
                   latest_generation = b.latest_generation, last_fetched = b.last_fetched,
                   first_seen = least(pages.first_seen, b.first_seen),
                   last_checked = greatest(pages.last_checked, b.last_checked)
            FROM batch_pages b WHERE pages.natural_key = b.natural_key AND pages.natural_key IN ({keys})
            RETURNING pages.natural_key""", keys.to_pylist(), "pages")
        fresh = batch.pages.filter(pc.invert(pc.is_in(keys, value_set=pa.array([row[0] for row in updated],
                                                                                 pa.string()))))
        if fresh.num_rows:  # a SURT per new page, made once (cdc.core.urls.surt_key)
            surts = [surt_key(key) for key in fresh.column("natural_key").to_pylist()]
            fresh = fresh.append_column("surt", pa.array(surts, pa.string()))
            with _registered(connection, "fresh_pages", fresh):
                connection.execute("INSERT INTO pages BY NAME SELECT * FROM fresh_pages")
        _for_keys(connection, """
            UPDATE pages SET last_checked = greatest(pages.last_checked, c.last_checked)
            FROM batch_checked c WHERE pages.natural_key = c.natural_key AND pages.natural_key IN ({keys})""",
                  batch.checked.column("natural_key").to_pylist(), "pages")
        if batch.removed_generations.num_rows:  # a backfill moved starts: annotations follow
            self._follow_moved_generations(connection)

    # --- live fetching: conditional-request validators --------------------------------------

    def page_validators(self, connection: duckdb.DuckDBPyConnection,
                        keys: Sequence[str]) -> dict[str, Validators]:
        """The validators of each page among `keys` the store has."""
        if not keys:
            return {}
        with _registered(connection, "wanted_keys", _key_table(keys)):
            rows = connection.execute("""
                SELECT p.natural_key, p.etag, p.last_modified
                FROM pages p JOIN wanted_keys w USING (natural_key)
            """).fetchall()
        return {key: Validators(etag, last_modified) for key, etag, last_modified in rows}


    def save_validators(self, connection: duckdb.DuckDBPyConnection,
                        rows: Sequence[tuple[str, str | None, str | None]]) -> None:
        """Set (natural_key, etag, last_modified) of pages the store has."""
        if not rows:
            return
        keys, etags, modified = zip(*rows)
        with _registered(connection, "batch_validators", pa.table({
                "natural_key": pa.array(keys, pa.string()), "etag": pa.array(etags, pa.string()),
                "last_modified": pa.array(modified, pa.string())})):
            connection.execute("""
                UPDATE pages SET etag = v.etag, last_modified = v.last_modified
                FROM batch_validators v WHERE pages.natural_key = v.natural_key
            """)


    def mark_checked(self, connection: duckdb.DuckDBPyConnection,
                     rows: Sequence[tuple[str, datetime]], run: int | None = None) -> None:
        """Move `last_checked` of pages forward (a 304, a WARC revisit: the page is as
        stored); with `run`, record that the run saw each page, with the content digest of
        the generation current at that time (`page_runs`), as a fetch of it would."""
        if not rows:
            return
        keys, times = zip(*rows)
        checked = pa.table({"natural_key": pa.array(keys, pa.string()),
                            "last_checked": pa.array(times, pa.timestamp("us"))})
        with _registered(connection, "batch_checked", checked):
            _for_keys(connection, """
                UPDATE pages SET last_checked = greatest(pages.last_checked, c.last_checked)
                FROM (SELECT natural_key, max(last_checked) AS last_checked
                      FROM batch_checked GROUP BY natural_key) c
                WHERE pages.natural_key = c.natural_key AND pages.natural_key IN ({keys})
            """, keys, "pages")
            if run is not None:
                _for_keys(connection, f"""
                    INSERT INTO page_runs
                    SELECT c.natural_key, {int(run)}, c.last_checked, g.content_digest
                    FROM (SELECT * FROM batch_checked WHERE natural_key IN ({{keys}})) c
                    ASOF JOIN (SELECT natural_key, fetched_at, content_digest FROM generations
                               WHERE natural_key IN ({{keys}})) g
                      ON g.natural_key = c.natural_key AND c.last_checked >= g.fetched_at
                """, keys, "generations")

    def _trim(self, connection: duckdb.DuckDBPyConnection, keys: Sequence[str] | None) -> int:
        """Drop text and chunk lists of generations past each page's retention limit: all but
        its newest `keep` by fetch time (generation numbers order as fetch times do), for the
        pages `keys` (None: every page). Returns the bytes of text dropped."""
        policy = self.retention(connection)
        limits = ", ".join(f"({int(keep)}, ?)" for _, keep in policy.classes)
        # The pages' retained generations, newest first, and their limits: a page's rows come
        # whole in each group of keys, as the window over a page needs. Only a policy with
        # classes reads the pages' classes (a lookup of every page more).
        classes = "" if not policy.classes else """
            JOIN (SELECT natural_key, retention_class FROM pages WHERE natural_key IN ({keys})) p
              USING (natural_key) LEFT JOIN class_limits l USING (retention_class)"""
        limit = f"coalesce(l.keep, {int(policy.keep)})" if policy.classes else str(int(policy.keep))
        expired = f"""
            SELECT g.natural_key, g.generation, g.length FROM (
                SELECT natural_key, generation, length, text IS NOT NULL AS held,
                       row_number() OVER (PARTITION BY natural_key ORDER BY generation DESC) AS newest
                FROM generations WHERE natural_key IN ({{keys}})
            ) g {classes}
            WHERE g.held AND g.newest > {limit}"""
        connection.execute(
            "CREATE OR REPLACE TEMP TABLE class_limits (keep INTEGER, retention_class VARCHAR)")
        if policy.classes:
            connection.execute(f"INSERT INTO class_limits VALUES {limits}",
                               [name for name, _ in policy.classes])
        _gather(connection, "expired", expired, keys, "generations")
        (dropped,) = _one(connection.execute("SELECT coalesce(sum(length), 0) FROM expired"))
        expired_keys = _keys_of(connection, "expired")
        _for_keys(connection, """
            DELETE FROM chunk_lists USING expired e
            WHERE chunk_lists.natural_key = e.natural_key AND chunk_lists.generation = e.generation
              AND chunk_lists.natural_key IN ({keys})""", expired_keys, "chunk_lists")
        # The rows to empty are found by key, then deleted by row id and appended again
        # without their text. An UPDATE of the text in place made the commit write back the
        # text column of every row group holding one (a page's generations are spread over
        # the table by the crawls that brought them): into a 1,000,000-page store a run's
        # 9,000 texts touched 20 of 25 row groups, and the commit took 18.9 s and more than
        # 16 GB of free disk; deleted and appended, 0.3 s. The deleted texts' bytes stay in
        # the file until it is compacted (`dead_text`, counted by the caller).
        _gather(connection, "expired_rows", """
            SELECT g.rowid AS row_id FROM generations g JOIN expired e USING (natural_key, generation)
            WHERE g.natural_key IN ({keys})""", expired_keys, "generations")
        connection.execute("""CREATE TEMP TABLE trimmed AS SELECT * REPLACE (NULL AS text) FROM generations
                              WHERE rowid IN (SELECT row_id FROM expired_rows)""")
        connection.execute("DELETE FROM generations WHERE rowid IN (SELECT row_id FROM expired_rows)")
        connection.execute("INSERT INTO generations SELECT * FROM trimmed")
        connection.execute("DROP TABLE trimmed")
        connection.execute("DROP TABLE expired_rows")
        connection.execute("DROP TABLE expired")
        connection.execute("DROP TABLE class_limits")
        return dropped

    def restore_texts(self, connection: duckdb.DuckDBPyConnection, texts: pa.Table) -> None:
        """Give their texts and chunk lists back to the generations that hold none: `texts`
        (natural_key, digest, text as UTF-8, digests, lengths) a run kept beside the store
        (`cdc.store.expired`), expired under a retention limit raised since. Deleted and
        appended again, as `_trim` empties them (and the trim that follows keeps what the
        limit keeps)."""
        with _registered(connection, "restored", texts):
            connection.execute("""
                CREATE TEMP TABLE restoring AS
                SELECT g.rowid AS row_id, g.* REPLACE (decode(r.text) AS text),
                       r.digests, r.lengths
                FROM generations g
                JOIN (SELECT DISTINCT ON (natural_key, digest) * FROM restored) r
                  ON g.natural_key = r.natural_key AND g.content_digest = r.digest
                WHERE g.text IS NULL""")
        connection.execute("DELETE FROM generations WHERE rowid IN (SELECT row_id FROM restoring)")
        connection.execute("INSERT INTO generations SELECT * EXCLUDE (row_id, digests, lengths) "
                           "FROM restoring")
        connection.execute("""
            INSERT INTO chunk_lists SELECT natural_key, generation, digests, lengths FROM restoring r
            WHERE NOT EXISTS (SELECT 1 FROM chunk_lists c
                              WHERE c.natural_key = r.natural_key AND c.generation = r.generation)""")
        connection.execute("DROP TABLE restoring")

    def prune(self, policy: RetentionPolicy) -> None:
        """Apply a new retention policy to every page, and keep it for later ingests; the
        templates and template-only flags follow the chunk lists that are left."""
        with self.write_lock():
            with self.writing() as connection:
                self.set_meta(connection, "retention", policy.to_json())
                self._trim(connection, None)
                self._refresh_templates(connection, None)
            drop_dead_runs(self.path)  # what killed runs kept: every page is trimmed
        self.compact()

    def check_extraction_mode(self, mode: str, connection: duckdb.DuckDBPyConnection | None = None) -> None:
        """Refuse `mode` if this store holds text made another way: pages made text two ways
        would compare as changed when only the extraction differs. Nothing is written: a run
        checks before it reads, and claims the mode with its first batch
        (`claim_extraction_mode`), so a run that fails claims nothing."""
        held = self._extraction_mode(connection)
        if held is None or held == mode:
            return
        if _GIVEN_TEXT in (held, mode):  # no --extract turns WET text into HTML or back
            raise StoreError(
                f"{self.path} holds {_MODE_WORDS.get(held, held)}, not {_MODE_WORDS.get(mode, mode)}: the "
                "same page made text two ways would compare as changed; ingest these files into another "
                "store (--db PATH)")
        raise StoreError(f"{self.path} holds pages extracted with --extract {held}, not {mode}: use "
                         f"--extract {held}, or another store (--db PATH) for {mode} extraction")

    def claim_extraction_mode(self, mode: str, connection: duckdb.DuckDBPyConnection | None = None) -> None:
        """Record how this store's text is made, or refuse another way (`check_extraction_mode`);
        in `connection`'s transaction when given (a run's first batch), else in its own."""
        if connection is None:
            with self.writing() as own:
                self.claim_extraction_mode(mode, own)
            return
        self.check_extraction_mode(mode, connection)
        if self._extraction_mode(connection) is None:
            self.set_meta(connection, "extraction", mode)

    def _extraction_mode(self, connection: duckdb.DuckDBPyConnection | None) -> str | None:
        if connection is None:
            if not self.path.exists():
                return None
            with self.reading() as own:
                return self._extraction_mode(own)
        row = _one(connection.execute("SELECT value FROM meta WHERE key = 'extraction'"))
        return row[0] if row else None

    def set_retention(self, policy: RetentionPolicy) -> None:
        with self.writing() as connection:
            self.set_meta(connection, "retention", policy.to_json())
