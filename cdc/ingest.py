"""Ingest: crawl records in, generations, chunk rows and change rows out, in batches.

For each batch of records: canonicalise the URL (the natural key), normalise the content,
digest it; sort by page and fetch time; compare each new version with the page's previous
one (the latest stored generation, whose text is retained, or the previous record of the
batch), with exact edits; write everything in one transaction.

Rules, all deterministic, so re-ingesting the same input changes nothing:

- Content identical to the page's latest generation makes no new generation; it moves
  `last_checked` forward to the record's fetch time.
- A record whose (fetch time, content) the page already has is already stored: counted as
  unchanged, nothing written.
- A record with new content but a fetch time no later than the page's latest generation is
  *stale*: history is kept in fetch order, so it is skipped, counted and reported.
- A bad record (no URL, an invalid URL, no or unreadable fetch time, malformed JSON) is
  skipped, counted and reported with its line; every good record around it is stored.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa

from cdc.chunking import DEFAULT_PARAMS, Chunk, ChunkParams, chunk_batch
from cdc.compare import ChangeReport, compare
from cdc.normalize import content_digest, content_for_chunking
from cdc.sources import BadRecord, SourceRecord
from cdc.store import PageState, Store, WriteBatch
from cdc.urls import InvalidUrlError, canonical_url, host_of

NEW = "new"  # the verdict of a page's first generation
BATCH_RECORDS = 4_000
BATCH_BYTES = 64 << 20  # of normalised text
EXCERPT_CHARS = 200


@dataclass(frozen=True)
class Observation:
    """One good record, reduced to what the store needs."""

    sequence: int  # position in the input, to keep the order of equal fetch times
    source: str
    line: int
    natural_key: str
    url: str
    host: str
    fetched_at: datetime
    retention_class: str | None
    content: bytes
    digest: bytes


@dataclass
class IngestSummary:
    """What a run did; `bad` lists every skipped record with where it was."""

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


def observe(item: SourceRecord, sequence: int) -> Observation | BadRecord:
    """Reduce a parsed record to an Observation, or say why it is bad."""
    record = item.record
    try:
        natural_key = canonical_url(record.get("url"))
        fetched_at = parse_time(record.get("fetched_at"))
    except (InvalidUrlError, ValueError, OverflowError, OSError) as exc:
        return BadRecord(item.source, item.line, str(exc))
    retention_class = record.get("retention_class")
    content = content_for_chunking(record)
    return Observation(
        sequence=sequence,
        source=item.source,
        line=item.line,
        natural_key=natural_key,
        url=str(record["url"]).strip(),
        host=host_of(natural_key),
        fetched_at=fetched_at,
        retention_class=retention_class if isinstance(retention_class, str) and retention_class else None,
        content=content,
        digest=content_digest(content),
    )


def _chunks_from_state(state: PageState) -> list[Chunk]:
    offsets = itertools.accumulate(state.chunk_lengths, initial=0)
    return [Chunk(i, offset, length, digest) for i, (offset, length, digest)
            in enumerate(zip(offsets, state.chunk_lengths, state.chunk_digests))]


def _shown(text: bytes, offset: int, length: int) -> str:
    return " ".join(text[offset:offset + min(length, 120)].decode("utf-8", "ignore").split())


def excerpt(report: ChangeReport | None, old: bytes, new: bytes) -> str:
    """A short line saying what changed first, for lists and CSV exports."""
    if report is None:
        return new[:EXCERPT_CHARS * 2].decode("utf-8", "ignore")[:EXCERPT_CHARS]
    parts = []
    for edit in report.edits[:3]:
        before = _shown(old, edit.old_offset, edit.old_length)
        after = _shown(new, edit.new_offset, edit.new_length)
        parts.append({"insert": f"+ {after}", "delete": f"- {before}"}.get(edit.kind, f"{before} → {after}"))
    if not parts and report.changed_regions:
        offset, length = report.changed_regions[0]
        parts.append("+ " + " ".join(new[offset:offset + min(length, 160)].decode("utf-8", "ignore").split()))
    text = " | ".join(parts)
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 1] + "…"


def _utf8(texts: list[bytes]) -> pa.Array:
    """Text column from UTF-8 bytes, checked and converted in C++, not decoded in Python."""
    return pa.array(texts, pa.binary()).cast(pa.string())


class _BatchBuilder:
    """Columns of the rows one batch writes."""

    def __init__(self) -> None:
        self.pages: dict[str, dict] = {}
        self.generations: dict[str, list] = {k: [] for k in (
            "natural_key", "generation", "fetched_at", "content_digest", "length", "chunk_count", "text")}
        self.chunks: dict[str, list] = {k: [] for k in (
            "natural_key", "generation", "chunk_index", "digest", "length")}
        self.changes: dict[str, list] = {k: [] for k in (
            "natural_key", "generation", "previous_generation", "fetched_at", "similarity",
            "unchanged_ratio", "retained_ratio", "bytes_added", "bytes_removed", "regions",
            "verdict", "excerpt")}
        self.checked: dict[str, datetime] = {}

    def add_generation(self, obs: Observation, generation: int, chunks: list[Chunk]) -> None:
        g = self.generations
        g["natural_key"].append(obs.natural_key)
        g["generation"].append(generation)
        g["fetched_at"].append(obs.fetched_at)
        g["content_digest"].append(obs.digest)
        g["length"].append(len(obs.content))
        g["chunk_count"].append(len(chunks))
        g["text"].append(obs.content)  # UTF-8 already: Arrow casts it to text in C++
        c = self.chunks
        c["natural_key"] += [obs.natural_key] * len(chunks)
        c["generation"] += [generation] * len(chunks)
        c["chunk_index"] += [chunk.index for chunk in chunks]
        c["digest"] += [chunk.digest for chunk in chunks]
        c["length"] += [chunk.length for chunk in chunks]

    def add_change(self, obs: Observation, generation: int, previous: int | None,
                   report: ChangeReport | None, old: bytes) -> None:
        c = self.changes
        c["natural_key"].append(obs.natural_key)
        c["generation"].append(generation)
        c["previous_generation"].append(previous)
        c["fetched_at"].append(obs.fetched_at)
        c["similarity"].append(report.similarity if report else None)
        c["unchanged_ratio"].append(report.unchanged_ratio if report else None)
        c["retained_ratio"].append(report.retained_ratio if report else None)
        c["bytes_added"].append(report.bytes_added if report else len(obs.content))
        c["bytes_removed"].append(report.bytes_removed if report else 0)
        c["regions"].append(len(report.changed_regions) + len(report.removed_regions) if report else 0)
        c["verdict"].append(report.verdict if report else NEW)
        c["excerpt"].append(excerpt(report, old, obs.content))

    def tables(self) -> WriteBatch:
        pages = list(self.pages.values())
        page_columns = ("natural_key", "url", "host", "retention_class", "latest_generation",
                        "first_seen", "last_fetched", "last_checked", "etag", "last_modified")
        return WriteBatch(
            pages=pa.table({name: [p.get(name) for p in pages] for name in page_columns},
                           schema=_PAGES_SCHEMA),
            generations=pa.table({**self.generations, "text": _utf8(self.generations["text"])},
                                 schema=_GENERATIONS_SCHEMA),
            chunks=pa.table(self.chunks, schema=_CHUNKS_SCHEMA),
            changes=pa.table(self.changes, schema=_CHANGES_SCHEMA),
            checked=pa.table({"natural_key": list(self.checked),
                              "last_checked": list(self.checked.values())}, schema=_CHECKED_SCHEMA),
        )


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
    ("natural_key", pa.string()), ("generation", pa.int32()), ("chunk_index", pa.int32()),
    ("digest", pa.binary()), ("length", pa.int32()),
])
_CHANGES_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("generation", pa.int32()), ("previous_generation", pa.int32()),
    ("fetched_at", pa.timestamp("us")), ("similarity", pa.float64()), ("unchanged_ratio", pa.float64()),
    ("retained_ratio", pa.float64()), ("bytes_added", pa.int32()), ("bytes_removed", pa.int32()),
    ("regions", pa.int32()), ("verdict", pa.string()), ("excerpt", pa.string()),
])


class Ingester:
    """Runs records into a store, batch by batch; see the module docstring for the rules."""

    def __init__(self, store: Store, params: ChunkParams = DEFAULT_PARAMS,
                 batch_records: int = BATCH_RECORDS, batch_bytes: int = BATCH_BYTES,
                 on_batch: Callable[[IngestSummary], None] | None = None):
        self.store = store
        self.params = params
        self.batch_records = batch_records
        self.batch_bytes = batch_bytes
        self.on_batch = on_batch
        self.summary = IngestSummary()

    def run(self, items: Iterable[SourceRecord | BadRecord]) -> IngestSummary:
        for batch in self._batches(items):
            self._ingest(batch)
            self.summary.batches += 1
            if self.on_batch:
                self.on_batch(self.summary)
        return self.summary

    def _batches(self, items: Iterable[SourceRecord | BadRecord]) -> Iterator[list[Observation]]:
        batch: list[Observation] = []
        size = 0
        for item in items:
            if isinstance(item, BadRecord):
                self.summary.bad.append(item)
                continue
            self.summary.records += 1
            observation = observe(item, self.summary.records)
            if isinstance(observation, BadRecord):
                self.summary.bad.append(observation)
                continue
            batch.append(observation)
            size += len(observation.content)
            if len(batch) >= self.batch_records or size >= self.batch_bytes:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    def _ingest(self, batch: list[Observation]) -> None:
        batch.sort(key=lambda o: (o.natural_key, o.fetched_at, o.sequence))
        with self.store.write_lock():
            with self.store.writing() as connection:
                states = self.store.page_states(connection, sorted({o.natural_key for o in batch}))
                known = self.store.known_versions(connection, sorted({o.natural_key for o in batch}))
            builder = self._plan(batch, states, known)
            with self.store.writing() as connection:
                self.store.write(connection, builder.tables())

    def _plan(self, batch: list[Observation], states: dict[str, PageState],
              known: dict[str, set[bytes]]) -> _BatchBuilder:
        builder = _BatchBuilder()
        summary = self.summary
        fresh: list[Observation] = []  # observations that become generations, in order
        previous: list[Observation | PageState | None] = []
        for key, group in itertools.groupby(batch, key=lambda o: o.natural_key):
            summary.pages.add(key)
            state = states.get(key)
            latest: Observation | PageState | None = state
            seen = known.get(key, set())  # content digests of the page's generations
            for obs in group:
                latest_time = latest.fetched_at if isinstance(latest, Observation) else (
                    latest.last_fetched if latest else None)
                latest_digest = latest.digest if isinstance(latest, Observation) else (
                    latest.content_digest if latest else None)
                not_newer = latest_time is not None and obs.fetched_at <= latest_time
                if obs.digest == latest_digest or (not_newer and obs.digest in seen):
                    summary.unchanged += 1  # a recheck, or a version the page already has
                    builder.checked[key] = max(builder.checked.get(key, obs.fetched_at), obs.fetched_at)
                    continue
                if latest_time is not None and obs.fetched_at < latest_time:
                    summary.stale.append((obs.source, obs.line, obs.url))
                    continue
                fresh.append(obs)
                previous.append(latest)
                seen = seen | {obs.digest}
                latest = obs
        batch_chunks = chunk_batch([obs.content for obs in fresh], self.params)
        generation_of: dict[int, int] = {}  # by sequence, for versions later in the batch
        chunks_of: dict[int, list[Chunk]] = {}
        for i, (obs, before) in enumerate(zip(fresh, previous)):
            chunks = batch_chunks.chunks_of(i)
            if before is None:
                generation, previous_generation, report, old_text = 1, None, None, b""
                summary.new_pages += 1
            else:
                if isinstance(before, PageState):
                    previous_generation = before.latest_generation
                    old_chunks, old_text = _chunks_from_state(before), before.text
                else:
                    previous_generation = generation_of[before.sequence]
                    old_chunks, old_text = chunks_of[before.sequence], before.content
                generation = previous_generation + 1
                if old_text is None:  # the previous text was not retained: chunks only
                    report = compare(old_chunks, chunks)
                    old_text = b""
                else:
                    report = compare(old_chunks, chunks, old_text=old_text, new_text=obs.content)
            generation_of[obs.sequence] = generation
            chunks_of[obs.sequence] = chunks
            builder.add_generation(obs, generation, chunks)
            builder.add_change(obs, generation, previous_generation, report, old_text)
            summary.new_generations += 1
            builder.pages[obs.natural_key] = {
                "natural_key": obs.natural_key, "url": obs.url, "host": obs.host,
                "retention_class": obs.retention_class, "latest_generation": generation,
                # Only a new page's row is inserted whole; an existing page keeps its own.
                "first_seen": builder.pages.get(obs.natural_key, {}).get("first_seen", obs.fetched_at),
                "last_fetched": obs.fetched_at,
                "last_checked": max(obs.fetched_at, builder.checked.get(obs.natural_key, obs.fetched_at)),
                "etag": None, "last_modified": None,
            }
        return builder
