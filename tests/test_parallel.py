"""`cdc ingest --processes N`: forked worker processes write what one process writes."""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import time

import pytest

import cdc.ingest.ingester as ingester
from cdc.cli.main import EXIT_OK, main
from cdc.ingest.ingester import prepare_records
from cdc.sources.warc import write_warc_response
from tests import crawlgen
from tests.storerows import store_rows as rows

PAGE = ("<html><head><title>{title}</title></head>"
        "<body><main><h1>{title}</h1><p>{body}</p></main></body></html>")


def jsonl_crawl(tmp_path):
    return crawlgen.write_jsonl(tmp_path / "crawl.jsonl", crawlgen.crawl(hosts=2, pages=6, versions=4))


def warc_crawl(tmp_path):
    path = tmp_path / "crawl.warc.gz"
    with open(path, "wb") as out:
        for record in crawlgen.crawl(hosts=2, pages=6, versions=4):
            body = PAGE.format(title=record["title"], body=record["sections"][1]["text"]).encode()
            write_warc_response(out, record["url"], record["fetched_at"], 200,
                                [("Content-Type", "text/html; charset=utf-8")], body, compress=True)
    return path



# With small batches, every batch after the first arrives with its records extracted ahead in a
# worker (`cdc.ingest.ingester.prepare_records`), its pages' earlier versions in the batches before it.
@pytest.mark.slow  # each ingests a crawl with one process and with two
@pytest.mark.parametrize("batch_bytes", [None, 2_000], ids=["one batch", "extracted ahead"])
@pytest.mark.parametrize("crawl", [jsonl_crawl, warc_crawl])
def test_worker_processes_write_what_one_process_writes(tmp_path, monkeypatch, crawl, batch_bytes):
    # small as it is, the batch goes to workers
    monkeypatch.setattr("cdc.ingest.ingester.PARALLEL_MIN_BYTES", 0)
    if batch_bytes:
        monkeypatch.setattr("cdc.cli.ingest.BATCH_BYTES", batch_bytes)
        monkeypatch.setattr("cdc.cli.ingest.WARC_BATCH_BYTES", batch_bytes)
    source = str(crawl(tmp_path))
    one, three = tmp_path / "one.duckdb", tmp_path / "three.duckdb"
    assert main(["--db", str(one), "ingest", "--processes", "1", "--quiet", source]) == EXIT_OK
    assert main(["--db", str(three), "ingest", "--processes", "3", "--quiet", source]) == EXIT_OK
    expected = rows(one)
    assert len(expected["generations"]) == 2 * 6 * 4
    assert rows(three) == expected


def slow_prepare_records(payloads):
    """`prepare_records`, 50 ms a record slower in a worker process: a worker still extracting
    when this process comes to build the batch. By name, as a pool's task is pickled."""
    if multiprocessing.parent_process() is not None:
        time.sleep(0.05 * len(payloads))
    return prepare_records(payloads)


@pytest.mark.slow
def test_pages_of_records_a_worker_is_still_extracting_are_built_here_as_they_come(tmp_path, monkeypatch):
    """A batch whose records a worker is still extracting ahead when this process builds it:
    the other pages are built first (in tasks), those pages once their records are in; the
    store is what one process writes."""
    monkeypatch.setattr(ingester, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr("cdc.cli.ingest.WARC_BATCH_BYTES", 60_000)  # about a crawl's version a batch
    source = str(warc_crawl(tmp_path))
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    assert main(["--db", str(one), "ingest", "--processes", "1", "--quiet", source]) == EXIT_OK
    events = []  # ("late", pages of the batch, of them late) and ("build", pages sent to tasks)
    original = ingester._Late.of

    def late_of(cls, ahead, extracting, pages):
        found = original(ahead, extracting, pages)
        events.append(("late", len(pages), len(found.pages) if found else 0))
        return found

    class Recorded(ingester.Tasks):
        def __init__(self, pool, function, items, *args, **kwargs):
            if isinstance(function, functools.partial):  # a batch's build
                events.append(("build", len(items)))
            super().__init__(pool, function, items, *args, **kwargs)

    monkeypatch.setattr(ingester, "prepare_records", slow_prepare_records)
    monkeypatch.setattr(ingester._Late, "of", classmethod(late_of))
    monkeypatch.setattr(ingester, "Tasks", Recorded)
    assert main(["--db", str(two), "ingest", "--processes", "2", "--quiet", source]) == EXIT_OK
    # A batch whose late pages were left out of its build tasks, to be built here after.
    assert any(late[0] == "late" and late[2] and build == ("build", late[1] - late[2])
               for late, build in itertools.pairwise(events))
    assert rows(two) == rows(one)


def test_an_ingest_never_imports_pandas(tmp_path):
    """`cdc ingest` builds its batch tables without pandas (`cdc.runtime.nopandas`): importing it
    took 0.33 s of every run's start."""
    import subprocess
    import sys

    source = jsonl_crawl(tmp_path)
    argv = ["--db", str(tmp_path / "store.duckdb"), "ingest", "--quiet", str(source)]
    script = ("import sys\n"
              "from cdc.cli.main import main\n"
              f"code = main({argv!r})\n"
              "print(code, 'pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == f"{EXIT_OK} False"


def test_a_small_input_is_ingested_in_one_process_by_default(tmp_path):
    """The default `--processes` (the cores) never forks for an input under PARALLEL_MIN_BYTES:
    a worker there would cost more than it saves."""
    import subprocess
    import sys

    source = jsonl_crawl(tmp_path)
    argv = ["--db", str(tmp_path / "store.duckdb"), "ingest", "--quiet", str(source)]
    script = ("import os\n"
              "forks = []\n"
              "os.register_at_fork(before=lambda: forks.append(1))\n"
              "from cdc.cli.main import main\n"
              f"code = main({argv!r})\n"
              "print(code, len(forks))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == f"{EXIT_OK} 0"
