"""The common case of `cdc.compare`, two `Chunks` and their texts, in one compiled call.

`cdc.compare` is a handful of steps, each a kernel already: number the digests and align
them (`cdc.core.alignment`), find the changed stretches' words (`cdc.core.regions`), align
and clean them up into edits (`cdc.core.wordchanges`). Called one by one from Python, with
their arrays made and read in between, the calls and the arrays cost more than the work
on a page with a small change, and more again on a machine whose caches other work has
just filled. `_compare_pair` runs them in turn in one kernel and writes every number the
report needs into one int64 buffer, read back with one `tolist`.

It answers where no chunk moved and each alignment is small enough
(`cdc.core.lcs.MAX_CELLS`, `MAX_LOGGED`); elsewhere NOT_HERE, and `cdc.compare` takes its
general path, which stays the reference: a test holds the two to the same reports. Where
the changed words may hold a move (`MIN_MOVE_TOKENS` of them in common, in order:
`cdc.core.moves`), the kernel writes them out too, and `cdc.compare` asks
`cdc.core.moves.find_moves` of them, as `refine` would: the report stands where it finds
none (on the English corpus, 277 of the 354 such pairs of 3,131), and the general path
decides where it finds one, without trying the compiled edits without moves again
(MAY_HOLD_MOVES), which would find the same.
"""

from __future__ import annotations

import threading

import numpy as np

from cdc.core.alignment import chunk_alignment_kernel, digest_ids_kernel
from cdc.core.compiled import AHEAD_OF_TIME, njit
from cdc.core.regions import _capacity, pair_words_kernel
from cdc.core.wordchanges import word_edits_kernel

HEADER = 16  # numbers before the report's lists in `_compare_pair`'s output
NOT_HERE = -1  # `_compare_pair`: the general path decides
# The general path decides, as the changed words hold a move: their compiled edits
# (`cdc.core.refine._edits_without_moves`) would find the same and need not be tried again.
# Either code is above minus the room the output needs (at least HEADER).
MAY_HOLD_MOVES = -2

_capacity_compiled = njit(inline="always")(_capacity)


def _merged(rows, positions, count, out, at):  # pragma: no cover - inlined in the kernel
    """`cdc.core.compare.merge_regions` of the chunks at `positions[:count]`, as (offset,
    length) pairs into `out` from `at`; returns how many."""
    regions = 0
    for k in range(count):
        offset, length = rows[positions[k], 1], rows[positions[k], 2]
        if regions and out[at + 2 * regions - 2] + out[at + 2 * regions - 1] == offset:
            out[at + 2 * regions - 1] += length
        else:
            out[at + 2 * regions], out[at + 2 * regions + 1] = offset, length
            regions += 1
    return regions


_merged_compiled = njit(inline="always")(_merged)


