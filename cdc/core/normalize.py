"""The one notion of "the content" of a page: the bytes that are chunked and fingerprinted.

`content_for_chunking` is the seed's function made robust, and aware of blocks: the units a
reader sees (a paragraph, a list item, a heading, a table row, a line of code or of
navigation). The output is one block per line: the title, the description, then the blocks
of each section's text, in that order, each folded to single spaces, joined by newlines,
empty blocks dropped. Before folding, text is cleaned: control characters and invisible
formatting characters (soft hyphens, zero-width spaces, byte-order marks) are dropped, lone
surrogates become U+FFFD, and the result is put in Unicode NFC, so that two encodings of the
same text give the same bytes. Missing, `None` or wrong-typed fields count as empty; numbers
are written out.

A section's text is read as the Markdown-like text crawlers and extractors give
(`text_blocks`): blank lines separate blocks; a single line break is kept where the next line
is a list item (`- `, `* `, `+ `, `1. `, `1) `), a table row (`|`), a heading (`#`), a fence
(```, ~~~) or a line inside one, or is indented four spaces after a block that cannot
continue; any other single line break is the wrapping of running text (or of a list item)
and becomes a space. The title and the description are one block each.

Normalising is idempotent on blocks: the normalised blocks of a record, given back as a
record (a section per block, or blank-line separated), normalise to the same bytes. One
block per line with single line breaks is ambiguous as Markdown ("a\nb" is one wrapped
paragraph or two blocks): read as a section's text, running-text lines join, so text whose
lines are blocks must say so with blank lines (as `cdc.sources.extract` writes it) or sections.

Change detection, the whole-page fingerprint and deduplication all use these bytes:
three notions of the content would give three verdicts about whether a page changed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

import numpy as np
import xxhash

from cdc.core.compiled import AHEAD_OF_TIME, njit

NORMALIZATION_VERSION = "norm-v2"

# C0 and C1 controls other than whitespace (which folding handles), DEL, invisible formatting
# characters that CMSs sprinkle into otherwise unchanged text, and lone surrogates (group 1).
CLEAN = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u00ad\u200b\u2060\ufeff]|([\ud800-\udfff])")
# For ASCII text the same cleaning is a byte translation: controls deleted, and the four
# separators that `str.split` counts as whitespace (but `bytes.split` does not) made spaces.
ASCII_DELETE = bytes([*range(0x00, 0x09), *range(0x0E, 0x1C), 0x7F])
ASCII_TABLE = bytes.maketrans(bytes(range(0x1C, 0x20)), b"    ")
# A control the translation would delete, in text beyond ASCII: the characters on either side
# of it meet, and may compose (A, a NUL, a combining acute: Á), which only NFC, after the
# cleaning, makes of them.
DELETED_CONTROL = re.compile(b"[" + re.escape(ASCII_DELETE) + b"]")


SHORT_TEXT = 64  # bytes; shorter text is folded by byte methods in C rather than the kernel


def _clean(match: re.Match) -> str:
    return "\ufffd" if match.group(1) else ""


# In UTF-8: what CLEAN removes (but ASCII controls and lone surrogates, found otherwise),
# and whitespace beyond ASCII, which `bytes.split` would not fold. C2 starts U+0080-U+00BF:
# the C1 controls, the soft hyphen, NEL and the no-break space among them.
NEEDS_CHARACTERS = re.compile(
    rb"\xc2|\xe2\x80[\x80-\x8b\xa8\xa9\xaf]|\xe2\x81[\x9f\xa0]|\xef\xbb\xbf|\xe1\x9a\x80|\xe3\x80\x80")


@njit(inline="always")
def _needs_characters(src, i):
    """Whether the UTF-8 sequence at `src[i]` is one NEEDS_CHARACTERS matches."""
    b = src[i]
    if b == 0xC2:
        return True
    if i + 2 >= len(src):
        return False
    b1, b2 = src[i + 1], src[i + 2]
    return ((b == 0xE2 and b1 == 0x80 and (b2 <= 0x8B or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF))
            or (b == 0xE2 and b1 == 0x81 and (b2 == 0x9F or b2 == 0xA0))
            or (b == 0xEF and b1 == 0xBB and b2 == 0xBF)
            or (b == 0xE1 and b1 == 0x9A and b2 == 0x80)
            or (b == 0xE3 and b1 == 0x80 and b2 == 0x80))


@njit(inline="always")
def _put(out, n, b, owed):
    """Write byte `b` at `out[n]`, after a space if one is owed; returns the length written."""
    if owed:
        out[n] = 32
        n += 1
    out[n] = b
    return n + 1


@njit(cache=True, nogil=True)
def _fold_bytes(src, out):  # pragma: no cover - compiled; the tests run it with and without the JIT
    """Fold UTF-8 `src` into `out` in one pass: ASCII controls dropped, runs of whitespace
    (the six `bytes.split` splits on, and the separators 0x1C-0x1F) made one space, none at
    either end. Returns the length written, or -1 when the text holds a character that
    NEEDS_CHARACTERS matches: those need the per-character path."""
    n = 0
    owed = False  # a space to write before the next byte of a word
    size = len(src)
    for i in range(size):
        b = src[i]
        if b == 32 or 9 <= b <= 13 or 28 <= b <= 31:
            owed = n > 0
            continue
        if b <= 8 or 14 <= b <= 27 or b == 127:
            continue
        if b >= 0xC2 and _needs_characters(src, i):
            return -1
        n = _put(out, n, b, owed)
        owed = False
    return n


# Block kinds while reading a section's text (`_fold_blocks`, `_blocks_by_characters`).
CLOSED = 0  # no block open: the next line starts one
CONTINUES = 1  # a paragraph or list item: a line of running text after it is its wrapping
SINGLE = 2  # a heading, table row, fence or preformatted line: the next line starts a block
PREFORMATTED_INDENT = 4  # columns (a tab counts four) that make a line preformatted
FENCES = ("```", "~~~")
MARKER = re.compile(r"[-*+]\s|\d{1,9}[.)]\s|[#|]")  # at a line's first non-space character
WRAPPABLE_MARKS = "-*+0123456789"  # list items wrap; headings and table rows do not


@njit(inline="always")
def _marker_space(src, i):
    """Whether `src[i]` is whitespace within a line (after a list marker)."""
    if i >= len(src):
        return False
    b = src[i]
    return b == 32 or b == 9 or 11 <= b <= 13 or 28 <= b <= 31


@njit(inline="always")
def _list_marker(src, j):
    """Whether the line content at `src[j]` starts with a list item's marker."""
    b = src[j]
    if b == 45 or b == 42 or b == 43:  # - * +
        return _marker_space(src, j + 1)
    k = j
    while k < len(src) and k - j < 9 and 48 <= src[k] <= 57:
        k += 1
    return k > j and k < len(src) and (src[k] == 46 or src[k] == 41) and _marker_space(src, k + 1)


