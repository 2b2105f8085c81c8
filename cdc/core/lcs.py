"""The longest common subsequence of two sequences of numbers, compiled, as rapidfuzz pairs it.

`cdc.core.compare` aligns chunk digests and `cdc.core.refine` word hashes with rapidfuzz's
Indel alignment; which items it pairs, where several longest alignments exist, is its
choice, and the reports depend on it. `lcs_matches` makes the same choice inside a kernel,
so a pair's whole alignment runs without a call back into Python: rapidfuzz's steps
(rapidfuzz-cpp's `lcs_seq_editops`), which are

1. the common prefix and suffix paired as they are;
2. between them, Hyyrö's bit-parallel LCS, each row's bit vector kept (bit `c` of row `r`
   set where dropping the first sequence's item `c` keeps the LCS of the prefixes);
3. a walk back from the end: a set bit drops an item of the first sequence; otherwise
   the row goes back, and the two items are paired unless the row before has its bit
   clear there too (then the second sequence's item is the one dropped).

Blocks of 62 bits held in int64 (the carry never overflows, so the uncompiled reference
runs as plain Python too); the same bits as rapidfuzz's 64-bit words. A test holds the
pairs to rapidfuzz's opcodes. Past MAX_CELLS blocks of matrix the caller asks rapidfuzz.
"""

from __future__ import annotations

import numpy as np

from cdc.core.compiled import njit

MAX_CELLS = 1 << 22  # blocks of kept rows (32 MiB as int64): past that, rapidfuzz aligns
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


def _rows(first, second, matrix, keep):  # pragma: no cover - inlined in the kernels
    """Step 2 over all of `first` and `second`: with `keep`, each row's bit vector into
    `matrix` (len(second) rows). Returns the LCS length."""
    length_1 = len(first)
    blocks = (length_1 + BLOCK - 1) // BLOCK
    order = np.argsort(first)  # `first`'s positions grouped by value
    ordered = first[order]
    state = np.full(blocks, LOW, np.int64)
    matches = np.zeros(blocks, np.int64)
    for row in range(len(second)):
        value = second[row]
        low, high = 0, length_1  # the first position of `ordered` not below `value`
        while low < high:
            middle = (low + high) // 2
            if ordered[middle] < value:
                low = middle + 1
            else:
                high = middle
        high = low
        while high < length_1 and ordered[high] == value:
            at = order[high]
            matches[at // BLOCK] |= 1 << (at % BLOCK)
            high += 1
        carry = 0
        for b in range(blocks):
            before = state[b]
            taken = before & matches[b]
            total = before + taken + carry
            carry = total >> BLOCK
            state[b] = (total & LOW) | (before - taken)
            if keep:
                matrix[row, b] = state[b]
        for t in range(low, high):
            matches[order[t] // BLOCK] = 0
    length = 0
    for b in range(blocks):
        word = ~state[b] & LOW
        if b == blocks - 1 and length_1 % BLOCK:
            word &= (1 << (length_1 % BLOCK)) - 1
        while word:
            word &= word - 1
            length += 1
    return length


_rows_compiled = njit(inline="always")(_rows)


def _bit(matrix, row, column):  # pragma: no cover - inlined in the kernels
    return (matrix[row, column // BLOCK] >> (column % BLOCK)) & 1


_bit_compiled = njit(inline="always")(_bit)


def _lcs_matches(first, second, first_at, second_at):  # pragma: no cover - compiled
    """The pairs rapidfuzz's Indel alignment makes of `first` and `second` (positions into
    `first_at` and `second_at`, in order); returns how many, or -1 where the matrix would
    pass MAX_CELLS (nothing written)."""
    length_1, length_2 = len(first), len(second)
    prefix, suffix = _affixes_compiled(first, second)
    middle_1, middle_2 = length_1 - prefix - suffix, length_2 - prefix - suffix
    if middle_1 and middle_2 and middle_2 * ((middle_1 + BLOCK - 1) // BLOCK) > MAX_CELLS:
        return -1
    count = 0
    for k in range(prefix):
        first_at[count], second_at[count] = k, k
        count += 1
    if middle_1 and middle_2:
        matrix = np.empty((middle_2, (middle_1 + BLOCK - 1) // BLOCK), np.int64)
        length = _rows_compiled(first[prefix:prefix + middle_1], second[prefix:prefix + middle_2], matrix,
                                 True)
        column, row = middle_1, middle_2
        found = length
        while row and column:
            if _bit_compiled(matrix, row - 1, column - 1):
                column -= 1
            else:
                row -= 1
                if not (row and not _bit_compiled(matrix, row - 1, column - 1)):
                    column -= 1
                    found -= 1
                    first_at[count + found], second_at[count + found] = prefix + column, prefix + row
        count += length
    for k in range(suffix):
        first_at[count], second_at[count] = length_1 - suffix + k, length_2 - suffix + k
        count += 1
    return count


lcs_matches = njit(nogil=True)(_lcs_matches)


def _lcs_length(first, second):  # pragma: no cover - compiled
    """How long the longest common subsequence is (what `LCSseq.similarity` counts)."""
    if len(first) == 0 or len(second) == 0:
        return 0
    return _rows_compiled(first, second, np.empty((1, 1), np.int64), False)


lcs_length = njit(nogil=True)(_lcs_length)
