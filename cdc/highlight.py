"""The two texts of a comparison side by side, as HTML, with what changed marked.

Page text is untrusted input: every piece of it goes through `html.escape` before any
markup is added, and the only markup is this module's own elements, all with class names
prefixed `cdc-`. Offsets are bytes into UTF-8 text; chunk-level regions may start or end
inside a character, so every offset is moved back to the start of its character before the
text is decoded.

Marks may overlap (an exact edit inside a removed chunk, a region that meets a moved chunk),
so the text is not edited by inserting tags at offsets: it is cut into runs at every mark's
ends, each run knows the set of marks over it, and each run is written once as one element
with those classes. Nothing nests, so nothing can nest wrongly.

`PALETTE` holds the colours of the kinds of chunk; `cdc.figures` uses the same ones, so the
text and the alignment figure agree. It lives here, where the text is marked up, rather than
in `cdc.figures`, which needs Plotly.
"""

from __future__ import annotations

import html
import itertools
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence

from cdc.chunking import Chunk
from cdc.compare import ChangeReport
from cdc.refine import DELETE, INSERT, MOVE, REPLACE, WHITESPACE

PALETTE = {
    "shared": "#4C78A8",  # aligned, in order
    "added": "#54A24B",  # only in the new version
    "removed": "#E45756",  # only in the old version
    "moved": "#F58518",  # in both, out of order
    "boilerplate": "#BAB0AC",  # ignored: the host's boilerplate
}
SHADE_ALPHA = "2E"  # hex alpha of a chunk-level region's background: light
STRONG_ALPHA = "80"  # hex alpha of an exact edit's background: strong

# Mark names: each is a CSS class, and the element a run is written as follows from them.
REMOVED = "cdc-removed"  # a removed chunk region, old column
ADDED = "cdc-added"  # an added chunk region, new column
MOVED = "cdc-moved"  # a moved chunk, either column
MOVE_FROM = "cdc-move-from"  # a move edit's text where it was, old column
MOVE_TO = "cdc-move-to"  # a move edit's text where it went, new column
DEL = "cdc-del"  # the exact words deleted or replaced, old column
INS = "cdc-ins"  # the exact words inserted or replacing, new column
POINT_INS = "cdc-point-ins"  # where words were inserted, old column (an empty element)
POINT_DEL = "cdc-point-del"  # where words were deleted, new column (an empty element)

FIRST_CHANGE_IDS = ("cdc-first-change-old", "cdc-first-change-new")
SHORTEN_CHARS = 120  # characters of text a `changes_list` entry shows, at most
WORD_REACH = 32  # bytes an elision's edge may move to fall between words

STYLE = f"""<style>
.cdc-sbs {{display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; align-items: start;}}
.cdc-col {{min-width: 0;}}
.cdc-head {{font-weight: 600; margin-bottom: 0.25rem;}}
.cdc-text {{white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.5;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.85rem;}}
.cdc-removed {{background: {PALETTE["removed"]}{SHADE_ALPHA};}}
.cdc-added {{background: {PALETTE["added"]}{SHADE_ALPHA};}}
.cdc-moved {{background: {PALETTE["moved"]}{SHADE_ALPHA};
  box-shadow: inset 0 -2px 0 {PALETTE["moved"]};}}
.cdc-move-from, .cdc-move-to {{outline: 1px dashed {PALETTE["moved"]}; outline-offset: -1px;
  background: {PALETTE["moved"]}{SHADE_ALPHA};}}
del.cdc-del {{background: {PALETTE["removed"]}{STRONG_ALPHA}; text-decoration: line-through;}}
ins.cdc-ins {{background: {PALETTE["added"]}{STRONG_ALPHA}; text-decoration: none;}}
.cdc-point-ins, .cdc-point-del {{display: inline-block; width: 0; height: 1.1em;
  vertical-align: text-bottom; margin: 0 1px;}}
.cdc-point-ins {{border-left: 2px solid {PALETTE["added"]};}}
.cdc-point-del {{border-left: 2px solid {PALETTE["removed"]};}}
.cdc-gap {{color: #888; font-style: italic;}}
</style>"""

