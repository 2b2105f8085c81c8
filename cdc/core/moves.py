"""Moves: text deleted in one place and inserted in another, identical or nearly so.

The input is what the word diff left unmatched: the deleted tokens of every change, in
document order, and the inserted ones, each token tagged with the change it belongs to (its
group; a group is contiguous text). The two sequences are aligned by their longest common
subsequence (rapidfuzz's Indel); what they share was deleted here and inserted there.

A move, as Wikipedia's diff marks moved paragraphs, is:

- anchored: runs of at least `ANCHOR_TOKENS` equal tokens, within one deleted and one
  inserted group, chained while the tokens between two runs are at most `GAP_TOKENS` on
  each side (a moved paragraph edited lightly on the way stays one move);
- at least `MIN_MOVE_TOKENS` matched tokens (words, or characters of scripts written
  without spaces): a moved "the", a repeated short phrase, is not a move;
- nearly identical: matched tokens at least `MOVE_SIMILARITY` of the tokens the move spans
  on either side.

A move's matched tokens are a common subsequence of the two sides' tokens (each round
aligns what the rounds before left), so where those have fewer than `MIN_MOVE_TOKENS` in
common, in order, there is none. The compiled comparison tests that
(`cdc.core.wordchanges`) before it hands changed words here; `cdc.core.refine` asks
`find_moves` directly, whose first round aligns them anyway.

Pure functions on token hashes; `cdc.core.refine` turns the result into edits. The same
steps run compiled (`_find_moves`, with the alignment of `cdc.core.lcs`, which pairs what
rapidfuzz pairs); the functions in Python are the reference a test holds it to, and what
runs where an alignment is too large to make compiled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rapidfuzz.distance import Indel

from cdc.core.compiled import AHEAD_OF_TIME, njit
from cdc.core.lcs import lcs_matches

ANCHOR_TOKENS = 3
GAP_TOKENS = 8
MIN_MOVE_TOKENS = 8
MOVE_SIMILARITY = 0.75
ROUNDS = 3  # alignments tried: moves that cross one another need more than one


def _run_ends(runs: Sequence[int]) -> np.ndarray:
    """For each token, the index one past the last token of its run of equal `runs` ids
    (an array: only the tokens where an equal stretch starts or a run ends are read)."""
    runs = np.asarray(runs)
    total = len(runs)
    if not total:
        return np.empty(0, np.int64)
    bounds = np.flatnonzero(runs[1:] != runs[:-1]) + 1  # where a run starts, past the first
    ends = np.append(bounds, total)
    return np.repeat(ends, np.diff(ends, prepend=0))


def _anchors(old: Sequence[int], old_runs: Sequence[int], new: Sequence[int], new_runs: Sequence[int],
             old_groups: Sequence[int], new_groups: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Equal runs of the two sequences, cut where contiguous text ends on either side, long
    enough, between different changes (a change's own two sides are in place, not moved)."""
    old_ends, new_ends = _run_ends(old_runs), _run_ends(new_runs)
    anchors = []
    for op in Indel.opcodes(old, new):
        if op.tag != "equal":
            continue
        i, j = op.src_start, op.dest_start
        while i < op.src_end:
            length = min(op.src_end, int(old_ends[i]), i + int(new_ends[j]) - j) - i
            if length >= ANCHOR_TOKENS and old_groups[i] != new_groups[j]:
                anchors.append((i, i + length, j, j + length))
            i, j = i + length, j + length
    return anchors


