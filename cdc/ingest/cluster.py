"""Ingest across a Dask cluster: map over shards, shuffle by page, compare, one writer loads.

1. **Map.** Each input file (shard) is read on a worker and turned into observations: an
   Arrow table whose rows are in buckets by a hash of the natural key
   (`cdc.ingest.observations.observe_shard`): BUCKETS_PER_PARTITION buckets per partition, and
   MIN_BUCKETS at least. The largest shards start first.
2. **Shuffle.** When every shard is read, the buckets are dealt into partitions of about
   equal text, by the sizes the shards report, each partition with a worker, and each
   bucket to the worker that read most of it while the shares stay even (`_deal`). For
   each partition, one small task on every other worker picks its rows out of the shards
   that worker holds, so only those rows move, and one task per worker, not per shard.
   This process reads from the store what it knows of each partition's pages.
3. **Compare.** One task per partition, on its worker, takes its rows picked elsewhere and
   its buckets of the shards held there, with the pages' stored state, and builds
   generations, chunk rows and change rows with exact edits
   (`cdc.ingest.observations.build_partition`), the same code the single-process ingest runs.
4. **Load.** This process is the store's single writer: it appends each partition's rows
   as soon as they arrive, one transaction per partition (or per group of partitions that
   finish together), holding the store's write lock for the run.

Every task is a pure function of the shards, so when a worker dies Dask computes what it
held again, for the compare tasks still waiting on it. A shard that cannot be read is reported
by name and the others go on. Interrupted, the store holds the partitions committed so
far, and running the same ingest again completes it: versions already stored count as
unchanged.

Dask is imported only here, and only when a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import pyarrow as pa

from cdc.core.gear import DEFAULT_PARAMS, ChunkParams
from cdc.errors import CdcError
from cdc.ingest.batches import Triaged, mark_revisits, plan_pages, reaching_back
from cdc.ingest.histories import read_histories
from cdc.ingest.ingester import IngestSummary
from cdc.ingest.observations import (
    ShardReport,
    build_partition,
    observe_shard,
    partition_keys,
    partition_table,
    shard_report,
)
from cdc.ingest.tables import outcome_tables
from cdc.ingest.versions import build_pages
from cdc.ingest.worktasks import share_out
from cdc.runtime.lifeline import die_with_parent, is_stop
from cdc.sources.inputs import JSONL, run_mode
from cdc.sources.warc import WarcSummary
from cdc.store import Store, WriteBatch

PARTITION_INPUT_BYTES = 32 << 20  # input file bytes per partition at most (`_partitions`)
# Hashing pages straight into as many partitions as workers leaves them uneven (on the corpus,
# one worker idled for a tenth of the run); dealt out of four times as many buckets by size,
# they come out within a few percent of each other.
BUCKETS_PER_PARTITION = 4
# And at least this many buckets: on inputs where a page's versions sit together, small
# buckets mostly hold rows read on one worker, and can stay there (see _deal).
MIN_BUCKETS = 256
LOCALITY_SLACK = 0.01  # how far past its share of text a worker takes buckets it holds
CONNECT_TIMEOUT = "20s"  # to reach a scheduler given by address
LINGER_SECONDS = 0.1  # for another partition to finish and share a transaction


@dataclass
class ClusterSummary:
    """A cluster ingest's result: the single-process summary, plus what was per shard."""

    ingest: IngestSummary = field(default_factory=IngestSummary)
    shards: int = 0
    shards_read: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # shard name, reason
    partitions: int = 0
    written: int = 0  # partitions committed
    rows: int = 0  # rows appended (generations, chunk list rows, change rows)
    write_seconds: float = 0.0  # time in the single writer's transactions
    run: int = 0  # the run's id (`cdc runs`), once it has finished

    @property
    def warc(self) -> WarcSummary | None:
        """The shards' archive counts (None when no shard was an archive)."""
        return self.ingest.warc


