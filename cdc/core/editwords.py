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
    lines = [" ".join(found) for found in map(tokens, pieces)]
    lines = [line for line in lines if line]
    return " " + " \n ".join(lines) + " " if lines else ""


def search_words(phrase: str) -> str:
    """The substring of a words column that holds `phrase`: its tokens, a space apart and at
    each end; '' when it has none."""
    found = tokens(phrase)
    return f" {' '.join(found)} " if found else ""


def _pieces(edits: Sequence[Edit], text: bytes, added: bool) -> list[str]:
    kinds = (INSERT, REPLACE) if added else (DELETE, REPLACE)
    pieces = []
    for edit in edits:
        if edit.kind not in kinds:
            continue
        offset, length = (edit.new_offset, edit.new_length) if added else (edit.old_offset, edit.old_length)
        piece = " ".join(text[offset:offset + length].decode("utf-8", "replace").split())
        if piece:
            pieces.append(piece)
    return pieces


def edit_words(natural_key: str, generation: int, run: int, edits: Sequence[Edit],
               old_text: bytes, new_text: bytes) -> EditWords | None:
    """The `change_words` row of a change measured with exact edits; None when its edits add
    and remove no words (only moves, or none)."""
    return words_row(natural_key, generation, run, _pieces(edits, new_text, True),
                     _pieces(edits, old_text, False))


def words_row(natural_key: str, generation: int, run: int, added: Sequence[str],
              removed: Sequence[str]) -> EditWords | None:
    """The `change_words` row of a change's added and removed pieces of text (whitespace
    runs made one space); None when there are none."""
    if not added and not removed:
        return None
    return EditWords(natural_key, generation, run, "\n".join(added), "\n".join(removed),
                     words_of(added), words_of(removed))


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
