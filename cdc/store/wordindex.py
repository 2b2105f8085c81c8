"""The index of the changes' words (`change_tokens`), and the one query that matches searches
against it: `cdc search`, the Search page and every watch of a run's end, all watches at once.

Layout: a row per distinct token of each side of each `change_words` row (token, page,
generation, run, side, its places in the side's words), appended a batch at a time sorted by
token. DuckDB keeps each row group's smallest and largest token (its zone map), so a scan
filtered on `token = ?` reads about one row group a batch, and with `run = ?` only that run's:
a search reads its tokens' rows, never every change's words. Chosen over DuckDB's `fts`
extension (BM25 ranking, no phrase query, and not installed here: it is a download) and over
an ART index on the tokens (built in memory, and not used for a lookup that matches more than
`index_scan_max_count` rows).

How a phrase is matched, exactly as the substring test of ` phrase ` in the words that
`cdc.core.editwords` defines: a phrase of one token is a hit where the side has the token; a
longer one where the side has every token of it and a place where each token is at its offset
in the phrase (the places count the line between two edits, so no phrase runs across it).

Measured (`benchmarks/search.py`, the 100,000-page synthetic store: 200,000 changes, 283 MB of
words, 31.8 million index rows): a common word in 240-410 ms (added, either side), a phrase of
three words in 160 ms, a watch of a common word at a 100,000-page run's end in 180 ms (a scan
of every change's words: 360-750 ms, the watch 830 ms), quiet machine. Then, on a loaded one
(CPU ms, medians, each beside the query before): the common word's query either side 235 ->
131 ms (its matches materialized before `changes` is joined), its page's texts 70 -> 4 ms
(`cdc.store.search`); 20 watches' hits (10 phrases of common syllables, 10 common words:
600,000 hits) recorded in 1,470-1,530 -> 880-1,020 ms in the writer's one thread, a run's end
with them 1.67x -> 1.41x one with none. What stays dear is finding those hits: the run's 1.4
million index rows of the 40 tokens read, joined with their phrases, each hit a row keyed by
its page's URL (the join with `changes` and the insert into `watch_hits` cost 50-150 ms).
At ingest the index costs about 5% of the corpus's CPU (0.5 s of 10.7); its rows are built
where the pages are (`index_rows`). Then (`narrow`): a search's hits are found without their
change rows and only a page of them is joined with `changes` (`cdc.store.search`): the common
word either side 311 -> 240 ms, one watch at a run's end 154 -> 103 ms, quiet machine, main
and this in turn. 20 watches still add 0.8 s to a 1.5 s run's end: the 600,000 hits
themselves, matched and written keyed by URL strings. Template-only changes left out by a
mark join (`NOT IN`): that join 77 -> 16 ms, the query 550 -> 460 ms of CPU; and a run's end
on every core (`Store.finish_run`): 1.72 -> 1.29 s, with the 20 watches 2.45 -> 1.77 s
(1.38x; CPU 1.47x). Then the one-token phrases, joined once on (side, token) with a table of
the searches' pairs (`search_singles`; DuckDB had joined on the token alone first, each row
once per side): the common word's match either side 95 -> 70 ms, warm, one connection. Then a run's end
finds the watches' matches beside its trim and template count, in a second connection
(`matching_query`, `cdc.store.search.WatchMatching`), and only their filters and the insert
wait for those: 20 watches 1.36x -> 1.13-1.25x one with none, the matching's 0.6-0.7 s (its
first read of the run's index rows, cold after the batches: the scan's operators 390 ms of
CPU where a second read takes 140) hidden but for the 600,000 hits' insert, 190-270 ms, and
its share of the cores. Then the watches a run starts with are matched as its batches are
written, on their words and index rows in memory (`cdc.store.indexwriter`), and its end
reads those matches: only a watch the run did not start with (added or changed since, or
any of a run whose copies are gone) is matched here, at its end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc.core.editwords import EditWords
from cdc.store.annotations import annotated_as
from cdc.store.lookups import _registered
from cdc.store.rows import ChangeWordsRow, arrow_table

# The columns of `change_tokens`, as the index rows are built (`index_rows`).
INDEX_SCHEMA = pa.schema([("token", pa.string()), ("natural_key", pa.string()), ("generation", pa.int64()),
                          ("run", pa.int32()), ("added", pa.bool_()), ("positions", pa.list_(pa.int32()))])
_SKIPPED = ("", "\n")  # the words' spaces at each end, the line between two edits


def _numbers(array: pa.Array) -> np.ndarray:
    """A null-free numeric Arrow array as NumPy's, without a copy: read from its buffer, as
    `to_numpy` asks pyarrow's pandas shim first, which an ingest keeps from importing pandas
    (`cdc.runtime.nopandas`)."""
    dtype = {pa.int32(): np.int32, pa.int64(): np.int64, pa.uint64(): np.uint64}[array.type]
    return np.frombuffer(array.buffers()[1], dtype=dtype)[array.offset:array.offset + len(array)]


def index_rows(words: pa.Table) -> pa.Table:
    """The `change_tokens` rows of `words` (a table with `change_words`' natural_key,
    generation, run, added_words and removed_words), sorted by token: a row per distinct
    token of each side, with its places in the side's words split at each space (from 1),
    so the line between two edits takes a place too and no phrase runs across it.

    Arrow's and NumPy's kernels, not a query: ingest builds them in its worker processes,
    beside the words, and the writer only appends them (as SQL in the writer, `string_split`,
    `unnest` and a grouping, they were its largest statement: 1.9 s of one process's 33 s on
    the interleaved shards). Each token is numbered by its rank among the distinct tokens,
    so the grouping is one stable sort of integers (by token, then side: a token's places
    stay ascending); `Table.group_by` would import pandas (0.2 s of an ingest's start,
    `cdc.runtime.nopandas`), and sorting by the strings themselves cost twice as much."""
    tokens, changes, added, places = [], [], [], []
    for side, column in ((True, "added_words"), (False, "removed_words")):
        split = pc.split_pattern(words.column(column).combine_chunks().fill_null(""), " ")
        parents = _numbers(pc.list_parent_indices(split))
        tokens.append(pc.list_flatten(split))
        changes.append(parents)
        added.append(np.full(len(parents), side))
        places.append(np.arange(len(parents), dtype=np.int32) - _numbers(split.offsets)[parents] + 1)
    encoded = pc.dictionary_encode(pa.chunked_array(tokens)).combine_chunks()
    distinct, numbers = encoded.dictionary, _numbers(encoded.indices)
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[_numbers(pc.sort_indices(distinct))] = np.arange(len(distinct))
    change, added_side, place = np.concatenate(changes), np.concatenate(added), np.concatenate(places)
    skipped = pc.index_in(pa.array(_SKIPPED, pa.string()), distinct).drop_null().cast(pa.int32())
    kept = np.flatnonzero(~np.isin(numbers, _numbers(skipped)))
    key = (rank[numbers[kept]] * words.num_rows + change[kept]) * 2 + ~added_side[kept]
    by_key = np.argsort(key, kind="stable")
    order, key = kept[by_key], key[by_key]
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if len(key) else key
    rows = order[starts]
    return pa.table([distinct.take(pa.array(numbers[rows])),
                     *(pc.take(words.column(name), pa.array(change[rows]))
                       for name in ("natural_key", "generation", "run")),
                     pa.array(added_side[rows]),
                     pa.ListArray.from_arrays(pa.array(np.append(starts, len(key)).astype(np.int32)),
                                              pa.array(place[order]))],
                    schema=INDEX_SCHEMA)


class WordTables(NamedTuple):
    """Changes' words as the writer appends them: `change_words` rows and their index rows."""

    words: pa.Table
    tokens: pa.Table


