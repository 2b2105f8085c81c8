"""The changes' words and the watches: the SQL behind `cdc.analyst.search`.

Layout: a search is `contains(side_words, ' phrase ')` over one column of `change_words`, a
scan, then a join of the matches' keys with `changes` and `pages` for the filters (host,
verdict, run, time, template-only), the text read only for the hits shown. Chosen over
DuckDB's `fts` extension (BM25 ranking, no phrase or substring query, a download) and over
a table of a row per word (ingest would write a row and an index entry per word, a phrase
would be a join per word), for its small cost at ingest and its exact answers in every
script. What it costs, measured (`benchmarks/search.py`): on the rustbook histories (3,113
changes, 2.5 MB of words) a search is a few ms; on the 100,000-page synthetic store, whose
every page changes every crawl (a fifth of them rewritten whole: 283 MB of words for 200,000
changes), about 220 ms of CPU a side to scan, over the 300 ms target of issue 22 on a loaded
machine. What would meet it there: a posting table of each run's tokens, sorted by token,
to find the candidate rows before the scan.

A watch reads only its run's rows (`run` ascends as rows are appended: DuckDB's zone maps
skip the row groups of other runs), once for all watches (`_record_watch_hits`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import duckdb
import numpy as np
import pyarrow as pa

from cdc.store.lookups import _key_table, _one, _registered

FILL_PAGES_PER_STEP = 1_000  # pages whose words are computed at a time by the upgrade

ADDED, REMOVED = "added", "removed"
SIDES = (ADDED, REMOVED)


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
    query: str  # JSON of the watch's search (`cdc.analyst.search.SearchQuery`)
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


@dataclass(frozen=True)
class WordsFilter:
    """What `search_words` matches: a side's words (from `cdc.core.editwords.search_words`; both
    sides given: a change must match both), and the change rows' filters."""

    added: str | None = None
    removed: str | None = None
    either: str | None = None
    host: str | None = None
    run: int | None = None  # the run that measured the change
    since: datetime | None = None
    until: datetime | None = None
    verdicts: tuple[str, ...] = ()
    include_template: bool = False


def _matching(words: WordsFilter) -> tuple[str, list]:
    """The rows of `change_words` (with a `side`) whose words hold the filter's phrases."""
    parts, values = [], []
    wanted = [(side, phrase) for side, phrase in ((ADDED, words.added), (REMOVED, words.removed)) if phrase]
    wanted += [(side, words.either) for side in SIDES] if words.either else []
    run = "AND run = ?" if words.run is not None else ""
    for side, phrase in wanted:
        parts.append(f"""SELECT natural_key, generation, run, '{side}' AS side
                         FROM change_words WHERE contains({side}_words, ?) {run}""")
        values += [phrase] + ([words.run] if words.run is not None else [])
    query = " UNION ALL ".join(parts)
    if words.added and words.removed:  # both said: the changes that did both
        query = f"""SELECT * FROM ({query})
                    QUALIFY count(DISTINCT side) OVER (PARTITION BY natural_key, generation) = 2"""
    return query, values


def _change_conditions(words: WordsFilter) -> tuple[str, list]:
    conditions, values = [], []
    if not words.include_template:
        conditions.append("c.template_only IS NOT TRUE")
    if words.host:
        conditions.append("p.host = ?")
        values.append(words.host)
    if words.since:
        conditions.append("c.fetched_at >= ?")
        values.append(words.since)
    if words.until:
        conditions.append("c.fetched_at < ?")
        values.append(words.until)
    if words.verdicts:
        conditions.append("list_contains(?, c.verdict)")
        values.append(list(words.verdicts))
    return ("WHERE " + " AND ".join(conditions)) if conditions else "", values


# The matches' keys only: their text is read for the hits shown (a common word matches most
# rows, and carrying every match's text through the join and the sort took seconds).
_MATCH_COLUMNS = """m.natural_key, p.url, p.host, m.generation, c.previous_generation, c.fetched_at,
                    c.verdict, c.template_only, m.run, m.side"""


