"""Ingest: crawl records in; generations, chunk rows and change rows out, in batches.

For each batch of records: canonicalise each URL (the natural key) and read its fetch time;
group the records by page; read what the store knows of those pages (their whole history, for
pages the batch reaches back into); build each page's history (`cdc.versions.build_pages`:
normalise, digest, chunk, put each fetch in its place, compare with exact edits); write
everything in one transaction. Re-ingesting the same input changes nothing, and the store
ends the same for any order and split of the records.

The per-page work is pure, so with `workers` above 1 it is queued for forked worker
processes in small tasks of about equal size, while this process reads, plans and writes,
and takes back the tasks no worker has started once it has time (`cdc.worktasks`): the
work is shared by what each process has time for. The next batch's records are extracted
(HTML to text, or JSON to normalised text) in the workers while this process writes the
current batch and reads the next: that work needs nothing from the store, so it may run
ahead; one batch ahead at most, so memory stays flat. A bad record
(malformed JSON, no or invalid URL, no or unreadable fetch time) is skipped, counted and
reported with its line; every good record around it is stored. So is a fetch time more than
a day in the future: a clock or a parser gone wrong, which would otherwise stand as the
page's latest version for good.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial

import pyarrow as pa

from cdc.chunking import DEFAULT_PARAMS, ChunkParams, chunk_content
from cdc.collector import collector_paused
from cdc.editwords import COLUMNS as EDIT_WORDS_COLUMNS
from cdc.errors import InvalidUrlError
from cdc.histories import read_histories
from cdc.lifeline import follow_parent
from cdc.normalize import content_digest
from cdc.sources import BadRecord, RawLine, SourceRecord
from cdc.store import PageHistory, PageState, Store, WriteBatch
from cdc.urls import canonical_url, host_of
from cdc.versions import (
    NEW,
    Fetch,
    PageOutcome,
    PageWork,
    Pending,
    Prepared,
    StoredGeneration,
    StoredState,
    build_pages,
    content_of,
)
from cdc.warc import RawPage, Revisit
from cdc.worktasks import Tasks, share_out

__all__ = [
    "NEW",
    "IngestSummary",
    "Ingester",
    "by_page",
    "mark_revisits",
    "outcome_tables",
    "parse_time",
    "plan_pages",
    "reaching_back",
    "read_pages",
    "share_out",
    "triage",
]

BATCH_RECORDS = 4_000
# Of input. A batch's records become several times their size in Python objects where they
# are built: at 64 MB the corpus (47.5 MB of JSONL) was one batch and its ingest peaked at
# 611 MB; at 16 MB it is three, and 397 MB (about 200 MB of it the imported libraries).
BATCH_BYTES = 16 << 20
# Of HTML, for WARC input: pages wait unextracted (cdc.warc.RawPage), and a batch's pages
# become several times their text in Python strings and dicts where they are built. With
# 16 MB, a 1 GB WARC ingest peaks at about 260 MB with two processes and the kernels
# compiled ahead of time (380 MB with Numba's JIT loaded); 32 MB added about 50 MB.
WARC_BATCH_BYTES = 16 << 20
PARALLEL_MIN_BYTES = 4 << 20  # a smaller batch is not worth the trip to worker processes
# With workers, the first batch is this part of the others (at least PARALLEL_MIN_BYTES): the
# workers have nothing to do while this process reads it (0.4 s of the corpus at 16 MB).
FIRST_BATCH_PART = 4
FUTURE_SLACK = timedelta(days=1)  # a fetch time later than this after now is refused
# A record's place in the input: the input's number, then the record's within it, the same
# for every way of ingesting (a cluster numbers its shards so): it orders two fetches of a
# page made at the same time.
INPUT_SHIFT = 40  # an input holds fewer than 2**40 records


@dataclass
class IngestSummary:
    """What a run did; `bad` lists every skipped record with where it was, `same_time` every
    record kept beside another of its page fetched at the same time with other content."""

    records: int = 0
    pages: set[str] = field(default_factory=set)
    new_pages: int = 0
    new_generations: int = 0  # net: a generation whose start moved earlier is one less, one more
    unchanged: int = 0
    older: int = 0  # fetches before a page's latest stored one, put in their place
    same_time: list[tuple[str, int, str]] = field(default_factory=list)  # source, line, url
    bad: list[BadRecord] = field(default_factory=list)
    batches: int = 0

    @property
    def skipped(self) -> int:
        return len(self.bad)

    def add(self, outcome: PageOutcome) -> None:
        """Count what happened to one page's records."""
        self.pages.add(outcome.natural_key)
        self.new_pages += outcome.new_page
        self.new_generations += outcome.added_generations
        self.unchanged += outcome.unchanged
        self.older += outcome.older
        self.same_time += outcome.same_time
        self.bad += outcome.bad

    def counts(self) -> dict[str, int]:
        """The run's counts as `cdc runs` shows them."""
        return {"records": self.records, "pages": len(self.pages), "new_pages": self.new_pages,
                "changed": max(self.new_generations - self.new_pages, 0), "unchanged": self.unchanged,
                "older": self.older, "skipped": len(self.bad), "failed": 0}

    def merge(self, other: IngestSummary) -> None:
        """Add a summary of other records (another shard, or another partition of pages)."""
        self.records += other.records
        self.pages |= other.pages
        self.new_pages += other.new_pages
        self.new_generations += other.new_generations
        self.unchanged += other.unchanged
        self.older += other.older
        self.same_time += other.same_time
        self.bad += other.bad
        self.batches += other.batches


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
           sequence: int) -> tuple[str, str | None, Pending, dict | None] | BadRecord:
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
    return natural_key, retention_class, pending, parsed