def word_tables(rows: Sequence[EditWords]) -> WordTables:
    """The `change_words` rows `rows` as Arrow, with their index rows (`index_rows`)."""
    words = arrow_table(ChangeWordsRow, rows)
    return WordTables(words, index_rows(words))


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
    labels: tuple[str, ...] = ()  # changes an analyst annotated with one of these only

    def phrases(self) -> tuple[str | None, str | None]:
        """The phrase each side must hold (added, removed), None where that side is not searched."""
        return self.added or self.either, self.removed or self.either


_PHRASE_SCHEMA = pa.schema([("search", pa.int32()), ("query", pa.string()), ("added", pa.bool_()),
                           ("phrase", pa.int32()), ("each_side", pa.bool_()), ("host", pa.string()),
                           ("since", pa.timestamp("us")), ("until", pa.timestamp("us")),
                           ("include_template", pa.bool_())])
_TOKEN_SCHEMA = pa.schema([("added", pa.bool_()), ("phrase", pa.int32()), ("token", pa.string()),
                          ("offsets", pa.list_(pa.int32())), ("tokens", pa.int32())])
_SINGLE_SCHEMA = pa.schema([("search", pa.int32()), ("added", pa.bool_()), ("token", pa.string())])
_VERDICT_SCHEMA = pa.schema([("query", pa.string()), ("verdict", pa.string())])
REGISTERED = ("search_phrases", "search_tokens", "search_singles", "search_verdicts")
# Past this many tokens of a run's watches, the run's index rows are read in one scan.
TOKENS_SCANNED_APART = 8


