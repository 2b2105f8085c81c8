"""Content-defined chunking with a Gear rolling hash.

A boundary is declared after byte `p` when the top `log2(avg_size)` bits of the Gear hash
at `p` are all zero. The Gear hash shifts one bit per byte, so its 64 bits depend only on the
last 64 bytes: a boundary is a property of the 64 bytes before it, wherever the chunk started.
That is what makes an insertion local: the cut points after it land where they were.

Each chunk is at least `min_size` and at most `max_size` bytes (the last may be shorter).
The search for a chunk's end starts at `min_size - 1`, warming the hash over the 63 bytes
before it, so the skipped bytes cost nothing (FastCDC's cut-point skipping); the mean chunk
length is therefore about `min_size + avg_size`.

The kernels are compiled with Numba and release the GIL. Under `NUMBA_DISABLE_JIT=1` the
same source runs as plain Python: that is the reference the tests compare against.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np
from numba import njit

from cdc.native import buffer_address, byte_view, xxh3_128_into

GEAR_TABLE_VERSION = "gear64-v1"
DIGEST_NAME = "xxh3-128"
DIGEST_SIZE = 16
WINDOW = 64  # bytes that determine the hash at a position

MIN_SIZE_FLOOR = WINDOW  # a smaller minimum would let a cut depend on the previous chunk
MAX_SIZE_CEILING = 1 << 30

_GEAR_SEED = 0x6364632D67656172  # "cdc-gear"
_MASK64 = (1 << 64) - 1


def _splitmix64(seed: int, count: int) -> list[int]:
    """The SplitMix64 sequence: a fixed, documented source for the gear table."""
    values = []
    for _ in range(count):
        seed = (seed + 0x9E3779B97F4A7C15) & _MASK64
        z = seed
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        values.append(z ^ (z >> 31))
    return values


GEAR = np.array(_splitmix64(_GEAR_SEED, 256), dtype=np.uint64)
GEAR.flags.writeable = False


@dataclass(frozen=True)
class ChunkParams:
    """Chunk size bounds, validated once. `avg_size` is a power of two."""

    avg_size: int = 2048
    min_size: int = 512
    max_size: int = 8192
    boundary_bits: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("avg_size", "min_size", "max_size"):
            value = getattr(self, name)
            if type(value) is not int:
                raise ValueError(f"{name} must be an int, got {value!r}")
        if self.avg_size < 1 or self.avg_size & (self.avg_size - 1):
            raise ValueError(f"avg_size must be a power of two, got {self.avg_size}")
        if self.min_size < MIN_SIZE_FLOOR:
            raise ValueError(f"min_size must be at least {MIN_SIZE_FLOOR}, got {self.min_size}")
        if self.max_size > MAX_SIZE_CEILING:
            raise ValueError(f"max_size must be at most {MAX_SIZE_CEILING}, got {self.max_size}")
        if not self.min_size <= self.avg_size <= self.max_size:
            raise ValueError(
                "need min_size <= avg_size <= max_size, got "
                f"{self.min_size}, {self.avg_size}, {self.max_size}"
            )

        # A boundary is a hash whose top `boundary_bits` bits are zero: log2(avg_size).
        object.__setattr__(self, "boundary_bits", self.avg_size.bit_length() - 1)

    @property
    def spec(self) -> str:
        return (
            f"{GEAR_TABLE_VERSION}/{self.avg_size}/{self.min_size}/{self.max_size}/{DIGEST_NAME}"
        )


DEFAULT_PARAMS = ChunkParams()


class Chunk(NamedTuple):
    """One chunk of a document: where it is and the XXH3-128 digest of its bytes.

    A named tuple rather than a dataclass: building one costs a third as much, and pages
    are chunked by the thousand (immutability and field access are the same).
    """

    index: int
    offset: int
    length: int
    digest: bytes

    @property
    def hex(self) -> str:
        return self.digest.hex()

    @property
    def end(self) -> int:
        return self.offset + self.length


_new_chunk = partial(tuple.__new__, Chunk)


# --- kernels -------------------------------------------------------------------------------

_ONE = np.uint64(1)
_TWO = np.uint64(2)
_THREE = np.uint64(3)
_FOUR = np.uint64(4)


@njit(inline="always")
def _gear(data, q, j):
    return GEAR[data[q + np.uintp(j)]]


@njit(inline="always")
def _roll4(h, g0, g1, g2, g3):
    """Hashes at the next four positions after one with hash `h`.

    The hash at `p + j` is `(h_p << j) + s_j`, where `s_j` sums the gear values of the `j`
    bytes after `p`. The sums do not depend on `h`, so the dependency carried from one
    step to the next is one shift and one add per four bytes, not per byte.
    """
    s1 = (g0 << _ONE) + g1
    s2 = (s1 << _ONE) + g2
    s3 = (s2 << _ONE) + g3
    return (h << _ONE) + g0, (h << _TWO) + s1, (h << _THREE) + s2, (h << _FOUR) + s3


@njit(cache=True, nogil=True)
def _find_boundary(data, first, last, threshold):
    """The first position in [first, last] whose hash is below `threshold`, or -1.

    Pure: it reads `data` and nothing else. The hash is warmed over the 63 bytes before
    `first`, so it is the same whatever came before them.
    """
    h = np.uint64(0)
    q = np.uintp(first - WINDOW + 1)
    stop = np.uintp(first)
    while q + np.uintp(3) < stop:
        h = _roll4(h, _gear(data, q, 0), _gear(data, q, 1), _gear(data, q, 2), _gear(data, q, 3))[3]
        q += np.uintp(4)
    while q < stop:
        h = (h << _ONE) + GEAR[data[q]]
        q += np.uintp(1)
    stop = np.uintp(last)
    while q + np.uintp(15) <= stop:  # sixteen positions per step, checked in order
        h0, h1, h2, h3 = _roll4(h, _gear(data, q, 0), _gear(data, q, 1), _gear(data, q, 2),
                                _gear(data, q, 3))
        h4, h5, h6, h7 = _roll4(h3, _gear(data, q, 4), _gear(data, q, 5), _gear(data, q, 6),
                                _gear(data, q, 7))
        h8, h9, h10, h11 = _roll4(h7, _gear(data, q, 8), _gear(data, q, 9), _gear(data, q, 10),
                                  _gear(data, q, 11))
        h12, h13, h14, h = _roll4(h11, _gear(data, q, 12), _gear(data, q, 13),
                                  _gear(data, q, 14), _gear(data, q, 15))
        if h0 < threshold:
            return np.intp(q + np.uintp(0))
        if h1 < threshold:
            return np.intp(q + np.uintp(1))
        if h2 < threshold:
            return np.intp(q + np.uintp(2))
        if h3 < threshold:
            return np.intp(q + np.uintp(3))
        if h4 < threshold:
            return np.intp(q + np.uintp(4))
        if h5 < threshold:
            return np.intp(q + np.uintp(5))
        if h6 < threshold:
            return np.intp(q + np.uintp(6))
        if h7 < threshold:
            return np.intp(q + np.uintp(7))
        if h8 < threshold:
            return np.intp(q + np.uintp(8))
        if h9 < threshold:
            return np.intp(q + np.uintp(9))
        if h10 < threshold:
            return np.intp(q + np.uintp(10))
        if h11 < threshold:
            return np.intp(q + np.uintp(11))
        if h12 < threshold:
            return np.intp(q + np.uintp(12))
        if h13 < threshold:
            return np.intp(q + np.uintp(13))
        if h14 < threshold:
            return np.intp(q + np.uintp(14))
        if h < threshold:
            return np.intp(q + np.uintp(15))
        q += np.uintp(16)
    while q <= stop:
        h = (h << _ONE) + GEAR[data[q]]
        if h < threshold:
            return np.intp(q)
        q += np.uintp(1)
    return -1


# A chunk record, as the kernels write it and `struct` reads it back into Chunk tuples:
# index, offset, length (int64 each), then the 16 digest bytes.
RECORD_FIELDS = 5  # int64 words per record
RECORD = struct.Struct("=qqq16s")
_DIGEST_AT = 24  # byte offset of the digest within a record


@njit(cache=True, nogil=True)
def _cut(data, min_size, max_size, threshold_bits, final, first_index, base_offset, records):
    """Cut `data` into chunks, write one record per chunk (see RECORD), return the count.

    `data` is `bytes` or a uint8 array; `records` is int64 with RECORD_FIELDS columns.
    With `final` false the bytes may continue, so a trailing chunk whose end is not yet
    decided is left out (the streaming chunker keeps those bytes for the next call).
    """
    threshold = np.uint64(1) << np.uint64(64 - threshold_bits)
    record_bytes = records.view(np.uint8)
    n = len(data)
    start = 0
    count = 0
    while start < n:
        end = -1
        if start + min_size <= n:
            last = min(start + max_size, n) - 1
            boundary = _find_boundary(data, start + min_size - 1, last, threshold)
            if boundary >= 0:
                end = boundary + 1
            elif start + max_size <= n:
                end = start + max_size
        if end < 0:
            if not final:
                break
            end = n
        records[count, 0] = first_index + count
        records[count, 1] = base_offset + start
        records[count, 2] = end - start
        xxh3_128_into(data, start, end - start, record_bytes[count, _DIGEST_AT:])
        count += 1
        start = end
    return count


@njit(cache=True, nogil=True)
def _cut_documents(addresses, lengths, first, stop, min_size, max_size, threshold_bits,
                   slots, records, counts):
    """Chunk documents `first` to `stop - 1`, each into its own run of record slots."""
    for doc in range(first, stop):
        data = byte_view(addresses[doc], lengths[doc])
        slot = slots[doc]
        counts[doc] = _cut(data, min_size, max_size, threshold_bits, True, 0, 0, records[slot:])


@njit(cache=True, nogil=True)
def _compact(slots, counts, records, dense):
    """Gather each document's records from its slots into one dense array."""
    k = 0
    for doc in range(counts.size):
        for i in range(slots[doc], slots[doc] + counts[doc]):
            dense[k] = records[i]
            k += 1


