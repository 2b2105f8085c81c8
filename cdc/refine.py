"""Exact edits: narrow each changed stretch of chunks to the words that changed.

Only the stretches the chunk comparison marks as changed are read, so the cost grows with
the change, not with the page. In each stretch:

1. The stretch is widened to whole words where it meets an unchanged neighbour (chunk
   boundaries fall mid-word), and its common prefix and suffix are set aside.
2. What is left is split into words (runs of non-whitespace bytes: ASCII whitespace never
   occurs inside a UTF-8 character, so no offset splits one) by a compiled pass that also
   hashes each word, and the two word sequences are diffed with rapidfuzz's compiled Indel
   alignment.
3. Short runs of equal words stranded between two larger edits are absorbed into them,
   as diff-match-patch's semantic cleanup does: unrelated texts share "the" and "of",
   and a report that keeps those is noise, not precision.

Offsets and lengths are in bytes of the two texts.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import zip_longest
from typing import NamedTuple

import numpy as np
from rapidfuzz.distance import Indel

from cdc.chunking import Chunk
from cdc.compiled import AHEAD_OF_TIME, njit
from cdc.native import xxh3_64_of

INSERT = "insert"
DELETE = "delete"
REPLACE = "replace"

WHITESPACE = b" \t\n\r\x0b\x0c"  # what bytes.split() splits on
WIDEN_LIMIT = 256  # bytes a stretch may grow by to reach a word boundary
SHORT_EQUALITY = 24  # bytes of equal words between changes that count as noise


class Edit(NamedTuple):
    """One word-level edit: bytes `old_offset:+old_length` became `new_offset:+new_length`."""

    kind: str  # insert, delete or replace
    old_offset: int
    old_length: int
    new_offset: int
    new_length: int


@dataclass(frozen=True)
class Span:
    """A changed stretch: its chunks on each side and the unchanged chunks around it."""

    old: list[Chunk]
    new: list[Chunk]
    old_before: Chunk | None
    new_before: Chunk | None
    old_after: Chunk | None
    new_after: Chunk | None


def _pieces(chunks: list[Chunk]) -> list[list[int]]:
    """Runs of byte-adjacent chunks as [start, end] (a moved chunk leaves a gap)."""
    pieces: list[list[int]] = []
    for chunk in chunks:
        if pieces and pieces[-1][1] == chunk.offset:
            pieces[-1][1] = chunk.end
        else:
            pieces.append([chunk.offset, chunk.end])
    return pieces


def _is_continuation(text: bytes, i: int) -> bool:
    return 0 <= i < len(text) and 0x80 <= text[i] < 0xC0


def _word_start(text: bytes, i: int, floor: int) -> int:
    """Move `i` back to the start of the word it is in, no further than `floor`."""
    floor = max(floor, i - WIDEN_LIMIT)
    while i > floor and text[i - 1] not in WHITESPACE:
        i -= 1
    while _is_continuation(text, i):
        i -= 1
    return i


def _word_end(text: bytes, i: int, ceiling: int) -> int:
    """Move `i` forward to the end of the word it is in, no further than `ceiling`."""
    ceiling = min(ceiling, i + WIDEN_LIMIT)
    while i < ceiling and text[i] not in WHITESPACE:
        i += 1
    while _is_continuation(text, i):
        i += 1
    return i


def _point_between(before: Chunk | None, after: Chunk | None) -> int:
    if before is not None:
        return before.end
    return after.offset if after is not None else 0


def _regions(span: Span, old_text: bytes, new_text: bytes) -> tuple[list[list[int]], list[list[int]]]:
    """Byte ranges to diff on each side, widened to whole words at unchanged neighbours."""
    old_pieces, new_pieces = _pieces(span.old), _pieces(span.new)
    if not old_pieces:  # nothing removed here: an empty range at the insertion point
        old_pieces = [[_point_between(span.old_before, span.old_after)] * 2]
    if not new_pieces:
        new_pieces = [[_point_between(span.new_before, span.new_after)] * 2]
    before, after = (span.old_before, span.new_before), (span.old_after, span.new_after)
    if all(before) and before[0].end == old_pieces[0][0] and before[1].end == new_pieces[0][0]:
        # The neighbours hold the same bytes, so both sides widen by the same amount.
        start = _word_start(old_text, old_pieces[0][0], before[0].offset)
        old_pieces[0][0], new_pieces[0][0] = start, new_pieces[0][0] - (old_pieces[0][0] - start)
    if all(after) and after[0].offset == old_pieces[-1][1] and after[1].offset == new_pieces[-1][1]:
        end = _word_end(old_text, old_pieces[-1][1], after[0].end)
        old_pieces[-1][1], new_pieces[-1][1] = end, new_pieces[-1][1] + (end - old_pieces[-1][1])
    for pieces, text in ((old_pieces, old_text), (new_pieces, new_text)):
        for piece in pieces:  # where no word boundary was reached, stay on whole characters
            while _is_continuation(text, piece[0]):
                piece[0] -= 1
            while _is_continuation(text, piece[1]):
                piece[1] += 1
    return old_pieces, new_pieces


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix, by halving (each test is one memcmp)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _at_word_start(text: bytes, i: int) -> bool:
    return i == 0 or text[i - 1] in WHITESPACE


def _trim_common(old_text: bytes, new_text: bytes, old: list[int], new: list[int]) -> None:
    """Set aside the common prefix and suffix of two ranges, in whole words."""
    a, b = old_text[old[0]:old[1]], new_text[new[0]:new[1]]
    prefix = _common_prefix(a, b)
    while not _at_word_start(a, prefix):  # the prefix is common, so this holds for b too
        prefix -= 1
    a, b = a[prefix:], b[prefix:]
    suffix = _common_prefix(a[::-1], b[::-1])
    while suffix and not (_at_word_start(a, len(a) - suffix) and _at_word_start(b, len(b) - suffix)):
        suffix -= 1
    old[0] += prefix
    new[0] += prefix
    old[1] -= suffix
    new[1] -= suffix


@dataclass
class Words:
    """The words of a region: each one's identity (a 64-bit hash), start, end and piece
    number. Arrays, not lists: a page's region can hold thousands of words, of which only
    those at the edges of a change are ever looked at from Python."""

    hashes: array
    begins: array
    ends: array
    pieces: array


def _is_space(byte) -> bool:  # pragma: no cover - inlined in the kernel
    return byte == 32 or 9 <= byte <= 13  # the six bytes `bytes.split()` splits on


_is_space_compiled = njit(inline="always")(_is_space)


@njit(cache=True, nogil=True)
def _scan_words(text, starts, stops, hashes, begins, ends, pieces):  # pragma: no cover - compiled
    """Find the words (runs of non-whitespace bytes) of each piece `starts[k]:stops[k]` of
    `text`, writing each one's hash, start, end and piece number; returns how many."""
    count = 0
    for piece in range(len(starts)):
        i, stop = starts[piece], stops[piece]
        while i < stop:
            if _is_space_compiled(text[i]):
                i += 1
                continue
            first = i
            while i < stop and not _is_space_compiled(text[i]):
                i += 1
            hashes[count] = xxh3_64_of(text, first, i - first)
            begins[count], ends[count], pieces[count] = first, i, piece
            count += 1
    return count


