"""A page's history from its fetches: the per-page work of ingest, as a pure function.

A page's history is every fetch of it, in fetch order (ties in the order they arrived). A
**generation** is a run of consecutive fetches with the same content, and it is named by its
first fetch: `capture_id` writes that time as the number `YYYYMMDDhhmmss` (UTC), as the
Wayback Machine names a capture. So what the store holds is a function of the set of fetches
alone: whatever order they arrive in, in whatever batches, files and runs, it ends the same;
and a generation number names the same content for good (a fetch of that content found later,
earlier in time, moves the generation's start, and a number held before still falls inside
it: the store resolves a number to the generation current at that time).

`build_pages` takes pages (each: what the store knows of it, and the batch's records of it)
and returns the rows to write and remove. It reads no store and writes nothing, so it runs
the same in the ingesting process, in a worker process, or on a cluster node. The rules:

- A fetch already stored (same time, same content) changes nothing: re-ingesting is free.
- Content identical to the fetch before it makes no generation.
- A fetch older than the page's latest is put in its place: the generations around it are
  recomputed, and the change rows whose previous version changed are computed again. Pages
  whose batch holds only fetches after everything stored (a crawl ingested in order) take a
  shorter path that reads only their latest generation: the same rule, with nothing before
  the latest to change.
- Each change row says how it was measured: `edits` (both texts at hand: chunks and exact
  word edits), `chunks` (both chunk lists, no texts) or `digests` (the previous version's
  text was no longer retained: only that the content differs is known; verdict `changed`).
- Text and chunk lists are written for every new generation; the run's end trims each page
  to its newest `keep` by fetch time (`Store.finish_run`), so that within a run every text is
  at hand, however its records fall into batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from cdc.core.captures import number_after
from cdc.core.chunking import Chunk, chunk_many
from cdc.core.chunks import Chunks, chunks_from_lengths, stored_columns
from cdc.core.compare import ChangeReport, compare
from cdc.core.editwords import EditWords, edit_words
from cdc.core.excerpts import change_excerpt
from cdc.core.gear import ChunkParams
from cdc.core.normalize import content_digest, content_for_chunking
from cdc.core.verdicts import NEW, UNMEASURED
from cdc.runtime.collector import collector_paused
from cdc.sources.jsonl import BadRecord, RawLine
from cdc.store.rows import (
    CHUNKS,
    DIGESTS,
    EDITS,
    ChangesRow,
    ChunkListsRow,
    ExpiredText,
    FetchesRow,
    GenerationsRow,
    PageRunsRow,
    PagesRow,
    report_measures,
)
from cdc.store.wordindex import WordTables, word_tables

if TYPE_CHECKING:
    from cdc.sources.warc import RawPage

@dataclass(frozen=True, slots=True)
class Prepared:
    """A record's content already normalised, digested and chunked: the observations a
    cluster's map stage makes (`cdc.ingest.observations`), so the page's worker need not redo it."""

    content: bytes
    digest: bytes
    chunks: list[Chunk] | None  # None: extracted ahead by `cdc.ingest.ingester`, chunked where built


@dataclass(frozen=True)
class Pending:
    """A record whose key and time are known, its content not yet normalised."""

    sequence: int  # position in the input: the input's number, then the record's
    source: str
    line: int
    url: str
    fetched_at: datetime
    payload: dict | RawLine | RawPage | Prepared  # the record; its line still to parse or its
    # HTML still to extract (cheaper to ship, and the work is done where the page is built); or
    # its content already prepared
    size: int  # about how many bytes of text, to share work out evenly


@dataclass(frozen=True, slots=True)
class Fetch:
    """One fetch of a page, as the store's `fetches` table keeps it."""

    fetched_at: datetime
    digest: bytes
    run: int
    sequence: int


@dataclass(frozen=True)
class StoredGeneration:
    """A generation the store holds, with its text and chunks when they are retained."""

    generation: int
    fetched_at: datetime  # its first fetch
    digest: bytes
    length: int
    chunk_count: int
    first_run: int | None
    text: bytes | None
    chunks: tuple[bytes, list[int]] | None  # its chunk list as stored: the digests end to end, the
    # lengths (made into Chunks where the page is built: a list of tuples travels far slower)
    previous: int | None  # the previous generation its change row was measured against