@njit(cache=True, nogil=True)
def _fold_blocks(src, out):  # pragma: no cover - compiled; the tests run it with and without the JIT
    """Read UTF-8 `src` as a section's text (see the module's docstring) into `out`: one block
    per line, each folded as `_fold_bytes` folds, joined by newlines. Returns the length
    written, or -1 when the text holds a character the per-character path must handle
    (what NEEDS_CHARACTERS matches, and the controls it drops)."""
    n = 0
    size = len(src)
    kind = np.int64(CLOSED)
    fenced = False
    i = 0
    while i < size:
        indent = 0  # the line's leading whitespace
        j = i
        while j < size:
            b = src[j]
            if b == 32:
                indent += 1
            elif b == 9:
                indent += PREFORMATTED_INDENT
            elif not (11 <= b <= 13 or 28 <= b <= 31):
                break
            j += 1
        if j == size or src[j] == 10:  # a blank line ends the open block
            kind = np.int64(CLOSED)
            i = j + 1
            continue
        b = src[j]
        starts = True
        if (b == 96 or b == 126) and j + 2 < size and src[j + 1] == b and src[j + 2] == b:
            fenced = not fenced
            kind = np.int64(SINGLE)
        elif fenced or b == 35 or b == 124:  # inside a fence, a heading, a table row
            kind = np.int64(SINGLE)
        elif _list_marker(src, j):
            kind = np.int64(CONTINUES)
        elif kind == CONTINUES:
            starts = False
        elif indent >= PREFORMATTED_INDENT:
            kind = np.int64(SINGLE)
        else:
            kind = np.int64(CONTINUES)
        if n > 0:
            out[n] = 10 if starts else 32
            n += 1
        owed = False  # a space to write before the next byte of a word
        while j < size:
            b = src[j]
            if b == 10:
                break
            if b == 32 or 9 <= b <= 13 or 28 <= b <= 31:
                owed = True
            elif b <= 8 or 14 <= b <= 27 or b == 127 or (b >= 0xC2 and _needs_characters(src, j)):
                return -1
            else:
                n = _put(out, n, b, owed)
                owed = False
            j += 1
        i = j + 1
    return n


