"""The chunks of a document: `Chunk`, one chunk as a named tuple, and `Chunks`, the
immutable sequence of them that the chunking calls return, held as the kernel's records.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import NamedTuple

import numpy as np

DIGEST_SIZE = 16

# A chunk record, as the kernels write it and `struct` reads it back into Chunk tuples:
# index, offset, length (int64 each), then the 16 digest bytes.
RECORD_FIELDS = 5  # int64 words per record
RECORD = struct.Struct(f"=qqq{DIGEST_SIZE}s")
DIGEST_AT = 24  # byte offset of the digest within a record
_PLACE = struct.Struct("=8xqq")  # a record's offset and length, its index skipped
RECORD_DTYPE = np.dtype([("index", "=i8"), ("offset", "=i8"), ("length", "=i8"),
                         ("digest", f"V{DIGEST_SIZE}")])  # the same, as NumPy reads it


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


def chunks_from_lengths(digests: Sequence[bytes] | bytes, lengths: Sequence[int]) -> Chunks:
    """The chunks a stored digest list and length list describe: offsets follow from lengths.
    `digests` is a sequence of 16-byte digests, or them end to end in one `bytes` (as the
    store keeps them). A `Chunks`, built as columns: compare reads its columns without a
    `Chunk` per chunk, where a list of them took its slow path."""
    blob = bytes(digests) if isinstance(digests, (bytes, bytearray, memoryview)) else b"".join(digests)
    count = min(len(lengths), len(blob) // DIGEST_SIZE)
    records = np.empty(count, RECORD_DTYPE)
    sizes = np.asarray(lengths[:count], np.int64)
    records["index"] = np.arange(count)
    records["length"] = sizes
    records["offset"] = np.cumsum(sizes) - sizes
    records["digest"] = np.frombuffer(blob, f"V{DIGEST_SIZE}", count)
    return Chunks(records.tobytes())


def stored_columns(chunks: Sequence[Chunk]) -> tuple[bytes, list[int]]:
    """A page's chunks as the store keeps them: the digests end to end, and the lengths.
    From a `Chunks`, read off its columns, not through a tuple per chunk."""
    if isinstance(chunks, Chunks):
        return chunks.digests.tobytes(), chunks.lengths.tolist()
    return b"".join([chunk.digest for chunk in chunks]), [chunk.length for chunk in chunks]


class Chunks(Sequence[Chunk]):
    """The chunks of one document, in order: an immutable sequence of `Chunk`.

    Held as the kernel's records, packed in one bytes-like buffer (see RECORD), not as an
    object per chunk: on the corpus, building 265,000 Chunk tuples cost more than cutting and
    digesting the text. A `Chunk` is made when one is read (by index or by iterating);
    length, slicing and equality work as on a list, and a `Chunks` equals the list of the
    same chunks. Callers that want arrays read `offsets`, `lengths` and `digests`
    (read-only NumPy views, no copy).
    """

    __slots__ = ("_data",)

    def __init__(self, data: bytes | memoryview = b""):
        """`data`: records packed as RECORD, read-only (`bytes`, or a read-only memoryview)."""
        self._data = data

    def __len__(self) -> int:
        return len(self._data) // RECORD.size

    def __getitem__(self, item):
        size = RECORD.size
        if isinstance(item, slice):
            rows = range(len(self))[item]
            if rows.step == 1:
                return Chunks(self._data[rows.start * size:rows.stop * size])
            return Chunks(b"".join(self._data[i * size:(i + 1) * size] for i in rows))
        i = operator.index(item)
        count = len(self._data) // size
        if i < 0:
            i += count
        if not 0 <= i < count:
            raise IndexError("chunk index out of range")
        return _new_chunk(RECORD.unpack_from(self._data, i * size))

    def take(self, positions: Iterable[int]) -> list[Chunk]:
        """The chunks at these positions (each in range, not negative), without the
        checks of indexing one at a time."""
        size, data, unpack = RECORD.size, self._data, RECORD.unpack_from
        return [_new_chunk(unpack(data, i * size)) for i in positions]

    def view(self, start: int, stop: int) -> Chunks:
        """Chunks start..stop-1 (0 <= start <= stop <= len), without a copy: `self[start:stop]`
        without the slice's checks."""
        return Chunks(self._data[start * RECORD.size:stop * RECORD.size])

    @property
    def end(self) -> int:
        """Where the last chunk ends (0 without chunks), without making a `Chunk`: what
        `cdc.compare` checks against a text's length on every call."""
        if not self._data:
            return 0
        offset, length = _PLACE.unpack_from(self._data, len(self._data) - RECORD.size)
        return offset + length

    def __iter__(self) -> Iterator[Chunk]:
        return map(_new_chunk, RECORD.iter_unpack(self._data))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chunks):
            return self._data == other._data
        if isinstance(other, list):
            return len(other) == len(self) and list(self) == other
        return NotImplemented

    __hash__ = None  # equal to lists, which are not hashable

    def __repr__(self) -> str:
        return f"Chunks({list(self)!r})"

    def __reduce__(self):
        return Chunks, (bytes(self._data),)

    @property
    def table(self) -> np.ndarray:
        """The records as int64 rows of RECORD_FIELDS (index, offset, length, then the
        digest's two words), read-only, no copy."""
        return np.frombuffer(self._data, np.int64).reshape(-1, RECORD_FIELDS)

    def _column(self, column: int) -> np.ndarray:
        return self.table[:, column]

    @property
    def records(self) -> np.ndarray:
        """The records as a structured array (index, offset, length, digest), read-only,
        no copy: a field's `tolist()` gives the digests as `bytes` without a Chunk each."""
        return np.frombuffer(self._data, RECORD_DTYPE)

    @property
    def offsets(self) -> np.ndarray:
        """int64 per chunk, read-only."""
        return self._column(1)

    @property
    def lengths(self) -> np.ndarray:
        """int64 per chunk, read-only."""
        return self._column(2)

    @property
    def digests(self) -> np.ndarray:
        """uint8, shape (chunks, 16), read-only: each row a chunk's XXH3-128 digest."""
        return np.frombuffer(self._data, np.uint8).reshape(-1, RECORD.size)[:, DIGEST_AT:]


def packed(records: np.ndarray) -> memoryview:
    """The bytes of kernel records, read-only, without a copy: what a `Chunks` holds."""
    if not records.size:
        return memoryview(b"")  # a view with a zero in its shape cannot be cast
    return memoryview(records).cast("B").toreadonly()
