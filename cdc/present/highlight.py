"""The two texts of a comparison side by side, as HTML, block by block, with what changed marked.

Page text is untrusted input: every piece of it goes through `html.escape` before any
markup is added, and the only markup is this module's own elements, all with class names
prefixed `cdc-`. Offsets are bytes into UTF-8 text; chunk-level regions may start or end
inside a character, so every offset is moved back to the start of its character before the
text is decoded.

A block is a line of the normalised text (a paragraph, list item, heading, table row or
navigation line). The two texts are laid out as rows of a grid, a block of each version
per row: equal blocks side by side, a changed block next to the block it replaced, an
inserted or deleted one opposite a blank. Only blocks that hold an exact edit are shaded;
the edited words are marked inside them. Moved text is outlined at both places and
labelled `move N` at both ends (ids `cdc-move-N-from` / `-to`, which a script may join).

Marks may overlap (an edit inside a move), so the text is not edited by inserting tags at
offsets: it is cut into runs at every mark's ends and at every block's ends, each run knows
the set of marks over it, and each run is written once as one element with those classes
inside its block's cell. Nothing nests, so nothing can nest wrongly.

`PALETTE` holds the colours of the kinds of chunk; `cdc.present.figures` uses the same ones, so the
text and the alignment figure agree. It lives here, where the text is marked up, rather than
in `cdc.present.figures`, which needs Plotly.
"""

from __future__ import annotations

import bisect
import html
import itertools
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rapidfuzz.distance import Indel
from rapidfuzz.process import cdist

from cdc.core.chunking import Chunk
from cdc.core.compare import ChangeReport
from cdc.core.excerpts import char_start
from cdc.core.refine import DELETE, INSERT, MOVE, REPLACE
from cdc.core.verdicts import UNCHANGED

PALETTE = {
    "shared": "#4C78A8",  # aligned, in order
    "added": "#54A24B",  # only in the new version
    "removed": "#E45756",  # only in the old version
    "moved": "#F58518",  # in both, out of order
    "boilerplate": "#BAB0AC",  # ignored: the host's boilerplate
}
SHADE_ALPHA = "2E"  # hex alpha of a changed block's background: light
STRONG_ALPHA = "80"  # hex alpha of an exact edit's background: strong

# Mark names: each is a CSS class, and the element a run is written as follows from them.
REMOVED = "cdc-removed"  # a removed chunk region, old column (only when there are no edits)
ADDED = "cdc-added"  # an added chunk region, new column (only when there are no edits)
MOVED = "cdc-moved"  # a moved chunk, either column (only when there are no edits)
MOVE_FROM = "cdc-move-from"  # a move edit's text where it was, old column
MOVE_TO = "cdc-move-to"  # a move edit's text where it went, new column
DEL = "cdc-del"  # the exact words deleted or replaced, old column
INS = "cdc-ins"  # the exact words inserted or replacing, new column
POINT_INS = "cdc-point-ins"  # where words were inserted, old column (an empty element)
POINT_DEL = "cdc-point-del"  # where words were deleted, new column (an empty element)
MOVE_LABEL = "cdc-move-label"  # "move N" at each end of a move edit (not page text)

# Block classes: a cell of the grid holds one block of one version, or is blank.
CELL = "cdc-cell"
CHANGED_BLOCK = "cdc-changed"  # holds an exact edit (or, without edits, a changed chunk)
MOVED_BLOCK = "cdc-moved-block"  # moved text, and no other change outside the move
BOILERPLATE_BLOCK = "cdc-boilerplate"  # wholly inside the host's boilerplate chunks
BLANK = "cdc-blank"  # no block on this side of the row: opposite an insertion or deletion
GAP = "cdc-gap"  # a note standing for blocks left out (unchanged, or hidden boilerplate)

MOVE_MARKS = frozenset({MOVE_FROM, MOVE_TO, MOVED})
CHANGE_MARKS = frozenset({DEL, INS, REMOVED, ADDED})
BOILERPLATE_VIEWS = ("shown", "dimmed", "hidden")  # how boilerplate blocks are drawn

