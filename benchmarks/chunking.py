"""Chunking benchmark: cdc against its peers, side by side in one process.

What is measured, on the normalised records of the real revision corpus
(`../shared/corpus/rustbook.jsonl.gz`, each record through `cdc.content_for_chunking`),
with avg 2048, min 512 and max 8192 bytes everywhere:

1. Throughput of chunking plus an XXH3-128 digest per chunk, in MB/s of input
   (1 MB = 10^6 bytes). Every peer produces, per document, its chunks' offsets, lengths
   and 16-byte digests, each in the form its API returns, and what that form is differs:
     - cdc.chunk_content per document (one thread), and cdc.chunk_many on all cores and on
       one thread: a `cdc.Chunks` per document, an immutable sequence over one array of
       records, whose `Chunk` tuples are made when they are read, not by the call;
     - the same chunk_content again, each result also iterated into its Chunk tuples (the
       "+ tuples" row), for context: what a caller that reads every chunk as a tuple pays,
       and the form the pyfastcdc row returns;
     - cdc.chunk_batch, the flat arrays of all documents (all cores, and one thread);
     - pyfastcdc (Cython), digesting each chunk's memoryview with xxhash: a list of
       (offset, length, digest bytes) tuples per document;
     - fastcdc from PyPI (its Cython module), digesting each chunk the same way, the same
       form;
     - the seed guide's pure-Python code, on a small subset only (BLAKE2b hex digests, as
       the guide wrote it).
   The peers run round-robin, each once per round, so machine noise hits them alike;
   gc.collect() runs before each timed call; the table shows the median over rounds and
   the min-max spread. Before timing, cdc's three entry points are checked to give the
   same chunks, and every peer's chunks are checked to tile each document with true
   XXH3-128 digests; a mismatch stops the run.
2. The fixed cost per document in chunk_many: 100,000 tiny (64-byte) or empty documents
   in one call, divided by the count.
3. cdc.compare with exact edits (both texts given) for every consecutive pair of versions
   of a URL in the corpus: median, mean, p95 and max per pair.
4. Numba's first-call compile time, in fresh subprocesses sharing a new NUMBA_CACHE_DIR:
   cold (compiles and writes the cache) and warm (loads it), with the JIT's kernels
   (CDC_KERNELS=jit); and the same first call with the kernels compiled ahead of time
   (`python -m cdc.core.aot`), when they are.

The header also gives a yardstick for the multi-thread rows: how much faster CPU-bound
work (sha256, which releases the GIL) runs on all cores than on one, on this machine,
when the calling thread takes a share and when idle pool workers do it all.

Target lines print PASS or FAIL; the exit status is 0 unless a correctness check fails
(targets are reported, not enforced: timings on a shared machine are noisy).

Run from the repository root:

    pip install -r benchmarks/requirements.txt
    python benchmarks/chunking.py             # about 30 s on two cores
    python benchmarks/chunking.py --quick     # fewer rounds: a smoke check
    python benchmarks/chunking.py --runs 15 --corpus PATH
"""

from __future__ import annotations

import argparse
import gc
import gzip
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numba
import numpy as np
import seed_reference as seed  # benchmarks/ is on sys.path when this file is run
import xxhash

import cdc
from cdc.core.chunking import default_threads

AVG_SIZE, MIN_SIZE, MAX_SIZE = 2048, 512, 8192
PARAMS = cdc.ChunkParams(avg_size=AVG_SIZE, min_size=MIN_SIZE, max_size=MAX_SIZE)
DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/rustbook.jsonl.gz"
SEED_SUBSET_BYTES = 250_000  # leading documents up to this size: the seed runs at a few MB/s
TINY_DOCS = 100_000
TINY_SIZE = 64
BASELINE = "pyfastcdc"

# Targets from the project's brief.
TARGET_SINGLE = 1.0  # chunk_content, one thread, relative to pyfastcdc
TARGET_ONE_THREAD = 1.3  # chunk_many with threads=1 (issue 21: "stays at least 1.3x in one thread")
TARGET_PARALLEL = 1.6  # chunk_many on 2 threads, relative to pyfastcdc
TARGET_FIXED_US = 5.0
TARGET_COMPARE_MS = 1.0

