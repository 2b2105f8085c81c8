"""Where a changed stretch's word diff starts and ends, in one compiled call per stretch.

The chunk comparison hands `cdc.refine` runs of changed chunks, whose edges fall where the
chunker cut, mid-word as often as not. Before the two sides are split into tokens, their
byte ranges (pieces: a moved chunk leaves a gap) are:

1. widened to whole tokens where they meet an unchanged neighbour: the neighbours hold the
   same bytes on both sides, so both move back (or on) by the same amount, at most
   WIDEN_LIMIT bytes and never past the neighbour;
2. kept on whole characters where no token boundary was reached;
3. with one piece a side, trimmed of their common prefix and suffix in whole tokens, short
   of the block (line) they end in (up to WIDEN_LIMIT bytes), so an edit can still slide
   to a block's start.

The rules are those of the word scan (`cdc.words`): a token boundary there is one here.
"""

from __future__ import annotations

import numpy as np

from cdc.compiled import AHEAD_OF_TIME, njit
from cdc.words import boundary_within

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
        limit = min(old - edges[1], WIDEN_LIMIT)
        shift = 0
        while shift < limit and not _boundary_both_compiled(old_text, new_text, old - shift, new - shift):
            shift += 1
        while _is_continuation_compiled(old_text, old - shift):
            shift += 1
        old_pieces[0, 0] -= shift
        new_pieces[0, 0] -= shift
    if edges[2]:
        last_old, last_new = len(old_pieces) - 1, len(new_pieces) - 1
        old, new = old_pieces[last_old, 1], new_pieces[last_new, 1]
        limit = min(edges[3] - old, WIDEN_LIMIT)
        shift = 0
        while shift < limit and not _boundary_both_compiled(old_text, new_text, old + shift, new + shift):
            shift += 1
        while _is_continuation_compiled(old_text, old + shift):
            shift += 1
        old_pieces[last_old, 1] += shift
        new_pieces[last_new, 1] += shift
    for k in range(len(old_pieces)):  # where no word boundary was reached, stay on whole characters
        while _is_continuation_compiled(old_text, old_pieces[k, 0]):
            old_pieces[k, 0] -= 1
        while _is_continuation_compiled(old_text, old_pieces[k, 1]):
            old_pieces[k, 1] += 1
    for k in range(len(new_pieces)):
        while _is_continuation_compiled(new_text, new_pieces[k, 0]):
            new_pieces[k, 0] -= 1
        while _is_continuation_compiled(new_text, new_pieces[k, 1]):
            new_pieces[k, 1] += 1
    if len(old_pieces) == 1 and len(new_pieces) == 1:
        _trim_common_compiled(old_text, new_text, old_pieces[0], new_pieces[0])
    return 0


if AHEAD_OF_TIME is not None:  # the same kernel, compiled by `python -m cdc.aot`
    _bound = AHEAD_OF_TIME.bound_region


def bound(old_text: bytes, new_text: bytes, old_pieces: list[list[int]], new_pieces: list[list[int]],
          edges: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The pieces after steps 1 to 3, as int64 arrays of [start, end] rows (see `_bound`)."""
    old = np.array(old_pieces, np.int64).reshape(-1, 2)
    new = np.array(new_pieces, np.int64).reshape(-1, 2)
    _bound(old_text, new_text, old, new, np.array(edges, np.int64))
    return old, new
