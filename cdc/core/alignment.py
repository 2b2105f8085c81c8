"""The chunk alignment's bookkeeping, compiled: what `cdc.core.compare` reads off the opcodes.

`cdc.compare` aligns two chunk lists by their digests (rapidfuzz's Indel opcodes). Around
that one call it needs, per chunk, work that as Python cost more than the alignment itself:

- `digest_ids`: each distinct digest numbered (the same number on both sides), with the
  counts the Jaccard similarity needs and whether the lists differ at all. rapidfuzz aligns
  the numbers as it aligned the digests (only which items are equal counts), without a
  `bytes` object per chunk;
- `chunk_alignment`: from the opcodes, the aligned pairs, the chunks left out that share a
  digest paired as moves (the first left-out old copy for each new one, in order), the added
  and removed positions, the changed stretches, and each side's bytes.

The rules are `cdc.core.compare`'s; a test holds them to the reference on lists of `Chunk`.
"""

from __future__ import annotations

import numpy as np

from cdc.core.compiled import AHEAD_OF_TIME, njit


@njit(cache=True, nogil=True)
def _digest_ids(old_rows, new_rows, old_ids, new_ids, counts):  # pragma: no cover - compiled
    """Number the digests (columns 3 and 4 of each chunk row) in order of first sight, old
    side first, into `*_ids`; `counts`: distinct old digests, distinct new ones, how many
    are on both sides, whether the two lists differ. Returns how many digests there are."""
    total = len(old_rows) + len(new_rows)
    size = 16
    while size < 2 * total:
        size *= 2
    mask = size - 1
    slots = np.full(size, -1, np.int64)
    first_words = np.empty(total, np.int64)
    second_words = np.empty(total, np.int64)
    seen = np.zeros(total, np.uint8)  # 1: on the old side, 2: on the new, 3: both
    distinct = 0
    for side in range(2):
        rows = old_rows if side == 0 else new_rows
        ids = old_ids if side == 0 else new_ids
        for k in range(len(rows)):
            first, second = rows[k, 3], rows[k, 4]
            slot = first & mask  # a digest's bits are random already
            while True:
                found = slots[slot]
                if found < 0:
                    slots[slot] = distinct
                    first_words[distinct], second_words[distinct] = first, second
                    found = distinct
                    distinct += 1
                    break
                if first_words[found] == first and second_words[found] == second:
                    break
                slot = (slot + 1) & mask
            ids[k] = found
            seen[found] = seen[found] | (side + 1)
    old_distinct, new_distinct, shared = 0, 0, 0
    for d in range(distinct):
        if seen[d] & 1:
            old_distinct += 1
        if seen[d] & 2:
            new_distinct += 1
        if seen[d] == 3:
            shared += 1
    differ = 1 if len(old_rows) != len(new_rows) else 0
    if not differ:
        for k in range(len(old_rows)):
            if old_ids[k] != new_ids[k]:
                differ = 1
                break
    counts[0], counts[1], counts[2], counts[3] = old_distinct, new_distinct, shared, differ
    return distinct