Triples = list[list[tuple[int, int, bytes]]]  # per document: (offset, length, digest)


# --- input ---------------------------------------------------------------------------------


def load_corpus(path: Path) -> list[tuple[str, bytes]]:
    """(url, normalised content) per record, in file order.

    The raw records are dropped once normalised, so the many small objects of the parsed
    JSON do not make every garbage collection during timing slower.
    """
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [(record["url"], cdc.content_for_chunking(record))
                for record in map(json.loads, lines)]


def versions(name: str) -> str:
    """Installed version of a distribution, without importing it."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_scaling(threads: int, rounds: int) -> tuple[float, float]:
    """How much faster `threads` threads do CPU-bound work than one thread, here.

    The yardstick for the multi-thread rows. sha256 is compute-bound and releases the GIL.
    Two ways to split the work, both with a pool started beforehand as cdc's is:
    the calling thread takes one share and the pool the rest, or the pool does every
    share while the caller waits. cdc's batch calls work the first way. On this kind of VM the
    second can lose all its speedup in some processes: the woken idle workers tend to
    stay on one CPU. Returns the speedup of each, in that order.
    """
    block = bytes(4 << 20)

    def digest(_: object = None) -> bytes:
        return hashlib.sha256(block).digest()

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(abs, range(threads)))  # start the workers

        def caller_takes_a_share() -> None:
            futures = [pool.submit(digest) for _ in range(threads - 1)]
            digest()
            for future in futures:
                future.result()

        times = round_robin({
            "serial": lambda: [digest() for _ in range(threads)],
            "caller shares": caller_takes_a_share,
            "pool only": lambda: list(pool.map(digest, range(threads))),
        }, rounds)
    serial = statistics.median(times["serial"])
    return serial / statistics.median(times["caller shares"]), serial / statistics.median(times["pool only"])


def print_header(path: Path, corpus: list[tuple[str, bytes]], rounds: int) -> None:
    """Versions and machine first: numbers mean little without them."""
    total = sum(len(doc) for _, doc in corpus)
    print("cdc chunking benchmark")
    print(f"  Python {sys.version.split()[0]}, numpy {np.__version__}, numba {numba.__version__}, "
          f"xxhash {xxhash.VERSION}, pyfastcdc {versions('pyfastcdc')}, fastcdc {versions('fastcdc')}")
    threads = default_threads()
    print(f"  CPUs: {os.cpu_count()} (usable by this process: {threads})")
    if threads > 1:
        shared, pool_only = machine_scaling(threads, rounds)
        print(f"  yardstick: CPU-bound work (sha256) on {threads} threads vs one: {shared:.2f}x with "
              f"the caller taking a share, {pool_only:.2f}x with idle pool workers doing it all; "
              f"ideal {threads}x (cdc's batch calls take a share)")
    print(f"  corpus: {path}")
    print(f"  {len(corpus):,} documents, {len({url for url, _ in corpus})} URLs, "
          f"{total / 1e6:.1f} MB normalised; params avg {AVG_SIZE}, min {MIN_SIZE}, max {MAX_SIZE}")
    print()


# --- peers ---------------------------------------------------------------------------------


@dataclass
class Peer:
    """One way of turning documents into chunks with digests, timed as a whole."""

    name: str
    run: Callable[[], object]
    input_bytes: int
    count_chunks: Callable[[object], int]
    note: str = ""


def count_nested(result) -> int:
    return sum(len(chunks) for chunks in result)


def count_batch(batch) -> int:
    return len(batch.records)


def pyfastcdc_peer(docs: Sequence[bytes], total: int) -> Peer | str:
    """pyfastcdc's Cython chunker; its chunks carry a memoryview, digested without a copy."""
    try:
        from pyfastcdc.cy import FastCDC
    except ImportError as exc:
        return f"pyfastcdc: Cython build not importable ({exc}); no baseline, ratios are n/a"
    chunker = FastCDC(AVG_SIZE, min_size=MIN_SIZE, max_size=MAX_SIZE)
    digest = xxhash.xxh3_128_digest  # a local name: spares the peer a global lookup per chunk

    def run() -> Triples:
        return [[(c.offset, c.length, digest(c.data)) for c in chunker.cut_buf(doc)] for doc in docs]

    return Peer(BASELINE, run, total, count_nested, "Cython, normalized_chunking=1; tuples")


