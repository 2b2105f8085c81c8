"""A full disk under the store, for real: a small tmpfs of its own, filled by an ingest.

The ingest stops with one line naming the store and the space left, never DuckDB's
traceback; the store stays as its last commit left it, and once there is room the same
command completes it: the store then holds what one uninterrupted ingest writes.
"""

from __future__ import annotations

import subprocess

import pytest

from cdc.cli.main import EXIT_FAILURE, EXIT_OK, main
from cdc.errors import StoreFullError
from cdc.store import Store
from tests import crawlgen, textgen
from tests.storerows import assert_same_rows, consistency_problems

DISK_MB = 8


def _mount(point, megabytes: int, remount: bool = False) -> subprocess.CompletedProcess:
    options = f"{'remount,' if remount else ''}size={megabytes}m"
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
                          capture_output=True, text=True, timeout=30)


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of DISK_MB mounted in the test's directory, unmounted at the end; skipped where
    this process may not mount one (not root, or no mount(8) in a container)."""
    point = tmp_path / "disk"
    point.mkdir()
    try:
        mounted = _mount(point, DISK_MB)
    except FileNotFoundError:
        pytest.skip("no mount(8) here to make a small disk to fill")
    if mounted.returncode:
        pytest.skip(f"cannot mount a {DISK_MB} MB tmpfs to fill (root is needed): {mounted.stderr.strip()}")
    yield point
    subprocess.run(["umount", "-l", str(point)], capture_output=True, timeout=30)


def crawl_of(megabytes: int) -> list[dict]:
    """Pages of text that does not repeat (it compresses little), about `megabytes` in all."""
    pages = megabytes * 1_000_000 // 20_000
    return [crawlgen.record(f"https://full.example/page/{number}", 0,
                            textgen.text(5_000 + number, 20_000).decode(), with_boilerplate=False)
            for number in range(pages)]


@pytest.mark.slow  # three ingests of 16 MB: 17-35 s on a loaded machine
def test_a_full_disk_is_one_line_and_the_same_command_completes_the_store(small_disk, tmp_path, capsys):
    crawl = crawlgen.write_jsonl(tmp_path / "crawl.jsonl", crawl_of(2 * DISK_MB))
    db = small_disk / "cdc.duckdb"
    command = ["--db", str(db), "ingest", "--quiet", str(crawl)]

    assert main(command) == EXIT_FAILURE
    captured = capsys.readouterr()
    assert captured.err.startswith(f"cdc: the disk holding {db} is full (") and captured.err.count("\n") == 1
    assert " MB free): free space there, then run the same command again" in captured.err
    assert "Traceback" not in captured.err and "FatalException" not in captured.err
    assert consistency_problems(db) == dict.fromkeys(consistency_problems(db), 0)
    with pytest.raises(StoreFullError, match="the disk holding"):  # a compaction's copy, say
        Store(db).compact()
    assert not [path.name for path in small_disk.iterdir() if ".compact" in path.name]  # no half copy

    assert _mount(small_disk, 20 * DISK_MB, remount=True).returncode == 0  # space freed
    assert main(command) == EXIT_OK
    expected = tmp_path / "expected.duckdb"
    assert main(["--db", str(expected), "ingest", "--quiet", str(crawl)]) == EXIT_OK
    assert consistency_problems(db) == dict.fromkeys(consistency_problems(db), 0)
    assert_same_rows(db, expected, runs=False)  # the generations the stopped run committed are its


@pytest.mark.slow  # a local Dask cluster and 16 MB of input
@pytest.mark.xdist_group("dask-dashboard")  # its dashboard takes port 8787 (docs/testing.md)
def test_a_full_disk_under_a_cluster_ingest_is_one_line_too(small_disk, tmp_path, capsys):
    pytest.importorskip("distributed")
    pages = crawl_of(2 * DISK_MB)
    shards = [str(crawlgen.write_jsonl(tmp_path / f"shard-{n}.jsonl", pages[n::2])) for n in range(2)]
    db = small_disk / "cdc.duckdb"
    assert main(["--db", str(db), "ingest", "--workers", "1", "--quiet", *shards]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"cdc: the disk holding {db} is full (")
    assert "Traceback" not in err and "FatalException" not in err
    assert consistency_problems(db) == dict.fromkeys(consistency_problems(db), 0)


def test_a_full_disk_under_the_parquet_lake_is_one_line(small_disk, tmp_path, capsys):
    assert _mount(small_disk, 1, remount=True).returncode == 0  # 1 MB: the lake fills it at once
    crawl = crawlgen.write_jsonl(tmp_path / "crawl.jsonl", crawl_of(4))
    lake = small_disk / "lake"
    command = ["--db", str(tmp_path / "cdc.duckdb"), "ingest", "--quiet", "--parquet-out", str(lake)]
    assert main([*command, str(crawl)]) == EXIT_FAILURE
    assert capsys.readouterr().err == ("cdc: the disk is full, writing an output file (--parquet-out, "
                                       "--warc-out): free space there, then run the same command again\n")