@dataclass(frozen=True)
class StoredState:
    """What the store knows of a page before the batch.

    `generations` are all of them and `fetches` every fetch, in fetch order, when the batch
    reaches back before the page's latest fetch (`complete`); otherwise `generations` is the
    latest alone and `fetches` is empty: nothing before it can change. A complete state may
    leave out texts and chunk lists far from the batch's fetches (`cdc.ingest.histories`): `unread`
    holds their digests, and a build that needs one marks its page `incomplete`.
    """

    last_seen: datetime  # the page's latest fetch (pages.last_checked)
    retention_class: str | None
    generations: list[StoredGeneration]
    fetches: list[Fetch]
    complete: bool
    unread: frozenset[bytes] = frozenset()

    @property
    def latest(self) -> StoredGeneration:
        return self.generations[-1]


@dataclass(frozen=True)
class PageWork:
    natural_key: str
    host: str
    state: StoredState | None
    records: list[Pending]
    retention_class: str | None  # the latest record's class, else the stored one
    run: int = 0  # the ingest run the records come in (`fetches.run`)


@dataclass
class PageOutcome:
    """The rows one page adds and removes, and what happened to each of its records."""

    natural_key: str
    generations: list[GenerationsRow] = field(default_factory=list)
    chunks: list[ChunkListsRow] = field(default_factory=list)  # a row per new generation with its text
    changes: list[ChangesRow] = field(default_factory=list)
    fetches: list[FetchesRow] = field(default_factory=list)
    removed_generations: list[int] = field(default_factory=list)  # with their chunk lists
    removed_changes: list[int] = field(default_factory=list)  # with their words
    # The words of the new change rows (`change_words`), while the page is built: `build_pages`
    # moves them into `word_tables`.
    words: list[EditWords] = field(default_factory=list)
    # The words of every page one `build_pages` call built, as the writer appends them (rows
    # and index rows), on the first of its outcomes that has words (None on the others): one
    # pair of tables for the call, built where the pages are (a worker process); tables for
    # each page cost more than the index itself.
    word_tables: WordTables | None = None
    page: PagesRow | None = None  # the page row, when its generations changed
    last_checked: datetime | None = None  # latest new fetch, when no generation changed
    seen: PageRunsRow | None = None  # the batch's latest fetch of the page, its content digest
    unchanged: int = 0
    older: int = 0  # fetches before the page's latest stored one, put in place
    same_time: list[tuple[str, int, str]] = field(default_factory=list)  # source, line, url
    bad: list[BadRecord] = field(default_factory=list)
    new_page: bool = False
    incomplete: bool = False  # it needed a stored text that was not read: build it again with all

    @property
    def added_generations(self) -> int:
        """Generations this page gained, net: a generation whose start moved is one less and
        one more."""
        return len(self.generations) - len(self.removed_generations)


def content_of(payload: dict | RawLine | RawPage | Prepared) -> bytes | BadRecord:
    """A record's normalised content, parsing or extracting it first where that is still to do."""
    if isinstance(payload, Prepared):
        return payload.content
    if not isinstance(payload, dict):  # a RawLine or a RawPage: parse or extract it here
        parsed = payload.parse()
        if isinstance(parsed, BadRecord):
            return parsed
        payload = parsed.record
    return content_for_chunking(payload)


@dataclass
class _Segment:
    """A generation as the page's fetches make it: a run of fetches of one content."""

    fetched_at: datetime
    digest: bytes
    first_run: int
    generation: int = 0
    stored: StoredGeneration | None = None  # the stored generation it is, unchanged


@dataclass
class _Plan:
    """A page's history once its new fetches are in place, before any chunking."""

    segments: list[_Segment]
    first_kept: int  # segments before this one are not the planner's to change (the shorter path)
    contents: dict[bytes, bytes]  # the batch's contents by digest
    prepared: dict[bytes, list[Chunk]]  # chunks a cluster's map stage made, by digest


