"""Exact edits: narrow each changed stretch of chunks to the tokens that changed.

Only the stretches the chunk comparison marks as changed are read, so the cost grows with
the change, not with the page. In each stretch:

1. Stretches are joined, with the aligned chunks between them, where those chunks hold too
   few tokens to bound a word alignment (see `_windows`). Each is widened to whole tokens
   where it meets an unchanged neighbour (chunk boundaries fall mid-word), and its common
   prefix and suffix are set aside, short of the block (line) they end in.
2. What is left is split into tokens by a compiled pass that decodes UTF-8 (so no offset
   splits a character) and hashes each token: a character of a script written without
   spaces (Han, kana, Thai, ...: see `_char_class`) is a token with the marks after it;
   otherwise a token is a run of other characters up to whitespace. The two token
   sequences are diffed as rapidfuzz's Indel alignment diffs them (`cdc.core.lcs`), and
   pure insertions and deletions slid to start a block where they can.
3. Short runs of equal tokens stranded between two larger edits are absorbed into them,
   as diff-match-patch's semantic cleanup does, counted in tokens so that every script is
   treated alike: unrelated texts share "the" and "of", and a report that keeps those is
   noise, not precision. Equal runs that are whole blocks stay.
4. Text deleted in one place and inserted in another is a `move` (see `cdc.core.moves`), with
   the edits inside it; chunks the chunk comparison found moved are moves too.

Offsets and lengths are in bytes of the two texts.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable, Set
from itertools import zip_longest
from operator import itemgetter
from typing import NamedTuple

import numpy as np
from rapidfuzz.distance import Indel

from cdc.core.lcs import changed_stretches
from cdc.core.moves import MIN_MOVE_TOKENS, find_moves
from cdc.core.regions import pair_words, scan_windows
from cdc.core.wordchanges import DELETE_CODE, INSERT_CODE, NO_BOUNDS, NO_DIFFS, REPLACE_CODE, word_edits
from cdc.core.words import (
    WHITESPACE,
    Words,
    is_token_boundary,
    word_table,
)

__all__ = ["DELETE", "INSERT", "MOVE", "REPLACE", "Edit", "Side", "is_token_boundary", "refine",
           "stretches", "word_table"]

INSERT = "insert"
DELETE = "delete"
REPLACE = "replace"
MOVE = "move"

SHORT_EQUALITY = 1  # tokens: one equal token between changes, next to a larger one, is noise
EQUALITY_SHARE = 8  # an equal run at most 1/8 of the smaller change around it is noise


class Edit(NamedTuple):
    """One word-level edit: bytes `old_offset:+old_length` became `new_offset:+new_length`."""

    kind: str  # insert, delete, replace or move (from old_offset to new_offset)
    old_offset: int
    old_length: int
    new_offset: int
    new_length: int


class Side(NamedTuple):
    """One version as the chunk comparison hands it over: its text, its chunks as int64 rows
    (offset in column 1 and length in 2, as a chunk record's table), and the positions of
    the chunks it found moved (in no changed stretch's words)."""

    text: bytes
    rows: np.ndarray
    moved: Set[int]


def _is_continuation(text: bytes, i: int) -> bool:
    return 0 <= i < len(text) and 0x80 <= text[i] < 0xC0


def _windows(old: Side, new: Side, runs: list[tuple[int, int, int, int]]) -> list[tuple[Words, Words]]:
    """The words of the changed stretches (i1, i2, j1, j2 in chunk positions) on each side,
    joined into windows across the aligned runs between them that a word alignment could
    cross, so each is diffed as one; one compiled call a pair (`cdc.core.regions.pair_words`).

    The chunk alignment counts chunks, and chunks are blocks: a code fence, a closing brace
    or a short heading is a chunk of its own that recurs through a page, and the alignment
    may pair it with any of its copies, or keep three such chunks in order over one long
    paragraph. Diffed apart, a paragraph whose line breaks alone changed is then deleted in
    one stretch and inserted in the next. An aligned run stays a bound of the word diff when
    it holds at least as many tokens as the old tokens on one side of it and the new on the
    other, either way round: an alignment that crosses it (pairs a word before it with one
    after it) pairs none of its words with their copies, and each pair it makes has its old
    word before the run or its new word after it (or the other way round), so it can pair
    no more words than the run keeps.
    Anything shorter is diffed together with the stretches around it; counted in tokens,
    as the word diff counts, so the rule is the same in every script. (The aligned run
    between two stretches holds no moved chunk: a joined window is every chunk from its
    first stretch's start to its last one's end, but the moved ones.) Each window's byte
    ranges are widened to whole words at unchanged neighbours and, one range a side,
    trimmed of their common affixes (see `cdc.core.regions`).
    """
    return pair_words(old.text, old.rows, old.moved, new.text, new.rows, new.moved, runs)


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
    """Changed runs of words, as (i1, i2, j1, j2) in word indexes, in order. A side without
    words, or a word a side, needs no alignment (a tenth of the regions on the corpus)."""
    old_count, new_count = len(old.hashes), len(new.hashes)
    if not old_count or not new_count or old_count == new_count == 1:
        if old_count == new_count and old.hashes == new.hashes:
            return []
        return [(0, old_count, 0, new_count)]
    return _stretches_of(old.hashes, new.hashes)


def _stretches_of(old_hashes: array, new_hashes: array) -> list[tuple[int, int, int, int]]:
    """`stretches` of the Indel opcodes of two words' hashes: compiled
    (`cdc.core.lcs.changed_stretches`), or by rapidfuzz where too large for that."""
    found = changed_stretches(np.frombuffer(old_hashes, np.uint64), np.frombuffer(new_hashes, np.uint64))
    return found if found is not None else stretches(Indel.opcodes(old_hashes, new_hashes).as_list())


def _absorb_short_equalities(changes: list[tuple], old: Words, new: Words, old_text: bytes,
                             new_text: bytes) -> list[tuple]:
    """Merge neighbouring changes across equal words that are noise, until none are left.

    Sizes count tokens (words, or characters of the scripts written without spaces), so the
    rule is the same in every script. The equal run goes when it is at most an eighth of
    either change around it (diff-match-patch's rule, which takes up to the whole change,
    scaled down: on the corpus it marked 5-15% of unchanged words as changed), or when it is
    one token next to a larger change: unrelated texts share "the" and "of", and a report
    that keeps them is a scatter, not precision. A run that is whole blocks on both sides (a
    line break before it and after it) stays: an unchanged paragraph, heading or code fence
    between two changed ones is not a stray word the two texts happen to share.

    One pass with a stack reaches the same result as repeated passes: a merge only makes a
    change larger, which can only make its neighbours' merges due, never undo one; so after
    each merge only the new change and the one before it need a second look.
    """
    merged: list[tuple] = []
    for change in changes:
        merged.append(change)
        while len(merged) > 1 and _noise_between(merged[-2], merged[-1], old, new, old_text, new_text):
            last = merged.pop()
            merged[-1] = (merged[-1][0], last[1], merged[-1][2], last[3])
    return merged


def _noise_between(first: tuple, second: tuple, old: Words, new: Words, old_text: bytes,
                   new_text: bytes) -> bool:
    between = second[0] - first[1]  # tokens, the same on both sides
    size_first = max(first[1] - first[0], first[3] - first[2])
    size_second = max(second[1] - second[0], second[3] - second[2])
    if not (between <= min(size_first, size_second) // EQUALITY_SHARE
            or between <= SHORT_EQUALITY < max(size_first, size_second)):
        return False
    return not (between and _whole_blocks(old_text, old, first[1], second[0])
                and _whole_blocks(new_text, new, first[3], second[2]))


def _whole_blocks(text: bytes, words: Words, i1: int, i2: int) -> bool:
    """Whether words i1..i2-1 are whole blocks: a line break (or an end of the text) before
    the first and after the last, the whitespace around them looked through."""
    after = words.begins[i2] if i2 < len(words.begins) else words.ends[i2 - 1]
    return (_block_break(text, words.ends[i1 - 1] if i1 else words.begins[i1], words.begins[i1])
            and _block_break(text, words.ends[i2 - 1], after))


def _block_break(text: bytes, left: int, right: int) -> bool:
    """Whether the whitespace around text[left:right] (the gap between two words) holds a
    line break or reaches an end of the text."""
    while left > 0 and text[left - 1] in WHITESPACE:
        left -= 1
    while right < len(text) and text[right] in WHITESPACE:
        right += 1
    return left == 0 or right == len(text) or b"\n" in text[left:right]


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


def _point(words: Words, i: int, text: bytes, start: int, limit: int) -> int:
    """Where an insertion before word `i` goes: its start; past the last word, where the
    next word would start (the whitespace after the last skipped, up to `limit`)."""
    if i < len(words.begins) and words.begins[i] <= limit:
        return words.begins[i]
    if i == 0:
        return start
    point = words.ends[i - 1]
    while point < limit and text[point] in WHITESPACE:
        point += 1
    return point


def _edits(changes: list[tuple], old: Words, new: Words, old_text: bytes, new_text: bytes,
           old_bounds: tuple[int, int], new_bounds: tuple[int, int]) -> list[Edit]:
    """The changes as edits; `*_bounds`: where the region starts and how far a point may go."""
    edits = []
    for i1, i2, j1, j2 in changes:
        old_point = _point(old, i1, old_text, *old_bounds)
        new_point = _point(new, j1, new_text, *new_bounds)
        for old_range, new_range in zip_longest(_ranges(old, i1, i2), _ranges(new, j1, j2)):
            if old_range is None:
                edits.append(Edit(INSERT, old_point, 0, new_range[0], new_range[1] - new_range[0]))
            elif new_range is None:
                edits.append(Edit(DELETE, old_range[0], old_range[1] - old_range[0], new_point, 0))
            else:
                edits.append(Edit(REPLACE, old_range[0], old_range[1] - old_range[0],
                                  new_range[0], new_range[1] - new_range[0]))
    return edits


class _Region(NamedTuple):
    """One changed stretch, diffed: its words on each side and the changes between them."""

    old: Words
    new: Words
    changes: list[tuple[int, int, int, int]]


def _starts_block(text: bytes, words: Words, i: int) -> bool:
    """Whether word `i` is the first of its block (a line break, or nothing, before it)."""
    return i == 0 or b"\n" in text[words.ends[i - 1]:words.begins[i]]


def _slide(changes: list[tuple], old: Words, new: Words, old_text: bytes, new_text: bytes) -> list[tuple]:
    """Pure insertions and deletions moved, among the places they could equally be (the
    word before a run equal to its last, or the word after it equal to its first), to start
    a block where one does, as diff-match-patch's lossless cleanup aligns edits with line
    breaks: a moved paragraph is then the same words at both places."""
    slid = []
    for number, (i1, i2, j1, j2) in enumerate(changes):
        if (i1 == i2) == (j1 == j2):
            slid.append((i1, i2, j1, j2))
            continue
        words, text, start, end = (new, new_text, j1, j2) if i1 == i2 else (old, old_text, i1, i2)
        side = 2 if i1 == i2 else 0
        floor = slid[-1][side + 1] if slid else 0
        ceiling = changes[number + 1][side] if number + 1 < len(changes) else len(words.hashes)
        shift = 0
        while start + shift > floor and words.hashes[start + shift - 1] == words.hashes[end + shift - 1]:
            shift -= 1
        best = None
        while True:
            if _starts_block(text, words, start + shift):
                best = shift
                if shift >= 0:
                    break
            if end + shift >= ceiling or words.hashes[start + shift] != words.hashes[end + shift]:
                break
            shift += 1
        shift = best or 0
        slid.append((i1 + shift, i2 + shift, j1 + shift, j2 + shift))
    return slid


def _token_moves(regions: list[_Region]) -> list[tuple[int, int, int, int, int, int]]:
    """Moves between the changes of all regions, as (old region, i1, i2, new region, j1, j2)
    in each region's word indexes (see `cdc.core.moves`)."""
    changes = [(r, change) for r, region in enumerate(regions) for change in region.changes]
    if len(changes) < 2:  # a change's own two sides are in place, not moved
        return []
    if (sum(i2 - i1 for _, (i1, i2, _, _) in changes) < MIN_MOVE_TOKENS
            or sum(j2 - j1 for _, (_, _, j1, j2) in changes) < MIN_MOVE_TOKENS):
        return []  # too few tokens on one side for any move (what `find_moves` checks first)
    old_hashes, new_hashes = array("Q"), array("Q")
    old_where: list[tuple[int, int, int]] = []  # per group: region, first word, first position
    new_where: list[tuple[int, int, int]] = []
    for r, (i1, i2, j1, j2) in changes:
        old_where.append((r, i1, len(old_hashes)))
        new_where.append((r, j1, len(new_hashes)))
        old_hashes.extend(regions[r].old.hashes[i1:i2])
        new_hashes.extend(regions[r].new.hashes[j1:j2])
    numbers = np.arange(len(changes))  # each token's group: its change's number, as an array
    old_groups = np.repeat(numbers, [i2 - i1 for _, (i1, i2, _, _) in changes])
    new_groups = np.repeat(numbers, [j2 - j1 for _, (_, _, j1, j2) in changes])
    found = []
    for i1, i2, j1, j2 in find_moves(old_hashes, old_groups, new_hashes, new_groups):
        old_region, old_first, old_base = old_where[int(old_groups[i1])]
        new_region, new_first, new_base = new_where[int(new_groups[j1])]
        found.append((old_region, old_first + i1 - old_base, old_first + i2 - old_base,
                      new_region, new_first + j1 - new_base, new_first + j2 - new_base))
    return found


def _subtract(start: int, end: int, holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """What is left of start:end without the holes (which do not overlap one another)."""
    left = []
    for hole_start, hole_end in sorted(holes):
        if hole_end <= start or hole_start >= end:
            continue
        if hole_start > start:
            left.append((start, hole_start))
        start = max(start, hole_end)
    if start < end:
        left.append((start, end))
    return left


def _without_moves(changes: list[tuple], old_holes: list[tuple[int, int]],
                   new_holes: list[tuple[int, int]]) -> list[tuple]:
    """The changes with the moved words taken out: what is left of each side of a change
    that lost words to a move is paired in order, the rest deleted or inserted."""
    if not old_holes and not new_holes:
        return changes
    left = []
    for i1, i2, j1, j2 in changes:
        old_left, new_left = _subtract(i1, i2, old_holes), _subtract(j1, j2, new_holes)
        if old_left == _subtract(i1, i2, []) and new_left == _subtract(j1, j2, []):  # no word moved
            left.append((i1, i2, j1, j2))
            continue
        for old, new in zip_longest(old_left, new_left):
            if new is None:
                point = new_left[-1][1] if new_left else j1
                left.append((old[0], old[1], point, point))
            elif old is None:
                point = old_left[-1][1] if old_left else i1
                left.append((point, point, new[0], new[1]))
            else:
                left.append((old[0], old[1], new[0], new[1]))
    return left


def _inner_changes(old: Words, new: Words, i1: int, i2: int, j1: int, j2: int) -> list[tuple]:
    """The changes inside a move: its old words against its new words."""
    return [(a + i1, b + i1, c + j1, d + j1)
            for a, b, c, d in _stretches_of(old.hashes[i1:i2], new.hashes[j1:j2])]


def _merge_moves(moves: list[Edit], old_text: bytes, new_text: bytes) -> list[Edit]:
    """Moves that continue one another (only whitespace between, on both sides) as one."""
    merged: list[Edit] = []
    for move in sorted(moves, key=lambda m: m.old_offset):
        if merged:
            last = merged[-1]
            old_end, new_end = last.old_offset + last.old_length, last.new_offset + last.new_length
            if (move.new_offset >= new_end and not old_text[old_end:move.old_offset].strip()
                    and not new_text[new_end:move.new_offset].strip()):
                merged[-1] = Edit(MOVE, last.old_offset, move.old_offset + move.old_length - last.old_offset,
                                  last.new_offset, move.new_offset + move.new_length - last.new_offset)
                continue
        merged.append(move)
    return merged


def _char_after(text: bytes, i: int) -> int:
    while _is_continuation(text, i):
        i += 1
    return i


def _char_at(text: bytes, i: int) -> int:
    while _is_continuation(text, i):
        i -= 1
    return i


def refine(old: Side, new: Side, runs: list[tuple[int, int, int, int]],
           moved: Iterable[tuple[int, int, int, int]] = (), may_hold_moves: bool = False) -> list[Edit]:
    """Word-level edits inside the changed stretches `runs` (i1, i2, j1, j2: chunk positions
    on each side, as `stretches` gives them), with moves, ordered by where they are in the
    new text (a move before the edits inside it).

    `moved`: runs of chunks the chunk comparison found moved, as byte ranges (old start,
    old end, new start, new end); each is a move, joined to the moved words next to it.
    `may_hold_moves`: the compiled comparison (`cdc.core.fastcompare`) found already that the
    changed words may hold a move, so the compiled edits without moves are not tried.
    """
    moved = list(moved)
    if not moved and not len(old.moved) and not len(new.moved) and not may_hold_moves:
        edits = _edits_without_moves(old, new, runs)
        if edits is not None:
            return edits
    old_text, new_text = old.text, new.text
    regions = []
    for old_words, new_words in _windows(old, new, runs):
        changes = _slide(_changes(old_words, new_words), old_words, new_words, old_text, new_text)
        changes = _absorb_short_equalities(changes, old_words, new_words, old_text, new_text)
        regions.append(_Region(old_words, new_words, changes))
    found = _token_moves(regions)
    old_holes: dict[int, list[tuple[int, int]]] = defaultdict(list)
    new_holes: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for old_region, i1, i2, new_region, j1, j2 in found:
        old_holes[old_region].append((i1, i2))
        new_holes[new_region].append((j1, j2))
    edits: list[Edit] = []
    for r, (old_words, new_words, changes) in enumerate(regions):
        if found:
            changes = _without_moves(changes, old_holes[r], new_holes[r])
        edits += _edits(changes, old_words, new_words, old_text, new_text,
                        (old_words.start, len(old_text)), (new_words.start, len(new_text)))
    moves = []
    for old_start, old_end, new_start, new_end in moved:  # chunk edges may split a character
        old_start, new_start = _char_after(old_text, old_start), _char_after(new_text, new_start)
        old_end, new_end = _char_at(old_text, old_end), _char_at(new_text, new_end)
        # A block-aligned chunk ends with its block's line break: the move is the text, and
        # the same bytes on both sides lose the same whitespace.
        piece = old_text[old_start:old_end]
        lead, trail = len(piece) - len(piece.lstrip()), len(piece) - len(piece.rstrip())
        if lead + trail >= len(piece):
            continue
        moves.append(Edit(MOVE, old_start + lead, old_end - old_start - lead - trail,
                          new_start + lead, new_end - new_start - lead - trail))
    for old_region, i1, i2, new_region, j1, j2 in found:
        old, new = regions[old_region].old, regions[new_region].new
        moves.append(Edit(MOVE, old.begins[i1], old.ends[i2 - 1] - old.begins[i1],
                          new.begins[j1], new.ends[j2 - 1] - new.begins[j1]))
        inner = _absorb_short_equalities(_inner_changes(old, new, i1, i2, j1, j2), old, new,
                                         old_text, new_text)
        edits += _edits(inner, old, new, old_text, new_text, (old.begins[i1], old.ends[i2 - 1]),
                        (new.begins[j1], new.ends[j2 - 1]))
    edits += _merge_moves(moves, old_text, new_text)
    edits.sort(key=lambda edit: (edit.new_offset, edit.kind != MOVE))
    return edits


KINDS = {INSERT_CODE: INSERT, DELETE_CODE: DELETE, REPLACE_CODE: REPLACE}


def _edits_without_moves(old: Side, new: Side, runs: list[tuple[int, int, int, int]]) -> list[Edit] | None:
    """`refine` where no chunk moved, its word alignments and per-change loops in one
    compiled call (`cdc.core.wordchanges`): the same edits, or None where the changed words
    may hold a move (`cdc.core.moves`: they have `MIN_MOVE_TOKENS` in common, in order; then
    `refine` decides)."""
    if not len(runs):
        return []
    regions, old_hashes, old_table, new_hashes, new_table, old_bytes, _, new_bytes, _ = scan_windows(
        old.text, old.rows, old.moved, new.text, new.rows, new.moved, runs)
    found = word_edits(old.text, new.text, old_hashes, old_table, new_hashes, new_table, regions,
                       NO_DIFFS, NO_BOUNDS)
    if found is None:  # a window too large to align compiled: rapidfuzz aligns each
        diffs: list[tuple[int, int, int, int]] = []
        bounds = [0]
        for old_at, old_count, new_at, new_count, _, _ in regions.tolist():
            if old_count and new_count and not old_count == new_count == 1:  # else `_changes` decides alone
                old_words, new_words = array("Q"), array("Q")
                old_words.frombytes(old_bytes[8 * old_at:8 * (old_at + old_count)])
                new_words.frombytes(new_bytes[8 * new_at:8 * (new_at + new_count)])
                diffs += [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in
                          Indel.opcodes(old_words, new_words).as_list() if tag != "equal"]
            bounds.append(len(diffs))
        found = word_edits(old.text, new.text, old_hashes, old_table, new_hashes, new_table, regions,
                           np.array(diffs, np.int64).reshape(-1, 4), np.array(bounds, np.int64))
    edits, (_, changes, old_words_changed, new_words_changed, _, _, common) = found[0], found[1].tolist()
    if changes >= 2 and min(old_words_changed, new_words_changed, common) >= MIN_MOVE_TOKENS:
        return None
    kinds = KINDS
    edits = [Edit(kinds[kind], *places) for kind, *places in edits.tolist()]
    edits.sort(key=_new_offset)  # no move: the order `refine` sorts by
    return edits


_new_offset = itemgetter(3)