def _stored(state: PageState | None, history: PageHistory | StoredState | None) -> StoredState | None:
    """What `build_pages` knows of a page: its latest generation, or its whole history (read
    whole by `Store.page_histories`, or around the batch's fetches by `cdc.histories`)."""
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
    return _whole(state.last_checked, state.retention_class, history)


def _whole(last_checked: datetime, retention_class: str | None, history: PageHistory) -> StoredState:
    """A page's whole history as `Store.page_histories` reads it, every retained text in it."""
    generations = [StoredGeneration(row.generation, row.fetched_at, row.content_digest, row.length,
                                    row.chunk_count, row.first_run, row.text,
                                    (row.digests, row.lengths)
                                    if row.lengths is not None else None, row.previous)
                   for row in history.generations]
    fetches = [Fetch(*row) for row in history.fetches]
    return StoredState(last_checked, retention_class, generations, fetches, complete=True)


def by_page(entries: list[tuple]) -> list[tuple[str, list[tuple]]]:
    """Entries of (natural key, retention class, Pending, ...) grouped by page, in key order;
    each page's in the order given (the sort is stable)."""
    entries.sort(key=lambda entry: entry[0])
    return [(key, list(group)) for key, group in itertools.groupby(entries, key=lambda entry: entry[0])]


def reaching_back(earliest: Iterable[tuple[str, datetime]], states: dict[str, PageState]) -> list[str]:
    """The pages, of (key, earliest fetch in the batch), whose fetches are not all after
    everything stored of them: their whole history is read, to put those fetches in place."""
    return [key for key, fetched_at in earliest if key in states and fetched_at <= states[key].last_checked]


def plan_pages(groups: list[tuple[str, list[tuple]]], states: dict[str, PageState],
               histories: dict[str, PageHistory | StoredState], run: int = 0) -> list[PageWork]:
    """Each page's work: its records and what the store knows of it (the whole history of
    pages in `histories`, see `reaching_back`). The class of the page's latest record wins,
    else the stored one."""
    pages = []
    for key, entries in groups:
        state = states.get(key)
        latest = max(entries, key=lambda entry: (entry[2].fetched_at, entry[2].sequence))
        newer = state is None or latest[2].fetched_at > state.last_checked
        stored_class = state.retention_class if state else None
        retention_class = (latest[1] or stored_class) if newer else (stored_class or latest[1])
        pages.append(PageWork(key, host_of(key), _stored(state, histories.get(key)),
                              [entry[2] for entry in entries], retention_class, run))
    return pages


def read_pages(store: Store, connection, groups: list[tuple[str, list[tuple]]],
               run: int = 0) -> list[PageWork]:
    """`plan_pages` for a batch's pages, with what `connection` holds of them: of pages the
    batch reaches back into, the texts next to its fetches only (`cdc.histories`)."""
    keys = [key for key, _ in groups]
    states = store.page_states(connection, keys)
    earliest = [(key, min(entry[2].fetched_at for entry in entries)) for key, entries in groups]
    back = set(reaching_back(earliest, states))
    times = {key: [entry[2].fetched_at for entry in entries] for key, entries in groups if key in back}
    seen = {key: (states[key].last_checked, states[key].retention_class) for key in back}
    histories = read_histories(connection, times, seen)
    return plan_pages(groups, states, histories, run)


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