def _matches_query(words: WordsFilter) -> tuple[str, list]:
    matching, values = _matching(words)
    where, more = _change_conditions(words)
    return f"""SELECT {_MATCH_COLUMNS} FROM ({matching}) m
               JOIN changes c USING (natural_key, generation)
               JOIN pages p ON p.natural_key = m.natural_key {where}""", values + more


class _Joined:
    """One side's words of a run's changes as they arrive from DuckDB, an Arrow string column:
    its bytes end to end and their offsets, to find phrases in by row without a Python string
    a row. A phrase never matches across two rows: each row's words begin and end with a
    space, so where two rows meet there are two spaces, which no phrase (`search_words`) holds."""

    def __init__(self, column: pa.ChunkedArray):
        array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        width = np.int64 if pa.types.is_large_string(array.type) else np.int32
        _, offsets, data = array.buffers()
        # A list, for bisect: numpy's searchsorted of one Python int took 55 µs (a conversion).
        self.starts = np.frombuffer(offsets, dtype=width)[array.offset:array.offset + len(array) + 1].tolist()
        self.text = data.to_pybytes() if data is not None else b""

    def rows_holding(self, phrase: str) -> list[int]:
        """The rows whose words hold `phrase` (from `cdc.core.editwords.search_words`), in order."""
        wanted, rows = phrase.encode(), []
        starts, find = self.starts, self.text.find
        at = find(wanted, starts[0])
        while at != -1:
            row = bisect_right(starts, at) - 1
            rows.append(row)
            at = find(wanted, starts[row + 1])
        return rows


