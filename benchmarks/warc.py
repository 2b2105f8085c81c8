"""WARC benchmark: end-to-end ingest of real HTML, extraction alone, boilerplate, memory.

Input: the 530 HTML pages of Debian's python3.11-doc package (/usr/share/doc/python3.11/html,
about 51 MB), served as https://docs.python.org/3.11/<path> and written once into
data/bench/pydocs.warc.gz (one gzip member per record) with cdc.sources.warc's writer helpers.

0. Against the peers, on two real GNU Wget crawls of the same docs (`tests/sitecrawl.py`,
   the second after edits; built once into data/bench/crawls): `cdc ingest` of both, as a
   user runs it (a fresh process, `--processes` at its default, start-up included), against
   bare FastWARC reading plus Resiliparse main-content extraction of the same pages in one
   thread of this process, interleaved, `--runs` rounds: medians and their ratio (target
   >= 1.5x), the ingest's peak resident memory (VmHWM, and its worker's), and a pure-CPU
   yardstick (sha256 in 2 processes vs 1) so that a run where the second core was busy
   can be told apart.
1. End to end, as `cdc ingest` runs it: the WARC's pages (`cdc.sources.inputs.CrawlRecords`) into an
   `Ingester` with one process per core on a fresh store, main-content extraction done where
   each page is built, in MB/s of HTML payload (1 MB = 10^6 bytes), median of `--runs`
   (default 3).
2. Extraction alone: `html_to_record` over the same pages held in memory, median of runs.
3. Boilerplate: `cdc.analyst.boilerplate.host_boilerplate(store, "docs.python.org")` must not be
   empty (in the main-content store; the whole-page mode is reported too).
4. Fetching from a loopback server (the tests' `tests/httpserver.py`, one host, no
   politeness delay, 16 requests at a time): 1,000 URLs fetched once into a fresh store,
   then again, `--runs` times: 900 answer 304 to the stored validators and 100 change on
   every request. Pages per second of the repeat runs (wall time of `fetch_all`, store
   writes included), median.
5. With `--big`: a ~1 GB WARC.gz made by repeating the docs records under other URLs and
   dates, streamed to disk (never held in memory), then ingested by `cdc ingest` in a fresh
   process, whose peak RSS (VmHWM) is reported, with its helper process's peak, its RSS
   sampled through the run, and what importing cdc alone takes.

Targets print PASS or FAIL. Run from the repository root:

    python benchmarks/warc.py            # about a minute
    python benchmarks/warc.py --big      # adds the ~1 GB memory run (several minutes)
    python benchmarks/warc.py --only-crawls    # section 0 alone: cdc ingest vs the peers
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cdc.analyst.boilerplate import host_boilerplate
from cdc.core.chunking import default_threads
from cdc.ingest.fetch import FetchOptions, fetch_all
from cdc.ingest.ingester import WARC_BATCH_BYTES, Ingester
from cdc.sources.extract import MAIN_CONTENT, WHOLE_PAGE, html_to_record
from cdc.sources.inputs import CrawlRecords
from cdc.sources.warc import WarcSummary, write_warc_response
from cdc.store import Store
from tests.httpserver import TestServer

DOCS = Path("/usr/share/doc/python3.11/html")
HOST = "docs.python.org"
BENCH_DIR = Path("data/bench")
WARC_PATH = BENCH_DIR / "pydocs.warc.gz"
BIG_PATH = BENCH_DIR / "pydocs-big.warc.gz"
BIG_BYTES = 1_000_000_000  # of HTML payload
TARGET_MBPS = 20.0
TARGET_RSS_MB = 300.0
TARGET_FETCH_PAGES = 200.0  # per second, when most answers are 304
TARGET_VS_BARE = 1.5  # cdc ingest on every core vs bare FastWARC + Resiliparse in one thread
CRAWLS_DIR = BENCH_DIR / "crawls"
YARDSTICK_BLOCK = bytes(16 << 20)
HTML_HEADERS = [("Content-Type", "text/html; charset=utf-8")]


def doc_pages() -> list[Path]:
    if not DOCS.is_dir():
        sys.exit(f"{DOCS} is missing: apt-get install -y python3.11-doc")
    return sorted(DOCS.rglob("*.html"))


def url_of(path: Path, prefix: str = "3.11") -> str:
    return f"https://{HOST}/{prefix}/{path.relative_to(DOCS).as_posix()}"


def build_warc(path: Path) -> int:
    """The docs pages as one WARC.gz, built once; HTML bytes in it."""
    pages = doc_pages()
    total = sum(page.stat().st_size for page in pages)
    if path.exists():
        return total
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with partial.open("wb") as out:
        for page in pages:
            write_warc_response(out, url_of(page), "2024-05-01T12:00:00Z", 200, HTML_HEADERS,
                                page.read_bytes(), compress=True)
    partial.rename(path)
    return total


def build_big_warc(path: Path, target: int = BIG_BYTES) -> int:
    """The docs records repeated under other URLs and dates up to `target` HTML bytes,
    written as they are made (never the whole file in memory); HTML bytes in it."""
    pages = doc_pages()
    per_round = sum(page.stat().st_size for page in pages)
    rounds = max(1, -(-target // per_round))
    if path.exists():
        return rounds * per_round
    partial = path.with_suffix(".partial")
    with partial.open("wb") as out:
        for round_number in range(rounds):
            # Half the rounds are new URLs, half new generations of earlier ones.
            prefix = f"copy{round_number // 2}"
            fetched_at = f"2024-{1 + round_number % 2:02d}-01T00:00:00Z"
            for page in pages:
                write_warc_response(out, url_of(page, prefix), fetched_at, 200, HTML_HEADERS,
                                    page.read_bytes(), compress=True)
    partial.rename(path)
    return rounds * per_round


def ingest(warc: Path, store_path: Path, mode: str = MAIN_CONTENT) -> tuple[float, WarcSummary]:
    """What `cdc ingest FILE.warc.gz` runs: pages extracted where they are built, by this
    process and `default_threads() - 1` forked workers."""
    records = CrawlRecords(str(warc), mode)
    start = time.perf_counter()
    result = Ingester(Store(store_path), batch_bytes=WARC_BATCH_BYTES, workers=default_threads()).run(records)
    elapsed = time.perf_counter() - start
    if result.bad:
        raise SystemExit(f"bad records in the benchmark WARC: {result.bad[:3]}")
    return elapsed, records.summary


def wget_crawls(pages: int | None) -> list[Path]:
    """The two Wget crawls of the docs, before and after the edits, built once."""
    from tests import sitecrawl

    reason = sitecrawl.available()
    if reason:
        sys.exit(f"cannot build the Wget crawls: {reason}")
    built = sitecrawl.cached_two_crawls(CRAWLS_DIR, pages=pages, seed=0)
    return [built.crawl1, built.crawl2]


def bare_read_and_extract(paths: list[Path]) -> tuple[int, int]:
    """The peers alone, in one thread: FastWARC reads each HTML 200 response, Resiliparse
    decodes it (the meta charset, else a guess), parses it and extracts its main content.
    Pages and HTML bytes seen."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding
    from resiliparse.parse.html import HTMLTree

    pages = html_bytes = 0
    for path in paths:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, record_types=WarcRecordType.response, parse_http=True):
                http = record.http_headers
                if http.status_code != 200 or not (http.get("Content-Type") or "").startswith("text/html"):
                    continue
                body = record.reader.read()
                tree = HTMLTree.parse(bytes_to_str(body, detect_encoding(body)))
                extract_plain_text(tree, main_content=True)
                pages += 1
                html_bytes += len(body)
    return pages, html_bytes