def _plan(work: PageWork, contents: dict[int, bytes], outcome: PageOutcome) -> _Plan | None:
    """Put the batch's fetches of a page in place; None when nothing changes but checks."""
    state = work.state
    stored = state.fetches if state and state.complete else []
    seen = {(fetch.fetched_at, fetch.digest) for fetch in stored}
    by_digest: dict[bytes, bytes] = {}
    prepared: dict[bytes, list[Chunk]] = {}
    arrived: list[tuple[Fetch, Pending | None]] = [(fetch, None) for fetch in stored]
    for item in sorted(work.records, key=lambda r: (r.fetched_at, r.sequence)):
        if item.sequence not in contents:  # a bad record
            continue
        payload = item.payload
        digest = payload.digest if isinstance(payload, Prepared) else content_digest(contents[item.sequence])
        if outcome.seen is None or item.fetched_at >= outcome.seen.fetched_at:
            outcome.seen = PageRunsRow(work.natural_key, work.run, item.fetched_at, digest)
        if (item.fetched_at, digest) in seen:  # stored already, or twice in the input
            outcome.unchanged += 1
            continue
        seen.add((item.fetched_at, digest))
        fetch = Fetch(item.fetched_at, digest, work.run, item.sequence)
        outcome.fetches.append(FetchesRow(work.natural_key, item.fetched_at, digest, work.run, item.sequence))
        if state is not None and item.fetched_at <= state.last_seen:
            outcome.older += 1
        by_digest.setdefault(digest, contents[item.sequence])
        if isinstance(payload, Prepared) and payload.chunks is not None:
            prepared.setdefault(digest, payload.chunks)
        arrived.append((fetch, item))
    if not outcome.fetches:
        return None
    arrived.sort(key=lambda pair: (pair[0].fetched_at, pair[0].run, pair[0].sequence))

    segments: list[_Segment] = []
    first_kept = 0
    if state is not None and not state.complete:  # the shorter path: after the latest alone
        latest = state.latest
        segments.append(_Segment(latest.fetched_at, latest.digest, latest.first_run or 0,
                                 latest.generation, latest))
        first_kept = 1
    previous_time = None
    for fetch, item in arrived:
        if segments and segments[-1].digest == fetch.digest:
            segments[-1].first_run = min(segments[-1].first_run, fetch.run)
        else:
            segments.append(_Segment(fetch.fetched_at, fetch.digest, fetch.run))
            if fetch.fetched_at == previous_time and item is not None:
                outcome.same_time.append((item.source, item.line, item.url))
        previous_time = fetch.fetched_at
    number = segments[0].generation if first_kept else None
    for segment in segments[first_kept:]:
        number = segment.generation = number_after(number, segment.fetched_at)
    if state is not None and state.complete:
        by_number = {generation.generation: generation for generation in state.generations}
        for segment in segments:
            kept = by_number.get(segment.generation)
            if kept is not None and kept.digest == segment.digest and kept.fetched_at == segment.fetched_at:
                segment.stored = kept
    return _Plan(segments, first_kept, by_digest, prepared)


class _Held(dict):
    """Texts or chunks by digest. Asking for one the store retains but did not send
    (`StoredState.unread`) is noted in `missed`: the page is then built again with them all."""

    def __init__(self, items: dict, unread: frozenset[bytes]):
        super().__init__(items)
        self.unread = unread
        self.missed = False

    def __contains__(self, digest: object) -> bool:
        if dict.__contains__(self, digest):
            return True
        self.missed |= digest in self.unread
        return False

    def get(self, digest: bytes, default=None):
        return dict.__getitem__(self, digest) if digest in self else default


class _Versions:
    """The text and chunks of each content a page's history holds, from the batch or the
    store: identical content has one digest, so any generation of it serves."""

    def __init__(self, work: PageWork, plan: _Plan):
        unread = work.state.unread if work.state else frozenset()
        self.texts = _Held(plan.contents, unread)
        self.chunks = _Held(plan.prepared, unread)
        self.sizes: dict[bytes, tuple[int, int]] = {}
        for stored in work.state.generations if work.state else []:
            self.sizes.setdefault(stored.digest, (stored.length, stored.chunk_count))
            if stored.text is not None:
                self.texts.setdefault(stored.digest, stored.text)
            if stored.chunks is not None and not dict.__contains__(self.chunks, stored.digest):
                self.chunks[stored.digest] = _chunks_of(*stored.chunks)

    @property
    def missed(self) -> bool:
        """Whether the page asked for a stored text or chunk list that was not read."""
        return self.texts.missed or self.chunks.missed

    def size(self, digest: bytes) -> tuple[int, int]:
        """(length, chunk count) of a content."""
        if digest in self.chunks and digest in self.texts:
            return len(self.texts[digest]), len(self.chunks[digest])
        return self.sizes[digest]

    def measure(self, old: bytes, new: bytes) -> tuple[ChangeReport | None, str]:
        if old in self.texts and new in self.texts and old in self.chunks and new in self.chunks:
            return compare(self.chunks[old], self.chunks[new], old_text=self.texts[old],
                           new_text=self.texts[new]), EDITS
        if old in self.chunks and new in self.chunks:
            return compare(self.chunks[old], self.chunks[new]), CHUNKS
        return None, DIGESTS


