"""Ingest: crawl records in; generations, chunk rows and change rows out, in batches.

For each batch of records: canonicalise each URL (the natural key) and read its fetch time;
group the records by page; read what the store knows of those pages; build each page's new
generations (`cdc.versions.build_pages`: normalise, digest, chunk, compare with exact
edits); write everything in one transaction. Re-ingesting the same input changes nothing.

The per-page work is pure, so with `workers` above 1 it runs in forked worker processes,
pages spread over them by size, while this process reads, plans and writes. A bad record
(malformed JSON, no or invalid URL, no or unreadable fetch time) is skipped, counted and
reported with its line; every good record around it is stored.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pyarrow as pa

from cdc.chunking import DEFAULT_PARAMS, ChunkParams, chunk_content
from cdc.collector import collector_paused
from cdc.errors import InvalidUrlError
from cdc.lifeline import follow_parent
from cdc.sources import BadRecord, RawLine, SourceRecord
from cdc.store import PageState, RetentionPolicy, Store, WriteBatch
from cdc.urls import canonical_url, host_of
from cdc.versions import NEW, PageOutcome, PageWork, Pending, StoredState, build_pages
from cdc.warc import RawPage, Revisit

__all__ = [
    "NEW",
    "IngestSummary",
    "Ingester",
    "by_page",
    "mark_revisits",
    "outcome_tables",
    "parse_time",
    "plan_pages",
    "share_out",
    "triage",
]

BATCH_RECORDS = 4_000
BATCH_BYTES = 64 << 20  # of input
# Of HTML, for WARC input: pages wait unextracted (cdc.warc.RawPage), and a batch's pages
# become several times their text in Python strings and dicts where they are built. With
# 16 MB, a 1 GB WARC ingest peaks at about 260 MB with two processes and the kernels
# compiled ahead of time (380 MB with Numba's JIT loaded); 32 MB added about 50 MB.
WARC_BATCH_BYTES = 16 << 20
PARALLEL_MIN_BYTES = 4 << 20  # a smaller batch is not worth the trip to worker processes


@dataclass
class IngestSummary:
    """What a run did; `bad` and `stale` list every skipped record with where it was."""

    records: int = 0
    pages: set[str] = field(default_factory=set)
    new_pages: int = 0
    new_generations: int = 0
    unchanged: int = 0
    stale: list[tuple[str, int, str]] = field(default_factory=list)  # source, line, url
    bad: list[BadRecord] = field(default_factory=list)
    batches: int = 0

    @property
    def skipped(self) -> int:
        return len(self.bad) + len(self.stale)

    def add(self, outcome: PageOutcome) -> None:
        """Count what happened to one page's records."""
        self.pages.add(outcome.natural_key)
        self.new_pages += outcome.new_page
        self.new_generations += len(outcome.generations)
        self.unchanged += outcome.unchanged
        self.stale += outcome.stale
        self.bad += outcome.bad

    def merge(self, other: IngestSummary) -> None:
        """Add a summary of other records (another shard, or another partition of pages)."""
        self.records += other.records
        self.pages |= other.pages
        self.new_pages += other.new_pages
        self.new_generations += other.new_generations
        self.unchanged += other.unchanged
        self.stale += other.stale
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
        fetched_at = parse_time(record.get("fetched_at"))
    except (InvalidUrlError, ValueError, OverflowError, OSError) as exc:
        return BadRecord(item.source, item.line, str(exc))
    retention_class = record.get("retention_class")
    if not isinstance(retention_class, str) or not retention_class:
        retention_class = None
    pending = Pending(sequence, item.source, item.line, str(record["url"]).strip(), fetched_at, payload, size)
    return natural_key, retention_class, pending, parsed


def _state(state: PageState | None, known: set[bytes]) -> StoredState | None:
    if state is None:
        return None
    return StoredState(state.latest_generation, state.last_fetched, state.content_digest,
                       state.retention_class, state.text, state.chunk_digests, state.chunk_lengths,
                       frozenset(known))


def by_page(entries: list[tuple]) -> list[tuple[str, list[tuple]]]:
    """Entries of (natural key, retention class, Pending, ...) grouped by page, in key order;
    each page's in the order given (the sort is stable)."""
    entries.sort(key=lambda entry: entry[0])
    return [(key, list(group)) for key, group in itertools.groupby(entries, key=lambda entry: entry[0])]