def chunk_table(rows: list[tuple]) -> pa.Table:
    """`chunk_lists` rows (natural_key, generation, digests, lengths) as Arrow."""
    return _table(rows, _CHUNKS_SCHEMA)


def change_table(rows: list[tuple]) -> pa.Table:
    """`changes` rows (`cdc.versions.change_row`) as Arrow."""
    return _table(rows, _CHANGES_SCHEMA)


def words_table(rows: list[tuple]) -> pa.Table:
    """`change_words` rows (`cdc.editwords.EditWords`) as Arrow."""
    return _table(rows, _WORDS_SCHEMA)


@collector_paused
def outcome_tables(outcomes: Iterable[PageOutcome]) -> WriteBatch:
    """The rows of built pages as the Arrow tables `Store.write` appends."""
    columns = _Columns()
    for outcome in outcomes:
        columns.add(outcome)
    return columns.tables()


def _weight(work: PageWork) -> int:
    return sum(record.size for record in work.records) + sum(
        len(generation.text or b"") for generation in (work.state.generations if work.state else []))


def prepare_records(payloads: list[dict | RawLine | RawPage]) -> list[Prepared | None]:
    """Each record's normalised content and digest (`Prepared`, chunked later where its page
    is built); None for a record that turns out bad, left for `build_pages` to report."""
    prepared: list[Prepared | None] = []
    for payload in payloads:
        content = content_of(payload)
        prepared.append(None if isinstance(content, BadRecord)
                        else Prepared(content, content_digest(content), None))
    return prepared


@dataclass
class _Ahead:
    """A batch's extraction queued ahead (`Ingester._prepare_ahead`), by its records' sequence."""

    tasks: Tasks
    sequences: list[int]

    def ready(self) -> dict[int, Prepared]:
        """Each record's prepared content, by sequence (none for a record that turned out bad)."""
        results = self.tasks.results(len(self.sequences))
        return {sequence: prepared for sequence, prepared in zip(self.sequences, results, strict=True)
                if prepared is not None}


def _with_ready(work: PageWork, ready: dict[int, Prepared]) -> PageWork:
    """A page's work with the contents prepared ahead in its records' place."""
    return replace(work, records=[replace(record, payload=ready[record.sequence]) if record.sequence in ready
                                  else record for record in work.records])


def _parsed_here(work: PageWork, parsed: dict[int, dict | None]) -> PageWork:
    """A page's work with the records this process parsed already, for a build here."""
    return replace(work, records=[replace(record, payload=parsed[record.sequence] or record.payload)
                                  for record in work.records])


class _Columns:
    """Rows of one batch, gathered as columns for Arrow."""

    def __init__(self) -> None:
        self.generations: list[tuple] = []
        self.chunks: list[tuple] = []
        self.changes: list[tuple] = []
        self.pages: list[tuple] = []
        self.checked: list[tuple] = []
        self.fetches: list[tuple] = []
        self.seen: list[tuple] = []  # natural_key, run, fetched_at, content_digest
        self.removed_generations: list[tuple] = []
        self.removed_changes: list[tuple] = []
        self.words: list[tuple] = []

    def add(self, outcome: PageOutcome) -> None:
        self.generations += outcome.generations
        self.chunks += outcome.chunks
        self.changes += outcome.changes
        self.words += outcome.words
        self.fetches += outcome.fetches
        key = outcome.natural_key
        if outcome.seen is not None:
            self.seen.append((key, *outcome.seen))
        self.removed_generations += [(key, generation) for generation in outcome.removed_generations]
        self.removed_changes += [(key, generation) for generation in outcome.removed_changes]
        if outcome.page is not None:
            self.pages.append(outcome.page)
        elif outcome.last_checked is not None:
            self.checked.append((outcome.natural_key, outcome.last_checked))

    def tables(self) -> WriteBatch:
        generations = _table(self.generations, _GENERATIONS_SCHEMA, text_column=6)
        return WriteBatch(pages=_table(self.pages, _PAGES_SCHEMA), generations=generations,
                          chunks=_table(self.chunks, _CHUNKS_SCHEMA),
                          changes=_table(self.changes, _CHANGES_SCHEMA),
                          checked=_table(self.checked, _CHECKED_SCHEMA),
                          fetches=_table(self.fetches, _FETCHES_SCHEMA),
                          seen=_table(self.seen, _SEEN_SCHEMA),
                          removed_generations=_table(self.removed_generations, _REMOVED_SCHEMA),
                          removed_changes=_table(self.removed_changes, _REMOVED_SCHEMA),
                          words=words_table(self.words))


