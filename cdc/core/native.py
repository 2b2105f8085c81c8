"""Helpers for the kernels: XXH3 digests of byte ranges, a byte search, views of raw buffers.

The chunking kernel digests every chunk while the bytes are still in cache, without a
round trip to Python per chunk. Compiled, it calls `XXH3_128bits` from the C library that
the `xxhash` package already ships (its extension module exports the symbol): through a
Numba intrinsic under the JIT (`cdc.core.native_jit`), by that symbol's name in the kernels
compiled ahead of time (`cdc.core.compiled`). As plain Python (`NUMBA_DISABLE_JIT=1`), the
functions here run `xxhash.xxh3_128_digest`, which is the reference the tests compare
against.

The byte search is C's `memchr` the same way (libc's, vectorised): the chunking kernel finds
each block's newline with it, which a byte-at-a-time loop did at a fifth of the speed.

The digest is the canonical (big-endian) form, byte for byte what
`xxhash.xxh3_128_digest` returns: the high 64 bits first.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import xxhash

from cdc.core.compiled import AHEAD_OF_TIME


def xxh3_128_record(data, start: int, length: int, records: np.ndarray, row: int) -> None:
    """Write the XXH3-128 digest of `data[start:start + length]` into the int64 `records`,
    row `row`, columns 3 and 4: the 16 digest bytes in order, as a chunk record holds them.

    `data` is `bytes` or a uint8 array.
    """
    digest = xxhash.xxh3_128_digest(bytes(data[start:start + length]))
    records[row, 3:5] = np.frombuffer(digest, records.dtype)


def xxh3_64_of(data, start: int, length: int) -> int:
    """The low 64 bits of the XXH3-128 digest of `data[start:start + length]`: a word's
    identity when two texts are diffed word by word."""
    return int.from_bytes(xxhash.xxh3_128_digest(bytes(data[start:start + length]))[8:], "big")


def find_byte(data, byte: int, first: int, stop: int) -> int:
    """The first position in [first, stop) of `data` holding `byte`, or -1 (C's `memchr`).

    `data` is `bytes` or a uint8 array.
    """
    if type(data) is bytes:
        return data.find(byte, first, stop)
    found = data[first:stop].tobytes().find(byte) if first < stop else -1
    return found + first if found >= 0 else -1


# CPython keeps a bytes object's data at a fixed offset from the object; checked below
# against ctypes so another interpreter falls back to the slower, general route.
_BYTES_DATA_OFFSET = sys.getsizeof(b"") - 1


def _bytes_offset_holds() -> bool:
    probe = b"cdc probe"
    return ctypes.cast(probe, ctypes.c_void_p).value == id(probe) + _BYTES_DATA_OFFSET


_FAST_BYTES_ADDRESS = _bytes_offset_holds()


def buffer_address(data: bytes | np.ndarray) -> int:
    """Address of the first byte of a `bytes` object or a contiguous uint8 array.

    The caller keeps `data` alive for as long as the address is used.
    """
    if type(data) is bytes:
        if _FAST_BYTES_ADDRESS:
            return id(data) + _BYTES_DATA_OFFSET
        return ctypes.cast(data, ctypes.c_void_p).value
    return data.__array_interface__["data"][0]


def byte_view(address: int, length: int) -> np.ndarray:
    """A read-only uint8 array over `length` bytes at `address` (no copy)."""
    if length == 0:
        return np.empty(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * int(length)).from_address(int(address)))


if AHEAD_OF_TIME is None:  # the JIT compiles the kernels: teach it these helpers
    import cdc.core.native_jit  # noqa: F401