def fastcdc_peer(docs: Sequence[bytes], total: int) -> Peer | str:
    """fastcdc (PyPI) 1.7's Cython `fastcdc_cy`, which takes bytes directly.

    Its own ways to get at a chunk's bytes cost more than ours: `fat=True` copies each
    chunk into a new bytes object, and `hf=` returns a hex string. So it runs with neither
    and each chunk is digested from a memoryview slice of the document, as pyfastcdc's is.
    Its package __init__ falls back to pure Python silently (a coloured note only); the
    compiled module is imported directly so that a missing build is reported, not timed.
    """
    try:
        from fastcdc.fastcdc_cy import fastcdc_cy
    except ImportError as exc:
        return f"fastcdc: Cython implementation missing (fastcdc.fastcdc_cy: {exc}); not measured"
    digest = xxhash.xxh3_128_digest

    def chunks_of(doc: bytes) -> list[tuple[int, int, bytes]]:
        view = memoryview(doc)
        return [(c.offset, c.length, digest(view[c.offset:c.offset + c.length]))
                for c in fastcdc_cy(doc, min_size=MIN_SIZE, avg_size=AVG_SIZE, max_size=MAX_SIZE)]

    def run() -> Triples:
        return [chunks_of(doc) for doc in docs]

    return Peer("fastcdc (PyPI)", run, total, count_nested, "fastcdc_cy: Cython generator; tuples")


def seed_subset(docs: list[bytes]) -> list[bytes]:
    """The leading documents that make up about SEED_SUBSET_BYTES: all the seed has time for."""
    subset, size = [], 0
    for doc in docs:
        if size >= SEED_SUBSET_BYTES:
            break
        subset.append(doc)
        size += len(doc)
    return subset


def build_peers(docs: list[bytes]) -> tuple[list[Peer], list[str]]:
    """All peers over the same documents, and notes about those that could not run."""
    total = sum(map(len, docs))
    cores = default_threads()
    seed_docs = seed_subset(docs)
    seed_bytes = sum(map(len, seed_docs))
    peers = [
        Peer("cdc.chunk_content", lambda: [cdc.chunk_content(doc, PARAMS) for doc in docs],
             total, count_nested, "per document, 1 thread; a Chunks (array-backed) each"),
        Peer("cdc.chunk_content + tuples", lambda: [list(cdc.chunk_content(doc, PARAMS)) for doc in docs],
             total, count_nested, "context: the same, each Chunks iterated into Chunk tuples"),
        Peer("cdc.chunk_many", lambda: cdc.chunk_many(docs, PARAMS),
             total, count_nested, f"all {cores} cores; a Chunks each"),
        Peer("cdc.chunk_many threads=1", lambda: cdc.chunk_many(docs, PARAMS, threads=1),
             total, count_nested, "1 thread; a Chunks each"),
        Peer("cdc.chunk_batch", lambda: cdc.chunk_batch(docs, PARAMS),
             total, count_batch, f"flat arrays of all documents, all {cores} cores"),
        Peer("cdc.chunk_batch threads=1", lambda: cdc.chunk_batch(docs, PARAMS, threads=1),
             total, count_batch, "context: the kernels alone, 1 thread"),
    ]
    notes = []
    for make in (pyfastcdc_peer, fastcdc_peer):
        peer = make(docs, total)
        if isinstance(peer, Peer):
            peers.append(peer)
        else:
            notes.append(peer)
    peers.append(Peer(
        "seed (pure Python)",
        lambda: [seed.chunk_content(doc, AVG_SIZE, MIN_SIZE, MAX_SIZE) for doc in seed_docs],
        seed_bytes, count_nested,
        f"subset: first {len(seed_docs)} docs, {seed_bytes / 1e6:.2f} MB; BLAKE2b hex digests",
    ))
    return peers, notes


