"""Where a changed stretch's word diff starts and ends, in one compiled call per stretch.

The chunk comparison hands `cdc.core.refine` runs of changed chunks, whose edges fall where the
chunker cut, mid-word as often as not. Before the two sides are split into tokens, their
byte ranges (pieces: a moved chunk leaves a gap) are:

1. widened to whole tokens where they meet an unchanged neighbour: the neighbours hold the
   same bytes on both sides, so both move back (or on) by the same amount, at most
   WIDEN_LIMIT bytes and never past the neighbour;
2. kept on whole characters where no token boundary was reached;
3. with one piece a side, trimmed of their common prefix and suffix in whole tokens, short
   of the block (line) they end in (up to WIDEN_LIMIT bytes), so an edit can still slide
   to a block's start.

The rules are those of the word scan (`cdc.core.words`): a token boundary there is one here.
"""

from __future__ import annotations

import threading
from collections.abc import Set

import numpy as np

from cdc.core.compiled import AHEAD_OF_TIME, njit
from cdc.core.words import Words, boundary_within, count_chunk_words_kernel, found_words, scan_words_kernel

WIDEN_LIMIT = 256  # bytes a stretch may grow by to reach a token boundary or a block's start


def _is_continuation(text, i):  # pragma: no cover - inlined in the kernel
    return 0 <= i < len(text) and 0x80 <= text[i] < 0xC0


_is_continuation_compiled = njit(inline="always")(_is_continuation)


def _boundary_both(old_text, new_text, old, new):  # pragma: no cover - inlined in the kernel
    return (boundary_within(old_text, 0, len(old_text), old)
            and boundary_within(new_text, 0, len(new_text), new))


_boundary_both_compiled = njit(nogil=True)(_boundary_both)


def _find_newline(text, start, stop, last):  # pragma: no cover - inlined in the kernel
    """The first (or, `last`, the last) b"\\n" in text[start:stop], clipped to the text, or -1."""
    start, stop = max(start, 0), min(stop, len(text))
    if last:
        for i in range(stop - 1, start - 1, -1):
            if text[i] == 10:
                return i
    else:
        for i in range(start, stop):
            if text[i] == 10:
                return i
    return -1


_find_newline_compiled = njit(inline="always")(_find_newline)


def _trim_common(old_text, new_text, old, new):  # pragma: no cover - inlined in the kernel
    """Step 3 on the ranges old[0]:old[1] and new[0]:new[1] (changed in place)."""
    a0, a1, b0, b1 = old[0], old[1], new[0], new[1]
    limit = min(a1 - a0, b1 - b0)
    prefix = 0
    while prefix < limit and old_text[a0 + prefix] == new_text[b0 + prefix]:
        prefix += 1
    block = _find_newline_compiled(old_text, a0 + max(0, prefix - WIDEN_LIMIT), a0 + prefix, True)
    block = block - a0 if block >= 0 else -1
    if block >= 0 or prefix <= WIDEN_LIMIT:
        prefix = block + 1
    while not (boundary_within(old_text, a0, a1, a0 + prefix)
               and boundary_within(new_text, b0, b1, b0 + prefix)):
        prefix -= 1
    a0, b0 = a0 + prefix, b0 + prefix
    length = a1 - a0
    limit = min(length, b1 - b0)
    suffix = 0
    while suffix < limit and old_text[a1 - 1 - suffix] == new_text[b1 - 1 - suffix]:
        suffix += 1
    start = a0 + length - suffix
    block = _find_newline_compiled(old_text, start, min(start + WIDEN_LIMIT, a1), False)
    if block >= 0:
        suffix = a1 - block
    elif suffix <= WIDEN_LIMIT:
        suffix = 0
    while suffix and not (boundary_within(old_text, a0, a1, a1 - suffix)
                          and boundary_within(new_text, b0, b1, b1 - suffix)):
        suffix -= 1
    old[0], new[0] = a0, b0
    old[1], new[1] = a1 - suffix, b1 - suffix


