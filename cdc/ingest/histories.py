"""What a batch reads of the pages it reaches back into: every generation's outline and every
fetch, and the texts and chunk lists of the generations next to the new fetches only.

A fetch put in place before a page's latest changes the history only around where it lands:
the generation it falls in (which it may split, or join), the one after (whose start may move
earlier, or whose change row is measured again against a new neighbour), and the one after
that (whose previous generation may be renumbered). So for each new fetch time this reads the
texts of the stored generation it falls in, of the one before (a tie in time may order the
fetch ahead of it) and of the two after; of a page with twenty retained generations and one
fetch put in place, four texts instead of twenty. Everything else is read without its text:
numbers, times, digests, sizes, and whether the store retains text and chunks of it.

The outline also says which digests the store retains a text or chunk list of that was not
read (`StoredState.unread`). A build that turns out to need one of those (a fetch whose
content matches a generation further away, say) marks its page `PageOutcome.incomplete`, and
the ingester builds that page again with its whole history (`Store.page_histories`), so the
rows are the same as if every text had been read.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import duckdb

from cdc.ingest.versions import Fetch, StoredGeneration, StoredState
from cdc.store.lookups import _by_keys, _rows_at

# Stored generations around each new fetch whose texts are read: from the one before the
# generation the fetch falls in to the second after it (see the module docstring).
BEFORE, AFTER = 1, 2


@dataclass(frozen=True)
class _Outline:
    """One stored generation without its text."""

    generation: int
    fetched_at: datetime
    digest: bytes
    length: int
    chunk_count: int
    first_run: int | None
    previous: int | None
    row: int  # its row id in `generations`
    chunk_row: int | None  # its chunk list's in `chunk_lists`, if retained

    @property
    def retained(self) -> bool:
        """Whether the store keeps its text and chunk list. A generation keeps its text exactly
        as long as its chunk list: ingest writes both or neither, retention drops both
        (`tests/storerows.consistency_problems` holds every test's store to it). So the narrow
        chunk list rows say it: `text IS NOT NULL` would read every generation's text, a third
        of the history reads on the interleaved shards."""
        return self.chunk_row is not None


def near(starts: Sequence[datetime], times: Iterable[datetime]) -> set[int]:
    """Indexes of the generations (by their first fetch times `starts`, in order) whose texts
    a batch of fetches at `times` may need: around where each lands (see BEFORE, AFTER)."""
    wanted: set[int] = set()
    for moment in times:
        at = bisect.bisect_right(starts, moment) - 1
        wanted.update(range(max(at - BEFORE, 0), min(at + AFTER + 1, len(starts))))
    return wanted


def read_histories(connection: duckdb.DuckDBPyConnection, times: dict[str, list[datetime]],
                   last_seen: dict[str, tuple[datetime, str | None]]) -> dict[str, StoredState]:
    """The stored state of each page in `times` (key: the batch's fetch times of it), with
    every generation and fetch, and only the texts and chunk lists `near` those times;
    `last_seen` gives each page's last check and retention class (`Store.page_states`)."""
    keys = sorted(times)
    if not keys:
        return {}
    outlines = _outlines(connection, keys)
    near_texts: dict[tuple[str, int], int] = {}
    near_lists: dict[tuple[str, int], int] = {}
    for key, generations in outlines.items():
        for n in near([generation.fetched_at for generation in generations], times[key]):
            outline = generations[n]
            if outline.retained:
                near_texts[key, outline.generation] = outline.row
                near_lists[key, outline.generation] = outline.chunk_row
    texts = {(key, generation): text for key, generation, text in _rows_at(
        connection, "generations", "encode(text)", near_texts) if text is not None}
    lists = {(key, generation): (digests, lengths) for key, generation, digests, lengths in _rows_at(
        connection, "chunk_lists", "digests, lengths", near_lists)}
    fetches: dict[str, list[Fetch]] = {key: [] for key in keys}
    for key, *fetch in _by_keys(connection, """
            SELECT natural_key, fetched_at, content_digest, run, sequence FROM fetches
            WHERE natural_key IN ({keys})""", keys):
        fetches[key].append(Fetch(*fetch))
    states = {}
    for key, generations in outlines.items():
        stored, unread = [], set()
        for row in generations:
            text = texts.get((key, row.generation)) if row.retained else None
            chunks = lists.get((key, row.generation)) if row.retained else None
            if row.retained and (text is None or chunks is None):
                unread.add(row.digest)
            stored.append(StoredGeneration(row.generation, row.fetched_at, row.digest, row.length,
                                           row.chunk_count, row.first_run, text, chunks, row.previous))
        checked, retention_class = last_seen[key]
        states[key] = StoredState(checked, retention_class, stored, fetches[key], complete=True,
                                  unread=frozenset(unread))
    return states


def _outlines(connection: duckdb.DuckDBPyConnection, keys: list[str]) -> dict[str, list[_Outline]]:
    """Every generation of the pages, in order, without texts: what the planner needs, and
    where the rows are, so that the texts and chunk lists wanted are read alone (`_rows_at`:
    a look-up by key reads every generation's, 1.5 s of a run on the interleaved shards)."""
    chunk_rows = {(key, generation): rowid for key, generation, rowid in _by_keys(
        connection, "SELECT natural_key, generation, rowid FROM chunk_lists "
                    "WHERE natural_key IN ({keys})", keys)}
    previous = {(key, generation): before for key, generation, before in _by_keys(
        connection, "SELECT natural_key, generation, previous_generation FROM changes "
                    "WHERE natural_key IN ({keys})", keys)}
    outlines: dict[str, list[_Outline]] = {}
    for key, generation, *columns, rowid in sorted(_by_keys(connection, """
            SELECT natural_key, generation, fetched_at, content_digest, length, chunk_count, first_run, rowid
            FROM generations WHERE natural_key IN ({keys})""", keys), key=lambda row: (row[0], row[1])):
        outline = _Outline(generation, *columns, previous.get((key, generation)), rowid,
                           chunk_rows.get((key, generation)))
        outlines.setdefault(key, []).append(outline)
    return outlines