# --- correctness before timing -------------------------------------------------------------


def fail(message: str) -> None:
    """Stop the benchmark: timing code that gives wrong chunks is meaningless."""
    raise SystemExit(f"FAIL: {message}")


def check_triples(name: str, docs: Sequence[bytes], result: Triples, check_digests: bool) -> None:
    """Chunks must tile each document; digests, where XXH3-128, must be of those bytes."""
    if len(result) != len(docs):
        fail(f"{name}: {len(result)} chunk lists for {len(docs)} documents")
    for i, (doc, chunks) in enumerate(zip(docs, result, strict=True)):
        at = 0
        for offset, length, digest in chunks:
            if offset != at or length <= 0:
                fail(f"{name}: document {i}: chunk at {offset} (length {length}), expected {at}")
            if check_digests and digest != xxhash.xxh3_128_digest(doc[offset:offset + length]):
                fail(f"{name}: document {i}: digest of the chunk at {offset} is not its XXH3-128")
            at += length
        if at != len(doc):
            fail(f"{name}: document {i}: chunks cover {at} of {len(doc)} bytes")


def verify(peers: list[Peer], docs: list[bytes]) -> dict[str, object]:
    """Run every peer once (also the warm-up), check outputs; return results for counting."""
    results = {peer.name: peer.run() for peer in peers}
    reference = results["cdc.chunk_content"]
    for name in ("cdc.chunk_content + tuples", "cdc.chunk_many", "cdc.chunk_many threads=1"):
        if results[name] != reference:
            fail(f"{name} disagrees with cdc.chunk_content")
    for name in ("cdc.chunk_batch", "cdc.chunk_batch threads=1"):
        batch = results[name]
        if [batch.chunks_of(i) for i in range(len(docs))] != reference:
            fail(f"{name} disagrees with cdc.chunk_content")
    check_triples("cdc.chunk_content", docs,
                  [[(c.offset, c.length, c.digest) for c in chunks] for chunks in reference], True)
    for name in (BASELINE, "fastcdc (PyPI)"):
        if name in results:
            check_triples(name, docs, results[name], True)
    check_triples("seed", seed_subset(docs),
                  [[(c.offset, c.length, c.digest) for c in chunks]
                   for chunks in results["seed (pure Python)"]], False)
    print("correctness: chunk_content, chunk_many and chunk_batch (all cores, 1 thread) agree "
          "(offsets, lengths, digests); every peer's chunks tile each document with true digests")
    print()
    return results


# --- timing --------------------------------------------------------------------------------


def timed(run: Callable[[], object]) -> float:
    """Seconds for one call, after a full collection; the result is freed outside the timing."""
    gc.collect()
    start = time.perf_counter()
    result = run()
    elapsed = time.perf_counter() - start
    del result
    return elapsed


