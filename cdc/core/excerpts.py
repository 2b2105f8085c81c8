"""Excerpts: a stretch of a page's text (UTF-8 bytes) as one short line.

The one way every part of cdc cuts text for a reader: the stored change excerpt
(`change_excerpt`), the edits `cdc diff` and `cdc compare` print, the chunk
texts in the figures' hover labels, and the messages of bad records. Whitespace is folded
to single spaces, so a line break or a run of blanks in the page never breaks a list's row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cdc.core.compare import ChangeReport

EXCERPT_CHARS = 200  # of a change row's excerpt


def char_start(text: bytes, offset: int) -> int:
    """`offset` clamped to the text and moved back to the start of its UTF-8 character."""
    offset = max(0, min(offset, len(text)))
    while offset < len(text) and offset > 0 and 0x80 <= text[offset] < 0xC0:
        offset -= 1
    return offset


def one_line(text: object) -> str:
    """Any text (or message) folded onto one line, for reports that list one problem a line."""
    return " ".join(str(text).split())


def shortened(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, the last of them `…` where it is cut."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def region_line(text: bytes, offset: int, length: int, limit: int = 120, cut_mark: str = "") -> str:
    """Up to `limit` bytes of a region of `text` as one line; a cut inside a character drops
    it, and `cut_mark` (" …", say) ends a region longer than `limit`."""
    line = one_line(text[offset:offset + min(length, limit)].decode("utf-8", "ignore"))
    return line + cut_mark if length > limit else line


def first_chars(text: bytes, offset: int, end: int, limit: int) -> str:
    """The first `limit` characters of `text[offset:end]` as one line, `…` where cut: the
    bounds move back to the start of their characters, so none is cut in two."""
    start = char_start(text, offset)
    stop = char_start(text, min(end, start + 4 * limit + 4))  # enough bytes for `limit` characters
    line = region_line(text, start, stop - start, stop - start)
    return line[:limit] + ("…" if len(line) > limit else "")


def change_excerpt(report: ChangeReport | None, old: bytes, new: bytes) -> str:
    """A short line saying what changed first (the first three edits of `report`, between the
    texts `old` and `new`), for lists and CSV exports: a change row's `excerpt`."""
    if report is None:
        return region_line(new, 0, EXCERPT_CHARS * 2, EXCERPT_CHARS * 2)[:EXCERPT_CHARS]
    parts = []
    for edit in report.edits[:3]:
        before = region_line(old, edit.old_offset, edit.old_length, 60)  # leave room for the new text
        after = region_line(new, edit.new_offset, edit.new_length)
        parts.append({"insert": f"+ {after}", "delete": f"- {before}", "move": f"> {after}"}.get(
            edit.kind, f"{before} → {after}"))
    if not parts and report.changed_regions:
        offset, length = report.changed_regions[0]
        parts.append("+ " + region_line(new, offset, length))
    text = " | ".join(parts)
    return shortened(text, EXCERPT_CHARS)