def _table(rows: list[tuple], schema: pa.Schema, text_column: int | None = None) -> pa.Table:
    """Rows as an Arrow table of `schema`, built column by column."""
    columns = list(zip(*rows)) if rows else [[] for _ in schema]
    arrays = []
    for i, (values, column) in enumerate(zip(columns, schema)):
        if i == text_column:  # UTF-8 already: checked and converted in C++, not decoded here
            arrays.append(pa.array(values, pa.binary()).cast(pa.string()))
        else:
            arrays.append(pa.array(values, column.type))
    return pa.Table.from_arrays(arrays, schema=schema)


_CHECKED_SCHEMA = pa.schema([("natural_key", pa.string()), ("last_checked", pa.timestamp("us"))])
_PAGES_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("url", pa.string()), ("host", pa.string()),
    ("retention_class", pa.string()), ("latest_generation", pa.int64()),
    ("first_seen", pa.timestamp("us")), ("last_fetched", pa.timestamp("us")),
    ("last_checked", pa.timestamp("us")), ("etag", pa.string()), ("last_modified", pa.string()),
])
_GENERATIONS_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int64()), ("fetched_at", pa.timestamp("us")),
    ("content_digest", pa.binary()), ("length", pa.int32()), ("chunk_count", pa.int32()),
    ("text", pa.string()), ("first_run", pa.int32()),
])
_CHUNKS_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int64()),
    ("digests", pa.binary()), ("lengths", pa.list_(pa.int32())),
])
_CHANGES_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int64()), ("previous_generation", pa.int64()),
    ("fetched_at", pa.timestamp("us")), ("similarity", pa.float64()), ("unchanged_ratio", pa.float64()),
    ("retained_ratio", pa.float64()), ("bytes_added", pa.int32()), ("bytes_removed", pa.int32()),
    ("regions", pa.int32()), ("verdict", pa.string()), ("excerpt", pa.string()), ("measure", pa.string()),
])
_FETCHES_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("fetched_at", pa.timestamp("us")), ("content_digest", pa.binary()),
    ("run", pa.int32()), ("sequence", pa.int64()),
])
_SEEN_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("run", pa.int32()), ("fetched_at", pa.timestamp("us")),
    ("content_digest", pa.binary()),
])
_WORDS_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int64()), ("run", pa.int32()),
    *((name, pa.string()) for name in EDIT_WORDS_COLUMNS[3:]),
])
_REMOVED_SCHEMA = pa.schema([("natural_key", pa.string()), ("generation", pa.int64())])


def _numbered(number: int, items: Iterable[SourceRecord | RawLine | BadRecord]
              ) -> Iterator[tuple[int, SourceRecord | RawLine | BadRecord]]:
    """The items of input `number`, each record with its place in the input (a bad line takes
    none), as a cluster's map stage numbers a shard's."""
    place = 0
    for item in items:
        if not isinstance(item, BadRecord):
            place += 1
        yield number << INPUT_SHIFT | place, item