@njit(inline="always")
def _wide_space(src, i):
    """Bytes of the character at `src[i]` (a lead byte 0xC2-0xE3) when `str.split` takes it
    for whitespace (the 19 beyond ASCII: NEL, the no-break spaces, U+2000-U+200A, ...), else 0."""
    b = src[i]
    if i + 1 >= len(src):
        return 0
    b1 = src[i + 1]
    if b == 0xC2:
        return 2 if b1 == 0x85 or b1 == 0xA0 else 0
    if i + 2 >= len(src):
        return 0
    b2 = src[i + 2]
    if ((b == 0xE1 and b1 == 0x9A and b2 == 0x80)
            or (b == 0xE2 and b1 == 0x80 and (b2 <= 0x8A or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF))
            or (b == 0xE2 and b1 == 0x81 and b2 == 0x9F)
            or (b == 0xE3 and b1 == 0x80 and b2 == 0x80)):
        return 3
    return 0


@njit(cache=True, nogil=True)
def _fold_lines(src, out):  # pragma: no cover - compiled; the tests run it with and without the JIT
    """Each line of UTF-8 `src` (lines end at a newline only) folded as `" ".join(line.split())`
    folds it, blank lines dropped, the rest joined by blank lines into `out` (`len(src) +
    lines` bytes at most). Returns the length written."""
    n = 0
    size = len(src)
    wrote = False  # a byte of this line written
    owed = False  # a space to write before the next byte of a word
    i = 0
    while i < size:
        b = src[i]
        if b == 10:
            wrote = False
            owed = False
            i += 1
            continue
        if b == 32 or 9 <= b <= 13 or 28 <= b <= 31:
            owed = wrote
            i += 1
            continue
        if 0xC2 <= b <= 0xE3:
            width = _wide_space(src, i)
            if width:
                owed = wrote
                i += width
                continue
        if not wrote:
            if n > 0:  # a line kept after another: a blank line between them
                out[n] = 10
                out[n + 1] = 10
                n += 2
        elif owed:
            out[n] = 32
            n += 1
        out[n] = b
        n += 1
        wrote = True
        owed = False
        i += 1
    return n


def fold_lines(text: str) -> str:
    """`"\\n\\n".join(line for line in (" ".join(l.split()) for l in text.split("\\n")) if line)`
    in one compiled pass over the text's UTF-8, not calls per line."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return "\n\n".join(filter(None, map(" ".join, map(str.split, text.split("\n")))))
    out = np.empty(len(data) + data.count(b"\n") + 1, np.uint8)
    return out[:_fold_lines(data, out)].tobytes().decode("utf-8")


if AHEAD_OF_TIME is not None:  # the same kernels, compiled by `python -m cdc.core.aot`
    _fold_bytes, _fold_blocks = AHEAD_OF_TIME.fold_bytes, AHEAD_OF_TIME.fold_blocks
    _fold_lines = AHEAD_OF_TIME.fold_lines


def _utf8_for_kernels(text: str) -> bytes | None:
    """`text` as UTF-8 when the byte kernels may fold it (composed, no lone surrogate), else None."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    return data if text.isascii() or unicodedata.is_normalized("NFC", text) else None


def _cleaned(text: str) -> str:
    return unicodedata.normalize("NFC", CLEAN.sub(_clean, text))


