"""The words a change added and removed, as the store keeps them for search (`change_words`).

A change row says how much changed; its exact edits (`cdc.core.refine`) say what: the text each
insert and replace put in (added) and each delete and replace took out (removed). Moves are
neither: the words are still on the page. For each side the store keeps two columns:

- the edits' text as on the page (whitespace runs made one space, an edit a line): what an
  excerpt shows;
- its **words**: the same text lowercased and cut into tokens, one space between tokens, a
  line break between edits, a space at each end. A token is a run of letters and digits in a
  script written with spaces, one character (with its combining marks) in a script written
  without them (Han, kana, Thai, ...: the scripts `cdc.core.words` treats so), or one mark of
  punctuation.

A search phrase is cut the same way (`search_words`), so a search is a substring test of
` phrase ` in the words: whole words in a spaced script ("climate" finds "climate," but not
"climates"), characters in an unspaced one (`价格` finds 价格 inside a sentence, `2,980円`
finds 価格2,980円), case-insensitive, never across two edits. The store answers that test
from an index of each side's tokens and their places in the words (`cdc.store.wordindex`):
the phrase's tokens at consecutive places, which is the same answer without reading the words.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from cdc.core.compiled import AHEAD_OF_TIME, njit
from cdc.core.refine import DELETE, INSERT, REPLACE, Edit

MAX_SEARCH_CHARS = 200  # a longer phrase is refused: no edit's words are searched for pages

# The characters of scripts written without spaces and the combining marks, as
# `cdc.core.words._char_class` has them (here for Python's `re`, where that kernel is compiled).
_SINGLE = ("\u0e00-\u0e30\u0e32\u0e33\u0e3b-\u0e46\u0e4f-\u0eb0\u0eb2\u0eb3\u0ebd-\u0ec7\u0ecf-\u0eff"
           "\u1000-\u102a\u103f-\u109f\u1780-\u17b3\u17d4-\u17dc\u17de-\u17ff\u19e0-\u19ff"
           "\u2e80-\u2fff\u3001-\u3029\u3030-\u3098\u309b-\u9fff\ua000-\ua4cf\ua9e0-\ua9ff\uaa60-\uaa7f"
           "\uf900-\ufaff\ufe10-\ufe1f\ufe30-\ufe6f\uff00-\uff9f\uffe0-\uffef"
           "\U0001b000-\U0001b16f\U00020000-\U0003ffff")
_MARK = ("\u0300-\u036f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece"
         "\u102b-\u103e\u17b4-\u17d3\u17dd\u1ab0-\u1aff\u1dc0-\u1dff\u200c\u200d\u20d0-\u20ff"
         "\u302a-\u302f\u3099\u309a\ufe00-\ufe0f\ufe20-\ufe2f\U000e0100-\U000e01ef")
TOKEN = re.compile(f"[{_SINGLE}][{_MARK}]*|(?:[^\\W{_SINGLE}]|[{_MARK}])+|[^\\w\\s{_MARK}]")
ASCII_TOKEN = re.compile(r"\w+|[^\w\s]", re.ASCII)  # the same tokens, for ASCII text: 1.7x faster


class EditWords(NamedTuple):
    """One `change_words` row: a change's added and removed text and words."""

    natural_key: str
    generation: int
    run: int  # the run that measured the change (a watch reads its run's rows)
    added_text: str
    removed_text: str
    added_words: str
    removed_words: str


COLUMNS = EditWords._fields


def tokens(text: str) -> list[str]:
    """The lowercased tokens of `text` (see the module docstring)."""
    text = text.lower()
    return (ASCII_TOKEN if text.isascii() else TOKEN).findall(text)


def words_of(pieces: Sequence[str]) -> str:
    """The words column of a side's edit texts: tokens a space apart, edits a line apart,
    a space at each end; '' when there are no tokens."""
    return _words_column([_line(piece) for piece in pieces])


def _line(piece: str) -> str:
    """An edit's line of a words column: its tokens a space apart."""
    return " ".join(tokens(piece))


def _words_column(lines: Sequence[str]) -> str:
    """A words column of its edits' lines: a line break between those with tokens, a space
    at each end; '' when none has one."""
    lines = [line for line in lines if line]
    return " " + " \n ".join(lines) + " " if lines else ""


def words_row(natural_key: str, generation: int, run: int, added: Sequence[str],
              removed: Sequence[str]) -> EditWords | None:
    """The `change_words` row of a change's added and removed pieces of text (whitespace
    runs made one space), as a synthetic store writes them; None when there are none."""
    if not added and not removed:
        return None
    return EditWords(natural_key, generation, run, "\n".join(added), "\n".join(removed),
                     words_of(added), words_of(removed))


def search_words(phrase: str) -> str:
    """The substring of a words column that holds `phrase`: its tokens, a space apart and at
    each end; '' when it has none."""
    found = tokens(phrase)
    return f" {' '.join(found)} " if found else ""


_ADDED, _REMOVED = (INSERT, REPLACE), (DELETE, REPLACE)

