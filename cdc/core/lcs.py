"""The longest common subsequence of two sequences of numbers, compiled, as rapidfuzz pairs it.

`cdc.core.compare` aligns chunk digests and `cdc.core.refine` word hashes with rapidfuzz's
Indel alignment; which items it pairs, where several longest alignments exist, is its
choice, and the reports depend on it. `lcs_matches` makes the same choice inside a kernel,
so a pair's whole alignment runs without a call back into Python: rapidfuzz's steps
(rapidfuzz-cpp's `lcs_seq_editops`), which are

1. the common prefix and suffix paired as they are;
2. between them, Hyyrö's bit-parallel LCS, each row's bit vector (bit `c` of row `r` set
   where dropping the first sequence's item `c` keeps the LCS of the prefixes) kept as
   the blocks it changed (`_rows`);
3. a walk back from the end: a set bit drops an item of the first sequence; otherwise
   the row goes back, and the two items are paired unless the row before has its bit
   clear there too (then the second sequence's item is the one dropped).

Blocks of 62 bits held in int64 (the carry never overflows, so the uncompiled reference
runs as plain Python too); the same bits as rapidfuzz's 64-bit words. A test holds the
pairs to rapidfuzz's opcodes. Past MAX_CELLS blocks of rows, or MAX_LOGGED changes to
log, the caller asks rapidfuzz.
"""

from __future__ import annotations

import numpy as np

from cdc.core.compiled import AHEAD_OF_TIME, njit

MAX_CELLS = 1 << 26  # blocks of rows (64,000 words against as many): past that, rapidfuzz aligns
MAX_LOGGED = 1 << 22  # changes the log holds (96 MiB; rows of repeated words change many)
BLOCK = 62  # bits a block holds: two blocks and a carry add up below 2**63
LOW = (1 << BLOCK) - 1


def _affixes(first, second):  # pragma: no cover - inlined in the kernels
    """(common prefix, common suffix of what the prefix leaves)."""
    length_1, length_2 = len(first), len(second)
    prefix = 0
    while prefix < length_1 and prefix < length_2 and first[prefix] == second[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < length_1 - prefix and suffix < length_2 - prefix
           and first[length_1 - 1 - suffix] == second[length_2 - 1 - suffix]):
        suffix += 1
    return prefix, suffix


_affixes_compiled = njit(inline="always")(_affixes)


def _room(log, logged, more):  # pragma: no cover - inlined in the kernels
    """`log`, or a copy twice as long (or more) where it has no room for `more` changes."""
    if logged + more <= len(log):
        return log
    grown = np.empty((2 * len(log) + more, 3), np.int64)
    grown[:logged] = log[:logged]
    return grown


_room_compiled = njit(inline="always")(_room)


def _rewind(state, log, logged, row):  # pragma: no cover - inlined in the kernels
    """`state` as row `row - 1` left it: the logged changes of the rows from `row` on undone.
    Returns how many changes are still logged."""
    while logged and log[logged - 1, 0] >= row:
        logged -= 1
        state[log[logged, 1]] = log[logged, 2]
    return logged


_rewind_compiled = njit(inline="always")(_rewind)


def _rows(first, second, keep):  # pragma: no cover - inlined in the kernels
    """Step 2 over all of `first` and `second`. Returns the LCS length, the last row's bit
    vector, and with `keep` a log of each block a row changed (the row, the block, the
    value before), from which `_rewind` gives any row back; a length of -1 where the log
    would pass MAX_LOGGED changes.

    A row adds to each block the bits of its matches and the carry from the block below,
    so a block with neither is left as it was, and a carry passes an all-ones block
    unchanged: only the blocks of the row's matches, and those a carry reaches, are
    computed. On a page's words (5,800 against 5,800, 94 blocks a row), a row changes about
    one block; keeping every row whole was most of the alignment's time."""
    length_1 = len(first)
    blocks = (length_1 + BLOCK - 1) // BLOCK
    # Each value's matches, a block at a time: (value, block, its bits), in value order, then
    # block order; a row reads the blocks of its value (a common word's 300 places on a page
    # are 94 blocks or fewer).
    order = np.argsort(first, kind="mergesort")
    values = np.empty(length_1, first.dtype)
    value_blocks, value_bits = np.empty(length_1, np.int64), np.empty(length_1, np.int64)
    groups = 0
    for t in range(length_1):
        at = order[t]
        if not groups or values[groups - 1] != first[at] or value_blocks[groups - 1] != at // BLOCK:
            values[groups], value_blocks[groups], value_bits[groups] = first[at], at // BLOCK, 0
            groups += 1
        value_bits[groups - 1] |= 1 << (at % BLOCK)
    state = np.full(blocks, LOW, np.int64)
    top = 0  # every block from `top` on is all ones
    log = np.empty((1024 if keep else 0, 3), np.int64)
    logged = 0
    for row in range(len(second)):
        if keep:  # a row changes each block once at most
            if logged + blocks > MAX_LOGGED:
                return -1, state, log, logged
            log = _room_compiled(log, logged, blocks)
        value = second[row]
        low, high = 0, groups  # the first group whose value is not below `value`
        while low < high:
            middle = (low + high) // 2
            if values[middle] < value:
                low = middle + 1
            else:
                high = middle
        t = low
        carry = 0
        b = 0  # the first block not computed yet
        while True:
            if t < groups and values[t] == value:  # the next block with matches
                target, matches = value_blocks[t], value_bits[t]
                t += 1
            else:
                target, matches = blocks, 0
            while carry and b < target:  # the carry up to it
                if b >= top:  # through all ones up to it
                    b = target
                    break
                before = state[b]
                if before != LOW:
                    if keep:
                        log[logged, 0], log[logged, 1], log[logged, 2] = row, b, before
                        logged += 1
                    state[b] = ((before + 1) & LOW) | before
                    carry = 0
                b += 1
            if target == blocks:
                break
            before = state[target]
            taken = before & matches
            total = before + taken + carry
            carry = total >> BLOCK
            after = (total & LOW) | (before - taken)
            if after != before:
                if keep:
                    log[logged, 0], log[logged, 1], log[logged, 2] = row, target, before
                    logged += 1
                state[target] = after
                if target >= top and after != LOW:
                    top = target + 1
            b = target + 1
    length = 0
    for b in range(blocks):
        word = ~state[b] & LOW
        if b == blocks - 1 and length_1 % BLOCK:
            word &= (1 << (length_1 % BLOCK)) - 1
        while word:
            word &= word - 1
            length += 1
    return length, state, log, logged