_trim_common_compiled = njit(inline="always")(_trim_common)


@njit(cache=True, nogil=True)
def _bound(old_text, new_text, old_pieces, new_pieces, edges):  # pragma: no cover - compiled
    """Steps 1 to 3 on the pieces (rows of [start, end], changed in place). `edges`: whether
    the start meets unchanged neighbours on both sides, how far back the old one reaches,
    whether the end does, and how far on the old one after it reaches."""
    if edges[0]:
        old, new = old_pieces[0, 0], new_pieces[0, 0]
        # In an alignment the neighbours on both sides are the same bytes; a caller's runs
        # that are not one never take the new side past its text.
        limit = min(old - edges[1], WIDEN_LIMIT, new)
        shift = 0
        while shift < limit and not _boundary_both_compiled(old_text, new_text, old - shift, new - shift):
            shift += 1
        while old - shift > 0 and _is_continuation_compiled(old_text, old - shift):
            shift += 1
        old_pieces[0, 0] -= shift
        new_pieces[0, 0] -= shift
    if edges[2]:
        last_old, last_new = len(old_pieces) - 1, len(new_pieces) - 1
        old, new = old_pieces[last_old, 1], new_pieces[last_new, 1]
        limit = min(edges[3] - old, WIDEN_LIMIT, len(new_text) - new)
        shift = 0
        while shift < limit and not _boundary_both_compiled(old_text, new_text, old + shift, new + shift):
            shift += 1
        while _is_continuation_compiled(old_text, old + shift):
            shift += 1
        old_pieces[last_old, 1] += shift
        new_pieces[last_new, 1] += shift
    # Where no word boundary was reached, stay on whole characters (never before the text:
    # invalid UTF-8 may start with continuation bytes).
    for k in range(len(old_pieces)):
        while old_pieces[k, 0] > 0 and _is_continuation_compiled(old_text, old_pieces[k, 0]):
            old_pieces[k, 0] -= 1
        while _is_continuation_compiled(old_text, old_pieces[k, 1]):
            old_pieces[k, 1] += 1
    for k in range(len(new_pieces)):
        while new_pieces[k, 0] > 0 and _is_continuation_compiled(new_text, new_pieces[k, 0]):
            new_pieces[k, 0] -= 1
        while _is_continuation_compiled(new_text, new_pieces[k, 1]):
            new_pieces[k, 1] += 1
    if len(old_pieces) == 1 and len(new_pieces) == 1:
        _trim_common_compiled(old_text, new_text, old_pieces[0], new_pieces[0])
    return 0


def _count_kept(text, rows, moved, start, stop, enough):  # pragma: no cover - inlined in the kernel
    """The tokens of chunks start..stop-1 (their `rows`), but those `moved` marks (a mask,
    empty when none is), counted as `cdc.core.words.count_rows` counts."""
    if stop <= start:
        return 0
    if len(moved):
        for k in range(start, stop):
            if moved[k]:
                kept = rows[start:stop][moved[start:stop] == 0]
                return count_chunk_words_kernel(text, kept, enough) if len(kept) else 0
    return count_chunk_words_kernel(text, rows[start:stop], enough)


_count_kept_compiled = njit(inline="always")(_count_kept)