@njit(cache=True, nogil=True)
def _compare_pair(old_text, new_text, old_rows, new_rows, move_tokens, out):  # pragma: no cover
    """`cdc.compare(old, new, old_text=..., new_text=...)` of two chunk tables (index,
    offset, length, digest words). Writes into `out` a header (aligned pairs, added,
    removed, edits, shared digests, digests in all, whether the lists differ, each side's
    bytes, bytes the edits insert and delete, merged added and removed regions), then the
    aligned (old index, new index) pairs, the added and the removed positions, the two
    region lists as (offset, length) and the edits as (kind code, old offset, old length,
    new offset, new length), in new-offset order; where the changed words may hold a move
    (header: a flag, the changes, the old changed words), each change's old and new word
    counts and the changed words' hashes, as `cdc.core.refine._token_moves` hands them to
    `find_moves`. Returns how many numbers it wrote; NOT_HERE where the general path decides
    (a moved chunk, or an alignment too large); minus the room needed where `out` is too
    small."""
    old_count, new_count = len(old_rows), len(new_rows)
    old_ids, new_ids = np.empty(old_count, np.int64), np.empty(new_count, np.int64)
    counts = np.empty(4, np.int64)
    distinct = digest_ids_kernel(old_rows, new_rows, old_ids, new_ids, counts)
    room = min(old_count, new_count) + 1
    old_paired, new_paired = np.empty(room, np.int64), np.empty(room, np.int64)
    aligned_old, aligned_new = np.empty(room, np.int64), np.empty(room, np.int64)
    added, removed = np.empty(new_count + 1, np.int64), np.empty(old_count + 1, np.int64)
    moves, runs = np.empty((room, 2), np.int64), np.empty((room + 1, 4), np.int64)
    old_moved, new_moved = np.zeros(old_count, np.uint8), np.zeros(new_count, np.uint8)
    found = np.empty(7, np.int64)
    if chunk_alignment_kernel(old_ids, new_ids, old_rows, new_rows, distinct, old_paired, new_paired, -1,
                              aligned_old, aligned_new, added, removed, moves, runs, old_moved, new_moved,
                              found) < 0:
        return NOT_HERE
    pairs, added_count, removed_count = found[0], found[1], found[2]
    move_count, run_count = found[3], found[4]
    if move_count:
        return NOT_HERE
    edit_count, inserted, deleted = 0, 0, 0
    edits = np.empty((1, 5), np.int64)
    may_hold, change_count, old_words_changed, new_words_changed = 0, 0, 0, 0
    changes = np.empty((1, 5), np.int64)
    old_changed, new_changed = np.empty(1, np.uint64), np.empty(1, np.uint64)
    if counts[3] and run_count:
        none_moved = np.zeros(0, np.uint8)
        capacity = max(_capacity_compiled(old_rows, runs[0, 0], runs[run_count - 1, 1], run_count),
                       _capacity_compiled(new_rows, runs[0, 2], runs[run_count - 1, 3], run_count))
        old_hashes, new_hashes = np.empty(capacity, np.uint64), np.empty(capacity, np.uint64)
        old_table, new_table = np.empty((capacity, 3), np.int64), np.empty((capacity, 3), np.int64)
        regions = np.empty((run_count, 6), np.int64)
        windows = pair_words_kernel(old_text, old_rows, none_moved, new_text, new_rows, none_moved,
                                    runs[:run_count], old_hashes, old_table, new_hashes, new_table, regions)
        old_words, new_words = 0, 0
        for w in range(windows):
            old_words += regions[w, 1]
            new_words += regions[w, 3]
        edits = np.empty((old_words + new_words + windows + 1, 5), np.int64)
        changes = np.empty((old_words + new_words + windows + 1, 5), np.int64)
        old_changed, new_changed = np.empty(old_words + 1, np.uint64), np.empty(new_words + 1, np.uint64)
        totals = np.zeros(7, np.int64)
        if word_edits_kernel(old_text, new_text, old_hashes, old_table, new_hashes, new_table,
                             regions[:windows], np.zeros((0, 4), np.int64), np.zeros(1, np.int64), True,
                             edits, changes, old_changed, new_changed, totals) < 0:
            return NOT_HERE
        if totals[1] >= 2 and min(totals[2], totals[3], totals[6]) >= move_tokens:
            may_hold = 1  # the changed words may hold a move: written out for `find_moves` to say
            change_count, old_words_changed, new_words_changed = totals[1], totals[2], totals[3]
        edit_count, inserted, deleted = totals[0], totals[4], totals[5]
        for k in range(1, edit_count):  # in new-offset order, ties as found (a stable sort)
            kind, old_offset, old_length, new_offset, new_length = (edits[k, 0], edits[k, 1], edits[k, 2],
                                                                    edits[k, 3], edits[k, 4])
            t = k
            while t and edits[t - 1, 3] > new_offset:
                for c in range(5):
                    edits[t, c] = edits[t - 1, c]
                t -= 1
            edits[t, 0], edits[t, 1], edits[t, 2], edits[t, 3], edits[t, 4] = (kind, old_offset, old_length,
                                                                               new_offset, new_length)
    need = (HEADER + 2 * pairs + 3 * added_count + 3 * removed_count + 5 * edit_count
            + 2 * change_count + old_words_changed + new_words_changed)
    if need > len(out):
        return -need
    at = np.int64(HEADER)
    for k in range(pairs):
        out[at + 2 * k], out[at + 2 * k + 1] = aligned_old[k], aligned_new[k]
    at += 2 * pairs
    out[at:at + added_count] = added[:added_count]
    at += added_count
    out[at:at + removed_count] = removed[:removed_count]
    at += removed_count
    added_regions = _merged_compiled(new_rows, added, added_count, out, at)
    at += 2 * added_regions
    removed_regions = _merged_compiled(old_rows, removed, removed_count, out, at)
    at += 2 * removed_regions
    out[at:at + 5 * edit_count] = edits[:edit_count].ravel()
    at += 5 * edit_count
    for c in range(change_count):  # each change's words on each side, then the words' hashes
        out[at + c] = changes[c, 2] - changes[c, 1]
        out[at + change_count + c] = changes[c, 4] - changes[c, 3]
    at += 2 * change_count
    out[at:at + old_words_changed] = old_changed[:old_words_changed].view(np.int64)
    at += old_words_changed
    out[at:at + new_words_changed] = new_changed[:new_words_changed].view(np.int64)
    at += new_words_changed
    out[0], out[1], out[2], out[3] = pairs, added_count, removed_count, edit_count
    out[4], out[5], out[6] = counts[2], counts[0] + counts[1] - counts[2], counts[3]
    out[7], out[8], out[9], out[10] = found[5], found[6], inserted, deleted
    out[11], out[12], out[13], out[14] = added_regions, removed_regions, may_hold, change_count
    out[15] = old_words_changed
    return at


if AHEAD_OF_TIME is not None:  # the same kernel, compiled by `python -m cdc.core.aot`
    _compare_pair = AHEAD_OF_TIME.compare_pair

_scratch = threading.local()


def compare_pair(old_text: bytes, new_text: bytes, old_rows: np.ndarray, new_rows: np.ndarray,
                 move_tokens: int) -> list[int] | int:
    """`_compare_pair`'s numbers, as one list (this thread's buffer, grown when short), or
    the code (NOT_HERE, MAY_HOLD_MOVES) saying why the general path decides."""
    out = getattr(_scratch, "out", None)
    if out is None:
        out = _scratch.out = np.empty(1 << 14, np.int64)
    used = _compare_pair(old_text, new_text, old_rows, new_rows, move_tokens, out)
    if used < MAY_HOLD_MOVES:
        out = _scratch.out = np.empty(2 * -used, np.int64)
        used = _compare_pair(old_text, new_text, old_rows, new_rows, move_tokens, out)
    return used if used < 0 else out[:used].tolist()