# --- public API ----------------------------------------------------------------------------


def _as_array(data) -> np.ndarray:
    """A uint8 view of bytes-like `data`; anything else is a TypeError naming the type."""
    if isinstance(data, (bytes, bytearray)):
        return np.frombuffer(data, np.uint8)
    if isinstance(data, memoryview):
        if not data.c_contiguous:
            data = data.tobytes()
        return np.frombuffer(data, np.uint8)
    raise TypeError(f"expected bytes, bytearray or memoryview, got {type(data).__name__}")


def _new_records(count: int) -> np.ndarray:
    return np.empty((count, RECORD_FIELDS), np.int64)


def _chunks(records: np.ndarray) -> list[Chunk]:
    """Chunk tuples from kernel records, unpacked in C."""
    return list(map(_new_chunk, RECORD.iter_unpack(records)))


_scratch = threading.local()


def _scratch_records(capacity: int) -> np.ndarray:
    """A per-thread record buffer, grown as needed and reused: no allocation per call."""
    records = getattr(_scratch, "records", None)
    if records is None or records.shape[0] < capacity:
        records = _scratch.records = _new_records(max(capacity, 1024))
    return records


def chunk_content(data: bytes, params: ChunkParams = DEFAULT_PARAMS) -> list[Chunk]:
    """Split `data` on content-defined boundaries; chunks tile it exactly."""
    if type(data) is not bytes:
        data = _as_array(data)
    records = _scratch_records(len(data) // params.min_size + 1)
    count = _cut(data, params.min_size, params.max_size, params.boundary_bits, True, 0, 0, records)
    return _chunks(records[:count])


@dataclass(frozen=True)
class ChunkBatch:
    """Chunks of many documents as flat arrays: the store's bulk path.

    Document `i` owns records `starts[i]` to `starts[i] + counts[i] - 1`. Each record
    holds index, offset (relative to the start of its document), length and digest.
    """

    counts: np.ndarray  # int64 per document
    starts: np.ndarray  # int64 per document: its first record
    records: np.ndarray  # int64, shape (chunks, 5)

    @property
    def offsets(self) -> np.ndarray:
        return self.records[:, 1]

    @property
    def lengths(self) -> np.ndarray:
        return self.records[:, 2]

    @property
    def digests(self) -> np.ndarray:
        """uint8, shape (chunks, 16)."""
        return self.records.view(np.uint8)[:, _DIGEST_AT:]

    def chunks_of(self, doc: int) -> list[Chunk]:
        start = int(self.starts[doc])
        return _chunks(self.records[start:start + int(self.counts[doc])])


_PARALLEL_MIN_BYTES = 1 << 18  # below this, starting a second thread costs more than it saves
_pool: ThreadPoolExecutor | None = None


def _thread_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="cdc-chunk")
    return _pool