# What `_text_and_words` makes of a character (`character_classes`, by code point):
OTHER = 0  # left to Python: a capital but A-Z (Unicode lowers it), a mark (it joins the token before)
WORD = 1  # part of a token of letters and digits, as it is
UPPER = 2  # A-Z: part of a token, lowered
SPACE = 3  # `str.split` splits at it
TOKEN_OF_ITS_OWN = 4  # punctuation, a symbol, a character of a script without spaces
UNKNOWN = 255  # not met yet: the range goes to Python, and the character is classed
_WORD_CHARACTER = re.compile(f"[^\\W{_SINGLE}{_MARK}]")
_OWN_TOKEN = re.compile(f"[{_SINGLE}]|[^\\w\\s{_MARK}{_SINGLE}]")


def _class_of(character: str) -> int:
    """A character's class, read from `TOKEN` itself: a token of its own where its first or
    third branch takes it alone, a word character where its second takes it and it is no
    mark; in both cases only where `str.lower` keeps it. So the compiled pass can only cut
    as `tokens` does, or leave the text to it."""
    if character.isspace():
        return SPACE
    if "A" <= character <= "Z":
        return UPPER
    if character.lower() != character:
        return OTHER
    if _WORD_CHARACTER.fullmatch(character):
        return WORD
    return TOKEN_OF_ITS_OWN if _OWN_TOKEN.fullmatch(character) else OTHER


# Every character of the Basic Multilingual Plane (the pass reads UTF-8 up to three bytes),
# classed as the pages bring it: classing all 65,536 up front cost each process 25-40 ms.
character_classes = np.full(0x10000, UNKNOWN, np.uint8)
character_classes[:128] = [_class_of(chr(point)) for point in range(128)]


@njit(cache=True, nogil=True)
def _text_and_words(text, ranges, classes, pieces, words, marks, used, unknown):  # pragma: no cover
    """`_piece` and its line of `tokens` for each range (offset, length) of `text` whose
    characters all have a class (`character_classes`) other than OTHER and UNKNOWN, in one
    pass: the piece written to `pieces` and the line to `words`, as UTF-8, their spans to
    `marks` (piece start, end, line start, end; -1 for a range left to Python: a character
    of class OTHER or UNKNOWN, or bytes that are not UTF-8). Around them, as `_side` joins
    them where no range is left: the pieces a line break apart, the lines a space, a line
    break and a space apart, a space at each end of the words. `used`: the bytes written to
    each, and the ranges left, which it returns; `unknown`: how many characters of class
    UNKNOWN it met, then their code points, as many as it holds."""
    at, said, left, lines = 0, 0, 0, 0
    end = len(text)
    for k in range(len(ranges)):
        start = ranges[k, 0]
        stop = min(start + ranges[k, 1], end)
        valid = True  # every character decodes and has a class
        i = start
        while i < stop:
            byte = text[i]
            point = byte
            if byte < 128:
                i += 1
            elif 0xC2 <= byte <= 0xDF and i + 1 < stop and text[i + 1] >> 6 == 2:
                point = ((byte & 0x1F) << 6) | (text[i + 1] & 0x3F)
                i += 2
            elif 0xE0 <= byte <= 0xEF and i + 2 < stop and text[i + 1] >> 6 == 2 and text[i + 2] >> 6 == 2:
                point = ((byte & 0x0F) << 12) | ((text[i + 1] & 0x3F) << 6) | (text[i + 2] & 0x3F)
                i += 3
                if point < 0x800 or 0xD800 <= point < 0xE000:  # overlong, or a surrogate: not UTF-8
                    valid = False
                    break
            else:  # not UTF-8, or past the plane
                valid = False
                break
            kind = classes[point]
            if kind == UNKNOWN:
                if unknown[0] < len(unknown) - 1:
                    unknown[0] += 1
                    unknown[unknown[0]] = point
                valid = False
            elif kind == OTHER:
                valid = False
        if not valid:
            marks[k, 0], marks[k, 1], marks[k, 2], marks[k, 3] = -1, -1, -1, -1
            left += 1
            continue
        first = True  # before the range's first character that is not a space
        gap, in_word = False, False
        i = start
        while i < stop:
            byte = text[i]
            size = 1
            point = byte
            if byte >= 0xE0:
                size = 3
                point = ((byte & 0x0F) << 12) | ((text[i + 1] & 0x3F) << 6) | (text[i + 2] & 0x3F)
            elif byte >= 0x80:
                size = 2
                point = ((byte & 0x1F) << 6) | (text[i + 1] & 0x3F)
            kind = classes[point]
            if kind == SPACE:
                gap, in_word = True, False
                i += size
                continue
            if first:
                if lines:
                    pieces[at] = 10
                    at += 1
                    words[said], words[said + 1], words[said + 2] = 32, 10, 32
                    said += 3
                else:
                    words[said] = 32
                    said += 1
                lines += 1
                marks[k, 0], marks[k, 2] = at, said
                first, gap = False, False
            elif gap:
                pieces[at] = 32
                at += 1
                gap = False
            part_of_word = WORD <= kind <= UPPER
            if not (part_of_word and in_word) and said > marks[k, 2]:  # a token starts
                words[said] = 32
                said += 1
            in_word = part_of_word
            for b in range(size):
                pieces[at + b] = text[i + b]
                words[said + b] = text[i + b]
            if kind == UPPER:
                words[said] += 32
            at += size
            said += size
            i += size
        if first:  # whitespace alone: no piece
            marks[k, 0], marks[k, 1], marks[k, 2], marks[k, 3] = at, at, said, said
        else:
            marks[k, 1], marks[k, 3] = at, said
    if lines:
        words[said] = 32
        said += 1
    used[0], used[1], used[2] = at, said, left
    return left


