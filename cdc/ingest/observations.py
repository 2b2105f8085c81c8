"""The map and compare stages of a distributed ingest, as pure functions of their inputs.

**Map** (`observe_shard`): one input file (a shard) is read where it runs, and each good
record becomes an *observation*: natural key, host, URL, retention class, fetch time, its
place in the input, the normalised text, its content digest and its chunks (offsets,
lengths, digests). Observations come out as one Arrow table sorted by *bucket*: a hash of
the natural key that is the same in every process (`bucket_of`). A partition is a set of
buckets, chosen once every shard is read so that partitions hold about as much text each;
the shuffle (`partition_table`) copies a partition's rows out of the shards one worker
holds, compactly, so that only those rows move.

**Compare** (`build_partition`): one partition's observations from every shard meet, with
what the store knows of those pages, and become the rows to write. This is the same
`cdc.ingest.versions.build_pages` the single-process ingest runs, on the same records in the same
order, so both paths write the same rows.

A record's place is `shard index << 40 | its ordinal in the shard`: ordering by it is the
order of the inputs read one after another, which is how the single-process ingest numbers
records, so ties between equal fetch times break the same way in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pyarrow as pa
import xxhash

from cdc.core.chunking import chunk_many
from cdc.core.chunks import chunks_from_lengths
from cdc.core.excerpts import one_line
from cdc.core.gear import DEFAULT_PARAMS, ChunkParams
from cdc.core.normalize import content_digest
from cdc.core.urls import host_of
from cdc.ingest.batches import Triaged, by_page, plan_pages, triage
from cdc.ingest.ingester import INPUT_SHIFT, IngestSummary
from cdc.ingest.tables import outcome_tables
from cdc.ingest.versions import Pending, Prepared, StoredState, build_pages, content_of, without_expired_texts
from cdc.runtime.collector import collector_paused
from cdc.sources.inputs import InputKind, open_crawl_input, run_mode
from cdc.sources.jsonl import BadRecord
from cdc.sources.warc import Revisit, WarcSummary
from cdc.store import PageHistory, PageState, WriteBatch

OBSERVE_BATCH = 2_000  # records normalised and chunked together (chunk_many's fixed cost)

OBSERVATION_SCHEMA = pa.schema([
    ("natural_key", pa.string()), ("host", pa.string()), ("url", pa.string()),
    ("retention_class", pa.string()), ("fetched_at", pa.timestamp("us")),
    ("sequence", pa.int64()), ("source", pa.string()), ("line", pa.int64()), ("size", pa.int64()),
    ("content_digest", pa.binary()), ("text", pa.binary()),
    ("chunk_offsets", pa.list_(pa.int64())), ("chunk_lengths", pa.list_(pa.int32())),
    ("chunk_digests", pa.list_(pa.binary())),
])
_KEY, _TEXT = OBSERVATION_SCHEMA.get_field_index("natural_key"), OBSERVATION_SCHEMA.get_field_index("text")


def bucket_of(natural_key: str, buckets: int) -> int:
    """The bucket a page belongs to: the same in every process and on every machine
    (Python's own `hash` of a string is salted per process)."""
    return xxhash.xxh3_64_intdigest(natural_key.encode("utf-8")) % buckets


@dataclass
class ShardReport:
    """What reading one shard found, apart from its observations; small, for the client."""

    name: str
    records: int = 0
    bad: list[BadRecord] = field(default_factory=list)
    revisits: list[Revisit] = field(default_factory=list)
    warc: WarcSummary | None = None  # when the shard is a WARC file
    kind: InputKind | None = None  # what the file holds, once opened: the run's mode is chosen from these
    failure: str | None = None  # why reading stopped early, if it did
    rows: list[int] = field(default_factory=list)  # observations per bucket
    sizes: list[int] = field(default_factory=list)  # bytes of text per bucket, to share out work


@dataclass
class Observed:
    """A shard's observations: one table sorted by bucket (stably, so each page's rows keep
    their order in the shard), and where each bucket's rows start (`starts[b]` to
    `starts[b + 1]`)."""

    table: pa.Table
    starts: np.ndarray


@collector_paused
def observe_shard(index: int, name: str, buckets: int, mode: str | None = None,
                  params: ChunkParams = DEFAULT_PARAMS) -> tuple[ShardReport, Observed]:
    """Read shard `index` (the file `name`) into observations, in `buckets` buckets, its
    pages made text with `mode` (`--extract`), or when None with the mode its file calls for
    (`cdc.sources.inputs.run_mode`, as a plain ingest chooses it).

    Never raises for the shard's own problems: a file that cannot be read, or that fails
    part-way, comes back as `failure` with the observations made before it, so one bad
    shard does not stop the others.
    """
    report = ShardReport(name)
    columns: list[list] = [[] for _ in OBSERVATION_SCHEMA]
    waiting: list[Triaged] = []
    try:
        crawl_input = open_crawl_input(name)
        report.kind = crawl_input.kind
        try:
            shard_mode = run_mode([crawl_input], mode)
        except Exception:
            crawl_input.close()
            raise
        items = crawl_input.records(shard_mode)
        report.revisits, report.warc = items.revisits, items.summary
        for item in items:
            if isinstance(item, BadRecord):
                report.bad.append(item)
                continue
            report.records += 1
            triaged = triage(item, (index << INPUT_SHIFT) | report.records)
            if isinstance(triaged, BadRecord):
                report.bad.append(triaged)
                continue
            waiting.append(triaged)
            if len(waiting) >= OBSERVE_BATCH:
                _observe(waiting, columns, params)
                waiting = []
        _observe(waiting, columns, params)
    except Exception as exc:  # any failure is this shard's, reported with its name
        report.failure = one_line(str(exc) or type(exc).__name__)
    bucket = np.array([bucket_of(key, buckets) for key in columns[_KEY]], np.int64)
    order = np.argsort(bucket, kind="stable")
    table = pa.Table.from_arrays([pa.array(values, column.type)
                                  for values, column in zip(columns, OBSERVATION_SCHEMA)],
                                 schema=OBSERVATION_SCHEMA).take(order)
    rows = np.bincount(bucket, minlength=buckets)
    report.rows = rows.tolist()
    report.sizes = np.bincount(bucket, np.array(list(map(len, columns[_TEXT])), np.float64),
                               minlength=buckets).astype(np.int64).tolist()
    return report, Observed(table, np.concatenate([[0], np.cumsum(rows)]))


def _observe(waiting: list[Triaged], columns: list[list], params: ChunkParams) -> None:
    contents = [content_of(entry.parsed if entry.parsed is not None else entry.pending.payload)
                for entry in waiting]
    for entry, content, chunks in zip(waiting, contents, chunk_many(contents, params, threads=1)):
        key, pending = entry.natural_key, entry.pending
        row = (key, host_of(key), pending.url, entry.retention_class, pending.fetched_at, pending.sequence,
               pending.source, pending.line, pending.size, content_digest(content), content,
               chunks.offsets.tolist(), chunks.lengths.tolist(),
               [digest.tobytes() for digest in chunks.digests])  # the columns, no Chunk tuples
        for column, value in zip(columns, row):
            column.append(value)


def shard_report(observed: tuple[ShardReport, Observed]) -> ShardReport:
    return observed[0]


def partition_table(shards: list[tuple[ShardReport, Observed]], buckets: list[int]) -> pa.Table:
    """The rows of the given buckets from `shards` (the shards one worker holds), copied out
    into one table: a slice would travel with the whole shards' buffers."""
    return pa.concat_tables([observed.table.take(_bucket_rows(observed, buckets)) for _, observed in shards])


def _bucket_rows(observed: Observed, buckets: list[int]) -> pa.Array:
    starts = observed.starts
    rows = np.concatenate([np.arange(starts[b], starts[b + 1]) for b in buckets]) if buckets else []
    return pa.array(rows, pa.int64())


def partition_keys(picked: list[pa.Table], held: list[tuple[ShardReport, Observed]],
                   buckets: list[int]) -> list[tuple[str, list[datetime]]]:
    """The distinct natural keys of one partition's observations (see build_partition), each
    with its fetch times: what the store is asked about (`cdc.ingest.batches.reaching_back`, and the
    texts next to those times, `cdc.ingest.histories`). Gathered one partition at a time, so the
    client never holds the keys of the whole crawl."""
    times: dict[str, list[datetime]] = {}
    tables = [table.select(["natural_key", "fetched_at"]) for table in picked]
    tables += [observed.table.select(["natural_key", "fetched_at"]).take(_bucket_rows(observed, buckets))
               for _, observed in held]  # the keys and times alone: the rest stays where it is
    for table in tables:
        columns = (table.column(name).to_pylist() for name in ("natural_key", "fetched_at"))
        for key, fetched_at in zip(*columns):
            times.setdefault(key, []).append(fetched_at)
    return sorted(times.items())


@collector_paused
def build_partition(picked: list[pa.Table], held: list[tuple[ShardReport, Observed]], buckets: list[int],
                    states: dict[str, PageState], histories: dict[str, PageHistory | StoredState],
                    params: ChunkParams = DEFAULT_PARAMS, run: int = 0, retained: int | None = None
                    ) -> tuple[WriteBatch, IngestSummary, list[tuple[str, list[Triaged]]]]:
    """The rows one partition's pages add, from their observations and what the store holds
    of them (`states`, `histories`: `Store.page_states`, and `cdc.ingest.histories.read_histories`
    or `Store.page_histories`); and the pages to build again with their whole histories
    (`PageOutcome.incomplete`), with their records, for the writer to build.

    The observations are the partition's rows picked out of other workers' shards
    (`picked`), and its `buckets` of the shards this worker holds (`held`), taken here: those
    need not be copied out before the task can start.

    Given `retained` (the most generations any page keeps its text for), a new generation
    with that many newer ones among its page's new generations comes without its text and
    chunk list (`without_expired_texts`).
    """
    # In any order: each page's records are taken by fetch time, then place in the input.
    observations = pa.concat_tables([*picked, partition_table(held, buckets)] if held else picked)
    rows = zip(*(observations.column(name).to_pylist() for name in OBSERVATION_SCHEMA.names))
    entries = []
    for (key, _host, url, retention_class, fetched_at, sequence, source, line, size, digest, text,
         _offsets, lengths, digests) in rows:
        prepared = Prepared(text, digest, chunks_from_lengths(digests, lengths))
        pending = Pending(sequence, source, line, url, fetched_at, prepared, size)
        entries.append(Triaged(key, retention_class, pending, None))
    groups = by_page(entries)
    outcomes = build_pages(plan_pages(groups, states, histories, run), params)
    summary = IngestSummary()
    for outcome in outcomes:
        if not outcome.incomplete:
            summary.add(outcome)
    again = [group for group, outcome in zip(groups, outcomes) if outcome.incomplete]
    built = [outcome for outcome in outcomes if not outcome.incomplete]
    if retained is not None:
        built = [without_expired_texts(outcome, retained) for outcome in built]
    return outcome_tables(built), summary, again

