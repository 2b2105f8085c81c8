"""Content-defined chunking of block-structured text with a Gear rolling hash.

The input is normalised text, one block per line (`cdc.core.normalize`): a paragraph, a list
item, a heading, a table row, a line of code or of navigation. Chunks follow the blocks:

- Every block ends a chunk at its newline: a paragraph, a banner, a navigation line, a
  menu's link or a lone `|` is a chunk of its own on every page, whatever surrounds it, so
  a host's template is found line by line. Empty lines (raw input has them; normalised text
  does not) go with the block after them.
- Inside a block longer than `min_size` the Gear rule cuts: a boundary falls after byte `p`
  when the top `log2(avg_size)` bits of the Gear hash at `p` are zero, searched from
  `min_size` bytes past the chunk's start (FastCDC's cut-point skipping, the hash warmed
  over the 63 bytes before). The Gear hash shifts one bit per byte, so its 64 bits depend
  only on the last 64 bytes: a boundary is a property of the bytes before it, wherever the
  chunk started. A block over `max_size` is cut at `max_size` where no boundary falls earlier.

Why every block: on two real crawls of a documentation site (`benchmarks/structure.py`),
navigation lines sit between page-specific lines (a breadcrumb's last step, the titles of
the previous and next pages). Merging runs of short blocks where a block's hash said so
(one end in 8 blocks, or in 2) left them in page-specific chunks on every page: none of the
site's navigation was found as boilerplate, and a banner re-cut the runs around it so that
a template-only change looked like a content change on 16-39% of pages. Merging only runs
of tiny blocks (under 8 bytes: `|`, `Note`) still did that on 7% of them. With every block
a chunk, navigation and banner are boilerplate on every page and every template-only page
compares unchanged; the cost is more chunks (about 105 a page on the corpus, 75 merged).

The invariants (tested): chunks tile the input; none is over `max_size`; every chunk but
the last is at least `min_size` or ends at a block end (a newline); streaming (`Chunker`)
gives the chunks one call gives, however the input is split; `chunk_many` and
`chunk_batch` give `chunk_content`'s chunks; the kernels compiled ahead of time, by the
JIT and run as plain Python cut at the same places. Time is linear in the input, and the
chunk count at most `_capacity` (half the bytes, plus two), whatever the input.

The kernels are compiled with Numba and release the GIL. Under `NUMBA_DISABLE_JIT=1` the
same source runs as plain Python: that is the reference the tests compare against. They
write one record per chunk (`cdc.core.chunks.RECORD`); `chunk_content` and `chunk_many` hand
them back as `Chunks`, which make a `Chunk` tuple only when one is read.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from cdc.core.chunks import DIGEST_AT, RECORD, RECORD_FIELDS, Chunk, Chunks, packed
from cdc.core.compiled import AHEAD_OF_TIME
from cdc.core.gear import DEFAULT_PARAMS, ChunkParams, _cut, _cut_documents
from cdc.core.native import buffer_address
from cdc.runtime.collector import collector_paused

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


def _capacity(length):
    """The most chunks `length` bytes can make (an int, or an array of them). Every chunk
    but the last holds a block's text and its newline (two bytes or more), or is cut inside
    a block after a chunk of min_size or more: at most length / 2 + 2."""
    return length // 2 + 2


_NO_SCRATCH = (_new_records(0), memoryview(b""))


def _chunks(records: np.ndarray) -> list[Chunk]:
    """Chunk tuples from kernel records, unpacked in C."""
    return list(Chunks(packed(records)))


_scratch = threading.local()  # per thread: a reusable record buffer and its bytes


def chunk_content(data: bytes, params: ChunkParams = DEFAULT_PARAMS) -> Chunks:
    """Split `data` on content-defined boundaries; chunks tile it exactly."""
    if type(data) is not bytes:
        data = _as_array(data)
    records, view = getattr(_scratch, "buffers", _NO_SCRATCH)
    if records.shape[0] < _capacity(len(data)):
        # grown as needed, then reused: its pages are written once, not once per page
        records = _new_records(max(_capacity(len(data)), 1024))
        view = memoryview(records).cast("B")
        _scratch.buffers = (records, view)
    count = _checked(_cut_entry(data)(data, params.final_settings, records))
    return Chunks(view[:count * RECORD.size].tobytes())


def _checked(count: int) -> int:
    """The kernels return -1 for a document whose chunks would not fit `_capacity`: never,
    if the bound holds; a broken bound is an error, not memory written out of bounds."""
    if count < 0:
        raise RuntimeError("cdc: more chunks than _capacity allows; this is a bug in cdc.core.chunking")
    return count


_bytes_entry: list = []  # `_cut`'s compiled entry point for `bytes` input, once known


def _cut_entry(data):
    """The fastest way to call `_cut` on `data`.

    For `bytes` (what pages are), `_cut`'s compiled entry point, found once: calling it skips
    Numba's dispatcher, which types every argument on every call (a third of the fixed cost
    of chunking one page). Anything else, the first call, and runs without the JIT go
    through `_cut` itself.
    """
    if AHEAD_OF_TIME is not None:  # an entry point for each type
        return AHEAD_OF_TIME.cut_bytes if type(data) is bytes else _cut
    if type(data) is not bytes:
        return _cut
    if not _bytes_entry:
        overloads = getattr(_cut, "overloads", None)
        if not overloads:  # not compiled or loaded yet, or NUMBA_DISABLE_JIT
            return _cut
        argument = _cut.typeof_pyval(data)
        entries = [result.entry_point for signature, result in overloads.items() if signature[0] == argument]
        if not entries:
            return _cut
        _bytes_entry.append(entries[0])
    return _bytes_entry[0]


@dataclass(frozen=True)
class ChunkBatch:
    """Chunks of many documents as flat arrays, for bulk writers.

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
        return self.records.view(np.uint8)[:, DIGEST_AT:]

    def chunks_of(self, doc: int) -> Chunks:
        start = int(self.starts[doc])
        return Chunks(packed(self.records[start:start + int(self.counts[doc])]))