def phrase_tokens(phrase: str) -> list[str]:
    """The tokens of a phrase as `search_words` makes it: cut at its spaces alone, as the
    words are (`index_rows`), not at every character Python counts as whitespace (a token
    of ASCII punctuation may be one of those, `\\x1c`; no side's words hold it)."""
    return [token for token in phrase.split(" ") if token]


class WantedTables(NamedTuple):
    """Searches as the matching query reads them: the tables it joins, registered under
    their names (`REGISTERED`), and what its SQL is made of."""

    search_phrases: pa.Table  # a row (numbered) per side a search reads: its phrase (a number), the filters
    search_tokens: pa.Table  # a row per distinct token of each distinct (side, longer phrase), its offsets
    search_singles: pa.Table  # a row per side a search reads whose phrase is one token: search, added, token
    search_verdicts: pa.Table  # a row per verdict a search keeps
    single: list[str]  # the distinct tokens of the phrases of one token: a scan of the index each
    longer: list[str]  # and of the longer phrases
    by_host: bool  # a search keeps one host's pages: `pages` is joined
    by_verdict: bool  # a search keeps some verdicts
    by_time: bool  # a search keeps the changes fetched since or until a time
    template_kept: bool  # every search keeps template-only changes
    both: bool  # a search asks for a phrase on each side
    labels: tuple[str, ...]  # the annotations' labels every search keeps (none: any change)