def default_threads() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def chunk_batch(docs: Sequence[bytes], params: ChunkParams = DEFAULT_PARAMS,
                threads: int | None = None) -> ChunkBatch:
    """Chunk many documents in one call, in parallel threads that release the GIL."""
    keep_alive = []  # arrays made from non-bytes documents, alive until the kernels end
    addresses = np.empty(len(docs), np.uint64)
    lengths = np.empty(len(docs), np.int64)
    for i, doc in enumerate(docs):
        if type(doc) is not bytes:
            doc = _as_array(doc)
            keep_alive.append(doc)
        addresses[i] = buffer_address(doc)
        lengths[i] = len(doc)
    capacities = lengths // params.min_size + 1
    slots = np.zeros(len(docs), np.int64)
    np.cumsum(capacities[:-1], out=slots[1:])
    records = _new_records(int(capacities.sum()))
    counts = np.zeros(len(docs), np.int64)
    run = partial(_cut_documents, addresses, lengths, min_size=params.min_size,
                  max_size=params.max_size, threshold_bits=params.boundary_bits,
                  slots=slots, records=records, counts=counts)
    threads = threads or default_threads()
    total_bytes = int(lengths.sum())
    if threads <= 1 or len(docs) < 2 or total_bytes < _PARALLEL_MIN_BYTES:
        run(first=0, stop=len(docs))
    else:
        # Contiguous runs of documents with about equal bytes each.
        cut_at = np.searchsorted(np.cumsum(lengths), np.arange(1, threads) * (total_bytes / threads))
        edges = sorted({0, len(docs), *(int(c) + 1 for c in cut_at if c + 1 < len(docs))})
        futures = [_thread_pool().submit(run, first=lo, stop=hi) for lo, hi in itertools.pairwise(edges)]
        for future in futures:
            future.result()
    del keep_alive
    dense = np.empty((int(counts.sum()), RECORD_FIELDS), np.int64)
    _compact(slots, counts, records, dense)
    starts = np.zeros(len(docs), np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return ChunkBatch(counts, starts, dense)


def chunk_many(docs: Sequence[bytes], params: ChunkParams = DEFAULT_PARAMS,
               threads: int | None = None) -> list[list[Chunk]]:
    """`chunk_content` for each document, computed in parallel; same chunks, same order."""
    batch = chunk_batch(docs, params, threads)
    everything = _chunks(batch.records)
    return [everything[lo:lo + count]
            for lo, count in zip(batch.starts.tolist(), batch.counts.tolist())]


class Chunker:
    """Streaming chunker: feed bytes as they arrive, get the chunks that are complete.

    Emits exactly the chunks `chunk_content` gives for the concatenated input, however it
    is split, while holding at most about two `max_size` blocks of it.
    """

    def __init__(self, params: ChunkParams = DEFAULT_PARAMS):
        self.params = params
        self._pending = bytearray()  # bytes after the last emitted chunk
        self._offset = 0  # offset of _pending[0] in the whole input
        self._index = 0
        self._records = _new_records(2 * params.max_size // params.min_size + 1)
        self._finished = False

    def feed(self, data: bytes) -> list[Chunk]:
        """Take the next bytes; return the chunks they complete, in order."""
        if self._finished:
            raise ValueError("this Chunker is finished; make a new one")
        view = memoryview(_as_array(data))
        step = self.params.max_size
        chunks: list[Chunk] = []
        for lo in range(0, len(view), step):
            self._pending += view[lo:lo + step]
            chunks += self._emit(final=False)
        return chunks

    def finish(self) -> list[Chunk]:
        """Emit the last chunks; the Chunker cannot be fed again."""
        chunks = self._emit(final=True)
        self._finished = True
        return chunks

    def _emit(self, final: bool) -> list[Chunk]:
        pending = np.frombuffer(self._pending, np.uint8)
        count = _cut(pending, self.params.min_size, self.params.max_size,
                     self.params.boundary_bits, final, self._index, self._offset, self._records)
        del pending  # the bytearray cannot shrink while a view of it exists
        if count == 0:
            return []
        chunks = _chunks(self._records[:count])
        consumed = chunks[-1].end - self._offset
        del self._pending[:consumed]
        self._offset += consumed
        self._index += count
        return chunks
