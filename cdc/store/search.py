"""The changes' words and the watches: the SQL behind `cdc.analyst.search`.

A search, and every watch of a run's end at once, is one query (`cdc.store.wordindex`): the
index of the changes' tokens gives the sides that hold the phrase, joined with `pages` for
a host, with `changes` for a time, a verdict or a label, and with the template-only changes
alone otherwise; a search's page of hits is joined with its change rows and pages, and
their texts read, for the hits shown only. A run's end reads the matches its batches made
(`cdc.store.indexwriter`) for the watches it started with, and matches the others in one
such query on its own index rows (`run` ascends as rows are appended: DuckDB's zone maps
skip the row groups of other runs).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from cdc.store.connection import _database_name
from cdc.store.indexwriter import append_words, copied_watches, forget_matches, unindex_words
from cdc.store.lookups import _by_keys, _key_table, _one, _registered
from cdc.store.searchquery import SearchQuery
from cdc.store.wordindex import (
    WordsFilter,
    matches_query,
    matching_query,
    registered_tables,
    wanted_tables,
)

FILL_PAGES_PER_STEP = 1_000  # pages whose words are computed at a time by the upgrade
# Hits whose texts are looked up by key (50 in 30 ms on the 100,000-page synthetic store);
# for more (a download of every hit), one scan of the texts costs less.
TEXTS_LOOKED_UP = 5_000
# DuckDB's zstd compresses a column's strings this many rows to a frame, from each row
# group's start (its `ZSTD_VECTOR_SIZE`; row groups are a multiple of it).
ZSTD_ROWS = 2_048
# A page of hits is first looked for among this many of the newest changes, or this many a
# hit asked for (offset and limit), whichever is more (`Search.search_words`).
NEWEST_CHANGES = 2_000
NEWEST_PER_HIT = 20

ADDED, REMOVED = "added", "removed"
SIDES = (ADDED, REMOVED)
# `matching_query`'s rows: a search (its number), the side of a change that holds its phrase.
_MATCHED_SCHEMA = pa.schema([("search", pa.int32()), ("natural_key", pa.string()),
                             ("generation", pa.int64()), ("run", pa.int32())])


def _texts_by_frame(connection: duckdb.DuckDBPyConnection, column: str,
                    wanted: set[tuple[str, int]]) -> list[tuple[str, int, str]]:
    """(natural_key, generation, text) of the `change_words` rows `wanted` from `column`: the
    rows of a zstd frame that holds two or more of them in one range of row ids, each other
    one by its key. Every row read is kept only if it is a wanted one, so a row id that moved
    (a writer between the two statements) costs a lookup by key, never a wrong text."""
    rows: list[tuple[str, int, str]] = []
    keys = sorted({key for key, _ in wanted})
    frames: dict[int, list[int]] = {}
    for *_, rowid in _by_keys(connection, """SELECT natural_key, generation, rowid FROM change_words
                                             WHERE natural_key IN ({keys})""",
                              keys, lambda row: row[:2] in wanted):
        frames.setdefault(rowid // ZSTD_ROWS, []).append(rowid)
    for rowids in frames.values():
        if len(rowids) > 1:
            rows += [row for row in connection.execute(
                f"SELECT natural_key, generation, {column} FROM change_words WHERE rowid BETWEEN ? AND ?",
                [min(rowids), max(rowids)]).fetchall() if row[:2] in wanted]
    missing = wanted - {row[:2] for row in rows}
    if missing:
        rows += _by_keys(connection, f"SELECT natural_key, generation, {column} FROM change_words "
                                     "WHERE natural_key IN ({keys})",
                         sorted({key for key, _ in missing}), lambda row: row[:2] in missing)
    return rows


@dataclass(frozen=True)
class WordsMatch:
    """One side of a change whose words hold a search's phrase, as the store has it."""

    natural_key: str
    url: str
    host: str
    generation: int
    previous_generation: int | None
    fetched_at: datetime
    verdict: str
    template_only: bool | None
    run: int
    side: str  # added or removed
    text: str  # the side's edits as on the page, a line each
    total: int  # matches of the whole search, before limit and offset


@dataclass(frozen=True)
class StoredWatch:
    name: str
    query: str  # JSON of the watch's search (`cdc.store.searchquery.SearchQuery`)
    created_at: datetime


@dataclass(frozen=True)
class WatchHitRow:
    name: str
    run: int
    natural_key: str
    url: str
    generation: int
    previous_generation: int | None
    side: str
    text: str | None  # the side's edits; None where the page's words are gone (re-measured)