def wanted_tables(searches: Mapping[str, WordsFilter]) -> WantedTables:
    """The searches, by name, as the matching query reads them (`matches_query`). Each
    distinct phrase of a side is matched once, however many searches ask for it."""
    phrases, verdicts, singles = [], [], []
    tokens: dict[tuple[bool, str], list[tuple]] = {}
    numbers: dict[tuple[bool, str], int] = {}
    for name, words in searches.items():
        verdicts += [(name, verdict) for verdict in words.verdicts]
        both = bool(words.added and words.removed)
        for added, phrase in zip((True, False), words.phrases()):
            if not phrase:
                continue
            number = numbers.setdefault((added, phrase), len(numbers))  # joined on, for the phrase
            phrases.append((len(phrases), name, added, number, both, words.host, words.since, words.until,
                            words.include_template))
            found = phrase_tokens(phrase)
            if len(found) == 1:  # matched by its token alone (`search_singles`)
                singles.append((len(phrases) - 1, added, found[0]))
                continue
            offsets: dict[str, list[int]] = {}
            for offset, token in enumerate(found):
                offsets.setdefault(token, []).append(offset)
            tokens[added, phrase] = [(added, number, token, places, len(offsets))
                                     for token, places in offsets.items()]

    def table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
        return pa.Table.from_pylist([dict(zip(schema.names, row)) for row in rows], schema)

    labels = {words.labels for words in searches.values()}
    if len(labels) > 1:  # a search's own (`cdc search`); a watch has none
        raise ValueError("searches of other labels are matched apart")
    token_rows = [row for rows in tokens.values() for row in rows]
    return WantedTables(table(phrases, _PHRASE_SCHEMA), table(token_rows, _TOKEN_SCHEMA),
                        table(singles, _SINGLE_SCHEMA), table(verdicts, _VERDICT_SCHEMA),
                        sorted({token for _, _, token in singles}),
                        sorted({token for _, _, token, _, _ in token_rows}),
                        by_host=any(words.host for words in searches.values()), by_verdict=bool(verdicts),
                        by_time=any(words.since or words.until for words in searches.values()),
                        template_kept=all(words.include_template for words in searches.values()),
                        both=any(row[4] for row in phrases), labels=next(iter(labels), ()))


def registered_tables(connection: duckdb.DuckDBPyConnection, wanted: WantedTables) -> ExitStack:
    """`wanted`'s tables, which the matching queries read (`REGISTERED`), registered on
    `connection` until the stack is closed."""
    registered = ExitStack()
    for name in REGISTERED:
        registered.enter_context(_registered(connection, name, getattr(wanted, name)))
    return registered