@njit(cache=True, nogil=True)
def _join_windows(old_text, old_rows, old_moved, new_text, new_rows, new_moved, runs,
                  windows):  # pragma: no cover - compiled
    """`cdc.core.refine._windows`' joining: `runs` the changed stretches' (i1, i2, j1, j2) rows,
    in chunk positions; `*_rows` the sides' chunk rows (offset in column 1, length in 2),
    `*_moved` masks of the moved chunks (empty when none is). Writes each window's (i1, i2,
    j1, j2, old tokens, new tokens) into a row of `windows`; returns how many there are."""
    count = 0
    for k in range(len(runs)):
        i1, i2, j1, j2 = runs[k, 0], runs[k, 1], runs[k, 2], runs[k, 3]
        old_tokens = _count_kept_compiled(old_text, old_rows, old_moved, i1, i2, -1)
        new_tokens = _count_kept_compiled(new_text, new_rows, new_moved, j1, j2, -1)
        while count:
            last = windows[count - 1]
            enough = max(last[4] + new_tokens, last[5] + old_tokens)
            held = 0
            if i1 > last[1]:  # the aligned run between: the same bytes on both sides, none moved
                held = count_chunk_words_kernel(old_text, old_rows[last[1]:i1], enough)
            if held >= enough:
                break
            count -= 1
            i1, j1 = last[0], last[2]
            old_tokens += last[4] + held
            new_tokens += last[5] + held
        windows[count, 0], windows[count, 1], windows[count, 2], windows[count, 3] = i1, i2, j1, j2
        windows[count, 4], windows[count, 5] = old_tokens, new_tokens
        count += 1
    return count


def _kept_pieces(rows, moved, start, stop):  # pragma: no cover - inlined in the kernel
    """Runs of byte-adjacent chunks among start..stop-1 (`rows`: offset in column 1,
    length in 2), but those `moved` marks, as [start, end] rows (a moved chunk leaves a
    gap); room for one more row when there are none."""
    pieces = np.empty((max(stop - start, 1), 2), np.int64)
    count = 0
    for k in range(start, stop):
        if len(moved) and moved[k]:
            continue
        offset, end = rows[k, 1], rows[k, 1] + rows[k, 2]
        if count and pieces[count - 1, 1] == offset:
            pieces[count - 1, 1] = end
        else:
            pieces[count, 0], pieces[count, 1] = offset, end
            count += 1
    return pieces, count


_kept_pieces_compiled = njit(inline="always")(_kept_pieces)


def _neighbour(rows, moved, k):  # pragma: no cover - inlined in the kernel
    """`k` if an unchanged chunk is there (in range, not moved), else -1."""
    if 0 <= k < len(rows) and not (len(moved) and moved[k]):
        return k
    return -1


_neighbour_compiled = njit(inline="always")(_neighbour)


def _window_pieces(rows, moved, start, stop, before, after):  # pragma: no cover - inlined
    """A window's pieces on one side; with none (nothing removed or inserted there), an
    empty range at the point between the neighbours."""
    pieces, count = _kept_pieces_compiled(rows, moved, start, stop)
    if count == 0:
        point = 0
        if before >= 0:
            point = rows[before, 1] + rows[before, 2]
        elif after >= 0:
            point = rows[after, 1]
        pieces[0, 0], pieces[0, 1] = point, point
        count = 1
    return pieces[:count]


_window_pieces_compiled = njit(inline="always")(_window_pieces)