@contextmanager
def dask_client(address: str | None = None, workers: int | None = None,
                dashboard_address: str | None = ":8787") -> Iterator:
    """A client of the scheduler at `address`, or of a local cluster of `workers` processes
    (one thread each: the work holds the GIL) started for the block and stopped after."""
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - distributed is in requirements.txt
        raise CdcError("a cluster ingest needs dask.distributed: pip install 'dask[distributed]'") from exc
    if address:
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            raise CdcError(f"cannot reach a Dask scheduler at {address}: {exc}; start one with "
                           "`dask scheduler`, or use --workers N for a local cluster") from exc
        try:
            yield client
        finally:
            client.close()
        return
    with local_cluster(workers or os.cpu_count() or 1, dashboard_address) as cluster:
        # A stop (`is_stop`: Ctrl-C or SIGTERM, raised as its own exception or as the error of
        # a call it cut short), while the client connects or during the work, kills the
        # workers before the cluster closes: else its close leaves them heartbeating to a
        # scheduler that is gone, and each prints a traceback (seen on a loaded machine).
        try:
            with Client(cluster) as client:
                # Its worker processes are ours: they end with this process, however it ends.
                client.run(die_with_parent, os.getpid())
                yield client
        except BaseException as exc:
            if is_stop(exc):  # no task's result is wanted now
                _quiet_dask()
                _kill_workers(cluster)
            raise


def _quiet_dask() -> None:
    """Stopping: the connections the kill closes are Dask's to note (at INFO, with a
    traceback), and no news to the user, whose command says it stopped."""
    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name.startswith("distributed"):
            logging.getLogger(name).setLevel(logging.WARNING)


def _kill_workers(cluster) -> None:
    """End a local cluster's worker processes at once: closing it gracefully waits for
    their running tasks (5 s here, for a WARC shard) before it lets the command end. Each
    nanny is marked as closing first: one that finds its worker dead otherwise starts a new
    one, which the cluster's close then has to wait for (the command's end took up to 2 s)."""
    from distributed.core import Status

    for nanny in list(cluster.workers.values()):
        pid = getattr(getattr(nanny, "process", None), "pid", None)
        if pid:
            nanny.status = Status.closing_gracefully
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def local_cluster(workers: int, dashboard_address: str | None = ":8787"):
    """A local cluster of `workers` processes, one thread each (the work holds the GIL).

    Its workers do not run Dask's statistical profiler: a thread that samples the running
    task's stack every 10 ms takes the GIL from it, and cost 10% of a 2-worker ingest here.
    """
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.worker.profile.enabled": False}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                            dashboard_address=dashboard_address)