@njit(cache=True, nogil=True)
def _chunk_alignment(opcodes, old_ids, new_ids, old_rows, new_rows, distinct, aligned_old, aligned_new,
                     added, removed, moves, runs, old_moved, new_moved, counts):  # pragma: no cover
    """What `cdc.core.compare` reads off the opcodes (rows of: 1 for equal, else 0; i1, i2,
    j1, j2), the chunks numbered by digest (`*_ids`, `distinct` numbers) and their rows
    (index, offset, length). Writes the alignment's (old index, new index) pairs, the
    equal runs' and then the moves', into `aligned_*`; the positions added and removed; the
    moves' (old, new) positions, in new order; the changed stretches (i1, i2, j1, j2); marks
    of the moved chunks. `counts`: pairs, added, removed, moves, stretches, and each side's
    bytes (old, new)."""
    in_old, in_new = np.zeros(distinct, np.uint8), np.zeros(distinct, np.uint8)
    for i in range(len(old_ids)):
        in_old[old_ids[i]] = 1
    for j in range(len(new_ids)):
        in_new[new_ids[j]] = 1
    head, tail = np.full(distinct, -1, np.int64), np.full(distinct, -1, np.int64)
    following = np.full(max(len(old_ids), 1), -1, np.int64)  # the next left-out copy of a digest
    waiting = np.empty(max(len(new_ids), 1), np.int64)  # left-out new chunks whose digest is old
    pairs, waiting_count, run_count = 0, 0, 0
    for k in range(len(opcodes)):
        equal, i1, i2, j1, j2 = opcodes[k, 0], opcodes[k, 1], opcodes[k, 2], opcodes[k, 3], opcodes[k, 4]
        if equal:
            for t in range(i2 - i1):
                aligned_old[pairs], aligned_new[pairs] = old_rows[i1 + t, 0], new_rows[j1 + t, 0]
                pairs += 1
            continue
        if run_count and runs[run_count - 1, 1] == i1 and runs[run_count - 1, 3] == j1:
            runs[run_count - 1, 1], runs[run_count - 1, 3] = i2, j2
        else:
            runs[run_count, 0], runs[run_count, 1], runs[run_count, 2], runs[run_count, 3] = i1, i2, j1, j2
            run_count += 1
        for i in range(i1, i2):
            digest = old_ids[i]
            if in_new[digest]:
                if tail[digest] < 0:
                    head[digest] = i
                else:
                    following[tail[digest]] = i
                tail[digest] = i
        for j in range(j1, j2):
            if in_old[new_ids[j]]:
                waiting[waiting_count] = j
                waiting_count += 1
    move_count = 0
    for w in range(waiting_count):
        j = waiting[w]
        i = head[new_ids[j]]
        if i >= 0:
            head[new_ids[j]] = following[i]
            moves[move_count, 0], moves[move_count, 1] = i, j
            move_count += 1
            old_moved[i], new_moved[j] = 1, 1
    for m in range(move_count):
        aligned_old[pairs], aligned_new[pairs] = old_rows[moves[m, 0], 0], new_rows[moves[m, 1], 0]
        pairs += 1
    added_count, removed_count = 0, 0
    for k in range(len(opcodes)):
        if opcodes[k, 0]:
            continue
        for j in range(opcodes[k, 3], opcodes[k, 4]):
            if not new_moved[j]:
                added[added_count] = j
                added_count += 1
        for i in range(opcodes[k, 1], opcodes[k, 2]):
            if not old_moved[i]:
                removed[removed_count] = i
                removed_count += 1
    old_bytes, new_bytes = 0, 0
    for i in range(len(old_rows)):
        old_bytes += old_rows[i, 2]
    for j in range(len(new_rows)):
        new_bytes += new_rows[j, 2]
    counts[0], counts[1], counts[2], counts[3], counts[4] = pairs, added_count, removed_count, move_count, run_count
    counts[5], counts[6] = old_bytes, new_bytes
    return pairs


if AHEAD_OF_TIME is not None:  # the same kernels, compiled by `python -m cdc.core.aot`
    _digest_ids = AHEAD_OF_TIME.digest_ids
    _chunk_alignment = AHEAD_OF_TIME.chunk_alignment


def digest_ids(old_rows: np.ndarray, new_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """(old ids, new ids, how many digests, counts) of `_digest_ids`, on chunk record rows."""
    old_ids, new_ids = np.empty(len(old_rows), np.int64), np.empty(len(new_rows), np.int64)
    counts = np.empty(4, np.int64)
    distinct = _digest_ids(old_rows, new_rows, old_ids, new_ids, counts)
    return old_ids, new_ids, distinct, counts


class Aligned:
    """`_chunk_alignment`'s output, cut to what it wrote."""

    __slots__ = ("added", "aligned_new", "aligned_old", "moves", "new_bytes", "new_moved", "old_bytes",
                 "old_moved", "removed", "runs")

    def __init__(self, opcodes: np.ndarray, old_ids: np.ndarray, new_ids: np.ndarray, old_rows: np.ndarray,
                 new_rows: np.ndarray, distinct: int):
        old_count, new_count = len(old_ids), len(new_ids)
        aligned_old, aligned_new = np.empty(old_count + 1, np.int64), np.empty(old_count + 1, np.int64)
        added, removed = np.empty(new_count + 1, np.int64), np.empty(old_count + 1, np.int64)
        moves = np.empty((min(old_count, new_count) + 1, 2), np.int64)
        runs = np.empty((len(opcodes) + 1, 4), np.int64)
        old_moved, new_moved = np.zeros(old_count, np.uint8), np.zeros(new_count, np.uint8)
        counts = np.empty(7, np.int64)
        _chunk_alignment(opcodes, old_ids, new_ids, old_rows, new_rows, distinct, aligned_old, aligned_new,
                         added, removed, moves, runs, old_moved, new_moved, counts)
        pairs, added_count, removed_count, move_count, run_count, self.old_bytes, self.new_bytes = counts.tolist()
        self.aligned_old, self.aligned_new = aligned_old[:pairs], aligned_new[:pairs]
        self.added, self.removed = added[:added_count], removed[:removed_count]
        self.moves, self.runs = moves[:move_count], runs[:run_count]
        self.old_moved, self.new_moved = old_moved, new_moved