@njit(cache=True, nogil=True)
def _pair_words(old_text, old_rows, old_moved, new_text, new_rows, new_moved, runs, old_hashes,
                old_table, new_hashes, new_table, regions):  # pragma: no cover - compiled
    """The token-level input of a pair's word diff, in one call: the changed stretches
    `runs` (rows of i1, i2, j1, j2 in chunk positions) joined into windows
    (`_join_windows`), then for each window its byte ranges on both sides (the chunks, but
    the moved ones), bounded (`_bound`: widened at unchanged neighbours, trimmed of common
    affixes) and scanned (`cdc.core.words._scan_words`), each side's words one window after the
    other into `*_hashes` and `*_table`. `regions` gets a row per window: where its old
    words start in the output and how many, the same for the new, and where its first
    bounded range starts on each side. Returns how many windows there are."""
    windows = np.empty((len(runs), 6), np.int64)
    count = _join_windows(old_text, old_rows, old_moved, new_text, new_rows, new_moved, runs, windows)
    edges = np.empty(4, np.int64)
    old_at, new_at = 0, 0
    for w in range(count):
        i1, i2, j1, j2 = windows[w, 0], windows[w, 1], windows[w, 2], windows[w, 3]
        old_before, new_before = _neighbour_compiled(old_rows, old_moved, i1 - 1), _neighbour_compiled(
            new_rows, new_moved, j1 - 1)
        old_after, new_after = _neighbour_compiled(old_rows, old_moved, i2), _neighbour_compiled(
            new_rows, new_moved, j2)
        old_pieces = _window_pieces_compiled(old_rows, old_moved, i1, i2, old_before, old_after)
        new_pieces = _window_pieces_compiled(new_rows, new_moved, j1, j2, new_before, new_after)
        # Where the neighbours hold the same bytes, both sides widen by the same amount.
        widen_start = (old_before >= 0 and new_before >= 0
                       and old_rows[old_before, 1] + old_rows[old_before, 2] == old_pieces[0, 0]
                       and new_rows[new_before, 1] + new_rows[new_before, 2] == new_pieces[0, 0])
        widen_end = (old_after >= 0 and new_after >= 0
                     and old_rows[old_after, 1] == old_pieces[len(old_pieces) - 1, 1]
                     and new_rows[new_after, 1] == new_pieces[len(new_pieces) - 1, 1])
        edges[0] = 1 if widen_start else 0
        edges[1] = old_rows[old_before, 1] if widen_start else 0
        edges[2] = 1 if widen_end else 0
        edges[3] = old_rows[old_after, 1] + old_rows[old_after, 2] if widen_end else 0
        _bound(old_text, new_text, old_pieces, new_pieces, edges)
        old_words = scan_words_kernel(old_text, old_pieces, old_hashes[old_at:], old_table[old_at:])
        new_words = scan_words_kernel(new_text, new_pieces, new_hashes[new_at:], new_table[new_at:])
        regions[w, 0], regions[w, 1], regions[w, 2], regions[w, 3] = old_at, old_words, new_at, new_words
        regions[w, 4], regions[w, 5] = old_pieces[0, 0], new_pieces[0, 0]
        old_at += old_words
        new_at += new_words
    return count


pair_words_kernel = _pair_words  # for other kernels to call (`cdc.core.fastcompare`), whichever build runs

if AHEAD_OF_TIME is not None:  # the same kernels, compiled by `python -m cdc.core.aot`
    _bound = AHEAD_OF_TIME.bound_region
    _pair_words = AHEAD_OF_TIME.pair_words
    _join_windows = AHEAD_OF_TIME.join_windows