def round_robin(runs: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Each callable once per round, for `rounds` rounds, so drift and noise hit all alike.

    The starting point rotates each round, so no callable always runs right after another.
    """
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(timed(runs[name]))
    return times


def throughput_table(peers: list[Peer], times: dict[str, list[float]],
                     results: dict[str, object]) -> dict[str, float]:
    """Print the table; return the median MB/s by peer name."""
    median_rate = {p.name: p.input_bytes / 1e6 / statistics.median(times[p.name]) for p in peers}
    base = median_rate.get(BASELINE)
    print(f"{'peer':<26} {'MB/s':>8} {'spread (min-max)':>18} {'chunks':>8} {'mean B':>7} "
          f"{'x ' + BASELINE:>11}  note")
    for peer in peers:
        rates = [peer.input_bytes / 1e6 / t for t in times[peer.name]]
        chunks = peer.count_chunks(results[peer.name])
        ratio = format_ratio(median_rate[peer.name] / base) if base else "n/a"
        print(f"{peer.name:<26} {median_rate[peer.name]:>8.1f} "
              f"{f'{min(rates):.1f}-{max(rates):.1f}':>18} {chunks:>8,} "
              f"{peer.input_bytes / chunks:>7.0f} {ratio:>11}  {peer.note}")
    return median_rate


def format_ratio(ratio: float) -> str:
    """Two decimals, or two significant digits for the seed's tiny ratio."""
    return f"{ratio:.2f}" if ratio >= 0.01 else f"{ratio:.2g}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def print_throughput_targets(rates: dict[str, float]) -> None:
    base = rates.get(BASELINE)
    if not base:
        print("targets relative to pyfastcdc: SKIP (pyfastcdc not available)")
        return
    single = rates["cdc.chunk_content"] / base
    print(f"target: chunk_content single thread >= {TARGET_SINGLE}x pyfastcdc: "
          f"{single:.2f}x  {verdict(single >= TARGET_SINGLE)}")
    one_thread = rates["cdc.chunk_many threads=1"] / base
    print(f"target: chunk_many in one thread >= {TARGET_ONE_THREAD}x pyfastcdc: "
          f"{one_thread:.2f}x  {verdict(one_thread >= TARGET_ONE_THREAD)}")
    cores = default_threads()
    parallel = rates["cdc.chunk_many"] / base
    caveat = "" if cores == 2 else f" (measured on {cores} threads, not 2)"
    print(f"target: chunk_many on 2 threads >= {TARGET_PARALLEL}x pyfastcdc: "
          f"{parallel:.2f}x{caveat}  {verdict(parallel >= TARGET_PARALLEL)}")


def measure_throughput(docs: list[bytes], rounds: int) -> None:
    peers, notes = build_peers(docs)
    results = verify(peers, docs)
    print(f"== chunk + XXH3-128 throughput: median of {rounds} rounds, peers interleaved ==")
    times = round_robin({peer.name: peer.run for peer in peers}, rounds)
    rates = throughput_table(peers, times, results)
    print("  returns: cdc.chunk_content and chunk_many a cdc.Chunks per document (one array of "
          "records; a Chunk tuple made when one is read); chunk_batch flat arrays; pyfastcdc and "
          "fastcdc a list of (offset, length, digest) tuples per document; '+ tuples' also reads "
          "every cdc chunk as a tuple")
    for note in notes:
        print(f"  note: {note}")
    print()
    print_throughput_targets(rates)
    print()


def measure_fixed_cost(rounds: int) -> None:
    """Per-document overhead of chunk_many, where chunking itself costs next to nothing.

    A 64-byte document is below min_size, so it is one chunk and one digest; an empty one
    is no chunk at all. What remains is the per-call bookkeeping per document.
    """
    rng = random.Random(0)
    tiny = [rng.randbytes(TINY_SIZE) for _ in range(TINY_DOCS)]
    empty = [b""] * TINY_DOCS
    runs = {
        f"chunk_many, {TINY_SIZE}-byte docs": lambda: cdc.chunk_many(tiny, PARAMS),
        f"chunk_many, {TINY_SIZE}-byte docs, threads=1": lambda: cdc.chunk_many(tiny, PARAMS, threads=1),
        "chunk_many, empty docs": lambda: cdc.chunk_many(empty, PARAMS),
        f"chunk_batch, {TINY_SIZE}-byte docs (for context)": lambda: cdc.chunk_batch(tiny, PARAMS),
    }
    for run in runs.values():
        run()  # warm-up, untimed
    times = round_robin(runs, rounds)
    print(f"== fixed cost per document: {TINY_DOCS:,} documents per call, median of {rounds} ==")
    per_doc = {}
    for name, seconds in times.items():
        per_doc[name] = statistics.median(seconds) / TINY_DOCS * 1e6
        print(f"{name:<42} {per_doc[name]:6.2f} us/doc  "
              f"(spread {min(seconds) / TINY_DOCS * 1e6:.2f}-{max(seconds) / TINY_DOCS * 1e6:.2f})")
    worst = max(per_doc[f"chunk_many, {TINY_SIZE}-byte docs"], per_doc["chunk_many, empty docs"])
    print(f"target: fixed cost per document <= {TARGET_FIXED_US:g} us (chunk_many, worse of "
          f"{TINY_SIZE}-byte and empty): {worst:.2f} us  {verdict(worst <= TARGET_FIXED_US)}")
    print()


# --- compare -------------------------------------------------------------------------------


def consecutive_pairs(corpus: list[tuple[str, bytes]]) -> list[tuple[list, list, bytes, bytes]]:
    """(old chunks, new chunks, old text, new text) for each URL's consecutive versions."""
    by_url: dict[str, list[bytes]] = {}
    for url, doc in corpus:
        by_url.setdefault(url, []).append(doc)
    pairs = []
    for texts in by_url.values():
        chunks = cdc.chunk_many(texts, PARAMS)
        pairs += zip(chunks, chunks[1:], texts, texts[1:], strict=False)
    return pairs


def time_pairs(pairs, compare_one: Callable, passes: int) -> list[float]:
    """Seconds per pair: the median over `passes` passes through all pairs.

    One collection before each pass, not before each pair: a full collection per pair
    would cost more than the comparisons and hide nothing the pass does not show.
    """
    per_pass = []
    for _ in range(passes):
        gc.collect()
        seconds = []
        for pair in pairs:
            start = time.perf_counter()
            compare_one(*pair)
            seconds.append(time.perf_counter() - start)
        per_pass.append(seconds)
    return [statistics.median(column) for column in zip(*per_pass, strict=True)]


def describe_ms(label: str, seconds: list[float]) -> float:
    ms = np.array(seconds) * 1e3
    median = float(np.median(ms))
    print(f"{label:<46} median {median:6.3f}  mean {ms.mean():6.3f}  "
          f"p95 {np.percentile(ms, 95):6.3f}  max {ms.max():7.3f}  ms")
    return median


def measure_compare(corpus: list[tuple[str, bytes]], passes: int) -> None:
    """cdc.compare with word edits on real consecutive versions, with cheaper references."""
    pairs = consecutive_pairs(corpus)
    unchanged = sum(1 for old, new, _, _ in pairs if old == new)
    print(f"== compare per consecutive pair of versions: {len(pairs):,} pairs "
          f"({unchanged} with identical chunks), median of {passes} passes per pair ==")

    def with_edits(old, new, old_text, new_text):
        return cdc.compare(old, new, old_text=old_text, new_text=new_text)

    def chunks_only(old, new, old_text, new_text):
        return cdc.compare(old, new)

    def seed_compare(old, new, old_text, new_text):
        return seed.compare(old, new)  # the seed's compare reads only digest, offset, length

    median = describe_ms("cdc.compare with edits (texts given)", time_pairs(pairs, with_edits, passes))
    describe_ms("cdc.compare chunks only (reference)", time_pairs(pairs, chunks_only, passes))
    # The seed's compare reads lists of chunks; given Chunks, it would time their tuples twice.
    listed = [(list(old), list(new), old_text, new_text) for old, new, old_text, new_text in pairs]
    describe_ms("seed compare, digest sets (reference)", time_pairs(listed, seed_compare, passes))
    print(f"target: compare with edits median <= {TARGET_COMPARE_MS:g} ms: "
          f"{median:.3f} ms  {verdict(median <= TARGET_COMPARE_MS)}")
    print()


# --- Numba compile time --------------------------------------------------------------------

CHILD = """
import json, time
start = time.perf_counter()
import cdc
imported = time.perf_counter()
cdc.chunk_content(b"x" * 10000)
first_call = time.perf_counter()
stats = cdc.core.gear._cut.stats  # live counters: read them before chunk_many adds its own
hits, misses = sum(stats.cache_hits.values()), sum(stats.cache_misses.values())
cdc.chunk_many([b"x" * 10000])
first_many = time.perf_counter()
print(json.dumps({
    "import": imported - start,
    "first_call": first_call - imported,
    "first_many": first_many - first_call,
    "hits": hits,
    "misses": misses,
    "cache_path": stats.cache_path,
}))
"""


AHEAD_OF_TIME_CHILD = """
import json, sys, time
start = time.perf_counter()
import cdc
imported = time.perf_counter()
cdc.chunk_content(b"x" * 10000)
first_call = time.perf_counter()
print(json.dumps({"import": imported - start, "first_call": first_call - imported,
                  "built": cdc.core.compiled.AHEAD_OF_TIME is not None, "numba": "numba" in sys.modules}))
"""


def run_child(cache_dir: str, code: str = CHILD, kernels: str = "jit") -> dict:
    """One fresh interpreter with NUMBA_CACHE_DIR set and the kernels from the JIT (or as
    `cdc.core.compiled` finds them: `kernels=""`); returns the child's timings."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, CDC_KERNELS=kernels)
    env.pop("NUMBA_DISABLE_JIT", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        fail(f"compile-time subprocess failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cache_files(cache_dir: str) -> dict[str, float]:
    return {str(p.relative_to(cache_dir)): p.stat().st_mtime_ns
            for p in Path(cache_dir).rglob("*") if p.is_file()}


def measure_compile() -> None:
    """First-call cost with an empty cache (compiles) and with that cache filled (loads).

    NUMBA_CACHE_DIR only moves where `cache=True` kernels keep their cache, so a fresh
    directory forces a compile; the file listing and Numba's own hit/miss counters show
    that the cold run compiled and the warm run loaded.
    """
    with tempfile.TemporaryDirectory(prefix="cdc-numba-cache-") as cache_dir:
        before = cache_files(cache_dir)
        cold = run_child(cache_dir)
        after_cold = cache_files(cache_dir)
        warm = run_child(cache_dir)
        after_warm = cache_files(cache_dir)
        ahead = run_child(cache_dir, AHEAD_OF_TIME_CHILD, kernels="")
    print("== Numba first call, fresh interpreter, NUMBA_CACHE_DIR = a new temporary directory ==")
    for label, child in (("cold (compile, write cache)", cold), ("warm (load from cache)", warm)):
        print(f"{label:<28} import cdc {child['import'] * 1e3:7.0f} ms   first chunk_content "
              f"{child['first_call'] * 1e3:7.0f} ms   then first chunk_many "
              f"{child['first_many'] * 1e3:6.0f} ms   (_cut cache hits {child['hits']}, "
              f"misses {child['misses']})")
    compiled = not before and bool(after_cold) and cold["misses"] > 0
    loaded = warm["hits"] > 0 and warm["misses"] == 0 and after_warm == after_cold
    print(f"check: cache dir empty before the cold run, {len(after_cold)} files after it, "
          f"{'unchanged' if after_warm == after_cold else 'CHANGED'} by the warm run: "
          f"cold run compiled {'yes' if compiled else 'NO'}, warm run loaded from cache "
          f"{'yes' if loaded else 'NO'}")
    if ahead["built"]:
        print(f"{'ahead of time (cdc.core.aot)':<28} import cdc {ahead['import'] * 1e3:7.0f} ms   "
              f"first chunk_content {ahead['first_call'] * 1e3:7.0f} ms   "
              f"Numba imported: {'yes' if ahead['numba'] else 'no'}")
    else:
        print("ahead of time: not built here (python -m cdc.core.aot)")
    print()


# --- main ----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help="JSON lines (gzip) of page records (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=None,
                        help="rounds per measurement (default: 9, or 3 with --quick)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds: a smoke check")
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 3 if args.quick else 9
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if numba.config.DISABLE_JIT:
        raise SystemExit("NUMBA_DISABLE_JIT is set: cdc would run as plain Python; unset it to benchmark")
    if not args.corpus.is_file():
        raise SystemExit(f"corpus not found: {args.corpus} (pass --corpus PATH)")
    corpus = load_corpus(args.corpus)
    if not corpus:
        raise SystemExit(f"corpus is empty: {args.corpus}")
    started = time.perf_counter()
    print_header(args.corpus, corpus, args.runs)
    measure_throughput([doc for _, doc in corpus], args.runs)
    measure_fixed_cost(args.runs)
    measure_compare(corpus, 1 if args.quick else 3)
    measure_compile()
    print(f"total benchmark time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