class Ingester:
    """Runs records into a store, batch by batch; see the module docstring."""

    def __init__(self, store: Store, params: ChunkParams = DEFAULT_PARAMS,
                 batch_records: int = BATCH_RECORDS, batch_bytes: int = BATCH_BYTES,
                 on_batch: Callable[[IngestSummary], None] | None = None,
                 workers: int = 1, on_write: Callable[[WriteBatch], None] | None = None,
                 label: str | None = None, inputs: Sequence[str] = (), run_id: int | None = None,
                 revisits: list[Revisit] | None = None, extraction_mode: str | None = None):
        self.store = store
        # How the run's archive pages were made text (cdc.inputs.run_mode), claimed in the
        # store with the first batch written: a run that fails before it claims nothing.
        self._mode_to_claim = extraction_mode
        self.revisits = revisits  # filled by the inputs' readers (WARC revisits), marked at the end
        self.label = label  # the run's label (`cdc runs`), by default what it ingests
        self.inputs = list(inputs)
        self.run_id = run_id  # given: batches of a run its caller started and ends (cdc fetch)
        self._own_run = run_id is None
        self.params = params
        self.batch_records = batch_records
        self.batch_bytes = batch_bytes
        self.on_batch = on_batch
        self.on_write = on_write  # given each batch's tables once committed (the Parquet lake)
        self.workers = max(1, workers)
        self.summary = IngestSummary()
        self._pool: ProcessPoolExecutor | None = None
        self._ahead: Tasks | None = None  # the next batch's extraction, queued for the workers

    def run(self, items: Iterable[SourceRecord | RawLine | BadRecord]) -> IngestSummary:
        """Ingest records as one input, as one run."""
        return self.run_inputs([items])

    def run_inputs(self, inputs: Sequence[Iterable[SourceRecord | RawLine | BadRecord]]) -> IngestSummary:
        """Ingest the records of several inputs (files), in order, as one run: each record
        numbered by its input and its place in it (`INPUT_SHIFT`), as a cluster numbers them."""
        numbered = (pair for number, items in enumerate(inputs) for pair in _numbered(number, items))
        try:
            batches = self._batches(numbered)
            current = next(batches, None)
            self._prepare_ahead(current)  # the workers extract the first batch while the run starts
            if self._own_run:
                self.run_id = self.store.start_run(self.label, self.inputs)
            while current is not None:
                # The next batch is read once this one's work is queued for the workers.
                current = self._ingest(*current, read_next=lambda: next(batches, None))
                self.summary.batches += 1
                if self.on_batch:
                    self.on_batch(self.summary)
        except BaseException:
            self._close_pool(abandon=True)
            raise
        self._close_pool()
        if self.revisits:  # fetched again, unchanged: seen by the run
            self.summary.unchanged += len(self.revisits)
            self.summary.pages |= mark_revisits(self.store, self.revisits, self.run_id)
        if self._own_run:
            self.store.finish_run(self.run_id, self.summary.counts(), self.summary.pages)
        return self.summary

    def _close_pool(self, abandon: bool = False) -> None:
        """Shut the worker pool down; `abandon` (an error, Ctrl-C, SIGTERM) stops the workers
        mid-task rather than wait for pages nobody will store (seconds, for a WARC batch)."""
        if self._pool is None:
            return
        if abandon:  # Python 3.11's pool has no public way to stop a worker mid-task
            # A task taken back (`cdc.worktasks`) is a cancelled future the pool still lists
            # as pending until a worker would have reached it. Once the workers are stopped
            # the pool marks every pending future broken, and on a cancelled one that raises
            # InvalidStateError in its manager thread, which then never closes its call
            # queue: the exit hung on that queue's feeder thread. Nobody waits for them.
            pending = getattr(self._pool, "_pending_work_items", None) or {}
            for work_id, item in list(pending.items()):
                if item.future.cancelled():
                    pending.pop(work_id, None)
            processes = list((getattr(self._pool, "_processes", None) or {}).values())
            for process in processes:
                process.terminate()
            for process in processes:
                process.join(timeout=5)
            # A worker stopped while writing its result leaves half a message in the pipe, and
            # the pool's manager thread would wait for the rest for good (shutdown joins it):
            # closing our own write end, the last one, turns that wait into an end of file.
            result_queue = getattr(self._pool, "_result_queue", None)
            if result_queue is not None:
                result_queue._writer.close()
        self._pool.shutdown(cancel_futures=True)
        self._pool = None

    def _batches(self, numbered: Iterable[tuple[int, SourceRecord | RawLine | BadRecord]]
                 ) -> Iterator[tuple[list, int]]:
        batch: list[tuple[str, str | None, Pending, dict]] = []
        size = 0
        # With workers, the first batch is smaller: they wait while it is read.
        limit = self.batch_bytes
        if self.workers > 1:
            limit = min(limit, max(PARALLEL_MIN_BYTES, limit // FIRST_BATCH_PART))
        for sequence, item in numbered:
            if isinstance(item, BadRecord):
                self.summary.bad.append(item)
                continue
            self.summary.records += 1
            triaged = triage(item, sequence)
            if isinstance(triaged, BadRecord):
                self.summary.bad.append(triaged)
                continue
            batch.append(triaged)
            size += triaged[2].size
            if len(batch) >= self.batch_records or size >= limit:
                yield batch, size
                batch, size, limit = [], 0, self.batch_bytes
        if batch:
            yield batch, size

    def _ingest(self, batch: list[tuple[str, str | None, Pending, dict | None]], size: int,
                read_next: Callable[[], tuple[list, int] | None]) -> tuple[list, int] | None:
        """Read, build and write one batch; the next one (`read_next`), read while the workers
        build this one, starts its extraction in the workers (`_prepare_ahead`) and is returned."""
        with self.store.write_lock():
            ahead, self._ahead = self._ahead, None
            if ahead is not None:  # extracted ahead: the tasks no worker has started are done here
                ahead.tasks.take_back_all()
            groups = by_page(batch)
            with self.store.writing() as connection:
                pages = read_pages(self.store, connection, groups, self.run_id or 0)
            parsed = {entry[2].sequence: entry[3] for entry in batch}
            if ahead is not None:
                ready = ahead.ready()
                pages = [_with_ready(work, ready) for work in pages]
                parsed.update((sequence, None) for sequence in ready)  # built from what is ready
            outcomes, following = self._build(pages, size, parsed, read_next)
            if again := [number for number, outcome in enumerate(outcomes) if outcome.incomplete]:
                self._rebuild(pages, outcomes, again, parsed)
            for outcome in outcomes:
                self.summary.add(outcome)
            tables = outcome_tables(outcomes)
            with self.store.writing() as connection:
                if self._mode_to_claim is not None:
                    self.store.claim_extraction_mode(self._mode_to_claim, connection)
                    self._mode_to_claim = None
                self.store.write(connection, tables)
        if self.on_write:
            self.on_write(tables)
        return following

    def _rebuild(self, pages: list[PageWork], outcomes: list[PageOutcome], again: list[int],
                 parsed: dict[int, dict | None]) -> None:
        """Build again, in this process and with their whole histories, the pages `again`
        whose build needed a stored text that was not read with them (`cdc.histories`)."""
        keys = [pages[number].natural_key for number in again]
        with self.store.writing() as connection:
            histories = self.store.page_histories(connection, keys)
        whole = [_parsed_here(replace(pages[number], state=_whole(pages[number].state.last_seen,
                                                                   pages[number].state.retention_class,
                                                                   histories[key])), parsed)
                 for number, key in zip(again, keys)]
        for number, outcome in zip(again, build_pages(whole, self.params)):
            outcomes[number] = outcome

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:
            chunk_content(b"warm")  # load the compiled kernels once, before forking
            # The workers end with this process, however it ends (see cdc.lifeline).
            self._pool = ProcessPoolExecutor(self.workers - 1,
                                             mp_context=multiprocessing.get_context("fork"),
                                             initializer=follow_parent, initargs=(os.getpid(),))
        return self._pool

    def _prepare_ahead(self, ahead: tuple[list, int] | None) -> None:
        """Queue the next batch's extraction (`prepare_records`) for the workers, after this
        batch's build: it needs nothing from the store, so it overlaps this process's write
        and its reading of the batch after. This process takes back the tasks no worker has
        started (`cdc.worktasks`) before it builds the next. Only where a batch is worth the
        trip (`PARALLEL_MIN_BYTES`)."""
        if ahead is None or self.workers < 2 or ahead[1] < PARALLEL_MIN_BYTES:
            return
        entries = ahead[0]
        here = [entry[3] or entry[2].payload for entry in entries]  # parsed already, where it was
        tasks = Tasks(self._workers(), prepare_records, [entry[2].payload for entry in entries],
                      [entry[2].size for entry in entries], self.workers,
                      here=lambda part: prepare_records([here[n] for n in part]))
        self._ahead = _Ahead(tasks, [entry[2].sequence for entry in entries])

    def _build(self, pages: list[PageWork], size: int, parsed: dict[int, dict | None],
               read_next: Callable[[], tuple[list, int] | None]
               ) -> tuple[list[PageOutcome], tuple[list, int] | None]:
        """`build_pages` in this process, or queued for the worker processes in tasks of
        about equal size, of which this process takes back those no worker has started once
        it has read the next batch (`cdc.worktasks`); and the next batch. Pages built here use
        the records parsed (or prepared) already; pages sent to a worker travel as raw lines or
        prepared contents."""

        def built_here(part: list[int]) -> list[PageOutcome]:
            return build_pages([_parsed_here(pages[n], parsed) for n in part], self.params)

        if self.workers < 2 or size < PARALLEL_MIN_BYTES or len(pages) < 2:
            following = read_next()
            self._prepare_ahead(following)
            return built_here(list(range(len(pages)))), following
        build = Tasks(self._workers(), partial(build_pages, params=self.params), pages,
                      [_weight(work) for work in pages], self.workers, here=built_here)
        following = read_next()
        self._prepare_ahead(following)
        # The next batch's extraction is left to the workers, not taken back while this
        # process waits: they do it while this process writes (measured on the corpus, taking
        # it back left them idle for the write).
        build.take_back_all()
        return build.results(len(pages)), following