def _partitions(client, files: Sequence[str]) -> int:
    """Two per worker at least, so that the writer loads a worker's first while it compares
    its next; more where the input passes PARTITION_INPUT_BYTES a partition; and a multiple of
    the workers, so that they finish together (three partitions on two workers left one of
    them idle for the last quarter of a run on the interleaved shards). Each partition costs
    the writer a transaction and the shuffle a pick per worker."""
    workers = max(1, len(_workers(client)))
    wanted = max(2 * workers, sum(map(_file_size, files)) // PARTITION_INPUT_BYTES + 1)
    return -(-wanted // workers) * workers


def _file_size(name: str) -> int:
    return os.path.getsize(name) if os.path.isfile(name) else 0


def _shard_weight(name: str) -> int:
    """About how much a shard holds to read: a gzip file's uncompressed size, from its
    trailer, else the file's size (0 if this process cannot see it).

    The trailer gives the last gzip member's size (modulo 4 GiB): the whole file's for a
    file compressed in one piece (JSONL.gz, where compression ratios differ fivefold between
    shards of the same crawl), only the last record's for a WARC.gz compressed record by
    record, which is then less than the file's size and is not used.
    """
    size = _file_size(name)
    if size < 18 or not name.endswith(".gz"):  # 18: the smallest gzip file
        return size
    with open(name, "rb") as stream:
        stream.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(stream.read(4), "little"))


def cluster_ingest(client, files: Sequence[str], store: Store, *, mode: str | None = None,
                   params: ChunkParams = DEFAULT_PARAMS, partitions: int | None = None,
                   on_progress: Callable[[ClusterSummary], None] | None = None,
                   on_write: Callable[[WriteBatch], None] | None = None,
                   label: str | None = None) -> ClusterSummary:
    """Ingest `files` (paths the workers can read) into `store`, as one run labelled `label`
    (`cdc runs`); see the module docstring.

    `mode` is how archive pages become text (`--extract`); None: as the files call for, chosen
    by `cdc.sources.inputs.run_mode` on each shard and then for the run from every shard's kind, as
    for a plain ingest. The store's mode is claimed with the first partition written, so a
    run whose shards all failed claims nothing.

    `on_progress` is called after each shard is read and each partition is committed;
    `on_write` is given each partition's tables once committed (the Parquet lake).
    """
    from distributed import as_completed

    summary = ClusterSummary(shards=len(files), partitions=partitions or _partitions(client, files))
    count = summary.partitions
    stored = store.path.exists()  # else there is nothing to look up
    # Largest shards first, so that the small ones at the end even out when the workers
    # finish. Submitted in that order too: Dask hands the first few to workers at once.
    weights = [_shard_weight(name) for name in files]
    largest_first = sorted(range(len(files)), key=lambda index: -weights[index])
    buckets = max(count * BUCKETS_PER_PARTITION, MIN_BUCKETS)
    submitted = {index: client.submit(observe_shard, index, files[index], buckets, mode, params,
                                      pure=False, priority=-rank)
                 for rank, index in enumerate(largest_first)}
    observed = [submitted[index] for index in range(len(files))]
    reports: list[ShardReport | None] = [None] * len(files)
    pending = list(observed)  # what to cancel if this stops early
    try:
        # While the shards are read: made by the first write, a new store would add 20 ms
        # to it, at the end of the run if the partitions end together.
        store.create()
        run = store.start_run(label, list(files))
        # The texts the run's end would trim are left out where they are built, unless the
        # lake keeps every text (`cdc.ingest.lake`).
        retained = None if on_write else store.retention().most_kept()
        # Each report runs before any shard its worker has not started, so progress follows
        # the reading.
        report_futures = {client.submit(shard_report, shard, pure=False, priority=1): number
                          for number, shard in enumerate(observed)}
        pending += report_futures
        for future in as_completed(report_futures, loop=client.loop):  # this loop: see below
            report = reports[report_futures[future]] = future.result()
            _add_report(summary, report)
            if on_progress:
                on_progress(summary)
        # WET beside HTML, or a mode that does not fit: refused before anything is written.
        text_mode = run_mode([report.kind for report in reports if report.kind is not None], mode)
        archive_pages = any(report.records for report in reports
                            if report.kind is not None and report.kind.format != JSONL)
        to_claim = text_mode if archive_pages else None
        with store.write_lock():
            if to_claim is not None:
                store.check_extraction_mode(to_claim)
            pending = _submit_builds(client, store if stored else None, observed, reports, count, params, run,
                                     retained)
            # Only the compare tasks are held from here: Dask frees each shard's observations
            # once the tasks that use them have run, and still recomputes any a dead worker
            # held while a compare task needs them.
            del observed, report_futures
            # On this client's loop: as_completed watches the default client's loop unless
            # told, and with two clients in one process (a notebook's, and this one) it could
            # wait forever.
            finished = as_completed(pending, with_results=True, loop=client.loop)
            for done in finished.batches():
                batch = _load(store, done, finished, summary, run, params, to_claim)
                to_claim = None
                if on_write:
                    on_write(batch)
                if on_progress:
                    on_progress(summary)
            summary.ingest.pages |= mark_revisits(
                store, [revisit for report in reports for revisit in report.revisits], run)
        counts = {**summary.ingest.counts(), "failed": len(summary.failed)}
        store.finish_run(run, counts, summary.ingest.pages)
        summary.run = run
    finally:
        client.cancel(pending)
    return summary


def _load(store: Store, done: list[tuple], finished, summary: ClusterSummary, run: int = 0,
          params: ChunkParams = DEFAULT_PARAMS, claim_mode: str | None = None) -> WriteBatch:
    """Append the rows of the compare tasks in `done` ((future, result) pairs), and of those
    in `finished` that end within LINGER_SECONDS while others still run, in one transaction,
    with the store's extraction mode `claim_mode` if given (the run's first).

    Partitions dealt to be equal tend to end together, and each transaction costs the writer
    a connection and a checkpoint (15 ms with no rows), which at the end of a run no compare
    hides. The connection is opened first, so the wait hides its cost.
    """
    started = time.perf_counter()
    with store.writing() as connection:
        waiting = time.perf_counter()
        if LINGER_SECONDS > 0:  # else only what had finished when the writer turned to it
            deadline = waiting + LINGER_SECONDS
            while not finished.is_empty() and not finished.has_ready() and time.perf_counter() < deadline:
                time.sleep(0.005)
            done = done + finished.next_batch(block=False)
        waited = time.perf_counter() - waiting
        rebuilt = [_rebuilt(store, connection, result[2], summary, run, params)
                   for _, result in done if result[2]]
        batch = _concatenated([result[0] for _, result in done] + rebuilt)
        if claim_mode is not None:
            store.claim_extraction_mode(claim_mode, connection)
        store.write(connection, batch)
    summary.write_seconds += time.perf_counter() - started - waited
    for future, (_, built, _) in done:
        future.release()
        summary.ingest.merge(built)
    summary.written += len(done)
    summary.rows += batch.rows
    summary.ingest.batches += 1
    return batch


def _rebuilt(store: Store, connection, again: list[tuple[str, list[Triaged]]], summary: ClusterSummary,
             run: int, params: ChunkParams) -> WriteBatch:
    """The rows of pages a compare task could not build with the texts next to their fetches
    (`PageOutcome.incomplete`), built here with their whole histories; counted in `summary`."""
    keys = [key for key, _ in again]
    states, histories = store.page_states(connection, keys), store.page_histories(connection, keys)
    pages = plan_pages(again, states, histories, run)
    outcomes = build_pages(pages, params)
    for outcome in outcomes:
        summary.ingest.add(outcome)
    return outcome_tables(outcomes)


def _concatenated(batches: list[WriteBatch]) -> WriteBatch:
    """Partitions that finished together, as one transaction's rows (see _load)."""
    if len(batches) == 1:
        return batches[0]
    return WriteBatch(**{name: pa.concat_tables([getattr(batch, name) for batch in batches])
                         for name in WriteBatch.__dataclass_fields__})


def _add_report(summary: ClusterSummary, report: ShardReport) -> None:
    summary.shards_read += 1
    summary.ingest.records += report.records
    summary.ingest.bad += report.bad
    summary.ingest.unchanged += len(report.revisits)  # a revisit: fetched again, unchanged
    if report.failure:
        summary.failed.append((report.name, report.failure))
    summary.ingest.add_archive(report.warc)


def _submit_builds(client, store: Store | None, observed: list, reports: list[ShardReport], count: int,
                   params: ChunkParams, run: int, retained: int | None = None) -> list:
    """One compare task per partition, given what the store holds of its pages (nothing, if
    `store` is None: a new one), and the texts to keep (`build_partition`'s `retained`).

    Each task is placed on the worker `_deal` gave its partition: left to itself, Dask puts
    a task where most of its input already is, which can stack every partition on one
    worker. A partition's rows are picked out of all the shards another worker holds by one
    task, not one per shard (a crawl's thousands of shards times its partitions would swamp
    the scheduler). Placements are preferences: if a worker dies, another takes its tasks,
    after Dask has made the shards it held again.
    """
    builds = []
    holders = _holders(client, observed)
    held: dict[str | None, list] = {}
    for shard, holder in zip(observed, holders):
        held.setdefault(holder, []).append(shard)
    dealt = _deal(reports, holders, _workers(client), count)
    # Every partition's picks before any compare task, and ahead of them: a worker runs one
    # task at a time, and a compare task it started first would hold up the picks the other
    # workers wait for, until it ended.
    picks = [[client.submit(partition_table, shards, buckets, pure=False, priority=1, **_preferring(other))
              for other, shards in held.items() if other != worker]
             for worker, buckets, _ in dealt]
    for (worker, buckets, _), picked in zip(dealt, picks):
        local = held.get(worker, [])
        states, histories = {}, {}
        if store:  # what the store holds of these pages, asked one partition at a time
            times = client.submit(partition_keys, picked, local, buckets, pure=False, priority=1).result()
            with store.reading() as connection:
                states = store.page_states(connection, [key for key, _ in times])
                back = set(reaching_back([(key, min(at)) for key, at in times], states))
                # Of pages the partition reaches back into, the texts next to its fetches only.
                histories = read_histories(connection, {key: at for key, at in times if key in back},
                                           {key: (states[key].last_checked, states[key].retention_class)
                                            for key in back})
        builds.append(client.submit(build_partition, picked, local, buckets, states, histories,
                                    params, run, retained, pure=False, **_preferring(worker)))
    return builds


def _holders(client, observed: list) -> list[str | None]:
    """The worker holding each shard's output (the first, if Dask holds copies on several)."""
    holders = client.who_has(observed)
    return [min(holders.get(shard.key) or [None]) for shard in observed]


def _preferring(worker: str | None) -> dict:
    """Placement on `worker` as a preference: any other worker may take the task."""
    return {"workers": [worker], "allow_other_workers": True} if worker else {}


def _workers(client) -> list[str]:
    return sorted(client.scheduler_info(n_workers=-1)["workers"])


def _deal(reports: list[ShardReport], holders: list[str | None], workers: list[str],
          count: int) -> list[tuple[str | None, list[int], int]]:
    """The buckets that hold rows, dealt into `count` partitions of about equal text, each
    with the worker to run it: (worker, buckets, bytes of text), largest first.

    Workers get partitions in turn, and text in proportion. Each bucket, largest first,
    goes to the worker that holds most of its text, unless that would take the worker past
    its share (and LOCALITY_SLACK), else to the worker furthest below its share: where a
    page's versions sit together in the input (revision histories ordered by page), most
    rows then stay where they were read. A worker's buckets are dealt into its partitions
    by size (`share_out`); partitions left without buckets are dropped.
    """
    names: list[str | None] = list(workers) or [None]
    partitions_of = {name: count // len(names) + (number < count % len(names))
                     for number, name in enumerate(names)}
    takers = [name for name in names if partitions_of[name]]  # all, unless fewer partitions than workers
    held = _text_held(reports, holders, names)
    sizes = [sum(column) for column in zip(*held.values())]
    share = {name: sum(sizes) * partitions_of[name] / count * (1 + LOCALITY_SLACK) for name in takers}
    loads = dict.fromkeys(takers, 0)
    dealt: dict[str | None, list[int]] = {name: [] for name in takers}
    filled = [bucket for bucket in range(len(sizes)) if any(report.rows[bucket] for report in reports)]
    for bucket in sorted(filled, key=lambda bucket: -sizes[bucket]):
        home = max(takers, key=lambda name: held[name][bucket])
        if loads[home] + sizes[bucket] > share[home]:
            home = min(takers, key=lambda name: loads[name] - share[name])
        dealt[home].append(bucket)
        loads[home] += sizes[bucket]
    partitions = []
    for name in takers:
        for part in share_out([sizes[bucket] for bucket in dealt[name]], partitions_of[name]):
            if part:
                buckets = [dealt[name][i] for i in part]
                partitions.append((name, buckets, sum(sizes[bucket] for bucket in buckets)))
    return sorted(partitions, key=lambda partition: -partition[2])


def _text_held(reports: list[ShardReport], holders: list[str | None],
               names: list[str | None]) -> dict[str | None, list[int]]:
    """Bytes of text of each bucket in the shards each worker holds; a shard whose holder
    is not among `names` (gone since) counts as the first's."""
    held = {name: [0] * (len(reports[0].sizes) if reports else 0) for name in names}
    for report, holder in zip(reports, holders):
        text = held[holder if holder in held else names[0]]
        for bucket, size in enumerate(report.sizes):
            text[bucket] += size
    return held
