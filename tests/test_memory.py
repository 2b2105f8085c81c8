"""Ingest streams: its peak memory does not grow with the input. A generated JSONL of many
MB is ingested by `Ingester` in a process of its own, and its peak resident set (from
`ru_maxrss`, a high-water mark) after the input's last batch is held against the same
process's peak after its first third: holding the input whole, or anything of each of its
records, would add more than the bound. The first third is four batches: an ingest's peak
still rises over its first two or three (the libraries' first use, the pools' first fill: 23-57
MB more at 600 records than at 2,000), and flat after (366.6, 367.0 and 366.6 MB at 2,000,
3,000 and 6,000 records, one process). One ingest gives both peaks: the first 2,000 records
are those a separate ingest of a third of the input would read, and the two peaks come from
one process, so no other process's start weighs on the difference.

Each page has hundreds of versions in the input, all retained within the run, so a batch
that read each page's older texts (as the latest generation's look-up once did) grows with
the input too. The store keeps every generation's text here: the trim at the run's end
(`Store.finish_run`) rewrites the texts it drops in one transaction, which takes memory in
proportion to them, a cost of the store's and not of the streaming measured here."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tests import crawlgen, textgen

ROOT = Path(__file__).resolve().parent.parent
PAGE_BYTES = 12_000  # of text a record
BATCH = 500  # records a batch, so that the large input is many batches


def write_input(path: Path, records: int) -> int:
    """`records` records of 20 pages, each version with new text; the file's size."""
    with path.open("w") as stream:
        for number in range(records):
            url = f"https://memory.example/page{number % 20}"
            body = textgen.text(number, PAGE_BYTES).decode()
            record = crawlgen.record(url, 0, body, with_boilerplate=False) | {
                "fetched_at": (crawlgen.START + timedelta(minutes=number)).isoformat()}
            stream.write(json.dumps(record) + "\n")
    return path.stat().st_size


def peaks_mb(store: Path, source: Path, processes: int, after_records: int) -> tuple[float, float]:
    """The peak resident set of an ingest of `source` in a new process, as it stood after
    the batch that ends at `after_records` and after its last batch (before the run's end:
    see the module docstring)."""
    script = ("import resource, sys; from cdc.ingest.ingester import Ingester; "
              "from cdc.sources.jsonl import iter_records; "
              "from cdc.store import RetentionPolicy, Store; store = Store(sys.argv[1]); "
              "store.set_retention(RetentionPolicy(100_000)); peaks = []; "
              "note = lambda _: peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); "
              f"Ingester(store, batch_records={BATCH}, workers={processes}, on_batch=note)"
              f".run(iter_records(sys.argv[2])); print(peaks[{after_records // BATCH - 1}], peaks[-1])")
    done = subprocess.run([sys.executable, "-c", script, str(store), str(source)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    first, last = (int(kib) * 1024 / 1e6 for kib in done.stdout.split()[-2:])
    return first, last


SMALL, LARGE = 2_000, 6_000  # records: the first third, and the whole input


@pytest.fixture(scope="module")
def large_input(tmp_path_factory) -> tuple[Path, int, int]:
    """The input, written once for both process counts (the tests share an xdist worker for
    it), with the size of its first SMALL records and its whole size."""
    source = tmp_path_factory.mktemp("memory") / "large.jsonl"
    size = write_input(source, LARGE)
    with source.open("rb") as lines:
        small = sum(len(line) for _, line in zip(range(SMALL), lines))
    return source, small, size


@pytest.mark.slow
@pytest.mark.xdist_group("memory")
@pytest.mark.parametrize("processes", [1, 2])
def test_peak_memory_of_an_ingest_does_not_grow_with_its_input(tmp_path, large_input, processes):
    source, small, large = large_input
    assert large > 70e6
    small_peak, large_peak = peaks_mb(tmp_path / "store.duckdb", source, processes, SMALL)
    # The input after its first third is 48 MB more of JSONL: held whole it would add at least that.
    assert large_peak - small_peak < (large - small) / 1e6 / 3, (small_peak, large_peak)
