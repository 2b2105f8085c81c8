"""Search changes by their words, and watches (saved searches evaluated at each run's end).

The one way in for the CLI (`cdc search`, `cdc watch`), the dashboard's Search page and the
watches a run's end evaluates: a `SearchQuery` (validated once, here) and `search(store,
query)`, which returns `SearchHit`s, one per side of a change that holds the phrase. What is
matched, and how, is `cdc.core.editwords`; the SQL is `cdc.store.search`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from cdc.core.editwords import excerpt_of
from cdc.errors import SearchError
from cdc.present.export import csv_cell
from cdc.store import Store
from cdc.store.search import SIDES
from cdc.store.searchquery import SearchQuery

DEFAULT_LIMIT = 50
MAX_WATCH_NAME = 100


@dataclass(frozen=True)
class SearchHit:
    """One side of a change whose words hold the phrase."""

    url: str
    natural_key: str
    host: str
    generation: int
    previous_generation: int | None
    fetched_at: datetime
    verdict: str
    template_only: bool | None
    run: int  # the run that measured the change
    side: str  # added or removed
    excerpt: str  # the edit that holds the phrase, around it


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    total: int  # hits of the whole search, before limit and offset


def search(store: Store, query: SearchQuery, limit: int | None = DEFAULT_LIMIT,
           offset: int = 0) -> SearchResult:
    """The hits of `query`, newest change first, `limit` of them from `offset`."""
    if (limit is not None and limit < 1) or offset < 0:
        raise SearchError("--limit must be at least 1 and --offset at least 0")
    words = query.words_filter()
    matches = store.search_words(words, limit=limit, offset=offset)
    phrases = dict(zip(SIDES, words.phrases(), strict=True))
    hits = [SearchHit(m.url, m.natural_key, m.host, m.generation, m.previous_generation, m.fetched_at,
                      m.verdict, m.template_only, m.run, m.side, excerpt_of(m.text, phrases[m.side]))
            for m in matches]
    total = matches[0].total if matches else (0 if offset == 0 else _total(store, query))
    return SearchResult(hits, total)


def _total(store: Store, query: SearchQuery) -> int:
    first = store.search_words(query.words_filter(), limit=1)
    return first[0].total if first else 0


HIT_COLUMNS = ("url", "host", "generation", "previous_generation", "fetched_at", "verdict", "template_only",
               "side", "excerpt")


def hits_csv(hits: Iterable[SearchHit]) -> bytes:
    """Search hits as CSV (RFC 4180, UTF-8), as `cdc export` writes changes: page text is
    untrusted, so a cell a spreadsheet would read as a formula is neutralised."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(HIT_COLUMNS)
    for hit in hits:
        writer.writerow([csv_cell(getattr(hit, name)) for name in HIT_COLUMNS])
    return buffer.getvalue().encode("utf-8")



# --- watches --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Watch:
    name: str
    query: SearchQuery
    created_at: datetime


@dataclass(frozen=True)
class WatchHit:
    name: str
    run: int
    url: str
    natural_key: str
    generation: int
    previous_generation: int | None
    side: str
    excerpt: str


def _checked_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_WATCH_NAME or any(char in name for char in "\r\n\t"):
        raise SearchError(f"a watch name is one line of 1 to {MAX_WATCH_NAME} characters, got {name!r}")
    return name


def add_watch(store: Store, name: str, query: SearchQuery) -> Watch:
    """Save `query` as watch `name`; refused when the name is taken or the query has --run
    or --label (a watch is evaluated at every run's end, against that run's changes, which no
    analyst has judged yet)."""
    name = _checked_name(name)
    if query.run is not None:
        raise SearchError("a watch is evaluated against each run's changes: give it no --run")
    if query.labels:  # a run's new changes are judged after it, if ever
        raise SearchError("a watch is evaluated as a run ends, before any change of it is annotated: "
                          "give it no --label")
    created = datetime.now(UTC).replace(tzinfo=None)
    if not store.add_watch(name, query.to_json(), created):
        raise SearchError(f"a watch named {name!r} exists; remove it first (`cdc watch remove {name}`) "
                          "or give another name")
    return Watch(name, query, created)


def watches(store: Store) -> list[Watch]:
    return [Watch(row.name, SearchQuery.from_json(row.query), row.created_at) for row in store.watches()]


def remove_watch(store: Store, name: str) -> None:
    if not store.remove_watch(name):
        raise SearchError(f"no watch named {name!r}; `cdc watch list` lists them")


def watch_hits(store: Store, name: str | None = None, run: int | None = None) -> list[WatchHit]:
    """The recorded hits, by run; of one watch (which must exist), of one run."""
    known = {watch.name: watch for watch in watches(store)}
    if name is not None and name not in known:
        raise SearchError(f"no watch named {name!r}; `cdc watch list` lists them")
    # Each watch's phrase per side, normalised once, not once a hit (a run's end may record
    # hundreds of thousands).
    phrases = {watch_name: dict(zip(SIDES, watch.query.words_filter().phrases(), strict=True))
               for watch_name, watch in known.items()}
    hits = []
    for row in store.watch_hits(name, run):
        phrase = phrases.get(row.name, {}).get(row.side)
        hits.append(WatchHit(row.name, row.run, row.url, row.natural_key, row.generation,
                             row.previous_generation, row.side,
                             excerpt_of(row.text, phrase or "") if row.text else ""))
    return hits


def run_watch_counts(store: Store, run: int) -> dict[int, dict[str, int]]:
    """Each watch's hits (0 for a watch that did not hit), by name, in each run whose hits
    run `run`'s end recorded: `run`, and the runs before it that did not finish
    (`cdc.store.search.watched_runs`), oldest first."""
    runs = store.watched_runs(run)
    counts = store.watch_hit_counts(runs)
    names = [watch.name for watch in store.watches()]
    return {watched: {name: counts.get((name, watched), 0) for name in names} for watched in runs}