def _matched(connection: duckdb.DuckDBPyConnection, searches: Mapping[str, WordsFilter],
             run: int | None, narrow: bool = False) -> tuple[str, list, ExitStack]:
    """The SQL of the searches' hits (`cdc.store.wordindex.matches_query`), its parameters,
    and the registrations it reads, to be closed after the query."""
    wanted = wanted_tables(searches)
    query, values = matches_query(wanted, run, narrow)
    return query, values, registered_tables(connection, wanted)


def watched_runs(connection: duckdb.DuckDBPyConnection, run: int) -> list[int]:
    """The runs whose watch hits run `run`'s end records: the runs since the last run that
    finished before it that did not finish (killed, stopped, failed: their batches are in
    the store, their hits were never recorded), oldest first, and `run` itself. So a
    stopped run's changes are watched by the next run to finish, once, as its rows are
    flagged then (`cdc.store.templates.unflagged_pages`); a run still going beside it is
    recorded again, whole, by its own end (hits are recorded by run, each run's anew)."""
    return [found for (found,) in connection.execute("""
        SELECT run FROM runs
        WHERE run < ? AND ended_at IS NULL
          AND run > coalesce((SELECT max(run) FROM runs WHERE run < ? AND ended_at IS NOT NULL), 0)
        ORDER BY run""", [run, run]).fetchall()] + [run]


class WatchMatching:
    """The watches, and the sides of the changes of a run's end's runs (`watched_runs`) that
    hold each one's phrase: read from the matches its batches made (`cdc.store.indexwriter`)
    for the watches the run started with, matched from the index (`matching_query`) for the
    others (a watch added since; every watch of a run stored before the matches were made);
    found beside the run's end, by a thread of its own, when asked (`beside`); else here.

    Beside: through a second connection to the store, which reads what the run's batches
    committed, where the matching reads: the run's matches, index rows and the watches.
    Nothing of that is written by the run's end until the matching is done (its trim, its
    template flags and own measures; the matches go after the hits are recorded), so the
    matching fills the cores those leave idle, and only the filters of the
    change rows (a template-only flag, a verdict) wait for them (`Search._record_watch_hits`).
    A block that fails stops the matching (`close`)."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, run: int, beside: bool = False):
        saved = dict(connection.execute("SELECT name, query FROM watches ORDER BY name").fetchall())
        self._filters = {name: SearchQuery.from_json(query).words_filter() for name, query in saved.items()}
        self.wanted = wanted_tables(self._filters) if saved else None
        self.runs = watched_runs(connection, run)
        copied = copied_watches(connection, self.runs)
        # Per run, the watches its batches matched: copied as it started, and unchanged since.
        self._matched_by_batches = {of: sorted(name for copy, name, query in copied
                                               if copy == of and saved.get(name) == query)
                                    for of in self.runs}
        self._rows: pa.Table | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if self.wanted is None:
            return
        if not beside:
            self._match(connection)
            return
        database = _database_name(connection)  # the store's name in the process's database
        self._connection = connection.cursor()
        self._connection.execute(f"USE {database}")
        self._thread = threading.Thread(target=self._match, args=(self._connection,),
                                        name="cdc-watch-matching", daemon=True)
        self._thread.start()

    def _match(self, connection: duckdb.DuckDBPyConnection) -> None:
        """The rows (search, natural_key, generation, run) of `matching_query` for each run:
        its batches' matches, and the other watches' from its index rows."""
        try:
            found = [self._from_index(connection, run) for run in self.runs]
            with registered_tables(connection, self.wanted):
                found += [connection.sql("""
                    SELECT s.search, m.natural_key, m.generation, m.run
                    FROM watch_matches m JOIN search_phrases s ON s.query = m.name AND s.added = m.added
                    WHERE m.run = ? AND list_contains(?, m.name)""",
                                         params=[run, names]).to_arrow_table().cast(_MATCHED_SCHEMA)
                          for run, names in self._matched_by_batches.items() if names]
            self._rows = pa.concat_tables(found)
        except BaseException as exc:  # raised in the caller's thread, by `rows`
            self._error = exc

    def _from_index(self, connection: duckdb.DuckDBPyConnection, run: int) -> pa.Table:
        """`matching_query`'s rows of run `run` for the watches its batches did not match,
        read from its index rows, each search numbered as in `wanted`."""
        rest = {name: words for name, words in self._filters.items()
                if name not in self._matched_by_batches[run]}
        if not rest:
            return _MATCHED_SCHEMA.empty_table()
        wanted = wanted_tables(rest)
        query, values = matching_query(wanted, run)
        with registered_tables(connection, wanted):
            rows = connection.sql(query, params=values).to_arrow_table().cast(_MATCHED_SCHEMA)
        # A search's number is its row in `search_phrases`: one (watch, side) each.
        phrases, ours = self.wanted.search_phrases, wanted.search_phrases
        numbers = dict(zip(zip(phrases["query"].to_pylist(), phrases["added"].to_pylist()),
                           phrases["search"].to_pylist()))
        sides = zip(ours["query"].to_pylist(), ours["added"].to_pylist())
        renumbered = pa.array([numbers[side] for side in sides], pa.int32())
        return rows.set_column(0, "search", pc.take(renumbered, rows.column("search")))

    def rows(self) -> pa.Table:
        """`matching_query`'s rows of the runs, once found."""
        self.close()
        if self._error is not None:
            raise self._error
        return self._rows

    def close(self, stop: bool = False) -> None:
        """Wait for the matching, stopped first if `stop`; close its connection."""
        if self._thread is None:
            return
        if stop:
            self._connection.interrupt()
        self._thread.join()
        self._thread = None
        self._connection.close()

    def __enter__(self) -> WatchMatching:
        return self

    def __exit__(self, kind, error, trace) -> None:
        self.close(stop=kind is not None)