def _children_cpu() -> float:
    """CPU seconds of this process's ended children and theirs (user + sys)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _yardstick_share(_: int) -> bytes:
    return hashlib.sha256(YARDSTICK_BLOCK).digest()


def process_yardstick(processes: int, rounds: int = 5) -> float:
    """How much faster `processes` processes do CPU-bound work (sha256) than one, here, now."""
    serial, parallel = [], []
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        pool.map(abs, range(processes))  # started
        for _ in range(rounds):
            start = time.perf_counter()
            for share in range(processes):
                _yardstick_share(share)
            serial.append(time.perf_counter() - start)
            start = time.perf_counter()
            pool.map(_yardstick_share, range(processes))
            parallel.append(time.perf_counter() - start)
    return statistics.median(serial) / statistics.median(parallel)


def versus_bare(tmp: Path, runs: int, pages: int | None) -> None:
    """Section 0 of the module docstring."""
    paths = wget_crawls(pages)
    processes = default_threads()
    print(f"yardstick: CPU-bound work (sha256) on {processes} processes vs one: "
          f"{process_yardstick(processes):.2f}x (ideal {processes}x); load average "
          f"{' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    bare_times, cdc_times, bare_cpu, cdc_cpu, reports = [], [], [], [], []
    seen = (0, 0)
    for run in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        seen = bare_read_and_extract(paths)
        bare_times.append(time.perf_counter() - start)
        bare_cpu.append(time.process_time() - cpu)
        args = ["--db", str(tmp / f"crawls{run}.duckdb"), "ingest", "--quiet", *map(str, paths)]
        start, cpu = time.perf_counter(), _children_cpu()
        report, _ = _sampled_child(["from cdc.cli.main import main", f"main({args!r})"])
        cdc_times.append(time.perf_counter() - start)
        cdc_cpu.append(_children_cpu() - cpu)
        reports.append(report)
    bare, ingest_median = statistics.median(bare_times), statistics.median(cdc_times)
    ratio = bare / ingest_median
    print(f"Wget crawls: {len(paths)} files, {seen[0]} HTML pages, {seen[1] / 1e6:.1f} MB of HTML")
    print(f"  bare FastWARC + Resiliparse main content, 1 thread: median {bare:.2f} s "
          f"({seen[1] / 1e6 / bare:.1f} MB/s)")
    print(f"  cdc ingest (fresh process, {processes} processes, start-up included): "
          f"median {ingest_median:.2f} s ({seen[1] / 1e6 / ingest_median:.1f} MB/s)")
    print(f"  cdc ingest vs bare: {ratio:.2f}x   target >= {TARGET_VS_BARE}x: "
          f"{verdict(ratio >= TARGET_VS_BARE)}")
    print(f"  CPU seconds (user + sys; the ingest's worker counted in): bare median "
          f"{statistics.median(bare_cpu):.2f} s, cdc ingest {statistics.median(cdc_cpu):.2f} s "
          f"({statistics.median(cdc_cpu) / statistics.median(bare_cpu):.2f}x bare's: the wall-time ratio "
          f"cannot pass {processes * statistics.median(bare_cpu) / statistics.median(cdc_cpu):.2f}x on "
          f"{processes} cores)")
    print(f"  load average at the end: {' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    print(f"  peak RSS of cdc ingest: {max(r['hwm'] for r in reports):.0f} MB (its worker: "
          f"{max(r['children'] for r in reports):.0f} MB)")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def extraction_alone(pages: list[Path], html_bytes: int, runs: int) -> None:
    """`html_to_record` over the pages held in memory, in MB/s of HTML. The pages are let go
    on return: the big run's child is forked later, and would inherit them."""
    bodies = [page.read_bytes() for page in pages]
    for mode in (MAIN_CONTENT, WHOLE_PAGE):
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            for body in bodies:
                html_to_record(body, "https://docs.python.org/3.11/x.html", "2024-05-01", "utf-8", mode)
            times.append(time.perf_counter() - start)
        print(f"extraction alone ({mode}): {html_bytes / 1e6 / statistics.median(times):.1f} MB/s")