def plan_pages(groups: list[tuple[str, list[tuple]]], states: dict[str, PageState],
               known: dict[str, set[bytes]], policy: RetentionPolicy) -> list[PageWork]:
    """Each page's work: its records, what the store knows of it, and its retention limit.
    The latest record's retention class wins, else the stored one."""
    pages = []
    for key, entries in groups:
        state = states.get(key)
        latest_class = max(entries, key=lambda entry: (entry[2].fetched_at, entry[2].sequence))[1]
        retention_class = latest_class or (state.retention_class if state else None)
        pages.append(PageWork(key, host_of(key), _state(state, known.get(key, set())),
                              [entry[2] for entry in entries], policy.for_class(retention_class),
                              retention_class))
    return pages


def mark_revisits(store: Store, revisits: Iterable[Revisit]) -> None:
    """Move `last_checked` forward for pages a WARC `revisit` record saw again, unchanged;
    a revisit without a usable URL or time says nothing and is passed over."""
    checked = []
    for revisit in revisits:
        try:
            checked.append((canonical_url(revisit.url), parse_time(revisit.fetched_at)))
        except (InvalidUrlError, ValueError, OverflowError):
            continue
    if checked:
        with store.writing() as connection:
            store.mark_checked(connection, checked)


def chunk_table(rows: list[tuple]) -> pa.Table:
    """`chunk_lists` rows (natural_key, generation, digests, lengths) as Arrow."""
    return _table(rows, _CHUNKS_SCHEMA)


def change_table(rows: list[tuple]) -> pa.Table:
    """`changes` rows (`cdc.versions.change_row`) as Arrow."""
    return _table(rows, _CHANGES_SCHEMA)


@collector_paused
def outcome_tables(outcomes: Iterable[PageOutcome]) -> WriteBatch:
    """The rows of built pages as the Arrow tables `Store.write` appends."""
    columns = _Columns()
    for outcome in outcomes:
        columns.add(outcome)
    return columns.tables()


def share_out(weights: Sequence[int], bins: int) -> list[list[int]]:
    """Indexes of `weights` dealt into `bins` of about equal total: heaviest first, each to
    the lightest bin so far (the first of equals). Each bin's indexes come heaviest first."""
    shares: list[list[int]] = [[] for _ in range(bins)]
    loads = [0] * bins
    for number in sorted(range(len(weights)), key=lambda n: -weights[n]):
        lightest = loads.index(min(loads))
        shares[lightest].append(number)
        loads[lightest] += weights[number]
    return shares


def _weight(work: PageWork) -> int:
    return sum(record.size for record in work.records) + len(work.state.text or b"" if work.state else b"")


class _Columns:
    """Rows of one batch, gathered as columns for Arrow."""

    def __init__(self) -> None:
        self.generations: list[tuple] = []
        self.chunks: list[tuple] = []
        self.changes: list[tuple] = []
        self.pages: list[tuple] = []
        self.checked: list[tuple] = []

    def add(self, outcome: PageOutcome) -> None:
        self.generations += outcome.generations
        self.chunks += outcome.chunks
        self.changes += outcome.changes
        if outcome.page is not None:
            self.pages.append(outcome.page)
        elif outcome.last_checked is not None:
            self.checked.append((outcome.natural_key, outcome.last_checked))

    def tables(self) -> WriteBatch:
        generations = _table(self.generations, _GENERATIONS_SCHEMA, text_column=6)
        return WriteBatch(pages=_table(self.pages, _PAGES_SCHEMA), generations=generations,
                          chunks=_table(self.chunks, _CHUNKS_SCHEMA),
                          changes=_table(self.changes, _CHANGES_SCHEMA),
                          checked=_table(self.checked, _CHECKED_SCHEMA))


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
    ("retention_class", pa.string()), ("latest_generation", pa.int32()),
    ("first_seen", pa.timestamp("us")), ("last_fetched", pa.timestamp("us")),
    ("last_checked", pa.timestamp("us")), ("etag", pa.string()), ("last_modified", pa.string()),
])
_GENERATIONS_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int32()), ("fetched_at", pa.timestamp("us")),
    ("content_digest", pa.binary()), ("length", pa.int32()), ("chunk_count", pa.int32()),
    ("text", pa.string()),
])
_CHUNKS_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int32()),
    ("digests", pa.binary()), ("lengths", pa.list_(pa.int32())),
])
_CHANGES_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int32()), ("previous_generation", pa.int32()),
    ("fetched_at", pa.timestamp("us")), ("similarity", pa.float64()), ("unchanged_ratio", pa.float64()),
    ("retained_ratio", pa.float64()), ("bytes_added", pa.int32()), ("bytes_removed", pa.int32()),
    ("regions", pa.int32()), ("verdict", pa.string()), ("excerpt", pa.string()),
])