Range = tuple[int, int, str]  # start, end (bytes), mark
Point = tuple[int, str]  # offset (bytes), mark
Run = tuple[int, int, frozenset[str]]  # start, end (bytes), the marks over it


def char_start(text: bytes, offset: int) -> int:
    """`offset` clamped to the text and moved back to the start of its UTF-8 character."""
    offset = max(0, min(offset, len(text)))
    while offset < len(text) and offset > 0 and 0x80 <= text[offset] < 0xC0:
        offset -= 1
    return offset


def decode(text: bytes, start: int, end: int) -> str:
    """Bytes `start:end` as text, both ends moved to character starts first."""
    return text[char_start(text, start):char_start(text, end)].decode("utf-8", errors="replace")


def _runs(length: int, ranges: list[Range], cuts: Collection[int] = ()) -> list[Run]:
    """The text cut at every mark's ends (and at `cuts`): each run with the marks over it."""
    changes: dict[int, Counter[str]] = defaultdict(Counter)
    for start, end, mark in ranges:
        if start < end:
            changes[start][mark] += 1
            changes[end][mark] -= 1
    active: Counter[str] = Counter()
    runs: list[Run] = []
    for start, end in itertools.pairwise(sorted({0, length, *changes, *cuts})):
        active.update(changes.get(start, {}))
        marks = frozenset(mark for mark, count in active.items() if count > 0)
        if runs and runs[-1][2] == marks and start not in cuts:
            runs[-1] = (runs[-1][0], end, marks)  # an end and a start that cancel out
        else:
            runs.append((start, end, marks))
    return runs


def _text_html(text: str) -> str:
    """Escaped page text; newlines become <br> so no blank line can end an HTML block."""
    return html.escape(text, quote=False).replace("\n", "<br>")


def _element(marks: frozenset[str], body: str, anchor: str | None) -> str:
    """One run: plain text when unmarked, else one element carrying all its marks."""
    if not marks:
        return body
    tag = "del" if DEL in marks else "ins" if INS in marks else "span"
    identity = f' id="{anchor}"' if anchor else ""
    return f'<{tag}{identity} class="{" ".join(sorted(marks))}">{body}</{tag}>'


def _gap(start: int, end: int) -> str:
    return f'<span class="cdc-gap">[… {end - start:,} bytes unchanged …]</span>'


def _word_edge(text: bytes, offset: int, step: int) -> int:
    """`offset` moved by `step` to the nearest whitespace within WORD_REACH bytes, else kept."""
    for candidate in range(offset, offset + step * WORD_REACH, step):
        if 0 <= candidate < len(text) and text[candidate] in WHITESPACE:
            return candidate + (step > 0)  # the spaces stay beside the gap
    return char_start(text, offset)


def _elide(text: bytes, runs: list[Run], context: int) -> list[Run | tuple[int, int, None]]:
    """Unmarked runs keep only about `context` bytes next to each change (edges between words).

    Runs shorter than three times `context` are kept whole. The part left out is returned as
    a run whose marks are None: a gap.
    """
    result: list = []
    for number, (start, end, marks) in enumerate(runs):
        keep_head = context if number > 0 else 0  # text before the first change needs no context
        keep_tail = context if number < len(runs) - 1 else 0
        if marks or end - start <= keep_head + keep_tail + context:
            result.append((start, end, marks))
            continue
        head = min(_word_edge(text, start + keep_head, 1), end) if keep_head else start
        tail = max(_word_edge(text, end - keep_tail, -1), head) if keep_tail else end
        result += [(start, head, marks), (head, tail, None), (tail, end, marks)]
    return [run for run in result if run[0] < run[1]]