def _chunks_of(digests: bytes, lengths: list[int]) -> Chunks:
    """The chunks of a stored chunk list: its digests end to end, and its lengths."""
    return chunks_from_lengths(digests, lengths)


def _remeasured(plan: _Plan, number: int) -> bool:
    """Whether segment `number` needs a change row made: it is new, or the generation
    before it is not the one its stored row was measured against."""
    segment = plan.segments[number]
    previous = plan.segments[number - 1].generation if number else None
    return segment.stored is None or segment.stored.previous != previous


def _to_chunk(plan: _Plan, versions: _Versions) -> list[bytes]:
    """The batch's contents a page's new rows need chunked: those of new generations, and
    of both sides of each change row made again, where no chunks are at hand."""
    needed: list[bytes] = []
    for number in range(plan.first_kept, len(plan.segments)):
        if not _remeasured(plan, number):
            continue
        for near in plan.segments[max(number - 1, 0):number + 1]:
            digest = near.digest
            if digest in plan.contents and digest not in versions.chunks and digest not in needed:
                needed.append(digest)
    return needed


@collector_paused
def build_pages(pages: list[PageWork], params: ChunkParams) -> list[PageOutcome]:
    """The rows each page adds and removes (see the module docstring); pure. Built with the
    cycle collector paused, as `chunk_many` builds its chunks."""
    outcomes = []
    planned = []
    for work in pages:
        outcome = PageOutcome(work.natural_key)
        contents: dict[int, bytes] = {}
        for item in work.records:
            content = content_of(item.payload)
            if isinstance(content, BadRecord):
                outcome.bad.append(content)
            else:
                contents[item.sequence] = content
        outcomes.append(outcome)
        plan = _plan(work, contents, outcome)
        planned.append((plan, _Versions(work, plan)) if plan is not None else None)
    wanted = [(versions, digest) for entry in planned if entry is not None
              for plan, versions in [entry] for digest in _to_chunk(plan, versions)]
    contents = [versions.texts[digest] for versions, digest in wanted]
    for (versions, digest), chunks in zip(wanted, chunk_many(contents, params, threads=1)):
        versions.chunks[digest] = chunks
    for number, (work, outcome, entry) in enumerate(zip(pages, outcomes, planned)):
        if entry is not None:
            _emit(work, *entry, outcome)
            if entry[1].missed:
                outcomes[number] = PageOutcome(work.natural_key, incomplete=True)
    with_words = [outcome for outcome in outcomes if outcome.words]
    if with_words:
        with_words[0].word_tables = word_tables([row for outcome in with_words for row in outcome.words])
        for outcome in with_words:  # carried back to the writer once, in the tables
            outcome.words = []
    return outcomes


def change_row(key: str, generation: int, previous: int | None, fetched_at: datetime,
               report: ChangeReport | None, old_text: bytes | None, content: bytes | None,
               measure: str | None) -> ChangesRow:
    """The `changes` row of a generation: its measures against the one before (`report`;
    None for a page's first generation, or a change that could not be measured)."""
    if report is None and previous is not None:  # the previous text was not retained
        return ChangesRow(key, generation, previous, fetched_at, similarity=None, unchanged_ratio=None,
                          retained_ratio=None, bytes_added=None, bytes_removed=None, regions=None,
                          verdict=UNMEASURED, excerpt="", measure=DIGESTS)
    content = content or b""
    if report is None:  # a page's first generation
        return ChangesRow(key, generation, previous, fetched_at, similarity=None, unchanged_ratio=None,
                          retained_ratio=None, bytes_added=len(content), bytes_removed=0, regions=0,
                          verdict=NEW, excerpt=change_excerpt(None, b"", content), measure=measure)
    return ChangesRow(key, generation, previous, fetched_at,
                      *report_measures(report, old_text or b"", content, measure))