_rows_compiled = njit(inline="always")(_rows)


def _bit(state, column):  # pragma: no cover - inlined in the kernels
    """Bit `column` of a row's bit vector (`_rows`' blocks)."""
    return (state[column // BLOCK] >> (column % BLOCK)) & 1


_bit_compiled = njit(inline="always")(_bit)


def _lcs_matches(first, second, first_at, second_at):  # pragma: no cover - compiled
    """The pairs rapidfuzz's Indel alignment makes of `first` and `second` (positions into
    `first_at` and `second_at`, in order); returns how many, or -1 where the rows would pass
    MAX_CELLS blocks or their log MAX_LOGGED changes (nothing written)."""
    length_1, length_2 = len(first), len(second)
    prefix, suffix = _affixes_compiled(first, second)
    middle_1, middle_2 = length_1 - prefix - suffix, length_2 - prefix - suffix
    if middle_1 and middle_2 and middle_2 * ((middle_1 + BLOCK - 1) // BLOCK) > MAX_CELLS:
        return -1
    length = 0
    if middle_1 and middle_2:
        length, state, log, logged = _rows_compiled(
            first[prefix:prefix + middle_1], second[prefix:prefix + middle_2], True)
        if length < 0:
            return -1
    count = 0
    for k in range(prefix):
        first_at[count], second_at[count] = k, k
        count += 1
    if middle_1 and middle_2:
        column, row = middle_1, middle_2
        found = length
        while row and column:
            logged = _rewind_compiled(state, log, logged, row)
            if _bit_compiled(state, column - 1):
                column -= 1
            else:
                row -= 1
                logged = _rewind_compiled(state, log, logged, row)
                if not (row and not _bit_compiled(state, column - 1)):
                    column -= 1
                    found -= 1
                    first_at[count + found], second_at[count + found] = prefix + column, prefix + row
        count += length
    for k in range(suffix):
        first_at[count], second_at[count] = length_1 - suffix + k, length_2 - suffix + k
        count += 1
    return count


lcs_matches = njit(nogil=True)(_lcs_matches)
_word_pairs = lcs_matches
if AHEAD_OF_TIME is not None:  # the same kernel, compiled by `python -m cdc.core.aot`, for words
    _word_pairs = AHEAD_OF_TIME.word_pairs


def changed_stretches(first: np.ndarray, second: np.ndarray) -> list[tuple[int, int, int, int]] | None:
    """What rapidfuzz's Indel opcodes of two word hash arrays (uint64) leave unpaired, as
    `cdc.core.refine.stretches` runs them (i1, i2, j1, j2): the gaps between the diagonal
    runs of `lcs_matches`' pairs, which are its equal blocks. None where the alignment is
    too large to make compiled (then ask rapidfuzz)."""
    room = min(len(first), len(second)) + 1
    first_at, second_at = np.empty(room + 1, np.int64), np.empty(room + 1, np.int64)
    count = _word_pairs(first, second, first_at[1:], second_at[1:])
    if count < 0:
        return None
    # Between a pair before the first (-1, -1) and one past the last (the lengths), a gap
    # wherever the next pair is not the next item on both sides.
    first_at[0] = second_at[0] = -1
    first_at[count + 1], second_at[count + 1] = len(first), len(second)
    ends_1, ends_2 = first_at[:count + 2], second_at[:count + 2]
    gaps = np.flatnonzero((np.diff(ends_1) > 1) | (np.diff(ends_2) > 1))
    return list(zip((ends_1[gaps] + 1).tolist(), ends_1[gaps + 1].tolist(), (ends_2[gaps] + 1).tolist(),
                    ends_2[gaps + 1].tolist()))


def _lcs_length(first, second):  # pragma: no cover - compiled
    """How long the longest common subsequence is (what `LCSseq.similarity` counts)."""
    if len(first) == 0 or len(second) == 0:
        return 0
    return _rows_compiled(first, second, False)[0]


lcs_length = njit(nogil=True)(_lcs_length)
