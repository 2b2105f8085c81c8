"""The Gear rolling hash and the cut kernels: where chunks end (`cdc.core.chunking` has the
rules and why; this module the parameters, the gear table and the compiled loops).

The kernels are Numba functions compiled ahead of time (`cdc.core.aot`) or by the JIT; under
`NUMBA_DISABLE_JIT=1` they run as plain Python, the reference the tests compare against.
They release the GIL, so `chunk_many`'s threads cut in parallel, and write one record per
chunk (`cdc.core.chunks.RECORD`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdc.core.compiled import AHEAD_OF_TIME, njit
from cdc.core.native import byte_view, find_byte, xxh3_128_record

ALGORITHM = "gear64-v2"  # the gear table of v1; block-aligned cuts (v1 cut the byte stream alone)
DIGEST_NAME = "xxh3-128"
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
    final_settings: np.ndarray = field(init=False, repr=False, compare=False)

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
        object.__setattr__(self, "final_settings", self.kernel_settings(final=True))

    def kernel_settings(self, final: bool, at_block: bool = True) -> np.ndarray:
        """What the kernel needs to know, as one array (see `_cut`)."""
        settings = np.array([self.min_size, self.max_size, self.boundary_bits, final, at_block], np.int64)
        settings.flags.writeable = False
        return settings

    @property
    def spec(self) -> str:
        return (
            f"{ALGORITHM}/{self.avg_size}/{self.min_size}/{self.max_size}/{DIGEST_NAME}"
        )


DEFAULT_PARAMS = ChunkParams()


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




_NEWLINE = 10


@njit(inline="always")
def _newline(data, first, stop):
    """The first newline in [first, stop), or -1."""
    return find_byte(data, _NEWLINE, first, stop)


@njit(inline="always")
def _long_end(data, start, n, min_size, max_size, threshold, final, clear):
    """The end of a chunk: the newline that ends its block, a Gear boundary before it, or
    `max_size`; -1 while the bytes given do not decide it. The newline is searched for from
    `clear` on (past the empty lines before a block, or where an earlier search stopped, so
    a block with no newline for megabytes is searched once, not once per chunk); also
    returned: where this search stopped."""
    limit = min(start + max_size, n)
    newline = _newline(data, max(start, clear), limit)
    last = newline if newline >= 0 else limit - 1
    searched = newline if newline >= 0 else limit
    if start + min_size - 1 <= last:
        boundary = _find_boundary(data, start + min_size - 1, last, threshold)
        if boundary >= 0:
            return boundary + 1, searched
    if newline >= 0:
        return newline + 1, searched
    if start + max_size <= n:
        return start + max_size, searched
    return (n if final else -1), searched


@njit(inline="always")
def _text_start(data, first, stop):
    """The first byte in [first, stop) that is not a newline, or `stop`: where the block at
    `first` begins, past any empty lines (raw input has them; normalised text does not)."""
    for i in range(first, stop):
        if data[i] != _NEWLINE:
            return i
    return stop


@njit(cache=True, nogil=True)
def _cut(data, settings, records):
    """Cut `data` into chunks, write one record per chunk (see RECORD), return the count.

    `data` is `bytes` or a uint8 array; `records` is int64 with RECORD_FIELDS columns and at
    least `_capacity(len(data))` rows (-1 is returned if it has too few). `settings` is
    `ChunkParams.kernel_settings`: min and max size, boundary bits, whether the input is
    complete, and whether it starts at a block's start (the streaming chunker's input may
    start inside a block). When the input is not complete, a trailing chunk whose end is not
    yet decided is left out (the streaming chunker keeps those bytes for the next call).
    Few arguments on purpose: each one costs time in Numba's dispatcher, once per page.
    """
    min_size, max_size, threshold_bits, final = settings[0], settings[1], settings[2], settings[3]
    at_block = settings[4] != 0
    threshold = np.uint64(1) << np.uint64(64 - threshold_bits)
    n = len(data)
    start = 0
    count = 0
    clear = 0  # where the next newline search starts (none ends a block in [start, clear))
    while start < n:
        if at_block:  # empty lines go with the block after them
            clear = max(clear, _text_start(data, start, min(start + max_size, n)))
        end, clear = _long_end(data, start, n, min_size, max_size, threshold, final, clear)
        if end < 0:
            break
        if count == records.shape[0]:
            return -1
        records[count, 0] = count
        records[count, 1] = start
        records[count, 2] = end - start
        xxh3_128_record(data, start, end - start, records, count)
        count += 1
        at_block = data[end - 1] == _NEWLINE
        start = end
    return count


@njit(cache=True, nogil=True)
def _cut_documents(addresses, lengths, first, stop, settings, records, counts):
    """Chunk documents `first` to `stop - 1` into `records`, one after another, each one's
    chunk count into `counts`. Returns `stop`, or the first document whose chunks did not fit
    (its count left unset; the caller gives it more room and calls again from there)."""
    k = 0
    for doc in range(first, stop):
        data = byte_view(addresses[doc], lengths[doc])
        count = _cut(data, settings, records[k:])
        if count < 0:
            return doc
        counts[doc] = count
        k += count
    return stop


if AHEAD_OF_TIME is not None:  # the same kernels, compiled by `python -m cdc.core.aot`
    _cut, _cut_documents = AHEAD_OF_TIME.cut, AHEAD_OF_TIME.cut_documents