FIRST_CHANGE_IDS = ("cdc-first-change-old", "cdc-first-change-new")
SHORTEN_CHARS = 120  # characters of text a `changes_list` entry shows, at most
PAIRING_LIMIT = 2500  # old x new blocks of one changed stretch paired by likeness, at most
PAIRING_LIKENESS = 0.5  # two blocks this alike (Indel, 0 to 1) sit side by side


def move_label_id(number: int, side: str) -> str:
    """The id of a move's label: `side` is "from" (old column) or "to" (new column)."""
    return f"cdc-move-{number}-{side}"


STYLE = f"""<style>
.cdc-sbs {{display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr);
  column-gap: 2.5rem; row-gap: 0.3rem; align-items: stretch; position: relative;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.85rem;}}
.cdc-head {{font-weight: 600; font-family: sans-serif; margin-bottom: 0.2rem;}}
.cdc-cell {{white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.5; min-height: 1.5em;
  padding: 0.1rem 0.4rem; border-left: 3px solid transparent; border-radius: 2px;}}
.cdc-old.cdc-changed {{background: {PALETTE["removed"]}{SHADE_ALPHA};
  border-left-color: {PALETTE["removed"]};}}
.cdc-new.cdc-changed {{background: {PALETTE["added"]}{SHADE_ALPHA};
  border-left-color: {PALETTE["added"]};}}
.cdc-moved-block {{background: {PALETTE["moved"]}{SHADE_ALPHA}; border-left: 3px dashed {PALETTE["moved"]};}}
.cdc-blank {{background: repeating-linear-gradient(135deg, #0000 0 6px, #8881 6px 8px);}}
.cdc-boilerplate {{opacity: 0.42;}}
.cdc-removed {{background: {PALETTE["removed"]}{SHADE_ALPHA};}}
.cdc-added {{background: {PALETTE["added"]}{SHADE_ALPHA};}}
.cdc-moved {{background: {PALETTE["moved"]}{SHADE_ALPHA}; box-shadow: inset 0 -2px 0 {PALETTE["moved"]};}}
.cdc-move-from, .cdc-move-to {{outline: 1px dashed {PALETTE["moved"]}; outline-offset: -1px;}}
.cdc-moved-block .cdc-move-from, .cdc-moved-block .cdc-move-to {{outline: none;}}
del.cdc-del {{background: {PALETTE["removed"]}{STRONG_ALPHA}; text-decoration: line-through;}}
ins.cdc-ins {{background: {PALETTE["added"]}{STRONG_ALPHA}; text-decoration: none;}}
.cdc-point-ins, .cdc-point-del {{display: inline-block; width: 0; height: 1.1em;
  vertical-align: text-bottom; margin: 0 1px;}}
.cdc-point-ins {{border-left: 2px solid {PALETTE["added"]};}}
.cdc-point-del {{border-left: 2px solid {PALETTE["removed"]};}}
.cdc-move-label {{font-family: sans-serif; font-size: 0.7rem; font-weight: 600; color: white;
  background: {PALETTE["moved"]}; border-radius: 3px; padding: 0 0.35em; margin-right: 0.4em;
  cursor: pointer; user-select: none; white-space: nowrap;}}
.cdc-gap {{grid-column: 1 / -1; color: #888; font-style: italic; font-family: sans-serif;
  text-align: center; font-size: 0.8rem;}}
</style>"""

Range = tuple[int, int, str]  # start, end (bytes), mark
Point = tuple[int, str]  # offset (bytes), mark
Run = tuple[int, int, frozenset[str]]  # start, end (bytes), the marks over it
Row = tuple[int | None, int | None]  # the old and the new block on one row; None: blank


def decode(text: bytes, start: int, end: int) -> str:
    """Bytes `start:end` as text, both ends moved to character starts first."""
    return text[char_start(text, start):char_start(text, end)].decode("utf-8", errors="replace")