class Search:
    """The changes' words and the watches, mixed into `Store`."""

    # --- words -------------------------------------------------------------------------------

    def search_words(self, words: WordsFilter, limit: int | None = None, offset: int = 0) -> list[WordsMatch]:
        """The sides of changes whose words hold the phrases, newest change first.

        The hits are found without their change rows (`matches_query`, narrow) and fetched
        as Arrow (127,000 of a common word in a few ms); a page of them is ordered by
        joining them with the changes fetched since the `NEWEST_CHANGES`-th newest only (all
        of that word's hits joined with every change cost 130 ms), and with every change
        only when these hold fewer hits than the page asks (`_page_of_hits`)."""
        with self.reading() as connection:
            query, matched, registered = _matched(connection, {"": words}, words.run, narrow=True)
            with registered:
                found = connection.sql(query, params=matched).to_arrow_table()
            total, hits = found.num_rows, []
            if total > offset:
                wanted = total - offset if limit is None else min(limit, total - offset)
                newest = max(NEWEST_CHANGES, NEWEST_PER_HIT * (offset + limit)) if limit is not None else None
                with _registered(connection, "found_hits", found):
                    hits = self._page_of_hits(connection, limit, offset, newest)
                    if len(hits) < wanted:
                        hits = self._page_of_hits(connection, limit, offset, None)
            # natural_key, url, host, generation, previous_generation, fetched_at, verdict,
            # template_only, run, side: the columns of `_page_of_hits`.
            texts = self._side_texts(connection, [(key, generation, side)
                                                  for key, _, _, generation, *_, side in hits])
        return [WordsMatch(key, url, host, generation, *middle, side, texts[key, generation, side], total)
                for key, url, host, generation, *middle, side in hits]

    @staticmethod
    def _page_of_hits(connection: duckdb.DuckDBPyConnection, limit: int | None, offset: int,
                      newest: int | None) -> list[tuple]:
        """The hits registered as `found_hits` (`matches_query`'s narrow rows) from `offset`,
        `limit` of them, each with its change row and page, newest change first: among the
        changes fetched no earlier than the `newest`-th newest (None: all), so fewer than
        asked for where the page's hits are not all among those changes. Every change
        fetched after one of those is among them, so the hits found there are the newest
        of all. The time is looked up first and bound: a filter the scan of `changes` applies
        by its zone maps (the newest changes themselves, ordered with their columns, cost
        a common word's search 33 of its 49 ms here; the time alone, 16)."""
        tail, values = ("LIMIT ? OFFSET ?", [limit, offset]) if limit is not None else ("", [])
        since = None
        if newest is not None:
            (since,) = _one(connection.execute("""
                SELECT min(fetched_at) FROM (
                    SELECT fetched_at FROM changes ORDER BY fetched_at DESC LIMIT ?)""", [newest]))
        within, bound = ("WHERE c.fetched_at >= ?", [since]) if since is not None else ("", [])
        return connection.execute(f"""
            SELECT h.natural_key, p.url, p.host, h.generation, h.previous_generation, h.fetched_at,
                   h.verdict, h.template_only, h.run, h.side FROM (
                SELECT h.natural_key, h.generation, c.previous_generation, c.fetched_at, c.verdict,
                       c.template_only, h.run, h.side
                FROM found_hits h JOIN changes c USING (natural_key, generation)
                {within}
                ORDER BY c.fetched_at DESC, h.natural_key, h.generation DESC, h.side {tail}) h
            JOIN pages p USING (natural_key)
            ORDER BY h.fetched_at DESC, h.natural_key, h.generation DESC, h.side""",
                                  [*bound, *values]).fetchall()

    @staticmethod
    def _side_texts(connection: duckdb.DuckDBPyConnection,
                    sides: Sequence[tuple[str, int, str]]) -> dict[tuple[str, int, str], str]:
        """The texts of the sides (natural_key, generation, side) of changes, each side's from
        its own column. For a page of hits, each text is read where it costs least: DuckDB's
        zstd compresses a column's texts `ZSTD_ROWS` rows to a frame, and reading one row
        decompresses its frame up to that row (50 rows of both columns took 60 ms), so the
        rows of a frame that holds several of the texts (the newest hits are the rows written
        last) are read in one range of row ids (3 ms for 50 rows), the others looked up by key
        (DuckDB uses the key index for `natural_key IN (...)` alone, and scans every text once
        the generations are asked for too). For more (a download of every hit), one scan."""
        texts = {}
        for side, column in ((ADDED, "added_text"), (REMOVED, "removed_text")):
            wanted = {(key, generation) for key, generation, of in sides if of == side}
            if not wanted:
                continue
            if len(wanted) > TEXTS_LOOKED_UP:
                with _registered(connection, "hit_changes", pa.table({
                        "natural_key": pa.array([key for key, _ in wanted], pa.string()),
                        "generation": pa.array([generation for _, generation in wanted], pa.int64())})):
                    rows = connection.execute(f"""
                        SELECT natural_key, generation, {column} FROM change_words
                        SEMI JOIN hit_changes USING (natural_key, generation)""").fetchall()
            else:
                rows = _texts_by_frame(connection, column, wanted)
            texts.update({(key, generation, side): text for key, generation, text in rows})
        return texts

    def replace_words(self, connection: duckdb.DuckDBPyConnection, words: pa.Table) -> None:
        """The words of the changes in `words` (`change_words` rows) replaced: re-measured by
        `cdc migrate`, each keeping the run that first measured it where it had words."""
        with _registered(connection, "new_words", words):
            replaced = connection.sql("""
                SELECT n.* REPLACE (coalesce(o.run, n.run) AS run) FROM new_words n
                LEFT JOIN change_words o USING (natural_key, generation)""").to_arrow_table()
            connection.execute("""
                DELETE FROM change_words USING new_words n
                WHERE change_words.natural_key = n.natural_key AND change_words.generation = n.generation""")
            unindex_words(connection, "new_words")
        append_words(connection, replaced)

    def fill_change_words(self, connection: duckdb.DuckDBPyConnection) -> int:
        """The words of every change measured with exact edits (of the whole texts, or of the
        page's own, `own_edits`: its words are the whole texts' all the same) whose two texts
        and chunk lists are still retained, and that has none yet (a store made before words were kept),
        computed as ingest computes them; returns the rows written. The rest (a previous text
        trimmed by retention) cannot be searched: their edits are not known any more."""
        from cdc.core.chunks import chunks_from_lengths
        from cdc.core.compare import compare
        from cdc.core.editwords import edit_words
        from cdc.store.rows import ChangeWordsRow, arrow_table

        pairs = connection.execute("""
            SELECT c.natural_key, c.generation, c.previous_generation, coalesce(g.first_run, 0)
            FROM changes c
            JOIN generations g ON g.natural_key = c.natural_key AND g.generation = c.generation
            JOIN generations o ON o.natural_key = c.natural_key AND o.generation = c.previous_generation
            WHERE c.measure IN ('edits', 'own_edits') AND g.text IS NOT NULL AND o.text IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM change_words w
                              WHERE w.natural_key = c.natural_key AND w.generation = c.generation)
            ORDER BY c.natural_key, c.generation""").fetchall()
        written = 0
        keys = sorted({pair[0] for pair in pairs})
        for start in range(0, len(keys), FILL_PAGES_PER_STEP):
            part = set(keys[start:start + FILL_PAGES_PER_STEP])
            with _registered(connection, "filled_keys", _key_table(sorted(part))):
                held = {(key, generation): rest for key, generation, *rest in connection.execute("""
                    SELECT g.natural_key, g.generation, encode(g.text), l.digests, l.lengths
                    FROM generations g JOIN filled_keys k USING (natural_key)
                    JOIN chunk_lists l ON l.natural_key = g.natural_key AND l.generation = g.generation
                    WHERE g.text IS NOT NULL""").fetchall()}
            rows = []
            for key, generation, previous, run in (pair for pair in pairs if pair[0] in part):
                old, new = held.get((key, previous)), held.get((key, generation))
                if old is None or new is None:
                    continue
                report = compare(chunks_from_lengths(*old[1:]), chunks_from_lengths(*new[1:]),
                                 old_text=old[0], new_text=new[0])
                found = edit_words(key, generation, run, report.edits, old[0], new[0])
                if found is not None:
                    rows.append(found)
            if rows:
                append_words(connection, arrow_table(ChangeWordsRow, rows))
            written += len(rows)
        return written

    # --- watches -----------------------------------------------------------------------------

    def watches(self) -> list[StoredWatch]:
        with self.reading() as connection:
            return [StoredWatch(*row) for row in connection.execute(
                "SELECT name, query, created_at FROM watches ORDER BY name").fetchall()]

    def add_watch(self, name: str, query: str, created_at: datetime) -> bool:
        """Save a watch; False (and nothing written) when one of that name exists."""
        with self.writing() as connection:
            if _one(connection.execute("SELECT 1 FROM watches WHERE name = ?", [name])):
                return False
            connection.execute("INSERT INTO watches VALUES (?, ?, ?)", [name, query, created_at])
        return True

    def remove_watch(self, name: str) -> bool:
        """Remove a watch and its hits; False when there is none of that name."""
        with self.writing() as connection:
            if not _one(connection.execute("SELECT 1 FROM watches WHERE name = ?", [name])):
                return False
            for table in ("watches", "watch_hits", "run_watches", "watch_matches"):
                connection.execute(f"DELETE FROM {table} WHERE name = ?", [name])
        return True

    def _record_watch_hits(self, connection: duckdb.DuckDBPyConnection, run: int,
                           matching: WatchMatching | None = None) -> None:
        """The hits of each watch among the changes of run `run`, and of the runs before it
        that did not finish (`watched_runs`), each recorded for the run that measured the
        change, in the run's end's transaction (a run ends with its hits or not at all): the
        sides that hold a phrase (found by `matching`, else here), then the change rows'
        filters, on the flags and measures the run's end has set."""
        matching = matching or WatchMatching(connection, run)
        connection.execute("DELETE FROM watch_hits WHERE list_contains(?, run)", [matching.runs])
        if matching.wanted is not None:
            # The rows of every run found already: `matches_query` applies the filters alone.
            query, values = matches_query(matching.wanted, None, narrow=True, matched="matched_rows")
            with (_registered(connection, "matched_rows", matching.rows()),
                  registered_tables(connection, matching.wanted)):
                connection.execute(f"""INSERT INTO watch_hits
                                       SELECT query, run, natural_key, generation, side FROM ({query})""",
                                   values)
        forget_matches(connection, matching.runs)  # recorded: the batches' matches have done their part

    def watched_runs(self, run: int) -> list[int]:
        """The runs whose watch hits run `run`'s end records (`watched_runs`)."""
        with self.reading() as connection:
            return watched_runs(connection, run)

    def watch_hits(self, name: str | None = None, run: int | None = None) -> list[WatchHitRow]:
        """Recorded hits, by run, then page and side; of one watch, of one run."""
        conditions, values = [], []
        if name is not None:
            conditions.append("h.name = ?")
            values.append(name)
        if run is not None:
            conditions.append("h.run = ?")
            values.append(run)
        where = ("WHERE " + " AND ".join(conditions)) if conditions else ""
        with self.reading() as connection:
            rows = connection.execute(f"""
                SELECT h.name, h.run, h.natural_key, p.url, h.generation, c.previous_generation, h.side,
                       CASE h.side WHEN 'added' THEN w.added_text ELSE w.removed_text END
                FROM watch_hits h JOIN pages p USING (natural_key)
                LEFT JOIN changes c ON c.natural_key = h.natural_key AND c.generation = h.generation
                LEFT JOIN change_words w ON w.natural_key = h.natural_key AND w.generation = h.generation
                {where} ORDER BY h.run, h.name, h.natural_key, h.generation, h.side""", values).fetchall()
        return [WatchHitRow(*row) for row in rows]

    def watch_hit_counts(self, runs: Sequence[int]) -> dict[tuple[str, int], int]:
        """(watch, run): hits, for the watches that hit in `runs`."""
        with self.reading() as connection:
            return {(name, run): count for name, run, count in connection.execute(
                "SELECT name, run, count(*) FROM watch_hits WHERE list_contains(?, run) GROUP BY ALL",
                [list(runs)]).fetchall()}