def _chains(anchors: list[tuple[int, int, int, int]], old_runs: Sequence[int],
            new_runs: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Anchors chained into moves, and the moves kept (see the module's rules)."""
    moves = []
    chain: list[tuple[int, int, int, int]] = []

    def close() -> None:
        if not chain:
            return
        matched = sum(i2 - i1 for i1, i2, _, _ in chain)
        i1, j1, i2, j2 = chain[0][0], chain[0][2], chain[-1][1], chain[-1][3]
        if matched >= MIN_MOVE_TOKENS and matched >= MOVE_SIMILARITY * max(i2 - i1, j2 - j1):
            moves.append((i1, i2, j1, j2))
        chain.clear()

    for anchor in anchors:
        if chain:
            last = chain[-1]
            joined = (old_runs[anchor[0]] == old_runs[last[0]] and new_runs[anchor[2]] == new_runs[last[2]]
                      and anchor[0] - last[1] <= GAP_TOKENS and anchor[2] - last[3] <= GAP_TOKENS)
            if not joined:
                close()
        chain.append(anchor)
    close()
    return moves


def _left(values: np.ndarray, groups: np.ndarray, used: np.ndarray) -> tuple[list, list, list, list]:
    """The tokens no move took: values, groups, runs (a new run past each gap a move left)
    and their indexes in the whole sequence."""
    at = np.flatnonzero(~used)
    kept_groups = groups[at]
    starts = np.ones(len(at), bool)
    starts[1:] = (at[1:] != at[:-1] + 1) | (kept_groups[1:] != kept_groups[:-1])
    runs = np.cumsum(starts) - 1
    return values[at].tolist(), kept_groups.tolist(), runs.tolist(), at.tolist()


def find_moves(old: Sequence[int], old_groups: Sequence[int], new: Sequence[int],
               new_groups: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Moves as (i1, i2, j1, j2), in order: deleted tokens old[i1:i2] went to new[j1:j2]. A
    group is one change's contiguous text, numbered alike on both sides (a deleted and an
    inserted group of the same number are one change's two sides). One alignment shows the
    moves that do not cross one another; further rounds on what is left find those that do
    (two paragraphs swapped). Compiled (`_find_moves`), or here where an alignment is too
    large for that."""
    old_array, new_array = np.asarray(old, np.uint64), np.asarray(new, np.uint64)
    found = np.empty((min(len(old_array), len(new_array)) // MIN_MOVE_TOKENS + 1, 4), np.int64)
    count = _find_moves(old_array, np.asarray(old_groups, np.int64), new_array,
                        np.asarray(new_groups, np.int64), found)
    if count < 0:
        return find_moves_here(old, old_groups, new, new_groups)
    return [tuple(move) for move in found[:count].tolist()]


def find_moves_here(old: Sequence[int], old_groups: Sequence[int], new: Sequence[int],
                    new_groups: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """`find_moves` in Python, with rapidfuzz's alignment: the reference."""
    found: list[tuple[int, int, int, int]] = []
    old_used, new_used = np.zeros(len(old), bool), np.zeros(len(new), bool)
    old_array, new_array = np.asarray(old, np.uint64), np.asarray(new, np.uint64)
    old_group_array, new_group_array = np.asarray(old_groups, np.int64), np.asarray(new_groups, np.int64)
    for round_number in range(ROUNDS):
        if round_number == 0:  # nothing used yet: the sequences as they are
            old_values, old_kept_groups, old_runs, old_at = old, old_groups, old_groups, range(len(old))
            new_values, new_kept_groups, new_runs, new_at = new, new_groups, new_groups, range(len(new))
        else:
            old_values, old_kept_groups, old_runs, old_at = _left(old_array, old_group_array, old_used)
            new_values, new_kept_groups, new_runs, new_at = _left(new_array, new_group_array, new_used)
        if min(len(old_values), len(new_values)) < MIN_MOVE_TOKENS:
            break
        anchors = _anchors(old_values, old_runs, new_values, new_runs, old_kept_groups, new_kept_groups)
        moves = _chains(anchors, old_runs, new_runs)
        if not moves:
            break
        for i1, i2, j1, j2 in moves:  # a run holds whole indexes: map its ends back
            i1, i2, j1, j2 = old_at[i1], old_at[i2 - 1] + 1, new_at[j1], new_at[j2 - 1] + 1
            found.append((i1, i2, j1, j2))
            old_used[i1:i2] = True
            new_used[j1:j2] = True
    return sorted(found)


def _ends(runs):  # pragma: no cover - inlined in the kernel
    """`_run_ends` in the kernel."""
    total = len(runs)
    ends = np.empty(total, np.int64)
    for k in range(total - 1, -1, -1):
        ends[k] = k + 1 if k == total - 1 or runs[k + 1] != runs[k] else ends[k + 1]
    return ends


_ends_compiled = njit(inline="always")(_ends)


@njit(cache=True, nogil=True)
def _find_moves(old, old_groups, new, new_groups, found):  # pragma: no cover - compiled
    """`find_moves_here`'s rounds, anchors and chains in one compiled call: its moves into
    `found` as rows (i1, i2, j1, j2), in order; returns how many, or -1 where an alignment
    is too large to make compiled (nothing else written)."""
    old_used, new_used = np.zeros(len(old), np.bool_), np.zeros(len(new), np.bool_)
    count = 0
    for round_number in range(ROUNDS):
        old_at, new_at = np.flatnonzero(~old_used), np.flatnonzero(~new_used)
        old_count, new_count = len(old_at), len(new_at)
        if min(old_count, new_count) < MIN_MOVE_TOKENS:
            break
        old_values, new_values = old[old_at], new[new_at]
        old_kept, new_kept = old_groups[old_at], new_groups[new_at]
        if round_number == 0:  # nothing used yet: the groups are the runs
            old_runs, new_runs = old_kept, new_kept
        else:  # a new run past each gap a move left (`_left`)
            old_runs, new_runs = np.empty(old_count, np.int64), np.empty(new_count, np.int64)
            for at, kept, runs in ((old_at, old_kept, old_runs), (new_at, new_kept, new_runs)):
                run = 0
                for k in range(len(at)):
                    if k and (at[k] != at[k - 1] + 1 or kept[k] != kept[k - 1]):
                        run += 1
                    runs[k] = run
        old_ends, new_ends = _ends_compiled(old_runs), _ends_compiled(new_runs)
        first_at, second_at = np.empty(min(old_count, new_count) + 1, np.int64), np.empty(
            min(old_count, new_count) + 1, np.int64)
        pairs = lcs_matches(old_values, new_values, first_at, second_at)
        if pairs < 0:
            return -1
        # Anchors (`_anchors`): the equal blocks of the alignment, its pairs' diagonal runs.
        anchors = np.empty((pairs + 1, 4), np.int64)
        anchor_count = 0
        k = 0
        while k < pairs:
            start = k
            while k + 1 < pairs and first_at[k + 1] - first_at[k] == 1 == second_at[k + 1] - second_at[k]:
                k += 1
            i, j, end = first_at[start], second_at[start], first_at[k] + 1
            while i < end:
                length = min(end, old_ends[i], i + new_ends[j] - j) - i
                if length >= ANCHOR_TOKENS and old_kept[i] != new_kept[j]:
                    anchors[anchor_count, 0], anchors[anchor_count, 1] = i, i + length
                    anchors[anchor_count, 2], anchors[anchor_count, 3] = j, j + length
                    anchor_count += 1
                i, j = i + length, j + length
            k += 1
        # Chains (`_chains`), each kept one marked used at once: this round's anchors are made.
        before = count
        first, matched = 0, 0
        for a in range(anchor_count + 1):
            if a and (a == anchor_count or not (
                    old_runs[anchors[a, 0]] == old_runs[anchors[a - 1, 0]]
                    and new_runs[anchors[a, 2]] == new_runs[anchors[a - 1, 2]]
                    and anchors[a, 0] - anchors[a - 1, 1] <= GAP_TOKENS
                    and anchors[a, 2] - anchors[a - 1, 3] <= GAP_TOKENS)):
                i1, i2, j1, j2 = anchors[first, 0], anchors[a - 1, 1], anchors[first, 2], anchors[a - 1, 3]
                if matched >= MIN_MOVE_TOKENS and matched >= MOVE_SIMILARITY * max(i2 - i1, j2 - j1):
                    i1, i2, j1, j2 = old_at[i1], old_at[i2 - 1] + 1, new_at[j1], new_at[j2 - 1] + 1
                    found[count, 0], found[count, 1], found[count, 2], found[count, 3] = i1, i2, j1, j2
                    count += 1
                    old_used[i1:i2] = True
                    new_used[j1:j2] = True
                first, matched = a, 0
            if a < anchor_count:
                matched += anchors[a, 1] - anchors[a, 0]
        if count == before:
            break
    for k in range(1, count):  # in order (`sorted`): few moves, an insertion sort
        i1, i2, j1, j2 = found[k, 0], found[k, 1], found[k, 2], found[k, 3]
        t = k
        while t and (found[t - 1, 0], found[t - 1, 1], found[t - 1, 2], found[t - 1, 3]) > (i1, i2, j1, j2):
            found[t, 0], found[t, 1], found[t, 2], found[t, 3] = (found[t - 1, 0], found[t - 1, 1],
                                                                  found[t - 1, 2], found[t - 1, 3])
            t -= 1
        found[t, 0], found[t, 1], found[t, 2], found[t, 3] = i1, i2, j1, j2
    return count


if AHEAD_OF_TIME is not None:  # the same kernel, compiled by `python -m cdc.core.aot`
    _find_moves = AHEAD_OF_TIME.find_moves
