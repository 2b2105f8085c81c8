"""The index of the changes' words (`change_tokens`), and the one query that matches searches
against it: `cdc search`, the Search page and every watch of a run's end.

Layout: a row per distinct token of each side of each `change_words` row (token, page,
generation, run, side), appended a batch at a time sorted by token. DuckDB keeps each row
group's smallest and largest token (its zone map), so `token IN (...)` reads about one row
group a batch, and with `run = ?` only that run's: a lookup joins a small set instead of
scanning every change's words. Measured on the 100,000-page synthetic store
(`benchmarks/search.py`, 200,000 changes, 283 MB of words, 28.5 million index rows): a
common word or a rare phrase in well under 300 ms, where a scan of the words (`contains` over
each side's column) took 0.5-0.8 s; the index costs about 20 µs of CPU a change of 100
tokens at ingest. Chosen over DuckDB's `fts` extension (BM25 ranking, no phrase query, a
download at first use) and over an ART index on the tokens (built in memory, and not used for
a lookup that matches more than `index_scan_max_count` rows).

How a phrase is matched, exactly as a substring test of the words would (`cdc.core.editwords`):
the index gives the sides that hold every token of the phrase; a phrase of one token is then
a hit, and a longer one is a hit where the side's words hold it as they are, tested on those
candidates' rows only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import duckdb
import pyarrow as pa


def index_words(connection: duckdb.DuckDBPyConnection, words: str) -> None:
    """Index the `change_words` rows of the table named `words` (a registered batch or a
    temporary table of that layout; a name this package chooses, never input). A token's
    positions are its places in the side's words split at each space, so the line between
    two edits takes a place too and no phrase runs across it."""
    connection.execute(f"""
        INSERT INTO change_tokens
        SELECT token, natural_key, generation, run, added, list(position)::INTEGER[] FROM (
            SELECT natural_key, generation, run, true AS added, unnest(split) AS token,
                   generate_subscripts(split, 1) AS position
            FROM (SELECT *, string_split(added_words, ' ') AS split FROM {words})
            UNION ALL
            SELECT natural_key, generation, run, false, unnest(split), generate_subscripts(split, 1)
            FROM (SELECT *, string_split(removed_words, ' ') AS split FROM {words}))
        WHERE token NOT IN ('', chr(10))  -- the words' spaces at each end, the line between edits
        GROUP BY ALL ORDER BY token""")


def unindex_words(connection: duckdb.DuckDBPyConnection, changes: str) -> None:
    """Remove the index rows of the changes (natural_key, generation) in the table named
    `changes`: one join, whose generations' range DuckDB pushes into the scan."""
    connection.execute(f"""
        DELETE FROM change_tokens USING {changes} r
        WHERE change_tokens.natural_key = r.natural_key AND change_tokens.generation = r.generation""")


@dataclass(frozen=True)
class WordsFilter:
    """What a search matches: a side's words (from `cdc.core.editwords.search_words`; both sides
    given: a change must match both), and the change rows' filters."""

    added: str | None = None
    removed: str | None = None
    either: str | None = None
    host: str | None = None
    run: int | None = None  # the run that measured the change
    since: datetime | None = None
    until: datetime | None = None
    verdicts: tuple[str, ...] = ()
    include_template: bool = False

    def phrases(self) -> tuple[str | None, str | None]:
        """The phrase each side must hold (added, removed), None where that side is not searched."""
        return self.added or self.either, self.removed or self.either


_QUERY_SCHEMA = pa.schema([("query", pa.string()), ("both", pa.bool_()), ("host", pa.string()),
                          ("since", pa.timestamp("us")), ("until", pa.timestamp("us")),
                          ("by_verdict", pa.bool_()), ("include_template", pa.bool_())])
_TOKEN_SCHEMA = pa.schema([("query", pa.string()), ("added", pa.bool_()), ("token", pa.string()),
                          ("offsets", pa.list_(pa.int32())), ("length", pa.int32())])
_VERDICT_SCHEMA = pa.schema([("query", pa.string()), ("verdict", pa.string())])


