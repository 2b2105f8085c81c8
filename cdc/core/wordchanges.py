"""A pair's word diffs to edits, in one compiled call: the per-change loops of `cdc.core.refine`.

`cdc.core.refine` diffs each window's words with rapidfuzz; what it does next is a loop over
changes and words per window: the changed runs (`stretches`), pure insertions and deletions
slid to a block's start (`_slide`), noise between changes absorbed
(`_absorb_short_equalities`), and the changes turned into byte ranges (`_edits`). Run as
Python, those loops cost more than the diff itself; `_word_edits` runs the same rules, in the
same order, over every window of a pair at once, on the word table the scan wrote
(`cdc.core.regions`). The Python functions of `cdc.core.refine` stay the reference (and the
path for pairs with moves); a test holds the two to the same edits.
"""

from __future__ import annotations

import numpy as np

from cdc.core.compiled import AHEAD_OF_TIME, njit
from cdc.core.lcs import lcs_length, lcs_matches
from cdc.core.words import _is_space_byte

SHORT_EQUALITY = 1  # as `cdc.core.refine`'s: tokens
EQUALITY_SHARE = 8

# Edit kinds as `_word_edits` writes them (`cdc.core.refine.INSERT`, ...).
INSERT_CODE, DELETE_CODE, REPLACE_CODE = 0, 1, 2

_space = njit(inline="always")(_is_space_byte)


def _has_newline(text, start, stop):  # pragma: no cover - inlined in the kernel
    for k in range(start, stop):  # noqa: SIM110 - a loop, as the kernel compiles it
        if text[k] == 10:
            return True
    return False


_has_newline_compiled = njit(inline="always")(_has_newline)


def _block_break(text, left, right):  # pragma: no cover - inlined in the kernel
    """`cdc.core.refine._block_break`."""
    while left > 0 and _space(text[left - 1]):
        left -= 1
    while right < len(text) and _space(text[right]):
        right += 1
    return left == 0 or right == len(text) or _has_newline_compiled(text, left, right)


_block_break_compiled = njit(inline="always")(_block_break)


def _whole_blocks(text, table, i1, i2):  # pragma: no cover - inlined in the kernel
    """`cdc.core.refine._whole_blocks` on a window's word rows (begin, end, piece)."""
    after = table[i2, 0] if i2 < len(table) else table[i2 - 1, 1]
    left = table[i1 - 1, 1] if i1 else table[i1, 0]
    return (_block_break_compiled(text, left, table[i1, 0])
            and _block_break_compiled(text, table[i2 - 1, 1], after))


_whole_blocks_compiled = njit(inline="always")(_whole_blocks)


def _noise_between(a, b, old_text, old_table, new_text, new_table):  # pragma: no cover - inlined
    """`cdc.core.refine._noise_between` of changes `a` and `b` (rows of i1, i2, j1, j2)."""
    between = b[0] - a[1]
    size_first = max(a[1] - a[0], a[3] - a[2])
    size_second = max(b[1] - b[0], b[3] - b[2])
    if not (between <= min(size_first, size_second) // EQUALITY_SHARE
            or between <= SHORT_EQUALITY < max(size_first, size_second)):
        return False
    return not (between and _whole_blocks_compiled(old_text, old_table, a[1], b[0])
                and _whole_blocks_compiled(new_text, new_table, a[3], b[2]))


_noise_between_compiled = njit(inline="always")(_noise_between)


def _starts_block(text, table, i):  # pragma: no cover - inlined in the kernel
    return i == 0 or _has_newline_compiled(text, table[i - 1, 1], table[i, 0])


_starts_block_compiled = njit(inline="always")(_starts_block)


def _slide(changes, count, old_text, old_hashes, old_table, new_text, new_hashes, new_table,
           slid):  # pragma: no cover - inlined in the kernel
    """`cdc.core.refine._slide` of `changes[:count]` into `slid`."""
    for number in range(count):
        i1, i2, j1, j2 = changes[number, 0], changes[number, 1], changes[number, 2], changes[number, 3]
        if (i1 == i2) == (j1 == j2):
            slid[number, 0], slid[number, 1], slid[number, 2], slid[number, 3] = i1, i2, j1, j2
            continue
        if i1 == i2:
            text, hashes, table, start, end, side = new_text, new_hashes, new_table, j1, j2, 2
        else:
            text, hashes, table, start, end, side = old_text, old_hashes, old_table, i1, i2, 0
        floor = slid[number - 1, side + 1] if number else 0
        ceiling = changes[number + 1, side] if number + 1 < count else len(hashes)
        shift = 0
        while start + shift > floor and hashes[start + shift - 1] == hashes[end + shift - 1]:
            shift -= 1
        best = 0  # none found: no shift, as is a best of 0
        while True:
            if _starts_block_compiled(text, table, start + shift):
                best = shift
                if shift >= 0:
                    break
            if end + shift >= ceiling or hashes[start + shift] != hashes[end + shift]:
                break
            shift += 1
        slid[number, 0], slid[number, 1] = i1 + best, i2 + best
        slid[number, 2], slid[number, 3] = j1 + best, j2 + best