class Search:
    """The changes' words and the watches, mixed into `Store`."""

    # --- words -------------------------------------------------------------------------------

    def search_words(self, words: WordsFilter, limit: int | None = None, offset: int = 0) -> list[WordsMatch]:
        """The sides of changes whose words hold the phrases, newest change first."""
        query, values = _matches_query(words)
        tail = ""
        if limit is not None:
            tail = "LIMIT ? OFFSET ?"
            values += [limit, offset]
        with self.reading() as connection:
            rows = connection.execute(f"""
                SELECT h.* EXCLUDE (total),
                       CASE h.side WHEN 'added' THEN w.added_text ELSE w.removed_text END, h.total
                FROM (SELECT *, count(*) OVER () AS total FROM ({query})
                      ORDER BY fetched_at DESC, natural_key, generation DESC, side {tail}) h
                JOIN change_words w USING (natural_key, generation)
                ORDER BY h.fetched_at DESC, h.natural_key, h.generation DESC, h.side""", values).fetchall()
        return [WordsMatch(*row) for row in rows]

    def replace_words(self, connection: duckdb.DuckDBPyConnection, words: pa.Table) -> None:
        """The words of the changes in `words` (`change_words` rows) replaced: re-measured by
        `cdc migrate`, each keeping the run that first measured it where it had words."""
        with _registered(connection, "new_words", words):
            connection.execute("""
                CREATE OR REPLACE TEMP TABLE replaced_words AS
                SELECT n.* REPLACE (coalesce(o.run, n.run) AS run) FROM new_words n
                LEFT JOIN change_words o USING (natural_key, generation)""")
            connection.execute("""
                DELETE FROM change_words USING new_words n
                WHERE change_words.natural_key = n.natural_key AND change_words.generation = n.generation""")
            connection.execute("INSERT INTO change_words SELECT * FROM replaced_words")
            connection.execute("DROP TABLE replaced_words")

    def fill_change_words(self, connection: duckdb.DuckDBPyConnection) -> int:
        """The words of every change measured with exact edits whose two texts and chunk lists
        are still retained, and that has none yet (a store made before words were kept),
        computed as ingest computes them; returns the rows written. The rest (a previous text
        trimmed by retention) cannot be searched: their edits are not known any more."""
        from cdc.core.chunks import DIGEST_SIZE, chunks_from_lengths
        from cdc.core.compare import compare
        from cdc.core.editwords import edit_words
        from cdc.store.rows import ChangeWordsRow, arrow_table

        pairs = connection.execute("""
            SELECT c.natural_key, c.generation, c.previous_generation, coalesce(g.first_run, 0)
            FROM changes c
            JOIN generations g ON g.natural_key = c.natural_key AND g.generation = c.generation
            JOIN generations o ON o.natural_key = c.natural_key AND o.generation = c.previous_generation
            WHERE c.measure = 'edits' AND g.text IS NOT NULL AND o.text IS NOT NULL
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
                old_chunks, new_chunks = (chunks_from_lengths(
                    [digests[at:at + DIGEST_SIZE] for at in range(0, len(digests), DIGEST_SIZE)], lengths)
                    for _, digests, lengths in (old, new))
                report = compare(old_chunks, new_chunks, old_text=old[0], new_text=new[0])
                found = edit_words(key, generation, run, report.edits, old[0], new[0])
                if found is not None:
                    rows.append(found)
            if rows:
                with _registered(connection, "filled_words", arrow_table(ChangeWordsRow, rows)):
                    connection.execute("INSERT INTO change_words SELECT * FROM filled_words")
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
            connection.execute("DELETE FROM watches WHERE name = ?", [name])
            connection.execute("DELETE FROM watch_hits WHERE name = ?", [name])
        return True

    def _record_watch_hits(self, connection: duckdb.DuckDBPyConnection, run: int) -> None:
        """The hits of each watch among the changes run `run` measured, recorded for the run
        (in the run's end's transaction: a run ends with its hits or not at all)."""
        from cdc.analyst.search import SearchQuery

        connection.execute("DELETE FROM watch_hits WHERE run = ?", [run])
        saved = [(name, SearchQuery.from_json(query).words_filter()) for name, query in connection.execute(
            "SELECT name, query FROM watches ORDER BY name").fetchall()]
        if not saved:
            return
        # The run's words read once, as Arrow (each side's bytes end to end), and every
        # watch's phrases found in them by Python's substring search: one query per watch
        # scanned the run's rows again for each (0.6 s a watch for a run of 100,000 changes).
        words = connection.sql("SELECT natural_key, generation, added_words, removed_words "
                               "FROM change_words WHERE run = $run", params={"run": run}).to_arrow_table()
        keys, generations = words.column("natural_key").to_pylist(), words.column("generation").to_pylist()
        sides = {side: _Joined(words.column(f"{side}_words")) for side in SIDES}
        by_filters: dict[WordsFilter, list[tuple[str, str, int]]] = {}
        for name, found in saved:
            matches = [(side, row) for side, phrase in ((ADDED, found.added or found.either),
                                                        (REMOVED, found.removed or found.either)) if phrase
                       for row in sides[side].rows_holding(phrase)]
            if found.added and found.removed:  # a change that did both
                both = {row for side, row in matches if side == ADDED} & {row for side, row in matches
                                                                          if side == REMOVED}
                matches = [(side, row) for side, row in matches if row in both]
            filters = replace(found, added=None, removed=None, either=None)
            by_filters.setdefault(filters, []).extend((name, side, row) for side, row in matches)
        for filters, matches in by_filters.items():
            where, values = _change_conditions(filters)
            table = pa.table({"name": [name for name, _, _ in matches],
                              "natural_key": [keys[row] for _, _, row in matches],
                              "generation": pa.array([generations[row] for _, _, row in matches], pa.int64()),
                              "side": [side for _, side, _ in matches]},
                             schema=pa.schema([("name", pa.string()), ("natural_key", pa.string()),
                                               ("generation", pa.int64()), ("side", pa.string())]))
            with _registered(connection, "run_matches", table):
                connection.execute(f"""
                    INSERT INTO watch_hits SELECT m.name, ?, m.natural_key, m.generation, m.side
                    FROM run_matches m JOIN changes c USING (natural_key, generation)
                    JOIN pages p ON p.natural_key = m.natural_key {where}""", [run, *values])

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