def bound(old_text: bytes, new_text: bytes, old_pieces: list[list[int]], new_pieces: list[list[int]],
          edges: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The pieces after steps 1 to 3, as int64 arrays of [start, end] rows (see `_bound`)."""
    old = np.array(old_pieces, np.int64).reshape(-1, 2)
    new = np.array(new_pieces, np.int64).reshape(-1, 2)
    _bound(old_text, new_text, old, new, np.array(edges, np.int64))
    return old, new


SCRATCH_WORDS = 1 << 14  # words a thread's reused output holds; a larger region gets its own
_scratch = threading.local()


def _outputs(capacity: int) -> tuple:
    """Where the scan writes each side's words (hashes; rows of start, end and piece): this
    thread's reused buffers (their words are copied out before the next call), or, past
    SCRATCH_WORDS, new ones; each array with a bytes view of it, to copy from."""
    if capacity > SCRATCH_WORDS:
        return _buffers(capacity)
    outputs = getattr(_scratch, "outputs", None)
    if outputs is None:
        outputs = _scratch.outputs = _buffers(SCRATCH_WORDS)
    return outputs


def _buffers(capacity: int) -> tuple:
    arrays = (np.empty(capacity, np.uint64), np.empty((capacity, 3), np.int64),
              np.empty(capacity, np.uint64), np.empty((capacity, 3), np.int64))
    return arrays + tuple(memoryview(array).cast("B") for array in arrays)


NONE_MOVED = np.zeros(0, np.uint8)


def _moved_mask(rows: np.ndarray, moved: Set[int] | np.ndarray) -> np.ndarray:
    if isinstance(moved, np.ndarray):  # a mask already (`cdc.core.compare` makes one)
        return moved
    if not moved:
        return NONE_MOVED
    mask = np.zeros(len(rows), np.uint8)
    mask[list(moved)] = 1
    return mask


def join_windows(old_text: bytes, old_rows: np.ndarray, old_moved: Set[int], new_text: bytes,
                 new_rows: np.ndarray, new_moved: Set[int],
                 runs: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """The windows `_join_windows` makes of the runs, as (i1, i2, j1, j2)."""
    windows = np.empty((len(runs), 6), np.int64)
    count = _join_windows(old_text, old_rows, _moved_mask(old_rows, old_moved), new_text, new_rows,
                          _moved_mask(new_rows, new_moved), np.array(runs, np.int64), windows)
    return [(i1, i2, j1, j2) for i1, i2, j1, j2, _, _ in windows[:count].tolist()]


def _capacity(rows: np.ndarray, start: int, stop: int, windows: int) -> int:
    """Room for the words of the windows over chunks start..stop-1 once bounded: a word and
    a gap take two bytes; each window may grow back and on by up to WIDEN_LIMIT bytes, and
    each of its pieces by a few, to stay on whole characters."""
    span = int(rows[stop - 1, 1] + rows[stop - 1, 2] - rows[start, 1]) if stop > start else 0
    return span // 2 + 4 * (stop - start) + windows * (2 * WIDEN_LIMIT + 8) + 8


def scan_windows(old_text: bytes, old_rows: np.ndarray, old_moved: Set[int] | np.ndarray, new_text: bytes,
                 new_rows: np.ndarray, new_moved: Set[int] | np.ndarray,
                 runs: list[tuple[int, int, int, int]] | np.ndarray) -> tuple:
    """`_pair_words` on the changed stretches `runs` (at least one): (its `regions` rows,
    cut to the windows found, then the scan's output: old hashes, old word table, new
    hashes, new word table, and a bytes view of each), in this thread's reused buffers
    (read them before the next call). `*_moved`: positions, or a mask already."""
    first, last = runs[0], runs[-1]
    capacity = max(_capacity(old_rows, first[0], last[1], len(runs)),
                   _capacity(new_rows, first[2], last[3], len(runs)))
    outputs = _outputs(capacity)
    old_hashes, old_table, new_hashes, new_table = outputs[:4]
    regions = np.empty((len(runs), 6), np.int64)
    count = _pair_words(old_text, old_rows, _moved_mask(old_rows, old_moved), new_text, new_rows,
                        _moved_mask(new_rows, new_moved), np.asarray(runs, np.int64), old_hashes, old_table,
                        new_hashes, new_table, regions)
    return (regions[:count], *outputs)


def pair_words(old_text: bytes, old_rows: np.ndarray, old_moved: Set[int], new_text: bytes,
               new_rows: np.ndarray, new_moved: Set[int],
               runs: list[tuple[int, int, int, int]]) -> list[tuple[Words, Words]]:
    """The words of each window `_pair_words` makes of the changed stretches `runs`, on
    both sides; each `Words.start` is where its side's first bounded range starts."""
    if not len(runs):
        return []
    regions, *_, old_hash_bytes, old_row_bytes, new_hash_bytes, new_row_bytes = scan_windows(
        old_text, old_rows, old_moved, new_text, new_rows, new_moved, runs)
    return [(found_words(old_hash_bytes[8 * old_at:], old_row_bytes[24 * old_at:], old_count, old_start),
             found_words(new_hash_bytes[8 * new_at:], new_row_bytes[24 * new_at:], new_count, new_start))
            for old_at, old_count, new_at, new_count, old_start, new_start in regions.tolist()]
