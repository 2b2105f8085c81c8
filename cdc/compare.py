"""Compare two versions of a page by their chunk lists: what changed, where, how much.

The chunk lists are aligned by their digests (a longest common subsequence, computed by
rapidfuzz): shared chunks in order are the alignment; shared chunks out of order are moves,
not a removal plus an addition; the rest are added (in the new version) or removed (in the
old). Given the two texts, `cdc.refine` narrows each changed stretch to the exact words,
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
  deletion is no more "minor" than a large insertion (see `Thresholds`).

`ignore` leaves the given digests (a host's boilerplate) out of every measure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from rapidfuzz.distance import Indel

from cdc.chunking import Chunk
from cdc.refine import MOVE, Edit, Span, refine, stretches

UNCHANGED = "unchanged"
MINOR = "minor"
REWRITE = "rewrite"
DIFFERENT_PAGE = "different_page"
VERDICTS = (UNCHANGED, MINOR, REWRITE, DIFFERENT_PAGE)


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


def _pair_moves(old: list[Chunk], new: list[Chunk], old_loose: list[int],
                new_loose: list[int]) -> list[tuple[int, int]]:
    """Pair chunks left out of the in-order alignment that share a digest: moves."""
    waiting: dict[bytes, list[int]] = defaultdict(list)
    for i in old_loose:
        waiting[old[i].digest].append(i)
    pairs = []
    for j in new_loose:
        candidates = waiting.get(new[j].digest)
        if candidates:
            pairs.append((candidates.pop(0), j))
    return pairs


def _move_runs(old: list[Chunk], new: list[Chunk],
               moves: list[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """Runs of moved chunks that follow one another on both sides, as byte ranges
    (old start, old end, new start, new end)."""
    runs: list[list[int]] = []
    for i, j in sorted(moves, key=lambda pair: pair[1]):
        if runs and runs[-1][1] == old[i].offset and runs[-1][3] == new[j].offset:
            runs[-1][1], runs[-1][3] = old[i].end, new[j].end
        else:
            runs.append([old[i].offset, old[i].end, new[j].offset, new[j].end])
    return [(a, b, c, d) for a, b, c, d in runs]


def _spans(opcodes: list[tuple], old_kept: list[Chunk], new_kept: list[Chunk],
           moved_old: set[int], moved_new: set[int]) -> list[Span]:
    """The changed stretches between aligned runs, without moved chunks, and the aligned
    chunks after each up to the next, for `refine`."""

    def kept(chunks: list[Chunk], i: int, moved: set[int]) -> Chunk | None:
        return chunks[i] if 0 <= i < len(chunks) and i not in moved else None

    runs = stretches(opcodes)
    ends = [(i1, j1) for i1, _, j1, _ in runs[1:]] + [(i2, j2) for _, i2, _, j2 in runs[-1:]]
    return [
        Span(
            old=[old_kept[i] for i in range(i1, i2) if i not in moved_old],
            new=[new_kept[j] for j in range(j1, j2) if j not in moved_new],
            old_before=kept(old_kept, i1 - 1, moved_old),
            new_before=kept(new_kept, j1 - 1, moved_new),
            old_after=kept(old_kept, i2, moved_old),
            new_after=kept(new_kept, j2, moved_new),
            old_gap=old_kept[i2:next_i1],  # aligned: what lies before the next stretch
            new_gap=new_kept[j2:next_j1],
        )
        for (i1, i2, j1, j2), (next_i1, next_j1) in zip(runs, ends)
    ]


def _opcodes(old_digests: list[bytes], new_digests: list[bytes]) -> list[tuple]:
    return [(op.tag, op.src_start, op.src_end, op.dest_start, op.dest_end)
            for op in Indel.opcodes(old_digests, new_digests)]


def compare(old: Sequence[Chunk], new: Sequence[Chunk], *, old_text: bytes | None = None,
            new_text: bytes | None = None, ignore: Collection[bytes] = frozenset(),
            thresholds: Thresholds = DEFAULT_THRESHOLDS) -> ChangeReport:
    """Compare two chunk lists (and, given both texts, find the exact word edits).

    `old` and `new` are any sequences of Chunk: `chunk_content`'s `Chunks`, or lists."""
    if (old_text is None) != (new_text is None):
        raise ValueError("give both old_text and new_text, or neither")
    if old_text is not None:
        _check_tiling("old", old, old_text)
        _check_tiling("new", new, new_text)
    old_kept = [c for c in old if c.digest not in ignore] if ignore else list(old)
    new_kept = [c for c in new if c.digest not in ignore] if ignore else list(new)
    old_digests = [c.digest for c in old_kept]
    new_digests = [c.digest for c in new_kept]
    old_set, new_set = set(old_digests), set(new_digests)
    union = old_set | new_set
    similarity = len(old_set & new_set) / len(union) if union else 1.0
    changed = old_digests != new_digests

    if changed:
        opcodes = _opcodes(old_digests, new_digests)
    else:
        opcodes = [("equal", 0, len(old_kept), 0, len(new_kept))]
    aligned = []
    old_loose: list[int] = []
    new_loose: list[int] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            aligned += zip(range(i1, i2), range(j1, j2))
        else:
            old_loose += (i for i in range(i1, i2) if old_kept[i].digest in new_set)
            new_loose += (j for j in range(j1, j2) if new_kept[j].digest in old_set)
    moves = _pair_moves(old_kept, new_kept, old_loose, new_loose)
    # Whatever is not paired is added or removed, an extra copy of a repeated chunk included.
    pairs = aligned + moves
    paired_old = {i for i, _ in pairs}
    paired_new = {j for _, j in pairs}
    added = [c for j, c in enumerate(new_kept) if j not in paired_new]
    removed = [c for i, c in enumerate(old_kept) if i not in paired_old]
    alignment = sorted(
        [(old_kept[i].index, new_kept[j].index) for i, j in pairs], key=lambda p: p[1]
    )

    new_total = sum(c.length for c in new_kept)
    old_total = sum(c.length for c in old_kept)
    edits: list[Edit] = []
    if old_text is not None and changed:
        moved_old = {i for i, _ in moves}
        moved_new = {j for _, j in moves}
        edits = refine(old_text, new_text, _spans(opcodes, old_kept, new_kept, moved_old, moved_new),
                       _move_runs(old_kept, new_kept, moves))
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
        moved=sorted((new_kept[j] for _, j in moves), key=lambda c: c.index),
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
    end = chunks[-1].end if chunks else 0
    if end != len(text):
        raise ValueError(
            f"{which}_text is {len(text)} bytes but its chunks cover {end}: "
            "pass the text the chunks were made from"
        )