class Ingester:
    """Runs records into a store, batch by batch; see the module docstring."""

    def __init__(self, store: Store, params: ChunkParams = DEFAULT_PARAMS,
                 batch_records: int = BATCH_RECORDS, batch_bytes: int = BATCH_BYTES,
                 on_batch: Callable[[IngestSummary], None] | None = None,
                 workers: int = 1, on_write: Callable[[WriteBatch], None] | None = None):
        self.store = store
        self.params = params
        self.batch_records = batch_records
        self.batch_bytes = batch_bytes
        self.on_batch = on_batch
        self.on_write = on_write  # given each batch's tables once committed (the Parquet lake)
        self.workers = max(1, workers)
        self.summary = IngestSummary()
        self._pool: ProcessPoolExecutor | None = None

    def run(self, items: Iterable[SourceRecord | RawLine | BadRecord]) -> IngestSummary:
        try:
            for batch, size in self._batches(items):
                self._ingest(batch, size)
                self.summary.batches += 1
                if self.on_batch:
                    self.on_batch(self.summary)
        except BaseException:
            self._close_pool(abandon=True)
            raise
        self._close_pool()
        return self.summary

    def _close_pool(self, abandon: bool = False) -> None:
        """Shut the worker pool down; `abandon` (an error, Ctrl-C, SIGTERM) stops the workers
        mid-task rather than wait for pages nobody will store (seconds, for a WARC batch)."""
        if self._pool is None:
            return
        if abandon:  # Python 3.11's pool has no public way to stop a worker mid-task
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

    def _batches(self, items: Iterable[SourceRecord | RawLine | BadRecord]) -> Iterator[tuple[list, int]]:
        batch: list[tuple[str, str | None, Pending, dict]] = []
        size = 0
        for item in items:
            if isinstance(item, BadRecord):
                self.summary.bad.append(item)
                continue
            self.summary.records += 1
            triaged = triage(item, self.summary.records)
            if isinstance(triaged, BadRecord):
                self.summary.bad.append(triaged)
                continue
            batch.append(triaged)
            size += triaged[2].size
            if len(batch) >= self.batch_records or size >= self.batch_bytes:
                yield batch, size
                batch, size = [], 0
        if batch:
            yield batch, size

    def _ingest(self, batch: list[tuple[str, str | None, Pending, dict | None]], size: int) -> None:
        groups = by_page(batch)
        keys = [key for key, _ in groups]
        with self.store.write_lock():
            with self.store.writing() as connection:
                states = self.store.page_states(connection, keys)
                known = self.store.known_versions(connection, keys)
                policy = self.store.retention(connection)
            pages = plan_pages(groups, states, known, policy)
            parsed = {entry[2].sequence: entry[3] for entry in batch}
            outcomes = self._build(pages, size, parsed)
            for outcome in outcomes:
                self.summary.add(outcome)
            tables = outcome_tables(outcomes)
            with self.store.writing() as connection:
                self.store.write(connection, tables)
        if self.on_write:
            self.on_write(tables)

    def _build(self, pages: list[PageWork], size: int, parsed: dict[int, dict | None]) -> list[PageOutcome]:
        """`build_pages` in this process, or spread over worker processes by size. Pages built
        here use the records parsed already; pages sent to a worker travel as raw lines."""

        def parsed_here(work: PageWork) -> PageWork:
            return replace(work, records=[replace(r, payload=parsed[r.sequence] or r.payload)
                                          for r in work.records])

        if self.workers < 2 or size < PARALLEL_MIN_BYTES or len(pages) < 2:
            return build_pages([parsed_here(work) for work in pages], self.params)
        slices = [part for part in share_out([_weight(work) for work in pages], self.workers) if part]
        if self._pool is None:
            chunk_content(b"warm")  # load the compiled kernels once, before forking
            # The workers end with this process, however it ends (see cdc.lifeline).
            self._pool = ProcessPoolExecutor(self.workers - 1,
                                             mp_context=multiprocessing.get_context("fork"),
                                             initializer=follow_parent, initargs=(os.getpid(),))
        # This process takes the first share itself, rather than wait: one process fewer,
        # and that share's pages never travel between processes.
        futures = [self._pool.submit(build_pages, [pages[n] for n in part], self.params)
                   for part in slices[1:]]
        outputs = [build_pages([parsed_here(pages[n]) for n in slices[0]], self.params)]
        outputs += [future.result() for future in futures]
        outcomes: list[PageOutcome | None] = [None] * len(pages)
        for part, output in zip(slices, outputs):
            for number, outcome in zip(part, output):
                outcomes[number] = outcome
        return outcomes


