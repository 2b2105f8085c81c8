"""Ingest on a real local Dask cluster of two worker processes: the same store as the
single-process ingest, a worker killed mid-run, a shard that cannot be read, Ctrl-C, Parquet."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
from datetime import timedelta

import duckdb
import pytest

import cdc.ingest.cluster
from cdc.cli.main import EXIT_FAILURE, EXIT_OK, EXIT_SKIPPED, EXIT_USAGE, main
from cdc.ingest.cluster import cluster_ingest, local_cluster
from cdc.ingest.ingester import Ingester
from cdc.ingest.observations import ShardReport
from cdc.sources.inputs import CrawlRecords
from cdc.store import Store
from tests import archives, crawlgen
from tests.storerows import assert_same_rows, without_runs
from tests.storerows import store_rows as rows

distributed = pytest.importorskip("distributed")

# The command line's local clusters take the Dask dashboard's port 8787, one per machine: the
# tests that start one share an xdist worker (docs/testing.md). The whole module does, so its
# cluster (`client`) is started once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dask-dashboard")]

SPLIT_PAGE = "https://shop0.example/split"


@pytest.fixture(scope="module")
def client():
    with local_cluster(2, dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture
def shards(tmp_path):
    """Three shards: a crawl spread round-robin, and one page's six versions split across all
    three in shuffled order."""
    records = crawlgen.crawl(hosts=2, pages=5, versions=3)
    split = [crawlgen.record(SPLIT_PAGE, v, body) for v, body in enumerate(crawlgen.page_versions(7, 6))]
    parts = [[*records[0::3], split[4], split[1]], [*records[1::3], split[5], split[0]],
             [*records[2::3], split[2], split[3]]]
    return [crawlgen.write_jsonl(tmp_path / f"shard-{n}.jsonl", part) for n, part in enumerate(parts)]


@pytest.fixture
def base(tmp_path):
    """A starting store: the first version of some of the pages, ingested before."""
    path = tmp_path / "base.duckdb"
    first = crawlgen.crawl(hosts=2, pages=5, versions=1)[::2]
    Ingester(Store(path)).run(CrawlRecords(str(crawlgen.write_jsonl(tmp_path / "base.jsonl", first)), "main"))
    return path


def copy_store(base, path):
    shutil.copy(base, path)
    return Store(path)


def single_process(base, tmp_path, shards) -> dict[str, list[tuple]]:
    store = copy_store(base, tmp_path / "single.duckdb")
    args = ["--db", str(store.path), "ingest", "--processes", "1", "--quiet", *map(str, shards)]
    assert main(args) == EXIT_OK
    return rows(store.path)


def test_a_cluster_ingest_writes_what_a_single_process_ingest_writes(client, tmp_path, shards, base):
    expected = single_process(base, tmp_path, shards)
    store = copy_store(base, tmp_path / "cluster.duckdb")
    summary = cluster_ingest(client, [str(s) for s in shards], store, partitions=3)
    assert rows(store.path) == expected
    assert summary.ingest.records == 3 * 10 + 6 and not summary.ingest.older and not summary.failed
    # Every version of the split page, met on one worker, became a generation in fetch order.
    history = store.history(SPLIT_PAGE)
    assert [change.generation for change in history] == [crawlgen.generation(v) for v in range(6)]
    assert [change.fetched_at.day for change in history] == [1, 2, 3, 4, 5, 6]
    # However the records are sharded, and into however many partitions: the same store.
    one_file = crawlgen.write_jsonl(tmp_path / "all.jsonl", [
        record for shard in reversed(shards) for record in map(json.loads, shard.read_text().splitlines())])
    again = copy_store(base, tmp_path / "again.duckdb")
    cluster_ingest(client, [str(one_file)], again, partitions=5)
    assert rows(again.path) == expected
    fewer = copy_store(base, tmp_path / "fewer.duckdb")  # fewer partitions than workers
    cluster_ingest(client, [str(s) for s in shards], fewer, partitions=1)
    assert rows(fewer.path) == expected


def test_a_cluster_run_writes_no_text_its_end_would_trim(client, tmp_path, shards):
    """A page's records all meet in one partition, so a text the run's end would trim (the
    split page's six versions: all but the newest three) is neither shipped to the writer
    nor written: the run leaves no dead bytes, and the store of the single-process ingest."""
    single = tmp_path / "single.duckdb"
    assert main(["--db", str(single), "ingest", "--processes", "1", "--quiet", *map(str, shards)]) == EXIT_OK
    store = Store(tmp_path / "cluster.duckdb")
    cluster_ingest(client, [str(s) for s in shards], store, partitions=3)
    assert_same_rows(store.path, single)
    with duckdb.connect(str(store.path), read_only=True) as connection:
        assert store.trimmed_bytes(connection) == 0
        (texts,) = connection.execute("""SELECT count(text) FROM generations JOIN pages USING (natural_key)
                                         WHERE url = ?""", [SPLIT_PAGE]).fetchone()
    assert texts == 3


def test_the_default_partitions_keep_every_worker_busy_to_the_end(client, tmp_path, shards):
    """Two a worker at least, so the writer loads one while the next is compared, and as
    many on each worker, so that none idles while another finishes its last (three on two
    workers left one idle for the last quarter of the interleaved shards' run)."""
    assert cdc.ingest.cluster._partitions(client, [str(s) for s in shards]) == 4
    large = tmp_path / "large.warc.gz"  # sparse: its size is what a partition is cut by
    with large.open("wb") as file:
        file.truncate(5 * cdc.ingest.cluster.PARTITION_INPUT_BYTES)
    assert cdc.ingest.cluster._partitions(client, [str(large)]) == 6


def test_eight_interleaved_shards_end_in_the_store_of_the_plain_ingest(client, tmp_path):
    """Each page's versions dealt over all eight files, each file in fetch order, as a
    crawler writing eight files at once leaves them: the plain ingest, batch by batch, puts
    the versions each batch finds older than stored in place; a cluster meets them all at
    once; the same store, given the files in either order."""
    records = crawlgen.crawl(hosts=2, pages=4, versions=8)
    urls = sorted({record["url"] for record in records})
    parts = [[] for _ in range(8)]
    for record in records:
        page, version = urls.index(record["url"]), int(record["fetched_at"][8:10]) - 1
        parts[(version * 3 + page) % 8].append(record)
    shards = [crawlgen.write_jsonl(tmp_path / f"interleaved-{n}.jsonl", part) for n, part in enumerate(parts)]
    plain = Store(tmp_path / "plain.duckdb")
    summary = Ingester(plain, batch_records=5).run_inputs(
        [CrawlRecords(str(shard), "main") for shard in shards])
    assert summary.older > 10 and summary.new_generations == len(records) and not summary.bad
    cluster = Store(tmp_path / "cluster.duckdb")
    cluster_ingest(client, [str(shard) for shard in reversed(shards)], cluster)
    assert rows(cluster.path) == rows(plain.path)
    assert [g.fetched_at.day for g in cluster.generations(urls[0])] == list(range(1, 9))


def test_the_shuffle_picks_once_per_worker_and_partition_not_per_shard(client, tmp_path, shards, base):
    store = copy_store(base, tmp_path / "cluster.duckdb")
    with distributed.get_task_stream(client) as stream:
        cluster_ingest(client, [str(s) for s in shards * 2], store, partitions=4)
    names = [task["key"].split("-")[0] for task in stream.data]
    # Six shards on two workers, four partitions: each partition's rows are picked out of
    # the other worker's shards by one task; its own worker's shards it reads in place.
    assert names.count("observe_shard") == 6 and names.count("build_partition") == 4
    assert names.count("partition_table") == 4


def test_buckets_stay_with_the_worker_that_read_them_while_the_shares_stay_even():
    def report(sizes):
        return ShardReport("shard", rows=[1 if size else 0 for size in sizes], sizes=sizes)

    # Pages sorted by shard: shard 0 (on worker a) holds buckets 0-3, shard 1 (on b) 4-7.
    apart = [report([10, 20, 30, 40, 0, 0, 0, 0]), report([0, 0, 0, 0, 40, 30, 20, 10])]
    dealt = cdc.ingest.cluster._deal(apart, ["a", "b"], ["a", "b"], 2)
    assert sorted((worker, sorted(buckets), size) for worker, buckets, size in dealt) == [
        ("a", [0, 1, 2, 3], 100), ("b", [4, 5, 6, 7], 100)]
    # Every row read on one worker: half of them move, so both compare as much.
    together = [report([10, 20, 30, 40, 40, 30, 20, 10]), report([0] * 8)]
    dealt = cdc.ingest.cluster._deal(together, ["a", "a"], ["a", "b"], 2)
    assert sorted(size for _, _, size in dealt) == [100, 100]
    # Fewer partitions than workers: every bucket still in one.
    (_, buckets, size), = cdc.ingest.cluster._deal(apart, ["a", "b"], ["a", "b"], 1)
    assert sorted(buckets) == list(range(8)) and size == 200


def test_shards_are_weighed_by_what_they_hold(tmp_path):
    text = b'{"url": "https://a.example/", "text": "the same words again and again"}\n' * 2000
    whole = tmp_path / "whole.jsonl.gz"
    whole.write_bytes(gzip.compress(text))
    by_record = tmp_path / "by-record.warc.gz"  # one gzip member per record, as WARC.gz
    by_record.write_bytes(b"".join(gzip.compress(line + b"\n") for line in text.splitlines()))
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(text)
    assert cdc.ingest.cluster._shard_weight(str(whole)) == len(text)  # from the gzip trailer
    assert cdc.ingest.cluster._shard_weight(str(by_record)) == by_record.stat().st_size
    assert cdc.ingest.cluster._shard_weight(str(plain)) == len(text)
    assert cdc.ingest.cluster._shard_weight(str(tmp_path / "elsewhere.jsonl.gz")) == 0


def test_a_worker_killed_mid_run_changes_nothing(client, tmp_path, shards, base):
    expected = single_process(base, tmp_path, shards)
    store = copy_store(base, tmp_path / "cluster.duckdb")
    pids = client.run(os.getpid)
    killed = []

    def kill_a_worker(summary) -> None:
        if not killed:  # after the first shard is read: the other worker holds results too
            victim = sorted(pids.values())[0]
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    cluster_ingest(client, [str(s) for s in shards], store, partitions=3, on_progress=kill_a_worker)
    assert killed and rows(store.path) == expected
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it, for the next test
    assert killed[0] not in client.run(os.getpid).values()


def test_a_shard_that_fails_is_reported_and_the_others_are_stored(client, tmp_path, shards, capsys):
    db = tmp_path / "s.duckdb"
    missing = tmp_path / "lost-shard.jsonl"
    address = client.scheduler.address
    code = main(["--db", str(db), "ingest", "--dask", address, "--quiet", str(shards[0]), str(missing),
                 str(shards[1])])
    out = capsys.readouterr().out
    assert code == EXIT_SKIPPED
    assert f"shard failed {missing}: " in out and "no such file" in out
    kept = rows(db)["generations"]
    assert len(kept) == 20 + 4  # 2 of 3 parts of 10 pages x 3 versions, and 4 versions of the split page


def test_ctrl_c_keeps_committed_partitions_and_a_rerun_converges(client, tmp_path, shards, base, monkeypatch):
    # Partitions write as they finish: not held back to share a transaction with the next.
    monkeypatch.setattr(cdc.ingest.cluster, "LINGER_SECONDS", 0)
    # The first partition built is committed alone: the others wait until it is. Left to
    # themselves, this test's small partitions had all ended by the first write on a loaded
    # CI machine, and went in whole in its one transaction.
    # One token, taken by the build that starts first; the others wait for the commit. (A
    # lock held by a task is let go once its lease times out, 30 s after that task ends.)
    token, first_committed = f"first-build-{tmp_path.name}", f"first-committed-{tmp_path.name}"
    distributed.Queue(token, client=client).put(True)
    build = cdc.ingest.cluster.build_partition

    def build_after_the_first_commit(*args, **kwargs):
        if not distributed.Queue(token).get(batch=True):  # what is there, at once
            distributed.secede()  # waiting, the worker runs the tasks the first write needs
            assert distributed.Event(first_committed).wait(timeout=120), "no partition was committed"
            distributed.rejoin()
        return build(*args, **kwargs)

    monkeypatch.setattr(cdc.ingest.cluster, "build_partition", build_after_the_first_commit)
    expected = single_process(base, tmp_path, shards)
    store = copy_store(base, tmp_path / "cluster.duckdb")
    files = [str(s) for s in shards]
    committed = []

    def interrupt_after_the_first_commit(summary) -> None:
        # Ctrl-C as Python delivers it, at this moment: a real SIGINT sent here lands at the
        # main thread's next check, which on a loaded machine came after the last commit
        # (the run then ended whole). Real signals to a real `cdc ingest` are test_lifeline's.
        if summary.written and not committed:
            committed.append(summary.written)
            distributed.Event(first_committed, client=client).set()
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cluster_ingest(client, files, store, partitions=6, on_progress=interrupt_after_the_first_commit)
    assert committed == [1]  # the run was cut short
    partial = rows(store.path)
    assert len(rows(base)["generations"]) < len(partial["generations"]) < len(expected["generations"])
    cluster_ingest(client, files, store, partitions=6)
    # The same rows, but for the run that first saw a generation: the one stopped, for those
    # it committed.
    assert without_runs(rows(store.path)) == without_runs(expected)


def test_parquet_lake_holds_the_rows_of_the_store(client, tmp_path, shards):
    db, lake = tmp_path / "s.duckdb", tmp_path / "lake"
    code = main(["--db", str(db), "ingest", "--dask", client.scheduler.address, "--quiet",
                 "--parquet-out", str(lake), *map(str, shards)])
    assert code == EXIT_OK
    stored = rows(db)
    stored["generations"] = sorted((row[:6] + row[7:] for row in stored["generations"]), key=repr)
    with duckdb.connect() as connection:
        for table in ("generations", "content_chunks", "changes"):
            # The lake keeps every text a batch wrote (the store's retention trims at the run's end).
            exclude = "host, text" if table == "generations" else "host"
            query = f"SELECT * EXCLUDE ({exclude}) FROM read_parquet(?, hive_partitioning = true)"
            read = connection.execute(query, [str(lake / table / "*" / "*.parquet")]).fetchall()
            if table == "content_chunks":  # of retained generations only, as the store's view
                retained = {row[:2] for row in stored["content_chunks"]}
                read = [row for row in read if row[:2] in retained]
            # A change row's template-only flag and edit are set at the run's end, not by the batch.
            expected = [row[:-2] for row in stored[table]] if table == "changes" else stored[table]
            assert sorted(read, key=repr) == expected
        hosts = connection.execute("SELECT DISTINCT host FROM read_parquet(?, hive_partitioning = true) "
                                   "ORDER BY host", [str(lake / "changes" / "*" / "*.parquet")]).fetchall()
    assert hosts == [("shop0.example",), ("shop1.example",)]


def test_the_command_line_starts_a_local_cluster_for_the_run(tmp_path, shards, capsys):
    db = tmp_path / "s.duckdb"
    assert main(["--db", str(db), "ingest", "--workers", "2", *map(str, shards)]) == EXIT_OK
    captured = capsys.readouterr()
    assert "Dask dashboard: http://" in captured.err
    assert "cluster: 3 shards" in captured.out and "rows/s" in captured.out
    assert Store(db).stats()["pages"] == 11


def test_warc_and_jsonl_shards_mixed_give_the_single_process_store(client, tmp_path, shards, capsys):
    from tests.test_cli_crawl import write_crawl

    warc = tmp_path / "crawl.warc.gz"
    write_crawl(warc, compress=True)  # two versions of a page, a revisit, a PDF, a 404
    files = [str(shards[0]), str(warc), str(shards[1])]
    single = tmp_path / "single.duckdb"
    assert main(["--db", str(single), "ingest", "--processes", "1", "--quiet", *files]) == EXIT_OK
    db = tmp_path / "cluster.duckdb"
    assert main(["--db", str(db), "ingest", "--dask", client.scheduler.address, "--quiet", *files]) == EXIT_OK
    out = capsys.readouterr().out
    assert "WARC records 5: 2 HTML pages, 1 revisits" in out
    assert rows(db) == rows(single)
    store = Store(db)
    assert store.meta()["extraction"] == "main"
    assert store.page("https://shop.example/lamp").last_checked.day == 3  # the revisit


def test_an_unreachable_scheduler_is_a_one_line_error(tmp_path, shards, capsys, monkeypatch):
    monkeypatch.setattr("cdc.ingest.cluster.CONNECT_TIMEOUT", "1s")
    code = main(["--db", str(tmp_path / "s.duckdb"), "ingest", "--dask", "tcp://127.0.0.1:9", str(shards[0])])
    err = capsys.readouterr().err
    assert code == EXIT_FAILURE and err.count("\n") == 1
    assert "cannot reach a Dask scheduler at tcp://127.0.0.1:9" in err and "--workers N" in err


@pytest.mark.parametrize("option", [["--workers", "0"], ["--workers", "2", "--dask", "tcp://x:1"]])
def test_cluster_options_are_checked(tmp_path, shards, capsys, option):
    with pytest.raises(SystemExit) as stopped:  # argparse's way
        main(["--db", str(tmp_path / "s.duckdb"), "ingest", *option, str(shards[0])])
    assert stopped.value.code == EXIT_USAGE and not (tmp_path / "s.duckdb").exists()
    assert "--workers" in capsys.readouterr().err


def test_a_cluster_ingest_reaching_back_into_stored_histories_writes_the_single_process_store(
        client, tmp_path):
    """Pages with six retained versions stored; shards that put fetches in their place, one
    between two versions (the texts next to it are read) and one before them all with the
    last version's content (not read: the observation brings its own text and chunks). The
    same store as the single process's, which builds the second page again with its whole
    history."""
    from cdc.store import RetentionPolicy

    bodies = crawlgen.page_versions(11, 7)
    urls = [f"https://back.example/p{n}" for n in range(2)]
    stored = [crawlgen.record(url, 2 * v + 2, body) for url in urls for v, body in enumerate(bodies[:6])]
    late = [crawlgen.record(urls[0], 3, bodies[6]), crawlgen.record(urls[1], 0, bodies[5])]
    base = Store(tmp_path / "base.duckdb")
    base.set_retention(RetentionPolicy(10))
    Ingester(base).run(CrawlRecords(str(crawlgen.write_jsonl(tmp_path / "stored.jsonl", stored)), "main"))
    shards = [crawlgen.write_jsonl(tmp_path / f"late-{n}.jsonl", [record]) for n, record in enumerate(late)]
    expected = single_process(base.path, tmp_path, shards)
    store = copy_store(base.path, tmp_path / "cluster.duckdb")
    summary = cluster_ingest(client, [str(shard) for shard in shards], store)
    assert summary.ingest.older == 2 and not summary.failed
    assert without_runs(rows(store.path)) == without_runs(expected)


def wet_shards(tmp_path) -> list[str]:
    """Two WET files of one crawl: three versions of six pages (a sentence a line, as Common
    Crawl writes its text), each page's versions spread over both files."""
    pages = []
    for number in range(6):
        for version, body in enumerate(crawlgen.page_versions(300 + number, 3)):
            fetched = (crawlgen.START + timedelta(days=version)).strftime("%Y-%m-%dT%H:%M:%SZ")
            pages.append((f"https://cc.example/item/{number}", fetched, body.replace(". ", ".\n")))
    files = []
    for half in range(2):
        path = tmp_path / f"CC-MAIN-test-{half}.warc.wet.gz"
        path.write_bytes(archives.wet_file(pages[half::2], filename=path.name))
        files.append(str(path))
    return files


def test_wet_files_through_workers_give_the_plain_ingest_store(tmp_path, capsys):
    """`--workers 1` on WET files chooses their mode as a plain ingest does (it failed every
    shard with "give --extract wet")."""
    files = wet_shards(tmp_path)
    single, cluster = tmp_path / "single.duckdb", tmp_path / "cluster.duckdb"
    assert main(["--db", str(single), "ingest", "--processes", "1", "--quiet", *files]) == EXIT_OK
    assert main(["--db", str(cluster), "ingest", "--workers", "1", "--quiet", *files]) == EXIT_OK
    out = capsys.readouterr().out
    assert "shard failed" not in out and "WET records 20: 18 text pages" in out
    assert_same_rows(cluster, single)  # the meta table too: the mode is "wet" in both
    assert Store(cluster).meta()["extraction"] == "wet"
    assert len(rows(cluster)["generations"]) == 18


def cut_wet(tmp_path) -> str:
    """A WET file cut inside its first conversion record: a WET file with no page to read."""
    record = archives.warc_record("conversion", "https://cc.example/cut", "2026-01-01T00:00:00Z",
                                  "text/plain", b"Cut short.\n" * 200)
    path = tmp_path / "cut.warc.wet"
    path.write_bytes(archives.warcinfo(path.name) + record[:len(record) // 2])
    return str(path)


def test_a_run_that_fails_claims_no_extraction_mode(client, tmp_path, capsys):
    """Runs that store no page leave the store's mode unset, so the WET files can still go in."""
    files, db = wet_shards(tmp_path), tmp_path / "s.duckdb"
    cluster = ["--db", str(db), "ingest", "--dask", client.scheduler.address, "--quiet"]
    code = main([*cluster, "--extract", "whole", *files])  # refused for the run, as a plain ingest is
    err = capsys.readouterr().err
    assert code == EXIT_FAILURE and "give --extract wet" in err
    for command in (cluster, ["--db", str(db), "ingest", "--quiet"]):
        code = main([*command, cut_wet(tmp_path)])
        out = capsys.readouterr().out
        assert code == EXIT_SKIPPED and "truncated" in out
        assert "extraction" not in Store(db).meta()
    assert main([*cluster[:3], "--quiet", *files]) == EXIT_OK
    assert Store(db).meta()["extraction"] == "wet" and len(rows(db)["generations"]) == 18