if AHEAD_OF_TIME is not None:  # the same kernel, compiled by `python -m cdc.core.aot`
    _text_and_words = AHEAD_OF_TIME.text_and_words


def _piece(text: bytes, offset: int, length: int) -> str:
    """An edit's text as `edit_words` keeps it: whitespace runs made one space."""
    return " ".join(text[offset:offset + length].decode("utf-8", "replace").split())


def _side(edits: Sequence[Edit], text: bytes, added: bool) -> tuple[str, str]:
    """One side's text and words columns (see the module docstring): of the edits that add
    text (`added`) or take it out. An edit's text whose characters all have a class is cut
    and lowered in a compiled pass (`_text_and_words`), any other here by `tokens`: the same
    columns, and the English corpus's 3,119 changes cut in 0.065 s where `tokens` alone
    took 0.20 s (0.045 s against 0.12 s in Chinese, 0.05 s against 0.24 s in Japanese)."""
    if added:
        ranges = [(edit.new_offset, edit.new_length) for edit in edits if edit.kind in _ADDED]
    else:
        ranges = [(edit.old_offset, edit.old_length) for edit in edits if edit.kind in _REMOVED]
    if not ranges:
        return "", ""
    spans = np.array(ranges, np.int64)
    total = int(spans[:, 1].sum())
    # Room for the most there can be: a line break between pieces; a space between every
    # two bytes of a line, " \n " between lines, a space at each end.
    pieces = np.empty(total + len(ranges), np.uint8)
    words = np.empty(2 * total + 3 * len(ranges) + 2, np.uint8)
    marks, used, unknown = np.empty((len(ranges), 4), np.int64), np.empty(3, np.int64), np.zeros(33, np.int64)
    if not _text_and_words(text, spans, character_classes, pieces, words, marks, used, unknown):
        return pieces[:used[0]].tobytes().decode(), words[:used[1]].tobytes().decode()
    for point in unknown[1:unknown[0] + 1].tolist():  # classed for the next side
        character_classes[point] = _class_of(chr(point))
    pieces_out, lines = [], []
    for (offset, length), (start, end, line_start, line_end) in zip(ranges, marks.tolist()):
        if start < 0:
            piece = _piece(text, offset, length)
            lines.append(_line(piece))
        else:
            piece = pieces[start:end].tobytes().decode()
            lines.append(words[line_start:line_end].tobytes().decode())
        if piece:
            pieces_out.append(piece)
    return "\n".join(pieces_out), _words_column(lines)


def edit_words(natural_key: str, generation: int, run: int, edits: Sequence[Edit],
               old_text: bytes, new_text: bytes) -> EditWords | None:
    """The `change_words` row of a change measured with exact edits; None when its edits add
    and remove no words (only moves, or none)."""
    added_text, added_words = _side(edits, new_text, True)
    removed_text, removed_words = _side(edits, old_text, False)
    if not added_text and not removed_text:
        return None
    return EditWords(natural_key, generation, run, added_text, removed_text, added_words, removed_words)


class Located(NamedTuple):
    """Where a phrase's words fall in a side's text: the edit (line) and the characters."""

    line: str
    start: int
    end: int


def locate(text: str, words: str) -> Located | None:
    """The first place in a side's text (edits a line apart) whose tokens are `words` (from
    `search_words`), as characters of its line."""
    wanted = words.split()
    if not wanted:
        return None
    for line in text.split("\n"):
        if wanted[0] not in line.lower():  # no token of the line is the first: not cut into tokens
            continue
        # The line's tokens in turn, the last len(wanted) of them kept, up to the first place
        # that holds the phrase: cutting the whole line into tokens first cost a common
        # word's 50 excerpts 19.2 ms, this 6.6-10.6 ms (the 100,000-page synthetic store).
        window: deque[tuple[str, re.Match[str]]] = deque(maxlen=len(wanted))  # each token lowered once
        for match in TOKEN.finditer(line):
            window.append((match.group().lower(), match))
            if len(window) == len(wanted) and all(held == token for (held, _), token in zip(window, wanted)):
                return Located(line, window[0][1].start(), window[-1][1].end())
    return None


def excerpt_of(text: str, words: str, context: int = 60) -> str:
    """A line of a side's text around the first place it holds `words`, with `context`
    characters each side (… where cut); the start of the text when it is not found."""
    place = locate(text, words)
    if place is None:
        first = text.split("\n", 1)[0]
        return first if len(first) <= 2 * context else first[:2 * context] + "…"
    start, end = max(place.start - context, 0), min(place.end + context, len(place.line))
    return ("…" if start else "") + place.line[start:end] + ("…" if end < len(place.line) else "")
