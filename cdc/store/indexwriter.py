"""Writing the index of the changes' words (`change_tokens`), and the watches' matches made
as it is written.

A run's end records each watch's hits among its changes (`cdc.store.search`). Found there,
the hits meant reading the run's index rows back, cold, after its batches: 20 watches of a
100,000-page run (`benchmarks/search.py`) read 15.6 million rows there for 0.47 s of CPU,
beside the trim and the template count, and the end cost 1.13-1.25x one with none. So the
watches a run starts with (`run_watches`, copied as the run starts: `copy_watches`) are
matched where the index rows are made: each batch's words and index rows, in memory, as
they are appended (`append_words`, `matches`: the definition of a match, ` phrase ` a
substring of a side's words, tested on the sides that hold its rarest token, where the
stored index is matched by a query, `cdc.store.wordindex.matching_query`, that gives the same
answer without reading the words); the sides that hold a phrase are kept in
`watch_matches`, in the batch's own transaction, so a run that is killed keeps the matches of
the batches it stored. A change whose index rows are removed (a late fetch re-measured it, an
erasure) loses its matches with them (`unindex_words`, `cdc.store.schema.INDEX_TABLES`).

So for each run in `run_watches`, its matches are what `matching_query` finds for those
watches in its stored index rows. Its end reads them, and matches from the index only the
watches it did not start with (added or changed since; every watch of a run whose copies
are gone: stored before them, or recorded already by the end of a run that overlapped it)
(`cdc.store.search.WatchMatching`); then the matches of the runs it recorded go
(`forget_matches`).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc.store.lookups import _registered
from cdc.store.searchquery import SearchQuery
from cdc.store.wordindex import WordsFilter, _numbers, index_rows, phrase_tokens

WORDS_COLUMNS = {True: "added_words", False: "removed_words"}  # a side's words, by `added`
MATCHES_SCHEMA = pa.schema([("name", pa.string()), ("run", pa.int32()), ("natural_key", pa.string()),
                            ("generation", pa.int64()), ("added", pa.bool_())])  # `watch_matches`'


def append_words(connection: duckdb.DuckDBPyConnection, words: pa.Table,
                 tokens: pa.Table | None = None) -> None:
    """Append `change_words` rows (`words`, in the table's layout), their index rows (`tokens`
    where the caller built them, `index_rows`; else built here), and the matches of those rows
    with the watches their runs started with (`match_appended`): the one way words are
    written, so no writer leaves words the index or a watch does not know."""
    tokens = index_rows(words) if tokens is None else tokens
    with _registered(connection, "appended_words", words), _registered(connection, "appended_tokens", tokens):
        connection.execute("INSERT INTO change_words SELECT * FROM appended_words")
        connection.execute("INSERT INTO change_tokens SELECT * FROM appended_tokens")
    match_appended(connection, words, tokens)


def unindex_words(connection: duckdb.DuckDBPyConnection, changes: str) -> None:
    """Remove the index rows of the changes (natural_key, generation) in the table named
    `changes`, and their watches' matches: one join each, whose generations' range DuckDB
    pushes into the scan."""
    for table in ("change_tokens", "watch_matches"):
        connection.execute(f"""
            DELETE FROM {table} USING {changes} r
            WHERE {table}.natural_key = r.natural_key AND {table}.generation = r.generation""")


def copy_watches(connection: duckdb.DuckDBPyConnection, run: int) -> None:
    """The watches saved now, as run `run` starts: its batches match these."""
    connection.execute("INSERT INTO run_watches SELECT ?, name, query FROM watches", [run])


def copied_watches(connection: duckdb.DuckDBPyConnection, runs: Sequence[int]) -> list[tuple[int, str, str]]:
    """The watches copied for `runs` as they started: (run, name, query as JSON) rows."""
    return connection.execute("SELECT run, name, query FROM run_watches WHERE list_contains(?, run)",
                              [list(runs)]).fetchall()


def match_appended(connection: duckdb.DuckDBPyConnection, words: pa.Table, tokens: pa.Table) -> None:
    """The sides of the changes of `words` (with their index rows, `tokens`) that hold the
    phrase of a watch their run started with, added to `watch_matches`. A run no watch is
    copied for costs one lookup."""
    if not tokens.num_rows:
        return
    runs = pc.unique(words.column("run")).to_pylist()
    copied = copied_watches(connection, runs)
    found = [matches(words, tokens, run, {name: SearchQuery.from_json(query).words_filter()
                                          for of, name, query in copied if of == run})
             for run in sorted({run for run, _, _ in copied})]
    if found:
        with _registered(connection, "appended_matches", pa.concat_tables(found)):
            connection.execute("INSERT INTO watch_matches SELECT * FROM appended_matches")


def matches(words: pa.Table, tokens: pa.Table, run: int, watched: dict[str, WordsFilter]) -> pa.Table:
    """`watch_matches` rows: the sides of run `run`'s changes in `words` whose words hold a
    watch's phrase, by the definition (`cdc.core.editwords`: ` phrase ` a substring of the
    side's words), tested only on the sides whose index rows (`tokens`) hold its rarest token.
    A phrase of one token is a hit wherever its token is. In memory, a batch's rows at a time:
    nothing is read back from the store."""
    if len(runs := pc.unique(tokens.column("run"))) != 1 or runs[0].as_py() != run:
        tokens = tokens.filter(pc.equal(tokens.column("run"), run))
    phrases: dict[tuple[bool, str], list[str]] = {}  # each distinct (side, phrase), tested once
    for name, words_filter in watched.items():
        for added, phrase in zip((True, False), words_filter.phrases()):
            if phrase:
                phrases.setdefault((added, phrase), []).append(name)
    tokens_of = {phrase: phrase_tokens(phrase) for _, phrase in phrases}
    sought = pa.array(sorted({token for found in tokens_of.values() for token in found}), pa.string())
    place = {token: at for at, token in enumerate(sought.to_pylist())}
    rows = tokens.filter(pc.is_in(tokens.column("token"), value_set=sought))
    # Each (token, side)'s rows, numbered 2 * the token's place in `sought` + the side: one sort.
    group = _numbers(pc.add(pc.multiply(pc.index_in(rows.column("token"), value_set=sought), 2),
                            pc.cast(rows.column("added"), pa.int32())).combine_chunks())
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(2 * len(sought) + 1))
    keys, generations = (rows.column(name).combine_chunks() for name in ("natural_key", "generation"))
    # Each phrase's sides to test: the rows of its rarest token on its side.
    holding = {}
    for added, phrase in phrases:
        numbers = [2 * place[token] + added for token in tokens_of[phrase]]
        rarest = min(numbers, key=lambda number: bounds[number + 1] - bounds[number])
        holding[added, phrase] = order[bounds[rarest]:bounds[rarest + 1]]
    # The phrases of several tokens: ` phrase ` in the side's words, all tested in one pass.
    tested = [side for side in holding if len(tokens_of[side[1]]) > 1 and len(holding[side])]
    if tested:
        candidates = np.concatenate([holding[side] for side in tested])
        at = {change: row for row, change in enumerate(zip(words.column("natural_key").to_pylist(),
                                                         words.column("generation").to_pylist()))}
        rows_in_words = pa.array([at[change] for change in zip(pc.take(keys, candidates).to_pylist(),
                                                               pc.take(generations, candidates).to_pylist())])
        texts = {added: pc.take(words.column(WORDS_COLUMNS[added]), rows_in_words).to_pylist()
                 for added in {added for added, _ in tested}}
        start = 0
        for added, phrase in tested:  # Python's `in`: twice as fast here as Arrow's match_substring
            count = len(holding[added, phrase])
            kept = [phrase in text for text in texts[added][start:start + count]]
            holding[added, phrase] = holding[added, phrase][np.array(kept, dtype=bool)]
            start += count
    # A row per watch of each phrase and side that holds it.
    taken = [(name, side) for side, names in phrases.items() for name in names if len(holding[side])]
    if not taken:
        return MATCHES_SCHEMA.empty_table()
    counts = [len(holding[side]) for _, side in taken]
    every = pa.array(np.concatenate([holding[side] for _, side in taken]))
    return pa.table([pa.DictionaryArray.from_arrays(pa.array(np.repeat(np.arange(len(taken), dtype=np.int32),
                                                                       counts)),
                                                    pa.array([name for name, _ in taken], pa.string())
                                                    ).cast(pa.string()),
                     pa.repeat(pa.scalar(run, pa.int32()), len(every)),
                     pc.take(keys, every), pc.take(generations, every),
                     pa.array(np.repeat([added for _, (added, _) in taken], counts))], schema=MATCHES_SCHEMA)


def forget_matches(connection: duckdb.DuckDBPyConnection, runs: Sequence[int]) -> None:
    """The watches copied for `runs`, and their matches: gone once their hits are recorded."""
    for table in ("run_watches", "watch_matches"):
        connection.execute(f"DELETE FROM {table} WHERE list_contains(?, run)", [list(runs)])