def _emit(work: PageWork, plan: _Plan, versions: _Versions, outcome: PageOutcome) -> None:
    """The rows of a planned history: new generations, change rows made again, and the
    stored rows they replace."""
    key = work.natural_key
    state = work.state
    segments = plan.segments
    outcome.new_page = state is None
    if state is not None and state.complete:
        kept = {id(segment.stored) for segment in segments if segment.stored is not None}
        outcome.removed_generations = [g.generation for g in state.generations if id(g) not in kept]
        outcome.removed_changes = list(outcome.removed_generations)
    for number in range(plan.first_kept, len(segments)):
        segment = segments[number]
        if not _remeasured(plan, number):
            continue  # the stored generation and its change row stand
        if segment.stored is None:
            # Its text is kept whatever its place: a fetch later in the run may need it to be
            # measured against; the run's end trims each page to its newest `keep`.
            length, chunk_count = versions.size(segment.digest)
            text = versions.texts.get(segment.digest)
            chunks = versions.chunks.get(segment.digest) if text is not None else None
            outcome.generations.append(GenerationsRow(
                key, segment.generation, segment.fetched_at, segment.digest, length, chunk_count,
                text=text if chunks is not None else None, first_run=segment.first_run))
            if chunks is not None:
                digests, lengths = stored_columns(chunks)
                outcome.chunks.append(ChunkListsRow(key, segment.generation, digests, lengths))
        else:
            outcome.removed_changes.append(segment.generation)
        before = segments[number - 1] if number else None
        report, measure = versions.measure(before.digest, segment.digest) if before else (None, None)
        old_text = versions.texts.get(before.digest) if before else None
        new_text = versions.texts.get(segment.digest)
        outcome.changes.append(change_row(
            key, segment.generation, before.generation if before else None, segment.fetched_at, report,
            old_text, new_text, measure))
        if measure == EDITS and report.edits:
            words = edit_words(key, segment.generation, work.run, report.edits, old_text, new_text)
            if words is not None:
                outcome.words.append(words)
    if not outcome.generations and not outcome.removed_generations and not outcome.changes:
        outcome.last_checked = max(fetch.fetched_at for fetch in outcome.fetches)
        outcome.unchanged += len(outcome.fetches)
        return
    started = {segment.fetched_at for segment in segments if segment.stored is None}
    outcome.unchanged += sum(fetch.fetched_at not in started for fetch in outcome.fetches)
    latest = segments[-1]
    newest = max(fetch.fetched_at for fetch in outcome.fetches)
    url = max((r for r in work.records if r.fetched_at == newest), key=lambda r: r.sequence).url
    first_seen = min(fetch.fetched_at for fetch in outcome.fetches)
    if state is not None and state.complete:
        first_seen = min(first_seen, segments[0].fetched_at)
    outcome.page = PagesRow(key, url, work.host, work.retention_class, latest.generation, first_seen,
                            last_fetched=latest.fetched_at, last_checked=newest,
                            etag=None, last_modified=None)


def without_expired_texts(outcome: PageOutcome, retained: int) -> PageOutcome:
    """`outcome` with its new generations' texts and chunk lists left out where `retained`
    newer generations of the page are among them (`split_expired_texts`), where no later
    build of the run can need them: a partition of a cluster run (a page's records all meet
    in one), a plain ingest's last batch."""
    return split_expired_texts(outcome, retained)[0]


def split_expired_texts(outcome: PageOutcome, retained: int) -> tuple[PageOutcome, list[ExpiredText]]:
    """`outcome` with its new generations' texts and chunk lists left out where `retained`
    newer generations of the page are among them, and those texts: the run's end would trim
    them (`Store._trim` keeps a page's newest, `retained` at most), so they are neither
    shipped nor written, and leave no dead bytes for a compaction to rewrite. Where a later
    build of the run may need them (a plain ingest's batch before its last: its text may be
    next to a later batch's fetch), the caller keeps them beside the store (`cdc.store.expired`)."""
    newest = sorted((row.generation for row in outcome.generations), reverse=True)
    expired = set(newest[retained:])
    if not expired:
        return outcome, []
    lists = {row.generation: row for row in outcome.chunks if row.generation in expired}
    texts = [ExpiredText(outcome.natural_key, row.content_digest, row.text,  # UTF-8 bytes, as built
                         lists[row.generation].digests, lists[row.generation].lengths)
             for row in outcome.generations if row.generation in lists and row.text is not None]
    return replace(outcome,
                   generations=[row._replace(text=None) if row.generation in expired else row
                                for row in outcome.generations],
                   chunks=[row for row in outcome.chunks if row.generation not in expired]), texts