def _column_html(text: bytes, ranges: list[Range], points: list[Point], anchor: str,
                 context: int | None) -> str:
    """One column's text with its marks; the first mark carries the `anchor` id."""
    ranges = [(char_start(text, s), char_start(text, e), mark) for s, e, mark in ranges]
    points = sorted((char_start(text, offset), mark) for offset, mark in points)
    runs: list = _runs(len(text), ranges, {offset for offset, _ in points})
    if context is not None:
        runs = _elide(text, runs, max(context, 0))
    parts: list[str] = []
    anchor_left: str | None = anchor
    waiting = iter(points)
    point = next(waiting, None)
    for start, end, marks in [*runs, (len(text), len(text), frozenset())]:
        while point is not None and point[0] <= start:  # points are cuts: they fall between runs
            parts.append(_element(frozenset({point[1]}), "", anchor_left))
            anchor_left, point = None, next(waiting, None)
        if start == end:
            continue
        if marks is None:
            parts.append(_gap(start, end))
        elif marks:
            parts.append(_element(marks, _text_html(text[start:end].decode("utf-8", "replace")),
                                  anchor_left))
            anchor_left = None
        else:
            parts.append(_text_html(text[start:end].decode("utf-8", "replace")))
    return "".join(parts)


def _old_marks(report: ChangeReport, old_chunks: Sequence[Chunk] | None) -> tuple[list[Range], list[Point]]:
    ranges = [(offset, offset + length, REMOVED) for offset, length in report.removed_regions]
    ranges += [(e.old_offset, e.old_offset + e.old_length, DEL)
               for e in report.edits if e.kind in (DELETE, REPLACE)]
    ranges += [(e.old_offset, e.old_offset + e.old_length, MOVE_FROM) for e in report.edits if e.kind == MOVE]
    points = [(e.old_offset, POINT_INS) for e in report.edits if e.kind == INSERT]
    if old_chunks is not None:
        by_index = {chunk.index: chunk for chunk in old_chunks}
        moved_new = {chunk.index for chunk in report.moved}
        ranges += [(by_index[o].offset, by_index[o].end, MOVED)
                   for o, n in report.alignment if n in moved_new and o in by_index]
    return ranges, points


def _new_marks(report: ChangeReport) -> tuple[list[Range], list[Point]]:
    ranges = [(offset, offset + length, ADDED) for offset, length in report.changed_regions]
    ranges += [(e.new_offset, e.new_offset + e.new_length, INS)
               for e in report.edits if e.kind in (INSERT, REPLACE)]
    ranges += [(e.new_offset, e.new_offset + e.new_length, MOVE_TO) for e in report.edits if e.kind == MOVE]
    ranges += [(chunk.offset, chunk.end, MOVED) for chunk in report.moved]
    points = [(e.new_offset, POINT_DEL) for e in report.edits if e.kind == DELETE]
    return ranges, points


def side_by_side_html(old_text: bytes, new_text: bytes, report: ChangeReport,
                      context: int | None = None, *, old_chunks: Sequence[Chunk] | None = None,
                      labels: tuple[str, str] = ("old", "new")) -> str:
    """One HTML fragment: the old text left, the new right, with what changed marked.

    Old column: removed chunk regions shaded, exact deletions in `<del class="cdc-del ...">`,
    insertion points as empty `cdc-point-ins` spans. New column: added chunk regions shaded,
    exact insertions in `<ins class="cdc-ins ...">`, deletion points. A `move` edit's text is
    outlined at both places (`cdc-move-from` in the old column, `cdc-move-to` in the new),
    the edits inside it marked as any others. Moved chunks are shaded
    in the new column, and in the old column too when `old_chunks` (the old version's chunks)
    is given. The first mark of each column has the id `cdc-first-change-old` / `-new`;
    there are none when nothing changed.

    `context=None` shows the whole texts; a number of bytes keeps that much unchanged text
    on each side of every change and replaces the rest with a "bytes unchanged" note.
    `labels` head the columns (escaped). Render with `st.html`, not `st.markdown`: Markdown
    would read `$...$` in page text as mathematics.
    """
    old_ranges, old_points = _old_marks(report, old_chunks)
    new_ranges, new_points = _new_marks(report)
    columns = (
        ("cdc-old", labels[0], _column_html(old_text, old_ranges, old_points, FIRST_CHANGE_IDS[0], context)),
        ("cdc-new", labels[1], _column_html(new_text, new_ranges, new_points, FIRST_CHANGE_IDS[1], context)),
    )
    body = "".join(
        f'<div class="cdc-col {side}"><div class="cdc-head">{html.escape(label)}</div>'
        f'<div class="cdc-text">{text}</div></div>'
        for side, label, text in columns
    )
    return f'{STYLE}<div class="cdc-sbs">{body}</div>'


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
