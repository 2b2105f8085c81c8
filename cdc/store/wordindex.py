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

import duckdb
import pyarrow as pa


def index_words(connection: duckdb.DuckDBPyConnection, words: str) -> None:
    """Index the `change_words` rows of the table named `words` (a registered batch or a
    temporary table of that layout; a name this package chooses, never input)."""
    connection.execute(f"""
        INSERT INTO change_tokens
        SELECT token, natural_key, generation, run, added FROM (
            SELECT natural_key, generation, run, unnest(string_split(added_words, ' ')) AS token,
                   true AS added FROM {words}
            UNION ALL
            SELECT natural_key, generation, run, unnest(string_split(removed_words, ' ')), false
            FROM {words})
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
                          ("verdicts", pa.list_(pa.string())), ("include_template", pa.bool_())])
_TOKEN_SCHEMA = pa.schema([("query", pa.string()), ("added", pa.bool_()), ("phrase", pa.string()),
                          ("token", pa.string()), ("tokens", pa.int64()), ("exact", pa.bool_())])


def wanted_tables(searches: Mapping[str, WordsFilter]) -> tuple[pa.Table, pa.Table, list[str]]:
    """The searches as the matching query's two tables (`search_queries`: a row a search, its
    filters; `search_tokens`: a row per distinct token of each side's phrase) and the
    distinct tokens of them all, for the index's scan to be bounded by."""
    queries, tokens = [], []
    for name, words in searches.items():
        queries.append((name, bool(words.added and words.removed), words.host, words.since, words.until,
                        list(words.verdicts), words.include_template))
        for added, phrase in zip((True, False), words.phrases()):
            if not phrase:
                continue
            found = phrase.split()
            distinct = list(dict.fromkeys(found))
            tokens += [(name, added, phrase, token, len(distinct), len(found) == 1) for token in distinct]
    return (pa.Table.from_pylist([dict(zip(_QUERY_SCHEMA.names, row)) for row in queries], _QUERY_SCHEMA),
            pa.Table.from_pylist([dict(zip(_TOKEN_SCHEMA.names, row)) for row in tokens], _TOKEN_SCHEMA),
            sorted({row[3] for row in tokens}))


def matches_query(token_count: int, run: int | None) -> tuple[str, list]:
    """The SQL of every search's hits, with `search_queries` and `search_tokens` registered
    (`wanted_tables`), and its parameters but for the tokens' (`token_count` of them, bound
    first, then the returned values): one row per side of a change that holds the phrase
    and passes the search's filters, as (query, natural_key, url, host, generation,
    previous_generation, fetched_at, verdict, template_only, run, side). The changes of one
    run only, given `run`: the index and the words are read for that run's rows alone."""
    in_run = "AND t.run = ?" if run is not None else ""
    words_in_run = "AND w.run = ?" if run is not None else ""
    runs = [run, run] if run is not None else []
    return f"""
        WITH candidates AS (  -- the sides that hold every token of the phrase
            SELECT w.query, w.added, t.natural_key, t.generation, t.run,
                   any_value(w.phrase) AS phrase, any_value(w.exact) AS exact
            FROM change_tokens t JOIN search_tokens w ON t.token = w.token AND t.added = w.added
            WHERE t.token IN ({", ".join("?" * token_count)}) {in_run}
            GROUP BY w.query, w.added, t.natural_key, t.generation, t.run
            HAVING count(*) = any_value(w.tokens)
        ), matched AS (  -- and of those, the ones whose words hold the phrase as it is
            SELECT query, added, natural_key, generation, run FROM candidates WHERE exact
            UNION ALL
            SELECT m.query, m.added, m.natural_key, m.generation, m.run
            FROM (SELECT * FROM candidates WHERE NOT exact) m
            JOIN change_words w
              ON w.natural_key = m.natural_key AND w.generation = m.generation {words_in_run}
            WHERE contains(CASE WHEN m.added THEN w.added_words ELSE w.removed_words END, m.phrase)
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
          AND (len(q.verdicts) = 0 OR list_contains(q.verdicts, c.verdict))
        QUALIFY NOT q.both  -- both sides asked for: the changes that did both
             OR count(DISTINCT m.added) OVER (PARTITION BY m.query, m.natural_key, m.generation) = 2
        """, runs