_PARALLEL_MIN_BYTES = 1 << 18  # below this, a second thread costs more than it saves
_GROUPS_PER_THREAD = 4  # work is handed out in groups, so a slow thread holds up no one
_pool: ThreadPoolExecutor | None = None


def _thread_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="cdc-chunk")
    return _pool


def _forget_pool() -> None:
    """A forked child has none of its parent's threads: it must start its own pool."""
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def default_threads() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _BatchJob:
    """Chunking of many documents, in groups of documents that threads take in turn.

    The calling thread takes groups too, rather than only waiting: measured here, two
    pool threads doing all the work while the caller slept scaled no better than one.
    Groups finish in any order and are handed to the caller in order, so it can turn
    finished groups into Python objects while the kernels run on the rest. Each group
    writes its records densely into an array of its own (grown when a document does not
    fit): room for `_capacity` chunks per document, eight bytes of records per byte of
    text, was 350 MB for the corpus, and the kernel spent two thirds of its time in the
    page faults of writing to it.
    """

    def __init__(self, docs: Sequence[bytes], params: ChunkParams, threads: int | None):
        self.docs = list(docs)  # holds the buffers the kernels read by address
        self.arrays = []  # uint8 views of documents that are not `bytes`, held for the same reason
        self.addresses = np.empty(len(self.docs), np.uint64)
        self.lengths = np.empty(len(self.docs), np.int64)
        for i, doc in enumerate(self.docs):
            if type(doc) is not bytes:
                doc = _as_array(doc)
                self.arrays.append(doc)
            self.addresses[i] = buffer_address(doc)
            self.lengths[i] = len(doc)
        self.counts = np.zeros(len(self.docs), np.int64)
        self.params = params
        total = int(self.lengths.sum())
        self.threads = threads or default_threads()
        if total < _PARALLEL_MIN_BYTES or len(self.docs) < 2:
            self.threads = 1
        self.groups = self._split(total, 1 if self.threads == 1 else self.threads * _GROUPS_PER_THREAD)
        self.records: list[np.ndarray] = [_NO_RECORDS] * len(self.groups)  # per group, read-only
        self._claims = iter(range(len(self.groups)))  # next() on it is atomic under the GIL
        self._done = [threading.Event() for _ in self.groups]
        self._error: BaseException | None = None

    def _split(self, total: int, parts: int) -> list[tuple[int, int]]:
        """Contiguous runs of documents with about `total / parts` bytes each."""
        ends = np.searchsorted(np.cumsum(self.lengths), np.arange(1, parts) * (total / parts), "right")
        edges = sorted({0, len(self.docs), *(int(e) for e in ends if 0 < e < len(self.docs))})
        return list(itertools.pairwise(edges))

    def _cut_group(self, first: int, stop: int) -> np.ndarray:
        """The records of documents `first` to `stop - 1`, one after another."""
        lengths = self.lengths[first:stop]
        # Room for chunks of 32 bytes on average (the corpus's are 109, a whole page of Python's
        # docs about 40): enough but for odd text.
        records = _new_records(int(lengths.sum()) // 32 + 2 * (stop - first))
        used = 0
        while first < stop:
            stopped = _cut_documents(self.addresses, self.lengths, first, stop, self.params.final_settings,
                                     records[used:], self.counts)
            used += int(self.counts[first:stopped].sum())
            if stopped < stop:  # document `stopped` did not fit: room for its worst case
                need = _capacity(int(self.lengths[stopped]))
                if records.shape[0] - used >= need:
                    _checked(-1)
                grown = _new_records(max(2 * records.shape[0], used + need))
                grown[:used] = records[:used]
                records = grown
            first = stopped
        records = records[:used]
        records.flags.writeable = False
        return records

    def _run(self, group: int) -> None:
        try:
            self.records[group] = self._cut_group(*self.groups[group])
        except BaseException as exc:
            self._error = exc
        finally:
            self._done[group].set()

    def _work(self) -> None:
        while (group := next(self._claims, None)) is not None:
            self._run(group)

    def finished_groups(self) -> Iterator[int]:
        """Run the job; yield each group's number once it is chunked, in order."""
        for _ in range(self.threads - 1):
            _thread_pool().submit(self._work)
        for group in range(len(self.groups)):
            while not self._done[group].is_set():
                claimed = next(self._claims, None)
                if claimed is None:
                    self._done[group].wait()
                else:
                    self._run(claimed)
            if self._error is not None:
                raise self._error
            yield group


_NO_RECORDS = _new_records(0)


def chunk_batch(docs: Sequence[bytes], params: ChunkParams = DEFAULT_PARAMS,
                threads: int | None = None) -> ChunkBatch:
    """Chunk many documents in one call, in parallel threads that release the GIL."""
    job = _BatchJob(docs, params, threads)
    for _ in job.finished_groups():
        pass
    starts = np.zeros(len(job.docs), np.int64)
    np.cumsum(job.counts[:-1], out=starts[1:])
    records = job.records[0] if len(job.records) == 1 else np.concatenate([_NO_RECORDS, *job.records])
    return ChunkBatch(job.counts, starts, records)


@collector_paused
def chunk_many(docs: Sequence[bytes], params: ChunkParams = DEFAULT_PARAMS,
               threads: int | None = None) -> list[Chunks]:
    """`chunk_content` for each document, computed in parallel; same chunks, same order.

    Each document's `Chunks` is a view of its group's records: no object per chunk, but
    two per document (the `Chunks` and its memoryview), made with the cycle collector
    paused (see `collector_paused`): 100,000 empty documents took 5.6 us each with it
    running, 1.4 us to cut."""
    job = _BatchJob(docs, params, threads)
    result: list[Chunks] = []
    for group in job.finished_groups():
        first, stop = job.groups[group]
        records = packed(job.records[group])
        start = 0
        for end in np.cumsum(job.counts[first:stop] * RECORD.size).tolist():
            result.append(Chunks(records[start:end]))
            start = end
    return result


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
        # Pending bytes are under max_size plus what an undecided chunk holds (max_size).
        self._records = _new_records(_capacity(2 * params.max_size))
        self._settings = {(final, at_block): params.kernel_settings(final, at_block)
                          for final in (False, True) for at_block in (False, True)}
        self._at_block = True  # whether _pending starts at a block's start
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
        count = _checked(_cut(pending, self._settings[final, self._at_block], self._records))
        del pending  # the bytearray cannot shrink while a view of it exists
        if count == 0:
            return []
        records = self._records[:count]
        records[:, 0] += self._index  # the kernel counts from the start of what it was given
        records[:, 1] += self._offset
        chunks = _chunks(records)
        consumed = chunks[-1].end - self._offset
        self._at_block = self._pending[consumed - 1] == 0x0A
        del self._pending[:consumed]
        self._offset += consumed
        self._index += count
        return chunks
