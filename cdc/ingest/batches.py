"""A batch's plan: each record triaged (its page, fetch time and retention class, or why it
is bad), the records grouped by page, and what the store knows of those pages read beside
them, so each page's history can be built (`cdc.ingest.versions.build_pages`).

Only the batch's pages are read: their states, and for pages the batch reaches back into
(a fetch not after everything stored), the texts next to those fetches
(`cdc.ingest.histories`)."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from cdc.core.urls import canonical_url, host_of_key
from cdc.errors import InvalidUrlError
from cdc.ingest.histories import read_histories
from cdc.ingest.versions import Fetch, PageWork, Pending, StoredGeneration, StoredState
from cdc.sources.jsonl import BadRecord, RawLine, SourceRecord
from cdc.sources.warc import RawPage, Revisit
from cdc.store import PageHistory, PageState, Store
from cdc.store.expired import ExpiredTexts
from cdc.store.rows import ExpiredText

FUTURE_SLACK = timedelta(days=1)  # a fetch time later than this after now is refused
_NATURAL_KEY = operator.attrgetter("natural_key")


class Triaged(NamedTuple):
    """A record whose page and fetch time are known (`triage`), waiting to be built."""

    natural_key: str
    retention_class: str | None
    pending: Pending
    parsed: dict | None  # the record parsed here, for work done in this process; None for a page
    # not yet extracted, or a record prepared elsewhere


def parse_time(value: object) -> datetime:
    """A fetch time as naive UTC: ISO 8601 text (naive means UTC) or epoch seconds."""
    if isinstance(value, bool) or value is None:
        raise ValueError("no fetched_at (an ISO 8601 time of the fetch)")
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
    if not isinstance(value, str):
        raise ValueError(f"fetched_at must be ISO 8601 text, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"fetched_at is not an ISO 8601 time: {value[:60]!r}") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def fetch_time(value: object, now: datetime | None = None) -> datetime:
    """`parse_time`, refusing a time more than a day after `now` (default: the clock)."""
    parsed = parse_time(value)
    now = now or datetime.now(UTC).replace(tzinfo=None)
    if parsed > now + FUTURE_SLACK:
        raise ValueError(f"fetched_at {parsed.isoformat()} is in the future (more than a day after now)")
    return parsed


def triage(item: SourceRecord | RawLine | RawPage,
           sequence: int) -> Triaged | BadRecord:
    """The natural key, retention class and fetch time of a record, or why it is bad; and
    the parsed record, for work done in this process (None for a page not yet extracted)."""
    if isinstance(item, RawPage):  # the WARC headers say where and when; the HTML waits
        record, parsed = {"url": item.url, "fetched_at": item.fetched_at}, None
        payload, size = item, len(item.body)
    elif isinstance(item, RawLine):
        parsed_line = item.parse()
        if isinstance(parsed_line, BadRecord):
            return parsed_line
        # A raw line travels to a worker process far faster than the dict parsed from it.
        record = parsed = parsed_line.record
        payload, size = item, len(item.data)
    else:
        record = parsed = payload = item.record
        sections = record.get("sections")
        size = sum(len(s.get("text") or "") for s in sections if isinstance(s, dict)) \
            if isinstance(sections, list) else 0
    try:
        natural_key = canonical_url(record.get("url"))
        fetched_at = fetch_time(record.get("fetched_at"))
    except (InvalidUrlError, ValueError, OverflowError, OSError) as exc:
        return BadRecord(item.source, item.line, str(exc))
    retention_class = record.get("retention_class")
    if not isinstance(retention_class, str) or not retention_class:
        retention_class = None
    pending = Pending(sequence, item.source, item.line, str(record["url"]).strip(), fetched_at, payload, size)
    return Triaged(natural_key, retention_class, pending, parsed)


def _stored(state: PageState | None, history: PageHistory | StoredState | None) -> StoredState | None:
    """What `build_pages` knows of a page: its latest generation, or its whole history (read
    whole by `Store.page_histories`, or around the batch's fetches by `cdc.ingest.histories`)."""
    if state is None:
        return None
    if isinstance(history, StoredState):
        return history
    if history is None:
        generations = [StoredGeneration(state.latest_generation, state.last_fetched, state.content_digest,
                                        state.length, state.chunk_count, state.first_run, state.text,
                                        (b"".join(state.chunk_digests), state.chunk_lengths)
                                        if state.text is not None else None, None)]
        return StoredState(state.last_checked, state.retention_class, generations, [], complete=False)
    return whole_history(state.last_checked, state.retention_class, history)


def whole_history(last_checked: datetime, retention_class: str | None, history: PageHistory) -> StoredState:
    """A page's whole history as `Store.page_histories` reads it, every retained text in it."""
    generations = [StoredGeneration(row.generation, row.fetched_at, row.content_digest, row.length,
                                    row.chunk_count, row.first_run, row.text,
                                    (row.digests, row.lengths)
                                    if row.lengths is not None else None, row.previous)
                   for row in history.generations]
    fetches = [Fetch(row.fetched_at, row.content_digest, row.run, row.sequence) for row in history.fetches]
    return StoredState(last_checked, retention_class, generations, fetches, complete=True)


def by_page(entries: list[Triaged]) -> list[tuple[str, list[Triaged]]]:
    """Triaged records grouped by page (natural key, its records), in key order; each page's
    in the order given (the sort is stable)."""
    entries.sort(key=_NATURAL_KEY)
    return [(key, list(group)) for key, group in itertools.groupby(entries, key=_NATURAL_KEY)]


def reaching_back(earliest: Iterable[tuple[str, datetime]], states: dict[str, PageState]) -> list[str]:
    """The pages, of (key, earliest fetch in the batch), whose fetches are not all after
    everything stored of them: their whole history is read, to put those fetches in place."""
    return [key for key, fetched_at in earliest if key in states and fetched_at <= states[key].last_checked]


def plan_pages(groups: list[tuple[str, list[Triaged]]], states: dict[str, PageState],
               histories: dict[str, PageHistory | StoredState], run: int = 0) -> list[PageWork]:
    """Each page's work: its records and what the store knows of it (the whole history of
    pages in `histories`, see `reaching_back`). The class of the page's latest record wins,
    else the stored one."""
    pages = []
    for key, entries in groups:
        state = states.get(key)
        latest = max(entries, key=lambda entry: (entry.pending.fetched_at, entry.pending.sequence))
        newer = state is None or latest.pending.fetched_at > state.last_checked
        stored_class = state.retention_class if state else None
        retention_class = (latest.retention_class or stored_class) if newer \
            else (stored_class or latest.retention_class)
        pages.append(PageWork(key, host_of_key(key), _stored(state, histories.get(key)),
                              [entry.pending for entry in entries], retention_class, run))
    return pages


def read_pages(store: Store, connection, groups: list[tuple[str, list[Triaged]]],
               run: int = 0) -> list[PageWork]:
    """`plan_pages` for a batch's pages, with what `connection` holds of them: of pages the
    batch reaches back into, the texts next to its fetches only (`cdc.ingest.histories`)."""
    keys = [key for key, _ in groups]
    states = store.page_states(connection, keys)
    earliest = [(key, min(entry.pending.fetched_at for entry in entries)) for key, entries in groups]
    back = set(reaching_back(earliest, states))
    times = {key: [entry.pending.fetched_at for entry in entries] for key, entries in groups if key in back}
    seen = {key: (states[key].last_checked, states[key].retention_class) for key in back}
    histories = read_histories(connection, times, seen)
    return plan_pages(groups, states, histories, run)


def with_expired(pages: list[PageWork], expired: ExpiredTexts | None) -> list[PageWork]:
    """`pages` with the texts and chunk lists kept beside the store (`cdc.store.expired`) in
    place of those the store does not hold: each page is built as it would have been had the
    batches that expired them written them."""
    if expired is None:
        return pages
    wanted = {(work.natural_key, generation.digest) for work in pages if work.state is not None
              for generation in work.state.generations if generation.text is None}
    found = expired.find(wanted)
    if not found:
        return pages
    filled = []
    for work in pages:
        if work.state is not None and any((work.natural_key, generation.digest) in found
                                          for generation in work.state.generations):
            generations = [_filled(generation, found.get((work.natural_key, generation.digest)))
                           for generation in work.state.generations]
            work = replace(work, state=replace(work.state, generations=generations))
        filled.append(work)
    return filled


def _filled(generation: StoredGeneration, text: ExpiredText | None) -> StoredGeneration:
    """`generation` with its kept text and chunk list, where the store held none."""
    if generation.text is not None or text is None:
        return generation
    return replace(generation, text=text.text, chunks=(text.digests, text.lengths))


def mark_revisits(store: Store, revisits: Iterable[Revisit], run: int | None = None) -> set[str]:
    """Move `last_checked` forward for pages a WARC `revisit` record saw again, unchanged,
    and record that `run` saw them (`Store.mark_checked`); the pages' keys. A revisit
    without a usable URL or time says nothing and is passed over."""
    checked = []
    for revisit in revisits:
        try:
            checked.append((canonical_url(revisit.url), parse_time(revisit.fetched_at)))
        except (InvalidUrlError, ValueError, OverflowError):
            continue
    if checked:
        with store.writing() as connection:
            store.mark_checked(connection, checked, run)
    return {key for key, _ in checked}
