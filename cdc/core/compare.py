"""Compare two versions of a page by their chunk lists: what changed, where, how much.

The chunk lists are aligned by their digests (a longest common subsequence, the pairs
rapidfuzz's Indel alignment makes, found compiled by `cdc.core.lcs`): shared chunks in order
are the alignment; shared chunks out of order are moves, not a removal plus an addition; the
rest are added (in the new version) or removed (in the old). Given the two texts,
`cdc.core.refine` narrows each changed stretch to the exact words, and reports text deleted
in one place and inserted in another (moved chunks included) as `move` edits, with the edits
inside them; moved text counts as unchanged in the measures. Two `Chunks` with their texts
are compared in one compiled call where nothing moved (`cdc.core.fastcompare`); the steps
below in Python are the general path and its reference.

Measures:

Unlike the seed, `added` and `removed` are the chunks left unpaired, so dropping one of two
identical paragraphs counts as a removal.

- `similarity`: the seed's Jaccard index of the two digest sets. Coarse on short pages
  (one changed chunk of seven scores 0.75), and blind to order.
- `unchanged_ratio`: the share of the new version's bytes that are unchanged; at word
  level when the texts are given.
- `retained_ratio`: the share of the old version's bytes still present, the same way.
- `verdict`: routes the change, from the smaller of the two ratios so that a large
  deletion is no more "minor" than a large insertion (see `Thresholds`; the words, with the
  ones ingest adds, are `cdc.core.verdicts`).

`ignore` leaves the given digests (a host's boilerplate) out of every measure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from cdc.core.alignment import Aligned, digest_ids
from cdc.core.chunking import Chunk
from cdc.core.chunks import Chunks
from cdc.core.fastcompare import HEADER, MAY_HOLD_MOVES, compare_pair
from cdc.core.moves import MIN_MOVE_TOKENS, find_moves
from cdc.core.refine import KINDS as EDIT_KINDS
from cdc.core.refine import MOVE, Edit, Side, refine
from cdc.core.regions import NONE_MOVED
from cdc.core.verdicts import DIFFERENT_PAGE, MINOR, REWRITE, UNCHANGED


@dataclass(frozen=True)
class Thresholds:
    """Where verdicts split, on the share of content kept (0 to 1).

    The seed's guide: about 0.98 is a typo fix (ignore it), about 0.4 a rewrite
    (reprocess), about 0.05 a different page at the same URL (re-examine extraction).
    """

    minor: float = 0.8  # at least this much kept: a minor edit
    different_page: float = 0.1  # less than this kept: another page

    def __post_init__(self) -> None:
        if not 0.0 <= self.different_page <= self.minor <= 1.0:
            raise ValueError(
                "need 0 <= different_page <= minor <= 1, got "
                f"different_page={self.different_page}, minor={self.minor}"
            )

    def verdict(self, changed: bool, kept: float) -> str:
        if not changed:
            return UNCHANGED
        if kept >= self.minor:
            return MINOR
        if kept >= self.different_page:
            return REWRITE
        return DIFFERENT_PAGE


DEFAULT_THRESHOLDS = Thresholds()
# The fields of a compiled report read from the kernel's numbers only when asked for.
UNREAD_FIELDS = frozenset({"alignment", "added", "removed"})


@dataclass
class ChangeReport:
    """What changed between two versions of a page. Regions are (offset, length) in bytes."""

    changed: bool
    similarity: float
    added: list[Chunk]
    removed: list[Chunk]
    changed_regions: list[tuple[int, int]]  # merged, in the new version
    removed_regions: list[tuple[int, int]] = field(default_factory=list)  # in the old version
    moved: list[Chunk] = field(default_factory=list)  # in the new version
    alignment: list[tuple[int, int]] = field(default_factory=list)  # (old index, new index)
    unchanged_ratio: float = 1.0
    retained_ratio: float = 1.0
    verdict: str = UNCHANGED
    edits: list[Edit] = field(default_factory=list)

    def __getattr__(self, name: str):
        """The chunk lists (`UNREAD_FIELDS`) of a report of the compiled path, read from the
        kernel's numbers when first asked for (`_compiled_report`): ingest reads none of
        them, and an alignment's hundred pairs cost as much as the rest of the report. Only
        for names not set, so every other attribute is a plain one."""
        unread = self.__dict__.get("_unread")
        if unread is None or name not in UNREAD_FIELDS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        values, old, new, at, pairs, added_count, removed_count = unread
        added_at = at + 2 * pairs
        removed_at = added_at + added_count
        self.alignment = _pairs(values, at, pairs)[0]
        self.added = new.take(values[added_at:removed_at])
        self.removed = old.take(values[removed_at:removed_at + removed_count])
        del self.__dict__["_unread"]
        return self.__dict__[name]

    @property
    def bytes_added(self) -> int:
        """Bytes of the new version that are new: word level when edits are known (moved
        text is not new; the edits inside a move are)."""
        if self.edits:
            return sum(edit.new_length for edit in self.edits if edit.kind != MOVE)
        return sum(length for _, length in self.changed_regions)

    @property
    def bytes_removed(self) -> int:
        """Bytes of the old version that are gone: word level when edits are known."""
        if self.edits:
            return sum(edit.old_length for edit in self.edits if edit.kind != MOVE)
        return sum(length for _, length in self.removed_regions)


def merge_regions(chunks: list[Chunk]) -> list[tuple[int, int]]:
    """(offset, length) of runs of adjacent chunks."""
    regions: list[tuple[int, int]] = []
    for chunk in chunks:
        if regions and regions[-1][0] + regions[-1][1] == chunk.offset:
            start, length = regions[-1]
            regions[-1] = (start, length + chunk.length)
        else:
            regions.append((chunk.offset, chunk.length))
    return regions


def _share(part: int, whole: int, other_whole: int) -> float:
    if whole:
        return part / whole
    return 1.0 if not other_whole else 0.0


def _move_runs(old: _Side, new: _Side, moves: list[list[int]]) -> list[tuple[int, int, int, int]]:
    """Runs of moved chunks (pairs of positions, in new order) that follow one another on
    both sides, as byte ranges (old start, old end, new start, new end)."""
    if not moves:  # the common case: no column read
        return []
    runs: list[list[int]] = []
    old_offsets, old_ends = old.rows[:, 1].tolist(), (old.rows[:, 1] + old.rows[:, 2]).tolist()
    new_offsets, new_ends = new.rows[:, 1].tolist(), (new.rows[:, 1] + new.rows[:, 2]).tolist()
    for i, j in sorted(moves, key=itemgetter(1)):
        if runs and runs[-1][1] == old_offsets[i] and runs[-1][3] == new_offsets[j]:
            runs[-1][1], runs[-1][3] = old_ends[i], new_ends[j]
        else:
            runs.append([old_offsets[i], old_ends[i], new_offsets[j], new_ends[j]])
    return [(a, b, c, d) for a, b, c, d in runs]


class _Side:
    """One version's chunks left after `ignore`: the chunks themselves (a `Chunks` where one
    was given, which makes a `Chunk` only for those a report lists), their rows (index,
    offset, length: a `Chunks`' own table, whose columns 3 and 4 are the digest), and, for a
    list of `Chunk`, the digests (numbered in Python; a `Chunks`' are numbered compiled)."""

    __slots__ = ("chunks", "digests", "rows")

    def __init__(self, chunks: Sequence[Chunk], ignore: Collection[bytes]):
        self.digests: list | None = None
        if isinstance(chunks, Chunks):
            if ignore:
                records = chunks.records
                keep = [digest not in ignore for digest in records["digest"].tolist()]
                if not all(keep):
                    chunks = Chunks(records[np.array(keep, bool)].tobytes())
            self.rows = chunks.table
        else:
            chunks = [c for c in chunks if c.digest not in ignore] if ignore else list(chunks)
            self.digests = [c.digest for c in chunks]
            self.rows = np.array([(c.index, c.offset, c.length) for c in chunks], np.int64).reshape(-1, 3)
        self.chunks = chunks

    def digest_list(self) -> list:
        if self.digests is None:
            return self.chunks.records["digest"].tolist()
        return self.digests

    def pick(self, positions: Iterable[int]) -> list[Chunk]:
        """The chunks at these positions (in range)."""
        if isinstance(self.chunks, Chunks):
            return self.chunks.take(positions)
        chunks = self.chunks
        return [chunks[k] for k in positions]


def _numbered(old: _Side, new: _Side) -> tuple[np.ndarray, np.ndarray, int, list[int]]:
    """Both sides' digests numbered alike (`cdc.core.alignment.digest_ids`): (old numbers,
    new numbers, how many, [distinct old, distinct new, shared, whether the lists differ])."""
    if old.digests is None and new.digests is None:
        old_ids, new_ids, distinct, counts = digest_ids(old.rows, new.rows)
        return old_ids, new_ids, distinct, counts.tolist()
    old_digests, new_digests = old.digest_list(), new.digest_list()
    numbers: dict = {}
    old_ids = np.array([numbers.setdefault(d, len(numbers)) for d in old_digests], np.int64)
    new_ids = np.array([numbers.setdefault(d, len(numbers)) for d in new_digests], np.int64)
    old_set, new_set = set(old_digests), set(new_digests)
    return old_ids, new_ids, len(numbers), [len(old_set), len(new_set), len(old_set & new_set),
                                           old_digests != new_digests]


def compare(old: Sequence[Chunk], new: Sequence[Chunk], *, old_text: bytes | None = None,
            new_text: bytes | None = None, ignore: Collection[bytes] = frozenset(),
            thresholds: Thresholds = DEFAULT_THRESHOLDS) -> ChangeReport:
    """Compare two chunk lists (and, given both texts, find the exact word edits).

    `old` and `new` are any sequences of Chunk: `chunk_content`'s `Chunks`, or lists. From
    a `Chunks`, the alignment reads its columns: a `Chunk` is made only for the chunks a
    report lists (added, removed, moved) and those refinement reads."""
    if (old_text is None) != (new_text is None):
        raise ValueError("give both old_text and new_text, or neither")
    if old_text is not None:
        _check_tiling("old", old, old_text)
        _check_tiling("new", new, new_text)
    may_hold_moves = False  # the compiled call found that the changed words may hold a move
    if old_text is not None and not ignore and isinstance(old, Chunks) and isinstance(new, Chunks):
        report = _compare_compiled(old, new, old_text, new_text, thresholds)
        if isinstance(report, ChangeReport):
            return report
        may_hold_moves = report == MAY_HOLD_MOVES
    old_side, new_side = _Side(old, ignore), _Side(new, ignore)
    old_ids, new_ids, distinct, (old_distinct, new_distinct, shared, changed) = _numbered(old_side, new_side)
    changed = bool(changed)
    union = old_distinct + new_distinct - shared
    similarity = shared / union if union else 1.0

    aligned = Aligned(old_ids, new_ids, old_side.rows, new_side.rows, distinct)
    alignment = list(zip(aligned.aligned_old.tolist(), aligned.aligned_new.tolist()))
    # Chunks left out of the in-order alignment that share a digest are moves; whatever is
    # not paired is added or removed, an extra copy of a repeated chunk included.
    moves = aligned.moves.tolist()
    if moves:  # the aligned runs alone are in order already
        alignment.sort(key=itemgetter(1))
    added = new_side.pick(aligned.added.tolist())
    removed = old_side.pick(aligned.removed.tolist())

    new_total, old_total = aligned.new_bytes, aligned.old_bytes
    edits: list[Edit] = []
    if old_text is not None and changed:
        old_moved, new_moved = (aligned.old_moved, aligned.new_moved) if moves else (NONE_MOVED, NONE_MOVED)
        edits = refine(Side(old_text, old_side.rows, old_moved), Side(new_text, new_side.rows, new_moved),
                       aligned.runs, _move_runs(old_side, new_side, moves), may_hold_moves=may_hold_moves)
        # Moved text is kept text: a paragraph moved and nothing else is a minor change.
        new_changed = sum(e.new_length for e in edits if e.kind != MOVE)
        old_changed = sum(e.old_length for e in edits if e.kind != MOVE)
    else:
        new_changed = sum(c.length for c in added)
        old_changed = sum(c.length for c in removed)
    unchanged_ratio = _share(new_total - new_changed, new_total, old_total)
    retained_ratio = _share(old_total - old_changed, old_total, new_total)
    return ChangeReport(
        changed=changed,
        similarity=similarity,
        added=added,
        removed=removed,
        changed_regions=merge_regions(added),
        removed_regions=merge_regions(removed),
        moved=sorted(new_side.pick([j for _, j in moves]), key=lambda c: c.index),
        alignment=alignment,
        unchanged_ratio=unchanged_ratio,
        retained_ratio=retained_ratio,
        # Chunks that differ while every word is the same (a chunk cut elsewhere around text
        # left out, as a new banner's neighbours are; a changed line break) are no change.
        verdict=thresholds.verdict(changed and (old_text is None or bool(edits)),
                                   min(unchanged_ratio, retained_ratio)),
        edits=edits,
    )


def _compare_compiled(old: Chunks, new: Chunks, old_text: bytes, new_text: bytes,
                      thresholds: Thresholds) -> ChangeReport | int:
    """`compare` of two `Chunks` with their texts in one compiled call
    (`cdc.core.fastcompare`): the same report, or the code saying why the general path
    decides."""
    values = compare_pair(old_text, new_text, old.table, new.table, MIN_MOVE_TOKENS)
    if isinstance(values, int):
        return values
    (pairs, added_count, removed_count, edit_count, shared, union, changed, old_total, new_total,
     new_changed, old_changed, added_regions, removed_regions, may_hold, change_count,
     old_words) = values[:HEADER]
    at = HEADER + 2 * pairs + added_count + removed_count  # the chunk lists are read when asked for
    changed_regions, at = _pairs(values, at, added_regions)
    removed_list, at = _pairs(values, at, removed_regions)
    if may_hold and _words_hold_a_move(values, at + 5 * edit_count, change_count, old_words):
        return MAY_HOLD_MOVES
    kinds = EDIT_KINDS
    edits = [Edit(kinds[values[k]], values[k + 1], values[k + 2], values[k + 3], values[k + 4])
             for k in range(at, at + 5 * edit_count, 5)]
    unchanged_ratio = _share(new_total - new_changed, new_total, old_total)
    retained_ratio = _share(old_total - old_changed, old_total, new_total)
    # Made without `__init__`, whose every field would be set: the fields `__getattr__` reads
    # from the numbers are left out (the dataclass's `==` and `repr` read them by name).
    report = object.__new__(ChangeReport)
    report.__dict__.update(
        changed=bool(changed),
        similarity=shared / union if union else 1.0,
        changed_regions=changed_regions,
        removed_regions=removed_list,
        moved=[],
        unchanged_ratio=unchanged_ratio,
        retained_ratio=retained_ratio,
        verdict=thresholds.verdict(bool(changed) and bool(edits), min(unchanged_ratio, retained_ratio)),
        edits=edits,
        _unread=(values, old, new, HEADER, pairs, added_count, removed_count),
    )
    return report


def _words_hold_a_move(values: list[int], at: int, change_count: int, old_words: int) -> bool:
    """Whether `find_moves` finds a move in the changed words the compiled call wrote from
    `at` (each change's old and new word counts, then the old and the new words' hashes,
    as int64): the same arrays `cdc.core.refine._token_moves` hands it, made the same way."""
    old_sizes, new_sizes = values[at:at + change_count], values[at + change_count:at + 2 * change_count]
    at += 2 * change_count
    old_hashes = np.array(values[at:at + old_words], np.int64).view(np.uint64)
    new_hashes = np.array(values[at + old_words:], np.int64).view(np.uint64)
    numbers = np.arange(change_count)
    old_groups, new_groups = np.repeat(numbers, old_sizes), np.repeat(numbers, new_sizes)
    return bool(find_moves(old_hashes, old_groups, new_hashes, new_groups))


def _pairs(values: list[int], at: int, count: int) -> tuple[list[tuple[int, int]], int]:
    """`count` pairs laid flat in `values` from `at`, and where the next field starts."""
    end = at + 2 * count
    return list(zip(values[at:end:2], values[at + 1:end:2])), end


def _check_tiling(which: str, chunks: Sequence[Chunk], text: bytes) -> None:
    end = chunks.end if isinstance(chunks, Chunks) else (chunks[-1].end if chunks else 0)
    if end != len(text):
        raise ValueError(
            f"{which}_text is {len(text)} bytes but its chunks cover {end}: "
            "pass the text the chunks were made from"
        )