_slide_compiled = njit(inline="always")(_slide)


def _point(table, i, text, start, limit):  # pragma: no cover - inlined in the kernel
    """`cdc.core.refine._point`."""
    if i < len(table) and table[i, 0] <= limit:
        return table[i, 0]
    if i == 0:
        return start
    point = table[i - 1, 1]
    while point < limit and _space(text[point]):
        point += 1
    return point


_point_compiled = njit(inline="always")(_point)


def _ranges(table, i1, i2, out):  # pragma: no cover - inlined in the kernel
    """`cdc.core.refine._ranges` into rows of `out`; returns how many."""
    if i2 <= i1:
        return 0
    if table[i1, 2] == table[i2 - 1, 2]:
        out[0, 0], out[0, 1] = table[i1, 0], table[i2 - 1, 1]
        return 1
    count = 0
    for i in range(i1, i2):
        if count and table[i - 1, 2] == table[i, 2]:
            out[count - 1, 1] = table[i, 1]
        else:
            out[count, 0], out[count, 1] = table[i, 0], table[i, 1]
            count += 1
    return count


_ranges_compiled = njit(inline="always")(_ranges)


@njit(cache=True, nogil=True)
def _word_edits(old_text, new_text, old_hashes, old_table, new_hashes, new_table, regions, diffs,
                diff_bounds, align, edits, changes_out, old_changed, new_changed,
                totals):  # pragma: no cover - compiled
    """The edits of every window of a pair, as `cdc.core.refine` makes them without moves.

    `regions`: a row per window as `cdc.core.regions._pair_words` writes it (where its old
    words start in `old_hashes`/`old_table` and how many, the same for the new, where its
    first range starts on each side). With `align`, each window's words are aligned here
    (`cdc.core.lcs`: rapidfuzz's pairs), and -1 is returned, nothing decided, where one is too
    large; else `diffs` holds the non-equal opcodes (i1, i2, j1, j2) of each window's word
    diff, window `w`'s at rows diff_bounds[w]:diff_bounds[w + 1]. A window with no words on
    a side, or one word on each, is not diffed (see `_changes`). Writes the
    edits as rows (kind code, old offset, old length, new offset, new length), each changes'
    (window, i1, i2, j1, j2) after the cleanup into `changes_out`, and the changed words'
    hashes one change after the other into `old_changed`/`new_changed` (what `_token_moves`
    aligns); `totals`: edits, changes, old changed words, new changed words, bytes the edits
    insert, bytes they delete, and, with two changes or more, the length of the changed
    words' longest common subsequence (a move needs `MIN_MOVE_TOKENS` of it:
    `cdc.core.moves`). Returns the number of edits."""
    edit_count, change_count, old_words, new_words, inserted, deleted = 0, 0, 0, 0, 0, 0
    for w in range(len(regions)):
        old_at, old_count, new_at, new_count = regions[w, 0], regions[w, 1], regions[w, 2], regions[w, 3]
        oh, ot = old_hashes[old_at:old_at + old_count], old_table[old_at:old_at + old_count]
        nh, nt = new_hashes[new_at:new_at + new_count], new_table[new_at:new_at + new_count]
        first, stop = (diff_bounds[w], diff_bounds[w + 1]) if not align else (0, 0)
        runs = np.empty((max(stop - first, min(old_count, new_count) + 1), 4), np.int64)
        count = 0
        if old_count == 0 or new_count == 0 or (old_count == 1 and new_count == 1):
            same = old_count == new_count and (old_count == 0 or oh[0] == nh[0])
            if not same:
                runs[0, 0], runs[0, 1], runs[0, 2], runs[0, 3] = 0, old_count, 0, new_count
                count = 1
        elif align:  # the runs between paired words: `stretches` of the opcodes
            old_paired = np.empty(min(old_count, new_count) + 1, np.int64)
            new_paired = np.empty(min(old_count, new_count) + 1, np.int64)
            pairs = lcs_matches(oh, nh, old_paired, new_paired)
            if pairs < 0:
                return -1
            last_i, last_j = -1, -1
            for t in range(pairs + 1):
                i, j = (old_paired[t], new_paired[t]) if t < pairs else (old_count, new_count)
                if i > last_i + 1 or j > last_j + 1:
                    runs[count, 0], runs[count, 1] = last_i + 1, i
                    runs[count, 2], runs[count, 3] = last_j + 1, j
                    count += 1
                last_i, last_j = i, j
        else:
            for k in range(first, stop):  # `stretches`: a delete next to an insert is one run
                i1, i2, j1, j2 = diffs[k, 0], diffs[k, 1], diffs[k, 2], diffs[k, 3]
                if count and runs[count - 1, 1] == i1 and runs[count - 1, 3] == j1:
                    runs[count - 1, 1], runs[count - 1, 3] = i2, j2
                else:
                    runs[count, 0], runs[count, 1], runs[count, 2], runs[count, 3] = i1, i2, j1, j2
                    count += 1
        slid = np.empty((max(count, 1), 4), np.int64)
        _slide_compiled(runs, count, old_text, oh, ot, new_text, nh, nt, slid)
        merged = np.empty((max(count, 1), 4), np.int64)  # `_absorb_short_equalities`' stack
        size = 0
        for c in range(count):
            merged[size] = slid[c]
            size += 1
            while size > 1 and _noise_between_compiled(merged[size - 2], merged[size - 1], old_text, ot,
                                                       new_text, nt):
                merged[size - 2, 1], merged[size - 2, 3] = merged[size - 1, 1], merged[size - 1, 3]
                size -= 1
        old_ranges = np.empty((max(old_count, 1), 2), np.int64)
        new_ranges = np.empty((max(new_count, 1), 2), np.int64)
        old_start, new_start = regions[w, 4], regions[w, 5]
        for c in range(size):
            i1, i2, j1, j2 = merged[c, 0], merged[c, 1], merged[c, 2], merged[c, 3]
            changes_out[change_count, 0] = w
            changes_out[change_count, 1], changes_out[change_count, 2] = i1, i2
            changes_out[change_count, 3], changes_out[change_count, 4] = j1, j2
            change_count += 1
            old_changed[old_words:old_words + i2 - i1] = oh[i1:i2]
            new_changed[new_words:new_words + j2 - j1] = nh[j1:j2]
            old_words += i2 - i1
            new_words += j2 - j1
            old_point = _point_compiled(ot, i1, old_text, old_start, len(old_text))
            new_point = _point_compiled(nt, j1, new_text, new_start, len(new_text))
            olds = _ranges_compiled(ot, i1, i2, old_ranges)
            news = _ranges_compiled(nt, j1, j2, new_ranges)
            for r in range(max(olds, news)):
                e = edit_count
                if r >= olds:
                    edits[e, 0], edits[e, 1], edits[e, 2] = INSERT_CODE, old_point, 0
                    edits[e, 3], edits[e, 4] = new_ranges[r, 0], new_ranges[r, 1] - new_ranges[r, 0]
                elif r >= news:
                    edits[e, 0], edits[e, 1] = DELETE_CODE, old_ranges[r, 0]
                    edits[e, 2], edits[e, 3], edits[e, 4] = old_ranges[r, 1] - old_ranges[r, 0], new_point, 0
                else:
                    edits[e, 0], edits[e, 1] = REPLACE_CODE, old_ranges[r, 0]
                    edits[e, 2] = old_ranges[r, 1] - old_ranges[r, 0]
                    edits[e, 3], edits[e, 4] = new_ranges[r, 0], new_ranges[r, 1] - new_ranges[r, 0]
                deleted += edits[e, 2]
                inserted += edits[e, 4]
                edit_count += 1
    totals[0], totals[1], totals[2], totals[3] = edit_count, change_count, old_words, new_words
    totals[4], totals[5] = inserted, deleted
    totals[6] = lcs_length(old_changed[:old_words], new_changed[:new_words]) if change_count >= 2 else 0
    return edit_count


