"""Ingest streams: its peak memory does not grow with the input. A generated JSONL of many
MB is ingested by `Ingester` in a process of its own, which notes after each batch its peak
resident set during that batch (Linux's `VmHWM`, reset after each through
`/proc/self/clear_refs`); the median of those peaks over the input's last third is held
against their median over its first: holding the input whole, or anything of each of its
records, would add more than the bound. The first third's batches include the first: an ingest's peak
still rises over its first few (the libraries' first use, the pools' first fill: 23-57 MB
more at 600 records than at 2,000), and flat after (366.6, 367.0 and 366.6 MB at 2,000,
3,000 and 6,000 records, one process, batches of 500). Batches of 250 records, where the
batch's own data weighs less in its peak, showed what those of 500 hid: the look-up of the
batch's latest texts read every retained text of its pages, 20-29 MB more by the last third
(`cdc.store.writer._latest_rows`).

Medians of each batch's own peak, not the high-water mark since the start: with two
processes this one builds the tasks no worker has started, a share that varies from batch to
batch, so a batch's peak varies by 20-40 MB either way with no trend (383-422 MB over one
run's twelve batches), and the mark since the start over twelve batches stood above the
mark over four by the luck of the draw (422.8 against 444.9 MB in one CI run). A process
that kept something of each record rises in every batch, and so in the median, by the input
between the thirds (73 MB of JSONL).

The thirds are twelve batches each (3,000 records): one process's batch peaks spread over 343-383 MB with no
trend (24 batches, twice), so the medians of eight batches each (a 2,000-record third) stood
-7 to +17 MB apart over four runs, against a bound of 16 MB then (a CI run failed at +16.7).

Each page has hundreds of versions in the input, all retained within the run, so a batch
that read each page's older texts (as the latest generation's look-up once did) grows with
the input too. The store keeps every generation's text here: the trim at the run's end
(`Store.finish_run`) appends again, without text, the generations it drops, in one
transaction, which takes memory in proportion to them, a cost of the store's and not of the
streaming measured here."""

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
BATCH = 250  # records a batch, so that the large input is many batches


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
    """The median of the peak resident sets of an ingest's batches (in a new process) over
    its first `after_records` records, and over the batches past twice that (before the
    run's end: see the module docstring)."""
    script = ("import re, statistics, sys; from cdc.ingest.ingester import Ingester; "
              "from cdc.sources.jsonl import iter_records; "
              "from cdc.store import RetentionPolicy, Store; store = Store(sys.argv[1]); "
              "store.set_retention(RetentionPolicy(100_000)); peaks = []; "
              "hwm = lambda: int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]); "
              "note = lambda _: (peaks.append(hwm()), open('/proc/self/clear_refs', 'w').write('5')); "
              f"Ingester(store, batch_records={BATCH}, workers={processes}, on_batch=note)"
              f".run(iter_records(sys.argv[2])); window = {after_records // BATCH}; "
              "print(statistics.median(peaks[:window]), statistics.median(peaks[2 * window:]))")
    done = subprocess.run([sys.executable, "-c", script, str(store), str(source)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    first, last = (float(kib) * 1024 / 1e6 for kib in done.stdout.split()[-2:])
    return first, last


SMALL, LARGE = 3_000, 9_000  # records: the first third, and the whole input


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
    assert large > 100e6
    small_peak, large_peak = peaks_mb(tmp_path / "store.duckdb", source, processes, SMALL)
    # The windows' starts, and their ends, lie 6,000 records apart: 73 MB of JSONL, a bound of 24 MB.
    assert large_peak - small_peak < (large - small) / 1e6 / 3, (small_peak, large_peak)