def matching_query(wanted: WantedTables, run: int | None) -> tuple[str, list]:
    """The SQL of the sides that hold each search's phrase, with `wanted`'s tables registered
    under their names, and its parameters: rows (search, natural_key, generation, run), a
    search by its number in `search_phrases`, before any filter of the change rows. Given
    `run`, the index is read for that run's rows alone. The half of `matches_query` that
    reads the index, and nothing a run's end writes: a run's end runs it beside its own work
    (`cdc.store.search.WatchMatching`)."""
    in_run = "AND run = ?" if run is not None else ""

    def scans(columns: str, tokens: list[str], listed: str) -> tuple[str, list]:
        """The index rows of `tokens` (the `token` column of the query `listed`): a scan per token
        where the whole index is read (DuckDB reads a token's row groups only, by their zone
        maps, where the filter is `token = ?`); one scan of the run's rows, joined with the
        tokens, for the many tokens of a run's watches (a scan per token read the run's row
        groups again for each: 40 tokens cost 1.4 s, one scan 80 ms)."""
        if not tokens:
            return f"SELECT {columns} FROM change_tokens WHERE false", []
        if run is not None and len(tokens) > TOKENS_SCANNED_APART:
            return (f"""SELECT {columns} FROM change_tokens
                        SEMI JOIN (SELECT DISTINCT token FROM ({listed})) USING (token)
                        WHERE run = ?""", [run])
        scan = f"SELECT {columns} FROM change_tokens WHERE token = ? {in_run}"
        return " UNION ALL ".join([scan] * len(tokens)), [
            value for token in tokens for value in (token, run) if value is not None]

    single, single_values = scans("token, added, natural_key, generation, run", wanted.single,
                                  "SELECT token FROM search_singles")
    longer, longer_values = scans("*", wanted.longer, "SELECT token FROM search_tokens")
    # The sides that hold every token of a longer phrase are bounded by those that hold its
    # two rarest tokens: the rows of the others are kept where those are (a hash join on few
    # rows), where counting every token's rows by side grouped them all (a common word or a
    # comma in a phrase: 850,000 rows for 10 phrases, a second). Bounded by the rarest token
    # alone, 20 watches' 10 phrases read 175,473 rows for 2,298 hits; by two, the query's
    # CPU went 500 -> 475 ms (with `matched` not materialized, 427 ms; one thread, medians).
    return f"""
        WITH single AS (  -- the sides that hold a phrase of one token, by search: one join,
            -- with the searches' (side, token) pairs as they are listed (DuckDB joined the
            -- rows with the phrases' tokens first, on the token alone: each row once per side)
            SELECT s.search, t.natural_key, t.generation, t.run
            FROM ({single}) t JOIN search_singles s ON s.token = t.token AND s.added = t.added
        ), found AS MATERIALIZED (  -- the index rows of the tokens of longer phrases, with their places
            {longer}
        ), rarest AS (  -- each longer phrase's two tokens of fewest rows (a side has no rows
            -- of a token it lacks)
            SELECT w.added, w.phrase, w.token, w.offsets, w.tokens,
                   row_number() OVER (PARTITION BY w.added, w.phrase
                                      ORDER BY coalesce(n.rows, 0), w.token) AS rank
            FROM search_tokens w
            LEFT JOIN (SELECT added, token, count(*) AS rows FROM found GROUP BY ALL) n
                   ON n.added = w.added AND n.token = w.token
        ), ends AS (  -- their rows, each with the places the phrase may start at (a token of
            -- several offsets: at any of them; `held` asks for all)
            SELECT r.added, r.phrase, r.rank, r.tokens, f.natural_key, f.generation,
                   flatten(list_transform(r.offsets, lambda k: list_transform(f.positions, lambda p: p - k)))
                       AS starts
            FROM found f JOIN rarest r ON r.added = f.added AND r.token = f.token AND r.rank <= 2
        ), bounds AS (  -- the sides where the two may start the phrase at one place (a phrase of
            -- one token repeated: every side of it): a join, where grouping the two's rows by
            -- side cost more than the rest of the phrases' matching (20 watches' 10 phrases:
            -- 17,661 sides hold both, 2,299 in place; those phrases' CPU 300 -> 260 ms)
            SELECT a.added, a.phrase, a.natural_key, a.generation
            FROM (SELECT * FROM ends WHERE rank = 1) a JOIN (SELECT * FROM ends WHERE rank = 2) b
              ON b.added = a.added AND b.phrase = a.phrase AND b.natural_key = a.natural_key
             AND b.generation = a.generation
            WHERE list_has_any(a.starts, b.starts)
            UNION ALL
            SELECT added, phrase, natural_key, generation FROM ends WHERE tokens = 1
        ), sought AS MATERIALIZED (  -- on those sides, each token of the phrase: the rows to read
            -- (materialized: DuckDB otherwise joined `found` with every phrase's tokens first,
            -- 850,000 rows for 10 phrases, and only then with the sides)
            SELECT b.*, w.token, w.offsets, w.tokens
            FROM bounds b JOIN search_tokens w ON w.added = b.added AND w.phrase = b.phrase
        ), longer AS (  -- the rows of a longer phrase's tokens on those sides
            SELECT t.added, t.phrase, f.natural_key, f.generation, f.run, f.positions, t.offsets, t.tokens
            FROM found f JOIN sought t ON f.added = t.added AND f.token = t.token
                                      AND f.natural_key = t.natural_key AND f.generation = t.generation
        ), held AS (  -- the sides that hold a longer phrase: every token of it, and a place where
            -- each is at its offset (a start that each token's places, less each offset, hold)
            SELECT added, phrase, natural_key, generation, run FROM longer
            GROUP BY ALL HAVING count(*) = any_value(tokens) AND len(list_reduce(
                flatten(list(list_transform(offsets, lambda k: list_transform(positions, lambda p: p - k)))),
                lambda a, b: list_intersect(a, b))) > 0
        )
        SELECT * FROM single
        UNION ALL
        SELECT s.search, h.natural_key, h.generation, h.run
        FROM held h JOIN search_phrases s ON s.added = h.added AND s.phrase = h.phrase
        """, [*single_values, *longer_values]