if AHEAD_OF_TIME is not None:  # the same kernel, compiled by `python -m cdc.aot`
    _scan_words = AHEAD_OF_TIME.scan_words


def _words(text: bytes, pieces: list[list[int]]) -> Words:
    """The words of the pieces of `text`, found in one compiled pass.

    A word is known by the low 64 bits of its XXH3 digest: rapidfuzz compares the items of
    a sequence by hash anyway (Python's `hash` of each `bytes`, before), and reads an
    `array` of them without a Python object per word.
    """
    capacity = sum((end - start + 1) // 2 for start, end in pieces)  # a word and a gap
    found = np.empty((4, capacity), np.uint64)
    count = _scan_words(text, np.array([start for start, _ in pieces], np.int64),
                        np.array([end for _, end in pieces], np.int64), found[0], *found[1:].view(np.int64))
    hashes, begins, ends, numbers = array("Q"), array("q"), array("q"), array("q")
    for column, values in zip((hashes, begins, ends, numbers), found[:, :count]):
        column.frombytes(values.tobytes())  # copied: an exported buffer could not shrink
    return Words(hashes, begins, ends, numbers)


def word_table(text: bytes, pieces: list[list[int]]) -> list[list[int]]:
    """The words of the pieces as [hash, start, end, piece] rows: what the kernel found,
    in plain lists (the reference tests compare it compiled and uncompiled)."""
    words = _words(text, pieces)
    return [list(row) for row in zip(words.hashes, words.begins, words.ends, words.pieces)]


def stretches(opcodes: Iterable[tuple]) -> list[tuple[int, int, int, int]]:
    """Maximal runs of non-equal opcodes (tag, i1, i2, j1, j2), as (i1, i2, j1, j2).

    rapidfuzz gives a replacement as a delete next to an insert: one stretch, not two.
    """
    runs: list[tuple[int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            continue
        if runs and runs[-1][1] == i1 and runs[-1][3] == j1:
            runs[-1] = (runs[-1][0], i2, runs[-1][2], j2)
        else:
            runs.append((i1, i2, j1, j2))
    return runs


def _changes(old: Words, new: Words) -> list[tuple[int, int, int, int]]:
    """Changed runs of words, as (i1, i2, j1, j2) in word indexes, in order."""
    return stretches(Indel.opcodes(old.hashes, new.hashes).as_list())


def _width(words: Words, i1: int, i2: int) -> int:
    return words.ends[i2 - 1] - words.begins[i1] if i2 > i1 else 0


def _absorb_short_equalities(changes: list[tuple], old: Words, new: Words) -> list[tuple]:
    """Merge neighbouring changes across equal words that are noise, until none are left.

    The equal run goes when it is no longer than either change around it (diff-match-patch's
    rule), or when it is a few words next to a larger change: unrelated texts share "the"
    and "of", and a report that keeps them is a scatter, not precision.

    One pass with a stack reaches the same result as repeated passes: a merge only makes a
    change larger, which can only make its neighbours' merges due, never undo one; so after
    each merge only the new change and the one before it need a second look.
    """
    merged: list[tuple] = []
    for change in changes:
        merged.append(change)
        while len(merged) > 1 and _noise_between(merged[-2], merged[-1], old, new):
            last = merged.pop()
            merged[-1] = (merged[-1][0], last[1], merged[-1][2], last[3])
    return merged


def _noise_between(first: tuple, second: tuple, old: Words, new: Words) -> bool:
    between = _width(old, first[1], second[0])
    size_first = max(_width(old, first[0], first[1]), _width(new, first[2], first[3]))
    size_second = max(_width(old, second[0], second[1]), _width(new, second[2], second[3]))
    return between <= min(size_first, size_second) or (
        between <= SHORT_EQUALITY and between <= max(size_first, size_second))


def _ranges(words: Words, i1: int, i2: int) -> list[tuple[int, int]]:
    """Byte ranges of words i1..i2-1, split where a moved chunk interrupts them."""
    if i2 <= i1:
        return []
    if words.pieces[i1] == words.pieces[i2 - 1]:  # one piece: the common case
        return [(words.begins[i1], words.ends[i2 - 1])]
    ranges: list[tuple[int, int]] = []
    for i in range(i1, i2):
        if ranges and words.pieces[i - 1] == words.pieces[i]:
            ranges[-1] = (ranges[-1][0], words.ends[i])
        else:
            ranges.append((words.begins[i], words.ends[i]))
    return ranges


def _point(words: Words, i: int, region_start: int) -> int:
    """Where an insertion before word `i` goes: its start, or the end of the last word."""
    if i < len(words.begins):
        return words.begins[i]
    return words.ends[i - 1] if i > 0 else region_start


def _edits(changes: list[tuple], old: Words, new: Words, old_start: int, new_start: int) -> list[Edit]:
    edits = []
    for i1, i2, j1, j2 in changes:
        old_point = _point(old, i1, old_start)
        new_point = _point(new, j1, new_start)
        for old_range, new_range in zip_longest(_ranges(old, i1, i2), _ranges(new, j1, j2)):
            if old_range is None:
                edits.append(Edit(INSERT, old_point, 0, new_range[0], new_range[1] - new_range[0]))
            elif new_range is None:
                edits.append(Edit(DELETE, old_range[0], old_range[1] - old_range[0], new_point, 0))
            else:
                edits.append(Edit(REPLACE, old_range[0], old_range[1] - old_range[0],
                                  new_range[0], new_range[1] - new_range[0]))
    return edits


def refine(old_text: bytes, new_text: bytes, spans: list[Span]) -> list[Edit]:
    """Word-level edits inside the changed spans, in document order."""
    edits: list[Edit] = []
    for span in spans:
        old_pieces, new_pieces = _regions(span, old_text, new_text)
        if len(old_pieces) == 1 and len(new_pieces) == 1:
            _trim_common(old_text, new_text, old_pieces[0], new_pieces[0])
        old_words, new_words = _words(old_text, old_pieces), _words(new_text, new_pieces)
        changes = _absorb_short_equalities(_changes(old_words, new_words), old_words, new_words)
        edits += _edits(changes, old_words, new_words, old_pieces[0][0], new_pieces[0][0])
    return edits
