"""A page's new generations from its records: the per-page work of ingest, as a pure function.

`build_pages` takes pages (each: what the store knows of it, and the batch's records of it)
and returns the rows to write. It reads no store and writes nothing, so it runs the same in
the ingesting process, in a worker process, or on a cluster node. The rules:

- Versions are taken in fetch order (input order breaks ties).
- Content identical to the page's latest generation makes no new generation; it moves
  `last_checked` forward. Content the page already had, fetched no later than its latest
  generation, is a version already stored: unchanged, nothing written.
- New content fetched before the latest generation is *stale*: history is kept in fetch
  order, so it is skipped and reported.
- Each new generation is chunked and compared with the one before it: with exact edits when
  the previous text is retained, by chunks alone when it is not.
- Text and chunk lists are written only for generations within the page's retention limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from cdc.chunking import Chunk, ChunkParams, chunk_many, chunks_from_lengths
from cdc.chunks import stored_columns
from cdc.collector import collector_paused
from cdc.compare import ChangeReport, compare
from cdc.normalize import content_digest, content_for_chunking
from cdc.sources import BadRecord, RawLine

if TYPE_CHECKING:
    from cdc.warc import RawPage

NEW = "new"  # the verdict of a page's first generation
EXCERPT_CHARS = 200


@dataclass(frozen=True, slots=True)
class Prepared:
    """A record's content already normalised, digested and chunked: the observations a
    cluster's map stage makes (`cdc.observations`), so the page's worker need not redo it."""

    content: bytes
    digest: bytes
    chunks: list[Chunk]


@dataclass(frozen=True)
class Pending:
    """A record whose key and time are known, its content not yet normalised."""

    sequence: int  # position in the input
    source: str
    line: int
    url: str
    fetched_at: datetime
    payload: dict | RawLine | RawPage | Prepared  # the record; its line still to parse or its
    # HTML still to extract (cheaper to ship, and the work is done where the page is built); or
    # its content already prepared
    size: int  # about how many bytes of text, to share work out evenly


@dataclass(frozen=True)
class StoredState:
    """What the store knows of a page before the batch."""

    latest_generation: int
    last_fetched: datetime
    content_digest: bytes
    retention_class: str | None
    text: bytes | None  # None when the latest generation's text was not retained
    chunk_digests: list[bytes]
    chunk_lengths: list[int]
    known_digests: frozenset[bytes]  # content digests of all the page's generations


@dataclass(frozen=True)
class PageWork:
    natural_key: str
    host: str
    state: StoredState | None
    records: list[Pending]
    keep: int  # generations that keep text and chunk rows, for this page's retention class
    retention_class: str | None  # the latest record's class, else the stored one


@dataclass
class PageOutcome:
    """The rows one page adds, and what happened to each of its records."""

    natural_key: str
    generations: list[tuple] = field(default_factory=list)  # columns of `generations`
    chunks: list[tuple] = field(default_factory=list)  # columns of `chunk_lists`: a row per generation
    changes: list[tuple] = field(default_factory=list)  # columns of `changes`
    page: tuple | None = None  # the page row, when it has a new generation
    last_checked: datetime | None = None  # latest fetch of unchanged content
    unchanged: int = 0
    stale: list[tuple[str, int, str]] = field(default_factory=list)  # source, line, url
    bad: list[BadRecord] = field(default_factory=list)
    new_page: bool = False


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


def shown(text: bytes, offset: int, length: int, limit: int = 120) -> str:
    """Up to `limit` bytes of a region as one line; a cut inside a character drops it."""
    return " ".join(text[offset:offset + min(length, limit)].decode("utf-8", "ignore").split())


def excerpt(report: ChangeReport | None, old: bytes, new: bytes) -> str:
    """A short line saying what changed first, for lists and CSV exports."""
    if report is None:
        return " ".join(new[:EXCERPT_CHARS * 2].decode("utf-8", "ignore").split())[:EXCERPT_CHARS]
    parts = []
    for edit in report.edits[:3]:
        before = shown(old, edit.old_offset, edit.old_length, 60)  # leave room for the new text
        after = shown(new, edit.new_offset, edit.new_length)
        parts.append({"insert": f"+ {after}", "delete": f"- {before}", "move": f"> {after}"}.get(
            edit.kind, f"{before} → {after}"))
    if not parts and report.changed_regions:
        offset, length = report.changed_regions[0]
        parts.append("+ " + shown(new, offset, length))
    text = " | ".join(parts)
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 1] + "…"


def _select(work: PageWork, contents: dict[int, bytes], digests: dict[int, bytes],
            outcome: PageOutcome) -> list[Pending]:
    """The records that become new generations, in order; the rest counted."""
    state = work.state
    latest_time = state.last_fetched if state else None
    latest_digest = state.content_digest if state else None
    seen = set(state.known_digests) if state else set()
    fresh = []
    for item in sorted(work.records, key=lambda r: (r.fetched_at, r.sequence)):
        if item.sequence not in contents:  # a bad record
            continue
        payload = item.payload
        digest = digests[item.sequence] = payload.digest if isinstance(payload, Prepared) \
            else content_digest(contents[item.sequence])
        not_newer = latest_time is not None and item.fetched_at <= latest_time
        if digest == latest_digest or (not_newer and digest in seen):
            outcome.unchanged += 1  # a recheck, or a version the page already has
            outcome.last_checked = max(outcome.last_checked or item.fetched_at, item.fetched_at)
            continue
        if latest_time is not None and item.fetched_at < latest_time:
            outcome.stale.append((item.source, item.line, item.url))
            continue
        fresh.append(item)
        seen.add(digest)
        latest_time, latest_digest = item.fetched_at, digest
    return fresh


@collector_paused
def build_pages(pages: list[PageWork], params: ChunkParams) -> list[PageOutcome]:
    """The rows each page adds (see the module docstring); pure. Built with the cycle
    collector paused, as `chunk_many` builds its chunks."""
    outcomes = []
    contents: dict[int, bytes] = {}
    digests: dict[int, bytes] = {}
    selected = []
    for work in pages:
        outcome = PageOutcome(work.natural_key)
        for item in work.records:
            content = content_of(item.payload)
            if isinstance(content, BadRecord):
                outcome.bad.append(content)
            else:
                contents[item.sequence] = content
        outcomes.append(outcome)
        selected.append(_select(work, contents, digests, outcome))
    fresh_items = [item for fresh in selected for item in fresh]
    computed = iter(chunk_many([contents[item.sequence] for item in fresh_items
                                if not isinstance(item.payload, Prepared)], params, threads=1))
    all_chunks = iter([item.payload.chunks if isinstance(item.payload, Prepared) else next(computed)
                       for item in fresh_items])
    for work, outcome, fresh in zip(pages, outcomes, selected):
        if fresh:
            _add_generations(work, outcome, fresh, contents, digests, all_chunks)
    return outcomes


def change_row(key: str, generation: int, fetched_at: datetime, report: ChangeReport | None,
               old_text: bytes | None, content: bytes) -> tuple:
    """The `changes` row of a generation: its measures against the one before (`report`,
    None for a page's first generation)."""
    return (
        key, generation, generation - 1 or None, fetched_at,
        report.similarity if report else None,
        report.unchanged_ratio if report else None,
        report.retained_ratio if report else None,
        report.bytes_added if report else len(content),
        report.bytes_removed if report else 0,
        len(report.changed_regions) + len(report.removed_regions) if report else 0,
        report.verdict if report else NEW,
        excerpt(report, old_text or b"", content),
    )


def _add_generations(work: PageWork, outcome: PageOutcome, fresh: list[Pending],
                     contents: dict[int, bytes], digests: dict[int, bytes], all_chunks) -> None:
    state = work.state
    key = work.natural_key
    generation = state.latest_generation if state else 0
    newest = generation + len(fresh)
    outcome.new_page = state is None
    old_text = state.text if state else None
    old_chunks = chunks_from_lengths(state.chunk_digests, state.chunk_lengths) if state else []
    for item in fresh:
        content = contents[item.sequence]
        chunks = next(all_chunks)
        if generation == 0:
            report = None
        elif old_text is None:  # the previous text was not retained: chunks only
            report = compare(old_chunks, chunks)
        else:
            report = compare(old_chunks, chunks, old_text=old_text, new_text=content)
        generation += 1
        retained = generation > newest - work.keep
        outcome.generations.append((key, generation, item.fetched_at, digests[item.sequence],
                                    len(content), len(chunks), content if retained else None))
        if retained:
            outcome.chunks.append((key, generation, *stored_columns(chunks)))
        outcome.changes.append(change_row(key, generation, item.fetched_at, report, old_text, content))
        old_text, old_chunks = content, chunks
    first, last = fresh[0], fresh[-1]
    outcome.page = (key, last.url, work.host, work.retention_class, generation, first.fetched_at,
                    last.fetched_at, max(last.fetched_at, outcome.last_checked or last.fetched_at),
                    None, None)