def _fold(text: str) -> bytes:
    """`normalize_text` as UTF-8 bytes. Most text takes one compiled pass over its bytes;
    regular expressions over characters and NFC run only on the text that needs them (a
    per-character pass over every page costs more than the rest of normalisation)."""
    data = _utf8_for_kernels(text)
    if data is not None:
        if len(data) < SHORT_TEXT:  # a compiled call costs more than these few bytes
            if text.isascii() or not (NEEDS_CHARACTERS.search(data) or DELETED_CONTROL.search(data)):
                return b" ".join(data.translate(ASCII_TABLE, ASCII_DELETE).split())
        else:
            out = np.empty(len(data), np.uint8)
            length = _fold_bytes(data, out)
            if length >= 0:
                return out[:length].tobytes()
    return " ".join(_cleaned(text).split()).encode("utf-8")


def _blocks_by_characters(text: str) -> list[str]:
    """A section's blocks, read per character: the reference `_fold_blocks` agrees with."""
    blocks: list[str] = []
    kind, fenced = CLOSED, False
    for line in _cleaned(text).split("\n"):
        content = line.lstrip()
        if not content:
            kind = CLOSED
            continue
        lead = line[:len(line) - len(content)]
        indent = lead.count(" ") + PREFORMATTED_INDENT * lead.count("\t")
        starts = True
        if content.startswith(FENCES):
            fenced, kind = not fenced, SINGLE
        elif fenced:
            kind = SINGLE
        elif MARKER.match(content):
            kind = CONTINUES if content[0] in WRAPPABLE_MARKS else SINGLE
        elif kind == CONTINUES:
            starts = False
        else:
            kind = SINGLE if indent >= PREFORMATTED_INDENT else CONTINUES
        folded = " ".join(content.split())
        if starts:
            blocks.append(folded)
        else:
            blocks[-1] += " " + folded
    return blocks


def _fold_section(text: str) -> bytes:
    """A section's text as its blocks (see the module's docstring), one per line, as UTF-8."""
    data = _utf8_for_kernels(text)
    if data is not None:
        if b"\n" not in data:  # one block
            return _fold(text)
        out = np.empty(len(data), np.uint8)
        length = _fold_blocks(data, out)
        if length >= 0:
            return out[:length].tobytes()
    return "\n".join(_blocks_by_characters(text)).encode("utf-8")


def text_blocks(text: str) -> list[str]:
    """The blocks of a section's text, normalised: paragraphs, list items, headings, table
    rows and preformatted lines, each folded to single spaces."""
    folded = _fold_section(text)
    return folded.decode("utf-8").split("\n") if folded else []


def normalize_text(text: str) -> str:
    """Clean, compose (NFC) and fold whitespace to single spaces: one block; idempotent."""
    return _fold(text).decode("utf-8")


def _field_text(value: object) -> str:
    """A field's text; anything that is not text or a number counts as empty."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return ""


def _section_texts(sections: object) -> list[str]:
    if isinstance(sections, (str, bytes)):
        return [_field_text(sections)]
    if not isinstance(sections, (list, tuple)):
        return []
    texts = []
    for section in sections:
        if isinstance(section, Mapping):
            texts.append(_field_text(section.get("text")))
        else:
            texts.append(_field_text(section))
    return texts


def _raw_parts(record: Mapping) -> tuple[str, str, list[str]]:
    if not isinstance(record, Mapping):
        raise TypeError(f"a record is a mapping (dict), got {type(record).__name__}")
    return (_field_text(record.get("title")), _field_text(record.get("description")),
            _section_texts(record.get("sections")))


def _folded_parts(record: Mapping) -> list[bytes]:
    """Title and description folded to one block each, then each section's blocks."""
    title, description, sections = _raw_parts(record)
    return [_fold(title), _fold(description), *map(_fold_section, sections)]


def content_parts(record: Mapping) -> list[str]:
    """The record's normalised blocks, in order: title, description, the sections' blocks."""
    data = content_for_chunking(record)
    return data.decode("utf-8").split("\n") if data else []


def content_for_chunking(record: Mapping) -> bytes:
    """Stable, reader-facing text of a record, one block per line, as UTF-8: what is chunked
    and fingerprinted."""
    return b"\n".join(part for part in _folded_parts(record) if part)


def content_digest(data: bytes) -> bytes:
    """The whole-page fingerprint: XXH3-128 (16 bytes) of the normalised content."""
    return xxhash.xxh3_128_digest(data)