class WantedTables(NamedTuple):
    """Searches as the matching query reads them, registered under these names."""

    search_queries: pa.Table  # a row a search: its filters
    search_tokens: pa.Table  # a row per distinct token of each side's phrase, with its offsets in it
    search_verdicts: pa.Table  # a row per verdict a search keeps (a list column per row cost 3x)
    tokens: list[str]  # the distinct tokens of them all, which bound the index's scan


def wanted_tables(searches: Mapping[str, WordsFilter]) -> WantedTables:
    """The searches, by name, as the tables of the matching query (`matches_query`)."""
    queries, tokens, verdicts = [], [], []
    for name, words in searches.items():
        queries.append((name, bool(words.added and words.removed), words.host, words.since, words.until,
                        bool(words.verdicts), words.include_template))
        verdicts += [(name, verdict) for verdict in words.verdicts]
        for added, phrase in zip((True, False), words.phrases()):
            if not phrase:
                continue
            found = phrase.split()
            offsets: dict[str, list[int]] = {}
            for offset, token in enumerate(found):
                offsets.setdefault(token, []).append(offset)
            tokens += [(name, added, token, places, len(found)) for token, places in offsets.items()]

    def table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
        return pa.Table.from_pylist([dict(zip(schema.names, row)) for row in rows], schema)

    return WantedTables(table(queries, _QUERY_SCHEMA), table(tokens, _TOKEN_SCHEMA),
                        table(verdicts, _VERDICT_SCHEMA), sorted({row[2] for row in tokens}))


def matches_query(token_count: int, run: int | None) -> tuple[str, list]:
    """The SQL of every search's hits, with the tables of `wanted_tables` registered under
    their names, and its parameters but for the tokens' (`token_count` of them, bound
    first, then the returned values): one row per side of a change that holds the phrase
    and passes the search's filters, as (query, natural_key, url, host, generation,
    previous_generation, fetched_at, verdict, template_only, run, side). The changes of one
    run only, given `run`: the index is read for that run's rows alone."""
    in_run = "AND t.run = ?" if run is not None else ""
    return f"""
        WITH found AS MATERIALIZED (  -- the index rows of the phrases' tokens
            SELECT w.query, w.added, t.natural_key, t.generation, t.run, t.positions, w.offsets, w.length
            FROM change_tokens t JOIN search_tokens w ON t.token = w.token AND t.added = w.added
            WHERE t.token IN ({", ".join("?" * token_count)}) {in_run}
        ), matched AS (
            SELECT query, added, natural_key, generation, run FROM found WHERE length = 1
            UNION ALL  -- a longer phrase: a place where each of its tokens is at its offset
            SELECT DISTINCT query, added, natural_key, generation, run FROM (
                SELECT *, unnest(flatten(list_transform(
                              offsets, lambda k: list_transform(positions, lambda p: p - k)))) AS start
                FROM found WHERE length > 1)
            GROUP BY query, added, natural_key, generation, run, start HAVING count(*) = any_value(length)
        ), both_sides AS (  -- of the searches of both sides, the changes that did both
            SELECT m.query, m.natural_key, m.generation FROM matched m JOIN search_queries q USING (query)
            WHERE q.both GROUP BY ALL HAVING count(DISTINCT m.added) = 2
        )
        SELECT m.query, m.natural_key, p.url, p.host, m.generation, c.previous_generation, c.fetched_at,
               c.verdict, c.template_only, m.run, CASE WHEN m.added THEN 'added' ELSE 'removed' END AS side
        FROM matched m JOIN search_queries q USING (query)
        JOIN changes c ON c.natural_key = m.natural_key AND c.generation = m.generation
        JOIN pages p ON p.natural_key = m.natural_key
        WHERE (q.include_template OR c.template_only IS NOT TRUE)
          AND (q.host IS NULL OR p.host = q.host)
          AND (q.since IS NULL OR c.fetched_at >= q.since)
          AND (q.until IS NULL OR c.fetched_at < q.until)
          AND (NOT q.by_verdict OR (m.query, c.verdict) IN (SELECT query, verdict FROM search_verdicts))
          AND (NOT q.both OR (m.query, m.natural_key, m.generation) IN (SELECT * FROM both_sides))
        """, [run] if run is not None else []
