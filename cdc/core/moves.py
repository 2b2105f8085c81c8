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

Pure functions on token hashes; `cdc.core.refine` turns the result into edits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rapidfuzz.distance import Indel

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
    """Moves as (i1, i2, j1, j2): deleted tokens old[i1:i2] went to new[j1:j2]. A group is
    one change's contiguous text, numbered alike on both sides (a deleted and an inserted
    group of the same number are one change's two sides). One alignment shows the moves
    that do not cross one another; further rounds on what is left find those that do (two
    paragraphs swapped)."""
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