def matches_query(wanted: WantedTables, run: int | None, narrow: bool = False,
                  matched: str | None = None) -> tuple[str, list]:
    """The SQL of every search's hits, with `wanted`'s tables registered under their names,
    and its parameters: one row per side of a change that holds the phrase and passes the
    search's filters, as (query, natural_key, generation, previous_generation, fetched_at,
    verdict, template_only, run, side); `narrow`, as (query, natural_key, generation, run,
    side). Given `run`, the changes of that run only: the index is read for that run's rows
    alone. Each join a hit goes through costs (for 20 watches of a 100,000-page run, 600,000
    hits): `pages` is joined only when a search keeps one host's pages, and the verdicts, the
    labels and the changes that did both only when a search asks. Narrow, `changes` is
    joined only when a search filters on its times, verdicts or labels: else the hits of a
    template-only change are left out by the few such changes alone (a hash join keyed by
    URL on every hit cost a common word's search 130 of its 300 ms). `matched`: the name of a
    table registered with `matching_query`'s rows, found already (else found here)."""
    if matched is None:
        rows, values = matching_query(wanted, run)
        matched = f"({rows})"
    else:
        values = []
    both_sides = """, both_sides AS (  -- of the searches of both sides, the changes that did both
            SELECT s.query, m.natural_key, m.generation FROM matched m JOIN search_phrases s USING (search)
            WHERE s.each_side GROUP BY ALL HAVING count(DISTINCT s.added) = 2
        )""" if wanted.both else ""
    conditions = [
        "(s.include_template OR c.template_only IS NOT TRUE)",
        "(s.since IS NULL OR c.fetched_at >= s.since)",
        "(s.until IS NULL OR c.fetched_at < s.until)",
        *(["(s.host IS NULL OR p.host = s.host)"] if wanted.by_host else []),
        *(["((s.query, c.verdict) IN (SELECT query, verdict FROM search_verdicts) "
           "OR s.query NOT IN (SELECT query FROM search_verdicts))"] if wanted.by_verdict else []),
        *(["(NOT s.each_side OR (s.query, m.natural_key, m.generation) IN (SELECT * FROM both_sides))"]
          if wanted.both else []),
        *([annotated_as("c")] if wanted.labels else []),
    ]
    joined = not narrow or wanted.by_time or wanted.by_verdict or bool(wanted.labels)
    if joined:
        columns = ("c.previous_generation, c.fetched_at, c.verdict, c.template_only, m.run" if not narrow
                   else "m.run")
        changes = "JOIN changes c ON c.natural_key = m.natural_key AND c.generation = m.generation"
    else:  # the template-only changes alone: left out unless a search includes them
        columns = "m.run"
        # (a mark join, `NOT IN`: each hit probes the few template-only changes; as a left
        # join with a test of its nulls it cost 20 watches' 600,000 hits 77 ms, this 16)
        conditions[:3] = [] if wanted.template_kept else [
            "(s.include_template OR (m.natural_key, m.generation) NOT IN ("
            "SELECT natural_key, generation FROM changes WHERE template_only))"]
        changes = ""
    return f"""
        WITH matched AS {"MATERIALIZED" if wanted.both else "NOT MATERIALIZED"} (  -- by search (its
            -- number: the rows stay narrow), joined with its filters after (materialized only
            -- where `both_sides` reads it too: 20 watches' 719,193 rows cost 25 ms more so)
            SELECT * FROM {matched}
        ){both_sides}
        SELECT s.query, m.natural_key, m.generation, {columns},
               CASE WHEN s.added THEN 'added' ELSE 'removed' END AS side
        FROM matched m JOIN search_phrases s USING (search)
        {changes}
        {"JOIN pages p ON p.natural_key = m.natural_key" if wanted.by_host else ""}
        WHERE {" AND ".join(conditions) or "true"}
        """, [*values, *([list(wanted.labels)] if wanted.labels else [])]
