"""The chunk alignment's bookkeeping, compiled: what `cdc.core.compare` reads off the opcodes.

`cdc.compare` aligns two chunk lists by their digests (rapidfuzz's Indel opcodes). Around
that one call it needs, per chunk, work that as Python cost more than the alignment itself:

- `digest_ids`: each distinct digest numbered (the same number on both sides), with the
  counts the Jaccard similarity needs and whether the lists differ at all (an alignment
  reads only which items are equal, so numbers align as the digests did);
- `chunk_alignment`: the alignment itself (`cdc.core.lcs`: the pairs rapidfuzz makes), and
  from it the aligned pairs, the chunks left out that share a
  digest paired as moves (the first left-out old copy for each new one, in order), the added
  and removed positions, the changed stretches, and each side's bytes.

The rules are `cdc.core.compare`'s; a test holds them to the reference on lists of `Chunk`.
"""

from __future__ import annotations

from array import array

import numpy as np
from rapidfuzz.distance import Indel

from cdc.core.compiled import AHEAD_OF_TIME, njit
from cdc.core.lcs import lcs_matches


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
def _chunk_alignment(old_ids, new_ids, old_rows, new_rows, distinct, old_paired, new_paired, known,
                     aligned_old, aligned_new, added, removed, moves, runs, old_moved, new_moved,
                     counts):  # pragma: no cover - compiled
    """What `cdc.core.compare` reads off the alignment of the chunks numbered by digest
    (`*_ids`, `distinct` numbers; `*_rows` their index, offset and length): with `known` < 0
    the pairs are found here (`cdc.core.lcs`, rapidfuzz's) into `*_paired`, else the first
    `known` there are the pairs. Writes the alignment's (old index, new index) pairs, the
    aligned ones' and then the moves', into `aligned_*`; the positions added and removed;
    the moves' (old, new) positions, in new order; the changed stretches (i1, i2, j1, j2,
    the runs between pairs); marks of the moved chunks. `counts`: pairs, added, removed,
    moves, stretches, and each side's bytes (old, new). Returns the pairs, or -1 (nothing
    written) where the alignment is too large to find here."""
    old_count, new_count = len(old_ids), len(new_ids)
    if known < 0:
        known = lcs_matches(old_ids, new_ids, old_paired, new_paired)
        if known < 0:
            return -1
    old_kept, new_kept = np.zeros(old_count, np.uint8), np.zeros(new_count, np.uint8)
    run_count = 0
    last_i, last_j = -1, -1
    for m in range(known + 1):
        i, j = (old_paired[m], new_paired[m]) if m < known else (old_count, new_count)
        if i > last_i + 1 or j > last_j + 1:
            runs[run_count, 0], runs[run_count, 1], runs[run_count, 2], runs[run_count, 3] = (
                last_i + 1, i, last_j + 1, j)
            run_count += 1
        if m < known:
            aligned_old[m], aligned_new[m] = old_rows[i, 0], new_rows[j, 0]
            old_kept[i], new_kept[j] = 1, 1
        last_i, last_j = i, j
    in_old, in_new = np.zeros(distinct, np.uint8), np.zeros(distinct, np.uint8)
    for i in range(old_count):
        in_old[old_ids[i]] = 1
    for j in range(new_count):
        in_new[new_ids[j]] = 1
    # Left out, with a copy on the other side: each new one takes the first old one waiting.
    head, tail = np.full(distinct, -1, np.int64), np.full(distinct, -1, np.int64)
    following = np.full(max(old_count, 1), -1, np.int64)
    for i in range(old_count):
        digest = old_ids[i]
        if not old_kept[i] and in_new[digest]:
            if tail[digest] < 0:
                head[digest] = i
            else:
                following[tail[digest]] = i
            tail[digest] = i
    move_count = 0
    for j in range(new_count):
        if new_kept[j]:
            continue
        i = head[new_ids[j]]
        if i >= 0:
            head[new_ids[j]] = following[i]
            moves[move_count, 0], moves[move_count, 1] = i, j
            move_count += 1
            old_moved[i], new_moved[j] = 1, 1
    pairs = known
    for m in range(move_count):
        aligned_old[pairs], aligned_new[pairs] = old_rows[moves[m, 0], 0], new_rows[moves[m, 1], 0]
        pairs += 1
    added_count, removed_count = 0, 0
    for j in range(new_count):
        if not new_kept[j] and not new_moved[j]:
            added[added_count] = j
            added_count += 1
    for i in range(old_count):
        if not old_kept[i] and not old_moved[i]:
            removed[removed_count] = i
            removed_count += 1
    old_bytes, new_bytes = 0, 0
    for i in range(old_count):
        old_bytes += old_rows[i, 2]
    for j in range(new_count):
        new_bytes += new_rows[j, 2]
    counts[0], counts[1], counts[2], counts[3] = pairs, added_count, removed_count, move_count
    counts[4], counts[5], counts[6] = run_count, old_bytes, new_bytes
    return pairs


# For other kernels to call (`cdc.core.fastcompare`), whichever build runs:
digest_ids_kernel, chunk_alignment_kernel = _digest_ids, _chunk_alignment

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

    def __init__(self, old_ids: np.ndarray, new_ids: np.ndarray, old_rows: np.ndarray, new_rows: np.ndarray,
                 distinct: int):
        old_count, new_count = len(old_ids), len(new_ids)
        room = min(old_count, new_count) + 1
        old_paired, new_paired = np.empty(room, np.int64), np.empty(room, np.int64)
        aligned_old, aligned_new = np.empty(room, np.int64), np.empty(room, np.int64)
        added, removed = np.empty(new_count + 1, np.int64), np.empty(old_count + 1, np.int64)
        moves = np.empty((room, 2), np.int64)
        runs = np.empty((room + 1, 4), np.int64)
        old_moved, new_moved = np.zeros(old_count, np.uint8), np.zeros(new_count, np.uint8)
        counts = np.empty(7, np.int64)
        outputs = (aligned_old, aligned_new, added, removed, moves, runs, old_moved, new_moved, counts)
        if _chunk_alignment(old_ids, new_ids, old_rows, new_rows, distinct, old_paired, new_paired, -1,
                            *outputs) < 0:  # too large to align compiled: rapidfuzz aligns them
            known = 0
            opcodes = Indel.opcodes(array("Q", old_ids.tobytes()), array("Q", new_ids.tobytes()))
            for tag, i1, i2, j1, j2 in opcodes.as_list():
                if tag == "equal":
                    old_paired[known:known + i2 - i1] = np.arange(i1, i2)
                    new_paired[known:known + i2 - i1] = np.arange(j1, j2)
                    known += i2 - i1
            _chunk_alignment(old_ids, new_ids, old_rows, new_rows, distinct, old_paired, new_paired, known,
                             *outputs)
        pairs, added_count, removed_count, moves_count, run_count, self.old_bytes, self.new_bytes = (
            counts.tolist())
        self.aligned_old, self.aligned_new = aligned_old[:pairs], aligned_new[:pairs]
        self.added, self.removed = added[:added_count], removed[:removed_count]
        self.moves, self.runs = moves[:moves_count], runs[:run_count]
        self.old_moved, self.new_moved = old_moved, new_moved
