"""Ingest: crawl records in; generations, chunk rows and change rows out, in batches.

For each batch of records: canonicalise each URL (the natural key) and read its fetch time;
group the records by page; read what the store knows of those pages (their whole history, for
pages the batch reaches back into); build each page's history (`cdc.ingest.versions.build_pages`:
normalise, digest, chunk, put each fetch in its place, compare with exact edits); write
everything in one transaction. Re-ingesting the same input changes nothing, and the store
ends the same for any order and split of the records.

The per-page work is pure, so with `workers` above 1 it is queued for forked worker
processes in small tasks of about equal size, while this process reads, plans and writes,
and takes back the tasks no worker has started once it has time (`cdc.ingest.worktasks`): the
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

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial

from cdc.core.chunking import chunk_content
from cdc.core.gear import DEFAULT_PARAMS, ChunkParams
from cdc.core.normalize import content_digest
from cdc.ingest.batches import (
    Triaged,
    by_page,
    mark_revisits,
    read_pages,
    triage,
    whole_history,
    with_expired,
)
from cdc.ingest.tables import outcome_tables
from cdc.ingest.versions import (
    PageOutcome,
    PageWork,
    Prepared,
    build_pages,
    content_of,
    split_expired_texts,
)
from cdc.ingest.worktasks import Tasks
from cdc.runtime.lifeline import follow_parent
from cdc.sources.inputs import CrawlRecords
from cdc.sources.jsonl import BadRecord, RawLine, SourceRecord
from cdc.sources.warc import RawPage, WarcSummary
from cdc.store import Store, WriteBatch
from cdc.store.expired import ExpiredTexts

__all__ = ["IngestSummary", "Ingester"]

BATCH_RECORDS = 4_000
# Of input. A batch's records become several times their size in Python objects where they
# are built: at 64 MB the corpus (47.5 MB of JSONL) was one batch and its ingest peaked at
# 611 MB; at 16 MB it is three, and 397 MB (about 200 MB of it the imported libraries).
BATCH_BYTES = 16 << 20
# Of HTML, for WARC input: pages wait unextracted (cdc.sources.warc.RawPage), and a batch's pages
# become several times their text in Python strings and dicts where they are built. With
# 16 MB, a 1 GB WARC ingest peaks at about 260 MB with two processes and the kernels
# compiled ahead of time (380 MB with Numba's JIT loaded); 32 MB added about 50 MB.
WARC_BATCH_BYTES = 16 << 20
PARALLEL_MIN_BYTES = 4 << 20  # a smaller batch is not worth the trip to worker processes
# With workers, the first batch is this part of the others (at least PARALLEL_MIN_BYTES): the
# workers have nothing to do while this process reads it (0.4 s of the corpus at 16 MB).
FIRST_BATCH_PART = 4
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
    warc: WarcSummary | None = None  # the archives' counts, when the inputs were archives

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

    def add_archive(self, counts: WarcSummary | None) -> None:
        """Count an archive's records too (an input file's, or a cluster shard's); None: the
        input was not an archive."""
        if counts is not None:
            self.warc = self.warc or WarcSummary()
            self.warc.add(counts)

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

    def ready_so_far(self) -> tuple[dict[int, Prepared], set[int]]:
        """The prepared contents of the records whose tasks are done now, by sequence (`ready`'s),
        and the sequences of the others: those a worker is still extracting."""
        done = self.tasks.results_so_far()
        ready = {self.sequences[number]: prepared for number, prepared in done.items()
                 if prepared is not None}
        return ready, {sequence for number, sequence in enumerate(self.sequences) if number not in done}


@dataclass
class _Late:
    """The pages of a batch (by number) that hold a record a worker was still extracting ahead
    (`_Ahead`) when this process came to build the batch."""

    ahead: _Ahead
    pages: list[int]

    @classmethod
    def of(cls, ahead: _Ahead, extracting: set[int], pages: list[PageWork]) -> _Late | None:
        numbers = [number for number, work in enumerate(pages)
                   if any(record.sequence in extracting for record in work.records)]
        return cls(ahead, numbers) if numbers else None

    def weight(self, weights: Sequence[int]) -> int:
        """Its pages' part of the batch's `weights` (by page number)."""
        return sum(weights[number] for number in self.pages)

    def wait(self, pages: list[PageWork], parsed: dict[int, dict | None]) -> None:
        """Wait for the worker; its pages (in `pages`, in place) with every content prepared."""
        _take_ready(pages, self.pages, self.ahead.ready(), parsed)


def _take_ready(pages: list[PageWork], numbers: Iterable[int], ready: dict[int, Prepared],
                parsed: dict[int, dict | None]) -> None:
    """The pages `numbers` of `pages` (in place) with the contents prepared ahead in their
    records' place, and those records marked in `parsed` as built from what is ready."""
    for number in numbers:
        work = pages[number]
        pages[number] = replace(work, records=[replace(record, payload=ready[record.sequence])
                                               if record.sequence in ready else record
                                               for record in work.records])
    parsed.update((sequence, None) for sequence in ready)


def _parsed_here(work: PageWork, parsed: dict[int, dict | None]) -> PageWork:
    """A page's work with the records this process parsed already, for a build here."""
    return replace(work, records=[replace(record, payload=parsed[record.sequence] or record.payload)
                                  for record in work.records])


def _numbered(number: int, items: Iterable[SourceRecord | RawLine | BadRecord]
              ) -> Iterator[tuple[int, SourceRecord | RawLine | BadRecord]]:
    """The items of input `number`, each record with its place in the input (a bad line takes
    none), as a cluster's map stage numbers a shard's."""
    place = 0
    for item in items:
        if not isinstance(item, BadRecord):
            place += 1
        yield number << INPUT_SHIFT | place, item


class _Abandoned:
    """The future of a task abandoned with its pool (`Ingester._close_pool`): cancelled, and
    silent where Python 3.11's pool would set the result or error of a cancelled one."""

    def cancel(self) -> bool:
        return True

    def set_running_or_notify_cancel(self) -> bool:
        return False

    def set_exception(self, exception: BaseException) -> None:
        pass

    def set_result(self, result) -> None:
        pass


class Ingester:
    """Runs records into a store, batch by batch; see the module docstring."""

    def __init__(self, store: Store, params: ChunkParams = DEFAULT_PARAMS,
                 batch_records: int = BATCH_RECORDS, batch_bytes: int = BATCH_BYTES,
                 on_batch: Callable[[IngestSummary], None] | None = None,
                 workers: int = 1, on_write: Callable[[WriteBatch], None] | None = None,
                 label: str | None = None, inputs: Sequence[str] = (), run_id: int | None = None,
                 extraction_mode: str | None = None):
        self.store = store
        # How the run's archive pages were made text (cdc.sources.inputs.run_mode), claimed in the
        # store with the first batch written: a run that fails before it claims nothing.
        self._mode_to_claim = extraction_mode
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
        self._ahead: _Ahead | None = None  # the next batch's extraction, queued for the workers
        # Texts the run expired in its batches, while a later batch may need one: a run of its
        # own only (a lake keeps every text; a caller's run, `cdc fetch`, ends elsewhere).
        self._expired: ExpiredTexts | None = None

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
                if self.on_write is None:
                    self._expired = ExpiredTexts(self.store.path)
            while current is not None:
                # The next batch is read once this one's work is queued for the workers.
                current = self._ingest(*current, read_next=lambda: next(batches, None))
                self.summary.batches += 1
                if self.on_batch:
                    self.on_batch(self.summary)
        except BaseException:
            self._close_pool(abandon=True)
            if self._expired is not None:  # its texts are a dead run's, for the next run's end
                self._expired.close()
            raise
        self._close_pool()
        readers = [items for items in inputs if isinstance(items, CrawlRecords)]
        revisits = [revisit for reader in readers for revisit in reader.revisits]
        if revisits:  # fetched again, unchanged: seen by the run
            self.summary.unchanged += len(revisits)
            self.summary.pages |= mark_revisits(self.store, revisits, self.run_id)
        for reader in readers:
            self.summary.add_archive(reader.summary)
        if self._own_run:
            self._finish_run()
        return self.summary

    def _finish_run(self) -> None:
        """The run's end (`Store.finish_run`: its trim, templates, watches), and the end of the
        texts it kept beside the store (`cdc.store.expired`), under one hold of the writer lock.
        Texts it expired under a retention limit raised since (another process's `cdc prune`
        while it ran) are written back first, for the trim to keep what the new limit keeps."""
        with self.store.write_lock():
            kept_under = self._expired.kept_under if self._expired is not None else None
            if kept_under is not None:
                with self.store.writing() as connection:
                    if self.store.retention(connection).most_kept() > kept_under:
                        self.store.restore_texts(connection, self._expired.own())
            self.store.finish_run(self.run_id, self.summary.counts(), self.summary.pages)
            if self._expired is not None:
                self._expired.finish(self.summary.pages)

    def _close_pool(self, abandon: bool = False) -> None:
        """Shut the worker pool down; `abandon` (an error, Ctrl-C, SIGTERM) stops the workers
        mid-task rather than wait for pages nobody will store (seconds, for a WARC batch)."""
        if self._pool is None:
            return
        if abandon:  # Python 3.11's pool has no public way to stop a worker mid-task
            # A task taken back (`cdc.ingest.worktasks`) is a cancelled future the pool still
            # lists as pending until a worker would have reached it. Once the workers are
            # stopped the pool marks every pending future broken, and on a cancelled one that
            # raises InvalidStateError in its manager thread (Python 3.12 ignores it), which
            # then never closes its call queue: the exit hung on that queue's feeder thread.
            # Dropping such a task from the pool's table raced its manager thread, which
            # looks the task up by the id it queued (a KeyError there ends it the same way).
            # So each task no worker has started is cancelled, and its future, left in place,
            # is one that takes being marked broken quietly. Nobody waits for them.
            pending = getattr(self._pool, "_pending_work_items", None) or {}
            for item in list(pending.values()):
                if item.future.cancel():  # not started, or taken back already
                    item.future = _Abandoned()
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
        call_queue = getattr(self._pool, "_call_queue", None)  # shutdown forgets it
        self._pool.shutdown(cancel_futures=True)
        if abandon and call_queue is not None:
            # The queue's feeder thread may be blocked writing a batch (more than a pipe holds)
            # that no worker will read; the pool's manager closes our read end, the last one
            # open, when it sees the workers gone, but not if it died before (a worker killed
            # earlier, say): then the exit waited on the feeder for good. Closed here too,
            # the write fails (EPIPE) and the feeder ends. Closing it twice does nothing.
            call_queue._reader.close()
        self._pool = None

    def _batches(self, numbered: Iterable[tuple[int, SourceRecord | RawLine | BadRecord]]
                 ) -> Iterator[tuple[list, int]]:
        batch: list[Triaged] = []
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
            size += triaged.pending.size
            if len(batch) >= self.batch_records or size >= limit:
                yield batch, size
                batch, size, limit = [], 0, self.batch_bytes
        if batch:
            yield batch, size

    def _ingest(self, batch: list[Triaged], size: int,
                read_next: Callable[[], tuple[list, int] | None]) -> tuple[list, int] | None:
        """Read, build and write one batch; the next one (`read_next`), read while the workers
        build this one, starts its extraction in the workers (`_prepare_ahead`) and is returned."""
        with self.store.write_lock():
            ahead, self._ahead = self._ahead, None
            groups = by_page(batch)
            # The store is read before the extraction queued ahead is taken back: the workers
            # go on extracting while this process reads (it was their idle time, 0.3-0.5 s a
            # batch on the interleaved shards, growing with the histories read back).
            with self.store.writing() as connection:
                pages = read_pages(self.store, connection, groups, self.run_id or 0)
                retained = self.store.retention(connection).most_kept()
            pages = with_expired(pages, self._expired)
            parsed = {entry.pending.sequence: entry.parsed for entry in batch}
            late: _Late | None = None
            if ahead is not None:  # extracted ahead: the tasks no worker has started are done here
                ahead.tasks.take_back_all()
                ready, extracting = ahead.ready_so_far()
                _take_ready(pages, range(len(pages)), ready, parsed)
                late = _Late.of(ahead, extracting, pages)
            outcomes, following = self._build(pages, size, parsed, read_next, late)
            if again := [number for number, outcome in enumerate(outcomes) if outcome.incomplete]:
                self._rebuild(pages, outcomes, again, parsed)
            if self._expired is not None:
                # Texts the run's end would trim are not written: kept beside the store while
                # a later batch may need one (`cdc.store.expired`), dropped in the last.
                split = [split_expired_texts(outcome, retained) for outcome in outcomes]
                outcomes = [outcome for outcome, _ in split]
                if following is not None:
                    self._expired.keep([text for _, texts in split for text in texts], retained)
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
        whose build needed a stored text that was not read with them (`cdc.ingest.histories`)."""
        keys = [pages[number].natural_key for number in again]
        with self.store.writing() as connection:
            histories = self.store.page_histories(connection, keys)
        whole = [_parsed_here(replace(pages[number], state=whole_history(pages[number].state.last_seen,
                                                                   pages[number].state.retention_class,
                                                                   histories[key])), parsed)
                 for number, key in zip(again, keys)]
        whole = with_expired(whole, self._expired)
        for number, outcome in zip(again, build_pages(whole, self.params)):
            outcomes[number] = outcome

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:
            chunk_content(b"warm")  # load the compiled kernels once, before forking
            # The workers end with this process, however it ends (see cdc.runtime.lifeline).
            self._pool = ProcessPoolExecutor(self.workers - 1,
                                             mp_context=multiprocessing.get_context("fork"),
                                             initializer=follow_parent, initargs=(os.getpid(),))
        return self._pool

    def _prepare_ahead(self, ahead: tuple[list, int] | None) -> None:
        """Queue the next batch's extraction (`prepare_records`) for the workers, after this
        batch's build: it needs nothing from the store, so it overlaps this process's write
        and its reading of the batch after. This process takes back the tasks no worker has
        started (`cdc.ingest.worktasks`) before it builds the next. Only where a batch is worth the
        trip (`PARALLEL_MIN_BYTES`)."""
        if ahead is None or self.workers < 2 or ahead[1] < PARALLEL_MIN_BYTES:
            return
        entries = ahead[0]
        here = [entry.parsed or entry.pending.payload for entry in entries]  # parsed already, where it was
        tasks = Tasks(self._workers(), prepare_records, [entry.pending.payload for entry in entries],
                      [entry.pending.size for entry in entries], self.workers,
                      here=lambda part: prepare_records([here[n] for n in part]))
        self._ahead = _Ahead(tasks, [entry.pending.sequence for entry in entries])

    def _build(self, pages: list[PageWork], size: int, parsed: dict[int, dict | None],
               read_next: Callable[[], tuple[list, int] | None], late: _Late | None = None
               ) -> tuple[list[PageOutcome], tuple[list, int] | None]:
        """`build_pages` in this process, or queued for the worker processes in tasks of
        about equal size, of which this process takes back those no worker has started once
        it has read the next batch (`cdc.ingest.worktasks`); and the next batch. Pages built here use
        the records parsed (or prepared) already; pages sent to a worker travel as raw lines or
        prepared contents. The pages of records a worker is still extracting (`late`) are built
        here once those are in, after this process has taken back the tasks of the others: so
        it builds while the worker finishes them, where it waited (on the docs crawls, a tenth
        of its time); unless they weigh more than its share, when it waits first, as before."""

        def built_here(part: list[int]) -> list[PageOutcome]:
            return build_pages([_parsed_here(pages[n], parsed) for n in part], self.params)

        parallel = self.workers >= 2 and size >= PARALLEL_MIN_BYTES and len(pages) >= 2
        weights = [_weight(work) for work in pages] if parallel else []
        if late is not None and (not parallel or late.weight(weights) > sum(weights) / self.workers):
            late.wait(pages, parsed)
            late = None
        if not parallel:
            following = read_next()
            self._prepare_ahead(following)
            return built_here(list(range(len(pages)))), following
        waiting = set(late.pages) if late is not None else set()
        sent = [number for number in range(len(pages)) if number not in waiting]
        build = Tasks(self._workers(), partial(build_pages, params=self.params), [pages[n] for n in sent],
                      [weights[n] for n in sent], self.workers,
                      here=lambda part: built_here([sent[n] for n in part]))
        following = read_next()
        self._prepare_ahead(following)
        # The next batch's extraction is left to the workers, not taken back while this
        # process waits: they do it while this process writes (measured on the corpus, taking
        # it back left them idle for the write).
        build.take_back_all()
        outcomes: list[PageOutcome | None] = [None] * len(pages)
        if late is not None:
            late.wait(pages, parsed)
            for number, outcome in zip(late.pages, built_here(late.pages), strict=True):
                outcomes[number] = outcome
        for number, outcome in zip(sent, build.results(len(sent)), strict=True):
            outcomes[number] = outcome
        return outcomes, following
