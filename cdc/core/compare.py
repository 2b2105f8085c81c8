"""Compare two versions of a page by their chunk lists: what changed, where, how much.

The chunk lists are aligned by their digests (a longest common subsequence, computed by
rapidfuzz): shared chunks in order are the alignment; shared chunks out of order are moves,
not a removal plus an addition; the rest are added (in the new version) or removed (in the
old). Given the two texts, `cdc.core.refine` narrows each changed stretch to the exact words,
and reports text deleted in one place and inserted in another (moved chunks included) as
`move` edits, with the edits inside them; moved text counts as unchanged in the measures.

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

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np
from rapidfuzz.distance import Indel

from cdc.core.chunking import Chunk
from cdc.core.chunks import Chunks
from cdc.core.refine import MOVE, Edit, Side, refine, stretches
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


def _pair_moves(old_digests: list[bytes], new_digests: list[bytes], old_loose: list[int],
                new_loose: list[int]) -> list[tuple[int, int]]:
    """Pair chunks left out of the in-order alignment that share a digest: moves."""
    if not old_loose or not new_loose:  # the common case: nothing to pair
        return []
    waiting: dict[bytes, list[int]] = defaultdict(list)
    for i in old_loose:
        waiting[old_digests[i]].append(i)
    pairs = []
    for j in new_loose:
        candidates = waiting.get(new_digests[j])
        if candidates:
            pairs.append((candidates.pop(0), j))
    return pairs


def _move_runs(old: _Side, new: _Side, moves: list[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """Runs of moved chunks that follow one another on both sides, as byte ranges
    (old start, old end, new start, new end)."""
    if not moves:  # the common case: no column read
        return []
    runs: list[list[int]] = []
    old_offsets, old_ends = old.offsets.tolist(), old.ends.tolist()
    new_offsets, new_ends = new.offsets.tolist(), new.ends.tolist()
    for i, j in sorted(moves, key=lambda pair: pair[1]):
        if runs and runs[-1][1] == old_offsets[i] and runs[-1][3] == new_offsets[j]:
            runs[-1][1], runs[-1][3] = old_ends[i], new_ends[j]
        else:
            runs.append([old_offsets[i], old_ends[i], new_offsets[j], new_ends[j]])
    return [(a, b, c, d) for a, b, c, d in runs]


def _opcodes(old_digests: list[bytes], new_digests: list[bytes]) -> list[tuple]:
    return Indel.opcodes(old_digests, new_digests).as_list()  # (tag, i1, i2, j1, j2) tuples, made in C


class _Side:
    """One version's chunks left after `ignore`, as columns: the digests (a list of bytes:
    what the alignment, the sets and the move pairing hash), indexes, offsets and lengths
    (int64 arrays), and the chunks themselves (a `Chunks` where one was given, which makes a
    `Chunk` only for those a report lists: `refine` reads the columns)."""

    __slots__ = ("chunks", "digests", "indexes", "lengths", "offsets")

    def __init__(self, chunks: Sequence[Chunk], ignore: Collection[bytes]):
        if isinstance(chunks, Chunks):
            records = chunks.records
            digests = records["digest"].tolist()
            if ignore:
                keep = [digest not in ignore for digest in digests]
                if not all(keep):
                    records = records[np.array(keep, bool)]
                    chunks = Chunks(records.tobytes())
                    digests = [digest for digest, kept in zip(digests, keep) if kept]
            self.indexes, self.offsets, self.lengths = records["index"], records["offset"], records["length"]
        else:
            chunks = [c for c in chunks if c.digest not in ignore] if ignore else list(chunks)
            digests = [c.digest for c in chunks]
            self.indexes = np.array([c.index for c in chunks], np.int64)
            self.offsets = np.array([c.offset for c in chunks], np.int64)
            self.lengths = np.array([c.length for c in chunks], np.int64)
        self.chunks, self.digests = chunks, digests

    @property
    def ends(self) -> np.ndarray:
        return self.offsets + self.lengths

    def for_refine(self, text: bytes, moved: set[int]) -> Side:
        """This side as `refine` reads it: rows with offset and length in columns 1 and 2
        (a `Chunks`' own table, no copy)."""
        table = getattr(self.chunks, "table", None)
        rows = table if table is not None else np.stack([self.indexes, self.offsets, self.lengths], axis=1)
        return Side(text, rows, moved)

    def pick(self, positions: Iterable[int]) -> list[Chunk]:
        """The chunks at these positions (in range)."""
        if isinstance(self.chunks, Chunks):
            return self.chunks.take(positions)
        chunks = self.chunks
        return [chunks[k] for k in positions]


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
    old_side, new_side = _Side(old, ignore), _Side(new, ignore)
    old_digests, new_digests = old_side.digests, new_side.digests
    old_set, new_set = set(old_digests), set(new_digests)
    shared = len(old_set & new_set)
    union = len(old_set) + len(new_set) - shared
    similarity = shared / union if union else 1.0
    changed = old_digests != new_digests

    if changed:
        opcodes = _opcodes(old_digests, new_digests)
    else:
        opcodes = [("equal", 0, len(old_digests), 0, len(new_digests))]
    old_loose: list[int] = []
    new_loose: list[int] = []
    old_indexes, new_indexes = old_side.indexes.tolist(), new_side.indexes.tolist()
    alignment: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            alignment += zip(old_indexes[i1:i2], new_indexes[j1:j2])
        else:
            old_loose += (i for i in range(i1, i2) if old_digests[i] in new_set)
            new_loose += (j for j in range(j1, j2) if new_digests[j] in old_set)
    moves = _pair_moves(old_digests, new_digests, old_loose, new_loose)
    moved_old = {i for i, _ in moves}
    moved_new = {j for _, j in moves}
    # Whatever is not paired is added or removed, an extra copy of a repeated chunk included.
    added = new_side.pick([j for tag, _, _, j1, j2 in opcodes if tag != "equal"
                           for j in range(j1, j2) if j not in moved_new])
    removed = old_side.pick([i for tag, i1, i2, _, _ in opcodes if tag != "equal"
                             for i in range(i1, i2) if i not in moved_old])
    if moves:  # the aligned runs alone are in order already
        alignment += ((old_indexes[i], new_indexes[j]) for i, j in moves)
        alignment.sort(key=itemgetter(1))

    new_total = int(new_side.lengths.sum())
    old_total = int(old_side.lengths.sum())
    edits: list[Edit] = []
    if old_text is not None and changed:
        edits = refine(old_side.for_refine(old_text, moved_old), new_side.for_refine(new_text, moved_new),
                       stretches(opcodes), _move_runs(old_side, new_side, moves))
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


def _check_tiling(which: str, chunks: Sequence[Chunk], text: bytes) -> None:
    end = chunks.end if isinstance(chunks, Chunks) else (chunks[-1].end if chunks else 0)
    if end != len(text):
        raise ValueError(
            f"{which}_text is {len(text)} bytes but its chunks cover {end}: "
            "pass the text the chunks were made from"
        )