def fetch_run(tmp: Path, runs: int) -> None:
    server = TestServer().start()
    try:
        urls = ([server.url(f"/many/{n}") for n in range(900)]
                + [server.url(f"/changing?copy={n}") for n in range(100)])
        store = Store(tmp / "fetch.duckdb")
        options = FetchOptions(politeness_delay=0, concurrency=16)
        first = fetch_all(urls, store, options)
        if first.fetched != len(urls):
            raise SystemExit(f"the first fetch got {first.fetched} of {len(urls)} pages: {first.lines()}")
        times, summary = [], first
        for _ in range(runs):
            start = time.perf_counter()
            summary = fetch_all(urls, store, options)
            times.append(time.perf_counter() - start)
    finally:
        server.stop()
    rate = len(urls) / statistics.median(times)
    print(f"fetch, loopback, {len(urls)} URLs again: {summary.not_modified} answered 304, "
          f"{summary.new_generations} new generations; median {statistics.median(times):.2f} s, "
          f"{rate:.0f} pages/s   target >= {TARGET_FETCH_PAGES:.0f} pages/s: "
          f"{verdict(rate >= TARGET_FETCH_PAGES)}")


def big_run(tmp: Path) -> None:
    print(f"building {BIG_PATH} (once) ...", flush=True)
    start = time.perf_counter()
    html_bytes = build_big_warc(BIG_PATH)
    print(f"  {html_bytes / 1e9:.2f} GB of HTML, {BIG_PATH.stat().st_size / 1e6:.0f} MB compressed, "
          f"{time.perf_counter() - start:.0f} s")
    # A fresh `cdc ingest` process, as a user runs it, reporting its own high-water mark
    # (VmHWM: ru_maxrss would count the pages of this process it was forked from) and its
    # helper process's (RUSAGE_CHILDREN); sampled from here meanwhile.
    start = time.perf_counter()
    args = ["--db", str(tmp / "big.duckdb"), "ingest", "--quiet", str(BIG_PATH)]
    report, samples = _sampled_child(["from cdc.cli.main import main", f"main({args!r})"])
    elapsed = time.perf_counter() - start
    imports, _ = _sampled_child(["import cdc.cli.main, cdc.core.chunking",
                                 "cdc.core.chunking.chunk_content(b'x')"])
    print(f"big ingest (cdc ingest, {default_threads()} processes): {html_bytes / 1e6:,.0f} MB of HTML "
          f"in {elapsed:.0f} s ({html_bytes / 1e6 / elapsed:.1f} MB/s, process start included)")
    print(f"peak RSS of the ingesting process: {report['hwm']:.0f} MB   "
          f"target <= {TARGET_RSS_MB:.0f} MB: {verdict(report['hwm'] <= TARGET_RSS_MB)}")
    print(f"  its helper process (forked, pages shared with it counted in both): {report['children']:.0f} MB")
    quarter = max(1, len(samples) // 4)
    print(f"  RSS sampled every 0.5 s ({len(samples)} samples): "
          f"median {statistics.median(samples[:quarter]):.0f} MB "
          f"in the first quarter, {statistics.median(samples[-quarter:]):.0f} MB in the last, "
          f"max {max(samples):.0f} MB")
    print(f"  importing cdc and loading its kernels alone: {imports['hwm']:.0f} MB "
          f"({'ahead of time' if imports['aot'] else 'Numba JIT'}: see python -m cdc.core.aot)")


def _sampled_child(statements: list[str]) -> tuple[dict, list[float]]:
    """Run `statements` in a fresh Python; its peak RSS and its children's in MB (and
    whether the kernels were compiled ahead of time), and its RSS sampled every 0.5 s."""
    code = "; ".join([*statements, "import json, resource, cdc.core.compiled",
                      "print(json.dumps({'hwm': [int(line.split()[1]) for line in open('/proc/self/status') "
                      "if line.startswith('VmHWM')][0] / 1024, 'children': "
                      "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "
                      "'aot': cdc.core.compiled.AHEAD_OF_TIME is not None}))"])
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    samples = []
    while child.poll() is None:
        try:
            status = Path(f"/proc/{child.pid}/status").read_text()
            samples += [int(line.split()[1]) / 1024 for line in status.splitlines()
                        if line.startswith("VmRSS")]
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    out = child.stdout.read()
    if child.returncode != 0:
        raise SystemExit(f"the measured process failed ({child.returncode})")
    return json.loads(out.strip().splitlines()[-1]), samples or [0.0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--big", action="store_true", help="also the ~1 GB peak-memory run")
    parser.add_argument("--crawl-pages", type=int, default=None,
                        help="pages of the docs in each Wget crawl (default: all 530)")
    parser.add_argument("--only-crawls", action="store_true", help="only section 0, against the peers")
    args = parser.parse_args()

    if args.only_crawls:
        with tempfile.TemporaryDirectory() as directory:
            versus_bare(Path(directory), args.runs, args.crawl_pages)
        return 0

    html_bytes = build_warc(WARC_PATH)
    pages = doc_pages()
    print(f"input: {len(pages)} pages, {html_bytes / 1e6:.1f} MB of HTML; "
          f"{WARC_PATH} {WARC_PATH.stat().st_size / 1e6:.1f} MB")

    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        versus_bare(tmp, args.runs, args.crawl_pages)
        times = []
        for run in range(args.runs):
            elapsed, summary = ingest(WARC_PATH, tmp / f"run{run}.duckdb")
            assert summary.pages == len(pages), summary
            times.append(elapsed)
        median = statistics.median(times)
        mbps = html_bytes / 1e6 / median
        print(f"end to end (cdc ingest, main content, {default_threads()} processes): median {median:.2f} s, "
              f"{mbps:.1f} MB/s of HTML   target >= {TARGET_MBPS:.0f} MB/s: {verdict(mbps >= TARGET_MBPS)}")

        extraction_alone(pages, html_bytes, args.runs)

        found = host_boilerplate(Store(tmp / "run0.duckdb"), HOST)
        print(f"boilerplate on {HOST} (main content): {len(found)} chunks   non-empty: "
              f"{verdict(bool(found))}")
        for chunk in found[:3]:
            print(f"  {chunk.pages} pages ({chunk.share:.0%}): {chunk.sample[:90]}")
        ingest(WARC_PATH, tmp / "whole.duckdb", WHOLE_PAGE)
        whole = host_boilerplate(Store(tmp / "whole.duckdb"), HOST)
        print(f"boilerplate on {HOST} (whole page): {len(whole)} chunks")
        for chunk in whole[:3]:
            print(f"  {chunk.pages} pages ({chunk.share:.0%}): {chunk.sample[:90]}")

        fetch_run(tmp, args.runs)
        if args.big:
            big_run(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