def blocks_of(text: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line of `text`, without its line break: the text's blocks."""
    if not text:
        return []
    blocks, start = [], 0
    for line in text.split(b"\n"):
        blocks.append((start, start + len(line)))
        start += len(line) + 1
    return blocks


def _runs(length: int, ranges: list[Range], cuts: Collection[int] = ()) -> list[Run]:
    """The text cut at every mark's ends (and at `cuts`): each run with the marks over it."""
    changes: dict[int, Counter[str]] = defaultdict(Counter)
    for start, end, mark in ranges:
        if start < end:
            changes[start][mark] += 1
            changes[end][mark] -= 1
    active: Counter[str] = Counter()
    marks: frozenset[str] = frozenset()
    runs: list[Run] = []
    for start, end in itertools.pairwise(sorted({0, length, *changes, *cuts})):
        delta = changes.get(start)
        if delta:  # most cuts are block ends, where no mark starts or ends
            active.update(delta)
            marks = frozenset(mark for mark, count in active.items() if count > 0)
        if runs and runs[-1][2] == marks and start not in cuts:
            runs[-1] = (runs[-1][0], end, marks)  # an end and a start that cancel out
        else:
            runs.append((start, end, marks))
    return runs


def _text_html(text: bytes) -> str:
    """Escaped page text (a run never holds a line break: blocks are cells)."""
    return html.escape(text.decode("utf-8", "replace"), quote=False)


def _element(marks: frozenset[str], body: str) -> str:
    """One run: plain text when unmarked, else one element carrying all its marks."""
    if not marks:
        return body
    tag = "del" if DEL in marks else "ins" if INS in marks else "span"
    return f'<{tag} class="{" ".join(sorted(marks))}">{body}</{tag}>'


def _whole_blocks(text: bytes, start: int, end: int) -> bool:
    """Whether bytes `start:end` are whole blocks (with or without a line break at an end)."""
    starts = start == 0 or text[start - 1:start] == b"\n" or text[start:start + 1] == b"\n"
    ends = end >= len(text) or text[end:end + 1] == b"\n" or text[end - 1:end] == b"\n"
    return start < end and starts and ends


def _edit_marks(report: ChangeReport, side: str, other_text: bytes) -> tuple[list[Range], list[Point]]:
    """One column's marks from the exact edits: `side` "old" or "new"; `other_text` the other
    column's text."""
    old = side == "old"
    changed, moved = (DEL, MOVE_FROM) if old else (INS, MOVE_TO)
    kinds = (DELETE, REPLACE) if old else (INSERT, REPLACE)
    elsewhere, point = (INSERT, POINT_INS) if old else (DELETE, POINT_DEL)
    ranges, points = [], []
    for edit in report.edits:
        here = (edit.old_offset, edit.old_length) if old else (edit.new_offset, edit.new_length)
        there = (edit.new_offset, edit.new_length) if old else (edit.old_offset, edit.old_length)
        if edit.kind in kinds or edit.kind == MOVE:
            ranges.append((here[0], here[0] + here[1], moved if edit.kind == MOVE else changed))
        # Whole blocks added or removed face a blank cell: only words inside a block need a point.
        elif edit.kind == elsewhere and not _whole_blocks(other_text, there[0], there[0] + there[1]):
            points.append((here[0], point))
    return ranges, points


def _old_chunk_marks(report: ChangeReport, old_chunks: Sequence[Chunk] | None) -> list[Range]:
    """Without exact edits (a report made without the texts): the changed chunks."""
    if not report.changed or report.verdict == UNCHANGED:
        return []  # the chunks differ in whitespace only, or in left-out boilerplate
    ranges = [(offset, offset + length, REMOVED) for offset, length in report.removed_regions]
    if old_chunks is not None:
        by_index = {chunk.index: chunk for chunk in old_chunks}
        moved_new = {chunk.index for chunk in report.moved}
        ranges += [(by_index[o].offset, by_index[o].end, MOVED)
                   for o, n in report.alignment if n in moved_new and o in by_index]
    return ranges


def _new_chunk_marks(report: ChangeReport) -> list[Range]:
    if not report.changed or report.verdict == UNCHANGED:
        return []
    ranges = [(offset, offset + length, ADDED) for offset, length in report.changed_regions]
    return ranges + [(chunk.offset, chunk.end, MOVED) for chunk in report.moved]


def _words(line: bytes) -> list[bytes]:
    return line.split()


def _pair_alike(old_lines: list[bytes], new_lines: list[bytes]) -> list[Row]:
    """Rows for a changed stretch: each old block beside the most alike new one, in order,
    where they share enough words; the rest opposite blanks. Equal counts pair in order."""
    m, n = len(old_lines), len(new_lines)
    if m == n or not m or not n or m * n > PAIRING_LIMIT:
        return list(itertools.zip_longest(range(m), range(n)))
    likeness = cdist(old_lines, new_lines, scorer=Indel.normalized_similarity, processor=_words)
    # The in-order pairing of most total likeness (Needleman-Wunsch, no gap cost).
    best = [[0.0] * (n + 1) for _ in range(m + 1)]
    for a in range(m - 1, -1, -1):
        for b in range(n - 1, -1, -1):
            pair = likeness[a][b] + best[a + 1][b + 1] if likeness[a][b] >= PAIRING_LIKENESS else -1.0
            best[a][b] = max(pair, best[a + 1][b], best[a][b + 1])
    rows: list[Row] = []
    a = b = 0
    while a < m and b < n:
        if likeness[a][b] >= PAIRING_LIKENESS and best[a][b] == likeness[a][b] + best[a + 1][b + 1]:
            rows.append((a, b))
            a, b = a + 1, b + 1
        elif best[a][b] == best[a + 1][b]:
            rows.append((a, None))
            a += 1
        else:
            rows.append((None, b))
            b += 1
    return rows + [(k, None) for k in range(a, m)] + [(None, k) for k in range(b, n)]


def _pair_stretch(old_lines: list[bytes], new_lines: list[bytes], old_alone: list[bool],
                  new_alone: list[bool], i1: int, j1: int) -> list[Row]:
    """A changed stretch's rows: blocks moved whole alone on theirs, the others paired."""
    old_paired = [k for k in range(len(old_lines)) if not old_alone[k]]
    new_paired = [k for k in range(len(new_lines)) if not new_alone[k]]
    rows: list[Row] = []
    old_next = new_next = 0  # the first block of each side not yet on a row
    for a, b in _pair_alike([old_lines[k] for k in old_paired], [new_lines[k] for k in new_paired]):
        a = None if a is None else old_paired[a]
        b = None if b is None else new_paired[b]
        if a is not None:
            rows += [(k, None) for k in range(old_next, a)]  # moved blocks before it
            old_next = a + 1
        if b is not None:
            rows += [(None, k) for k in range(new_next, b)]
            new_next = b + 1
        rows.append((a, b))
    rows += [(k, None) for k in range(old_next, len(old_lines))]
    rows += [(None, k) for k in range(new_next, len(new_lines))]
    return [(None if a is None else i1 + a, None if b is None else j1 + b) for a, b in rows]


def block_rows(old_text: bytes, new_text: bytes, old_blocks: list[tuple[int, int]],
               new_blocks: list[tuple[int, int]], old_alone: Collection[int] = (),
               new_alone: Collection[int] = ()) -> list[Row]:
    """The blocks of both texts as rows: an alignment of the two lists of lines. Equal lines
    share a row; in a changed stretch, alike lines share one and the rest face blanks, as do
    the blocks numbered in `old_alone` / `new_alone` (those moved whole)."""
    old_lines = [old_text[s:e] for s, e in old_blocks]
    new_lines = [new_text[s:e] for s, e in new_blocks]
    old_flags = [k in old_alone for k in range(len(old_lines))] if old_alone else [False] * len(old_lines)
    new_flags = [k in new_alone for k in range(len(new_lines))] if new_alone else [False] * len(new_lines)
    rows: list[Row] = []
    i = j = 0
    for op in [*Indel.opcodes(old_lines, new_lines), None]:
        if op is not None and op.tag != "equal":
            continue  # a changed stretch runs until the next equal run (or the end)
        i2, j2 = (op.src_start, op.dest_start) if op is not None else (len(old_lines), len(new_lines))
        if i < i2 or j < j2:
            rows += _pair_stretch(old_lines[i:i2], new_lines[j:j2], old_flags[i:i2], new_flags[j:j2], i, j)
        if op is not None:
            rows += zip(range(op.src_start, op.src_end), range(op.dest_start, op.dest_end))
            i, j = op.src_end, op.dest_end
    return rows


@dataclass
class _Cell:
    """One block of one version: its inner markup and what kind of block it is."""

    body: str
    changed: bool
    moved: bool
    boilerplate: bool
    moved_whole: bool = False  # every word of it is in a move: it stands alone on its row

    @property
    def marked(self) -> bool:
        return self.changed or self.moved


def _covered(ranges: list[tuple[int, int]], starts: list[int], start: int, end: int) -> bool:
    """Whether `start:end` lies inside one of the merged, sorted `ranges`."""
    at = bisect.bisect_right(starts, start) - 1
    return at >= 0 and ranges[at][1] >= end


def _merged(chunks: Sequence[Chunk] | None, digests: Collection[bytes]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for chunk in chunks or ():
        if chunk.digest in digests:
            if merged and merged[-1][1] == chunk.offset:
                merged[-1] = (merged[-1][0], chunk.end)
            else:
                merged.append((chunk.offset, chunk.end))
    return merged


def _cells(text: bytes, blocks: list[tuple[int, int]], ranges: list[Range], points: list[Point],
           labels: dict[int, list[str]], boilerplate: list[tuple[int, int]]) -> list[_Cell]:
    """Each block's cell: its runs written out, with the points and move labels in place."""
    ranges = [(char_start(text, s), char_start(text, e), mark) for s, e, mark in ranges]
    inline: dict[int, list[str]] = defaultdict(list)  # offset: empty elements written there
    for offset, mark in points:
        inline[char_start(text, offset)].append(_element(frozenset({mark}), ""))
    point_offsets = sorted(char_start(text, offset) for offset, _ in points)
    for offset, spans in labels.items():
        inline[char_start(text, offset)] += spans
    cuts = {offset for block in blocks for offset in block} | set(inline)
    runs = iter(_runs(len(text), ranges, cuts))
    run = next(runs, None)
    starts = [start for start, _ in boilerplate]
    cells = []
    for start, end in blocks:
        while run is not None and run[0] < start:
            run = next(runs, None)  # the line break between two blocks
        parts = list(inline.get(start, ()))
        at = bisect.bisect_left(point_offsets, start)
        changed = at < len(point_offsets) and point_offsets[at] <= end
        moved = unmoved = False  # some text of the block is in a move; some is outside every move
        while run is not None and run[0] < end:
            run_start, run_end, marks = run
            if run_start > start:
                parts += inline.get(run_start, ())
            piece = text[run_start:run_end]
            parts.append(_element(marks, _text_html(piece)))
            changed = changed or bool(marks & CHANGE_MARKS)
            if marks & MOVE_MARKS:
                moved = True
            elif not unmoved and piece.strip():
                unmoved = True
            run = next(runs, None)
        if end > start:
            parts += inline.get(end, ())
        # A block moved whole is a moved block, edits inside or not; one partly moved is too,
        # unless something else changed in it.
        moved_block = moved and not (unmoved and changed)
        boilerplate_block = (not changed and not moved and bool(boilerplate)
                             and _covered(boilerplate, starts, start, end))
        cells.append(_Cell("".join(parts), changed and not moved_block, moved_block, boilerplate_block,
                           moved and not unmoved))
    return cells


def _move_labels(report: ChangeReport, old_blocks, new_blocks) -> tuple[dict, dict]:
    """"move N" labels at both ends of each move edit, the arrow toward the other end."""
    old_starts = [s for s, _ in old_blocks]
    new_starts = [s for s, _ in new_blocks]
    old_labels: dict[int, list[str]] = defaultdict(list)
    new_labels: dict[int, list[str]] = defaultdict(list)
    moves = [e for e in report.edits if e.kind == MOVE]
    for number, edit in enumerate(moves, 1):
        old_share = bisect.bisect_right(old_starts, edit.old_offset) / max(len(old_starts), 1)
        new_share = bisect.bisect_right(new_starts, edit.new_offset) / max(len(new_starts), 1)
        later = new_share >= old_share
        old_labels[edit.old_offset].append(
            f'<span id="{move_label_id(number, "from")}" class="{MOVE_LABEL}">move {number} '
            f'{"↓" if later else "↑"}</span>')
        new_labels[edit.new_offset].append(
            f'<span id="{move_label_id(number, "to")}" class="{MOVE_LABEL}">move {number} '
            f'{"↑" if later else "↓"}</span>')
    return old_labels, new_labels


def _cell_html(side: str, cell: _Cell | None, blank_marked: bool, anchor: str | None,
               boilerplate_view: str) -> str:
    classes = [CELL, side]
    if cell is None:
        classes.append(BLANK)
    elif cell.moved:
        classes.append(MOVED_BLOCK)
    elif cell.changed:
        classes.append(CHANGED_BLOCK)
    elif cell.boilerplate and boilerplate_view != "shown":
        classes.append(BOILERPLATE_BLOCK)
    identity = f'id="{anchor}" ' if anchor and (cell.marked if cell else blank_marked) else ""
    return f'<div {identity}class="{" ".join(classes)}">{cell.body if cell else ""}</div>'


def _gap(count: int, what: str) -> str:
    blocks = f'{count:,} {what} block{"s" if count != 1 else ""}'
    note = f"[{blocks} hidden]" if what == "boilerplate" else f"[… {blocks} …]"
    return f'<div class="{GAP}">{note}</div>'


def side_by_side_html(old_text: bytes, new_text: bytes, report: ChangeReport,
                      context_blocks: int | None = None, *, old_chunks: Sequence[Chunk] | None = None,
                      new_chunks: Sequence[Chunk] | None = None,
                      boilerplate: Collection[bytes] = frozenset(), boilerplate_view: str = "dimmed",
                      labels: tuple[str, str] = ("old", "new")) -> str:
    """One HTML fragment: the two texts block by block, old left and new right, rows aligned.

    Each block is a cell (`cdc-cell cdc-old` / `cdc-new`); a row with a block on one side
    only has a `cdc-blank` cell on the other. A block holding an exact edit is `cdc-changed`
    (shaded), its deleted words in `<del class="cdc-del ...">` (old column), inserted ones in
    `<ins class="cdc-ins ...">` (new column), and where words went or came from inside a
    block an empty `cdc-point-ins` / `cdc-point-del` span. A `move` edit's text is outlined
    at both places (`cdc-move-from`, `cdc-move-to`), its blocks `cdc-moved-block`, the edits
    inside it marked as any others, and a `move N` label (`cdc-move-label`, ids from
    `move_label_id`) at each end. Without exact edits (a report made without the texts),
    changed and moved chunks are marked instead (`cdc-removed`, `cdc-added`, `cdc-moved`; in
    the old column given `old_chunks`). The first marked cell of each column has the id
    `cdc-first-change-old` / `-new`; there are none when nothing changed.

    Blocks wholly inside chunks whose digest is in `boilerplate` (given the chunks) are
    `boilerplate_view`: "shown" as any other, "dimmed" (`cdc-boilerplate`) or "hidden" (rows
    of them replaced by one `cdc-gap` note); a boilerplate block with an edit is shown.
    `context_blocks=None` shows every block; a number keeps that many unchanged rows on each
    side of every change and replaces the rest with a note. `labels` head the columns
    (escaped). Render with `st.html` or in a frame, not `st.markdown`: Markdown would read
    `$...$` in page text as mathematics.
    """
    if boilerplate_view not in BOILERPLATE_VIEWS:
        raise ValueError(f"boilerplate_view must be one of {BOILERPLATE_VIEWS}, got {boilerplate_view!r}")
    old_blocks, new_blocks = blocks_of(old_text), blocks_of(new_text)
    old_labels, new_labels = _move_labels(report, old_blocks, new_blocks)
    hide = boilerplate and boilerplate_view != "shown"
    if report.edits:
        old_marks, new_marks = _edit_marks(report, "old", new_text), _edit_marks(report, "new", old_text)
    else:
        old_marks, new_marks = (_old_chunk_marks(report, old_chunks), []), (_new_chunk_marks(report), [])
    old_cells = _cells(old_text, old_blocks, *old_marks, old_labels,
                       _merged(old_chunks, boilerplate) if hide else [])
    new_cells = _cells(new_text, new_blocks, *new_marks, new_labels,
                       _merged(new_chunks, boilerplate) if hide else [])
    rows = block_rows(old_text, new_text, old_blocks, new_blocks,
                      {k for k, cell in enumerate(old_cells) if cell.moved_whole},
                      {k for k, cell in enumerate(new_cells) if cell.moved_whole})
    cells = [(None if i is None else old_cells[i], None if j is None else new_cells[j]) for i, j in rows]
    return (f'{STYLE}<div class="cdc-sbs"><div class="cdc-head cdc-old">{html.escape(labels[0])}</div>'
            f'<div class="cdc-head cdc-new">{html.escape(labels[1])}</div>'
            f'{_grid(cells, context_blocks, boilerplate_view)}</div>')


def _grid(cells: list[tuple[_Cell | None, _Cell | None]], context_blocks: int | None,
          boilerplate_view: str) -> str:
    """The rows' cells in order; hidden boilerplate and far unchanged rows as notes."""
    marked = [any(c is not None and c.marked for c in row) for row in cells]
    near = marked
    if context_blocks is not None:
        reach = max(context_blocks, 0)
        near = [False] * len(cells)
        for number in (n for n, flag in enumerate(marked) if flag):
            for k in range(max(0, number - reach), min(len(cells), number + reach + 1)):
                near[k] = True
    parts: list[str] = []
    anchors = list(FIRST_CHANGE_IDS)
    left_out = ("", 0)  # what the pending note stands for, and how many rows
    for row, is_marked, is_near in zip(cells, marked, near):
        hidden = boilerplate_view == "hidden" and not is_marked and all(
            c is None or c.boilerplate for c in row)
        far = context_blocks is not None and not is_near
        skipped = "boilerplate" if hidden else "unchanged" if far else ""
        if skipped:
            if left_out[0] and left_out[0] != skipped:
                parts.append(_gap(left_out[1], left_out[0]))
                left_out = ("", 0)
            left_out = (skipped, left_out[1] + 1)
            continue
        if left_out[0]:
            parts.append(_gap(left_out[1], left_out[0]))
            left_out = ("", 0)
        old, new = row
        for side, cell, other, number in (("cdc-old", old, new, 0), ("cdc-new", new, old, 1)):
            blank_marked = other is not None and other.marked
            parts.append(_cell_html(side, cell, blank_marked, anchors[number], boilerplate_view))
            if anchors[number] and (cell.marked if cell else blank_marked):
                anchors[number] = None
    if left_out[0]:
        parts.append(_gap(left_out[1], left_out[0]))
    return "".join(parts)


def shorten(text: str, limit: int = SHORTEN_CHARS) -> str:
    """Whitespace folded; past `limit` characters, the middle replaced by an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    return f"{text[:half]}…{text[len(text) - (limit - 1 - half):]}"


def _entry(kind: str, old_text: bytes, new_text: bytes, old: tuple[int, int] | None,
           new: tuple[int, int] | None) -> dict:
    def side(text: bytes, span: tuple[int, int] | None) -> tuple[int | None, int | None, str]:
        if span is None:
            return None, None, ""
        return span[0], span[1], shorten(decode(text, span[0], span[0] + span[1]))

    old_offset, old_length, old_shown = side(old_text, old)
    new_offset, new_length, new_shown = side(new_text, new)
    return {"kind": kind, "old_text": old_shown, "new_text": new_shown,
            "old_offset": old_offset, "old_length": old_length,
            "new_offset": new_offset, "new_length": new_length}


def changes_list(old_text: bytes, new_text: bytes, report: ChangeReport, *,
                 old_chunks: Sequence[Chunk] | None = None) -> list[dict]:
    """What changed, one dict per change, in order, for a table.

    Keys: kind, old_text, new_text (shortened plain text: NOT escaped, so escape it before
    putting it in HTML), old_offset, old_length, new_offset, new_length (bytes; None where a
    side does not apply). Kinds: the exact edits' `insert`, `delete`, `replace` and `move`
    (moved chunks among them) when the report has them; else the chunk regions as `removed`
    and `added`, then `moved` chunks (their old offset only when `old_chunks` is given).
    """
    if report.edits:
        return [_entry(e.kind, old_text, new_text, (e.old_offset, e.old_length),
                       (e.new_offset, e.new_length)) for e in report.edits]
    rows = [_entry("removed", old_text, new_text, region, None) for region in report.removed_regions]
    rows += [_entry("added", old_text, new_text, None, region) for region in report.changed_regions]
    by_index = {chunk.index: chunk for chunk in old_chunks or ()}
    old_of = {n: by_index.get(o) for o, n in report.alignment}
    for chunk in report.moved:
        before = old_of.get(chunk.index)
        rows.append(_entry("moved", old_text, new_text,
                           (before.offset, before.length) if before else None,
                           (chunk.offset, chunk.length)))
    return rows