word_edits_kernel = _word_edits  # for other kernels to call (`cdc.core.fastcompare`), whichever build runs

if AHEAD_OF_TIME is not None:  # the same kernel, compiled by `python -m cdc.core.aot`
    _word_edits = AHEAD_OF_TIME.word_edits


def word_edits(old_text: bytes, new_text: bytes, old_hashes: np.ndarray, old_table: np.ndarray,
               new_hashes: np.ndarray, new_table: np.ndarray, regions: np.ndarray, diffs: np.ndarray,
               diff_bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """`_word_edits` with room for its output: (edits, totals), the edits cut to what was
    written; None where a window is too large to align here (without `diffs`)."""
    old_words, new_words = int(regions[:, 1].sum()), int(regions[:, 3].sum())
    edits = np.empty((old_words + new_words + len(regions) + 1, 5), np.int64)
    changes = np.empty((old_words + new_words + len(regions) + 1, 5), np.int64)
    old_changed, new_changed = np.empty(old_words + 1, np.uint64), np.empty(new_words + 1, np.uint64)
    totals = np.zeros(7, np.int64)
    if _word_edits(old_text, new_text, old_hashes, old_table, new_hashes, new_table, regions, diffs,
                   diff_bounds, diffs is NO_DIFFS, edits, changes, old_changed, new_changed, totals) < 0:
        return None
    return edits[:totals[0]], totals


NO_DIFFS = np.zeros((0, 4), np.int64)  # `word_edits` aligns the words itself
NO_BOUNDS = np.zeros(1, np.int64)
