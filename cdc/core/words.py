"""The word scan: what a token is, in every script, and where tokens start and end.

`cdc.core.refine` diffs two texts token by token. A compiled pass decodes UTF-8 (so no offset
splits a character) and hashes each token: a character of a script written without spaces
(Han, kana, Thai, ...: see `_char_class`) is a token with the marks after it; otherwise a
token is a run of other characters up to whitespace. The same rules, decided from the
characters around one byte, say where a token may start or end (`is_token_boundary`), and
count the tokens of a run of chunks (`count_words`, which `cdc.core.refine` uses to decide which
changed stretches to diff together).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cdc.core.compiled import AHEAD_OF_TIME, njit
from cdc.core.native import xxh3_64_of

WHITESPACE = b" \t\n\r\x0b\x0c"  # what bytes.split() splits on


@dataclass
class Words:
    """The words of a region: each one's identity (a 64-bit hash), start, end and piece
    number. Arrays, not lists: a page's region can hold thousands of words, of which only
    those at the edges of a change are ever looked at from Python."""

    hashes: array
    begins: array
    ends: array
    pieces: array
    start: int = 0  # where the region's first range starts (its bounded start, in `cdc.core.regions`)


# What a character is to the word scan. A token is a run of WORD characters (with any MARKs
# among them), or one SINGLE character with the MARKs that follow it; SPACE separates tokens.
SPACE, WORD, SINGLE, MARK = 0, 1, 2, 3


def _decode(text, i, stop):  # pragma: no cover - inlined in the kernel
    """(code point, length in bytes) of the UTF-8 character at `text[i]`, read no further
    than `stop`; a byte that does not start a whole character there is (-1, 1)."""
    lead = np.int64(text[i])
    if lead < 0x80:
        return lead, 1
    if lead < 0xC2 or lead > 0xF4:
        return np.int64(-1), 1
    width = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    if i + width > stop:
        return np.int64(-1), 1
    code = lead & (0x7F >> width)
    for k in range(1, width):
        byte = np.int64(text[i + k])
        if byte & 0xC0 != 0x80:
            return np.int64(-1), 1
        code = (code << 6) | (byte & 0x3F)
    return code, width


def _char_class(code):  # pragma: no cover - inlined in the kernel
    """SPACE, WORD, SINGLE or MARK. SINGLE: the scripts written without spaces between
    words (Han, kana, CJK punctuation and fullwidth forms, Yi; Thai, Lao, Burmese, Khmer),
    one character a token. MARK: combining marks, which stay with the character before
    them (Thai and Lao vowel and tone marks, Burmese and Khmer signs, kana voicing marks,
    variation selectors, Latin diacritics). Hangul and everything else: WORD."""
    if code < 0x80:
        return SPACE if code == 32 or 9 <= code <= 13 else WORD
    if code < 0x0E00:
        return MARK if 0x0300 <= code <= 0x036F else WORD
    if code < 0x1100:
        if code < 0x0F00:  # Thai, Lao
            if (code == 0x0E31 or 0x0E34 <= code <= 0x0E3A or 0x0E47 <= code <= 0x0E4E or code == 0x0EB1
                    or 0x0EB4 <= code <= 0x0EBC or 0x0EC8 <= code <= 0x0ECE):
                return MARK
            return SINGLE
        if code < 0x1000:  # Tibetan: words apart by its own separator
            return WORD
        if (0x102B <= code <= 0x103E or 0x1056 <= code <= 0x1059 or 0x105E <= code <= 0x1060
                or 0x1062 <= code <= 0x1064 or 0x1067 <= code <= 0x106D or 0x1071 <= code <= 0x1074
                or 0x1082 <= code <= 0x108D or code == 0x108F or 0x109A <= code <= 0x109D):
            return MARK  # Burmese signs
        return SINGLE if code < 0x10A0 else WORD
    if code < 0x2E80:
        if 0x1780 <= code <= 0x17FF:  # Khmer
            return MARK if 0x17B4 <= code <= 0x17D3 or code == 0x17DD else SINGLE
        if 0x19E0 <= code <= 0x19FF:
            return SINGLE
        if (0x1AB0 <= code <= 0x1AFF or 0x1DC0 <= code <= 0x1DFF or 0x200C <= code <= 0x200D
                or 0x20D0 <= code <= 0x20FF):
            return MARK
        return WORD
    if code < 0xA000:  # CJK radicals, punctuation, kana, Bopomofo, Han
        if code == 0x3000:
            return SPACE
        if 0x302A <= code <= 0x302F or 0x3099 <= code <= 0x309A:
            return MARK
        return SINGLE
    if code < 0xF900:  # Yi and the Burmese extensions; Hangul syllables are words
        if code <= 0xA4CF or 0xA9E0 <= code <= 0xA9FF or 0xAA60 <= code <= 0xAA7F:
            return SINGLE
        return WORD
    if code < 0x10000:
        if code <= 0xFAFF:
            return SINGLE  # compatibility ideographs
        if 0xFE00 <= code <= 0xFE0F or 0xFE20 <= code <= 0xFE2F:
            return MARK
        if 0xFE10 <= code <= 0xFE6F or 0xFF00 <= code <= 0xFF9F or 0xFFE0 <= code <= 0xFFEF:
            return SINGLE  # vertical, compatibility and small forms; fullwidth and halfwidth forms
        return WORD
    if 0x1B000 <= code <= 0x1B16F or 0x20000 <= code <= 0x3FFFF:
        return SINGLE  # kana supplement, Han extensions
    if 0xE0100 <= code <= 0xE01EF:
        return MARK
    return WORD


_decode_compiled = njit(inline="always")(_decode)
_char_class_compiled = njit(inline="always")(_char_class)


def _char_before(text, lo, i):  # pragma: no cover - inlined in the kernels
    """(code point, start) of the character of `text[lo:]` that ends at byte `i` (code -1
    if invalid)."""
    start = i - 1
    while start > lo and i - start < 4 and 0x80 <= text[start] < 0xC0:
        start -= 1
    code, width = _decode_compiled(text, start, i)
    if start + width == i:
        return code, start
    return np.int64(-1), i - 1


_char_before_compiled = njit(inline="always")(_char_before)


def _is_space_byte(byte):  # pragma: no cover - inlined in the kernels
    """Whether a byte is ASCII whitespace, what `bytes.split()` splits on."""
    return byte == 32 or 9 <= byte <= 13


_is_space_byte_compiled = njit(inline="always")(_is_space_byte)


def _boundary_within(text, lo, hi, i):  # pragma: no cover - inlined in the kernels
    """Whether a token of the word scan of `text[lo:hi]` may start or end at byte `i`
    (never inside a character): the word scan, decided from the characters around `i`."""
    if i <= lo or i >= hi:
        return True
    if text[i] < 0x80 and text[i - 1] < 0x80:  # ASCII on both sides: whitespace decides
        return _is_space_byte_compiled(text[i]) or _is_space_byte_compiled(text[i - 1])
    if 0x80 <= text[i] < 0xC0:
        return False
    after = _char_class_compiled(_decode_compiled(text, i, hi)[0])
    code, start = _char_before_compiled(text, lo, i)
    before = _char_class_compiled(code)
    if before == SPACE or after == SPACE or after == SINGLE:  # noqa: SIM109
        return True
    if after == MARK:
        return False
    for _ in range(8):  # a word after marks: a boundary when they follow a single character
        if before != MARK or start == lo:
            break
        code, start = _char_before_compiled(text, lo, start)
        before = _char_class_compiled(code)
    return before == SINGLE


boundary_within = njit(nogil=True)(_boundary_within)  # called, not inlined: it is large


def _token_boundary(text, i):  # pragma: no cover - compiled
    """Whether a token of the word scan may start or end at byte `i` of `text` (never
    inside a character)."""
    return boundary_within(text, 0, len(text), i)


_is_token_boundary_compiled = njit(inline="always")(_token_boundary)
is_token_boundary = njit(cache=True, nogil=True)(_token_boundary)  # from Python: one compiled call


def _next_token(text, i, stop):  # pragma: no cover - inlined in the kernels
    """(start, end) of the first token of `text[i:stop]` (see `_char_class`); (stop, stop)
    when there is none."""
    while i < stop:
        code, width = _decode_compiled(text, i, stop)
        kind = _char_class_compiled(code)
        if kind == SPACE:
            i += width
            continue
        first = i
        i += width
        while i < stop:
            code, width = _decode_compiled(text, i, stop)
            following = _char_class_compiled(code)
            if following == SPACE or following == SINGLE or (kind == SINGLE and following != MARK):  # noqa: SIM109
                break
            i += width
        return first, i
    return stop, stop


_next_token_compiled = njit(inline="always")(_next_token)


@njit(cache=True, nogil=True)
def _scan_words(text, pieces, hashes, table):  # pragma: no cover - compiled
    """Find the tokens of each piece `pieces[k, 0]:pieces[k, 1]` of `text` (see
    `_char_class`), writing each one's hash into `hashes` and its start, end and piece
    number into a row of `table`; returns how many."""
    count = 0
    for piece in range(len(pieces)):
        i, stop = pieces[piece, 0], pieces[piece, 1]
        while i < stop:
            first, i = _next_token_compiled(text, i, stop)
            if first >= stop:
                break
            hashes[count] = xxh3_64_of(text, first, i - first)
            table[count, 0], table[count, 1], table[count, 2] = first, i, piece
            count += 1
    return count


@njit(cache=True, nogil=True)
def _count_chunk_words(text, chunks, enough):  # pragma: no cover - compiled
    """How many tokens the chunks hold (a row each: offset in column 1, length in 2, as
    in a chunk record), byte-adjacent chunks scanned as
    one piece; with `enough` >= 0, counted a few chunks at a time (one, two, four, ...) and
    no further once that many are found. A token that the boundary between two groups
    cuts counts once. (-1: no `enough`.)"""
    total = len(chunks)
    count, done = 0, 0
    batch = 1 if enough >= 0 else total
    while done < total and (enough < 0 or count < enough):
        stop_at = min(done + batch, total)
        k = done
        while k < stop_at:
            i, stop = chunks[k, 1], chunks[k, 1] + chunks[k, 2]
            k += 1
            while k < stop_at and chunks[k, 1] == stop:
                stop = chunks[k, 1] + chunks[k, 2]
                k += 1
            while i < stop:
                first, i = _next_token_compiled(text, i, stop)
                if first >= stop:
                    break
                count += 1
        start = chunks[done, 1]
        if (done and chunks[done - 1, 1] + chunks[done - 1, 2] == start
                and not _is_token_boundary_compiled(text, start)):
            count -= 1
        done = stop_at
        batch *= 2
    return count


# For other kernels to call (`cdc.core.regions`), whichever build runs:
scan_words_kernel, count_chunk_words_kernel = _scan_words, _count_chunk_words

if AHEAD_OF_TIME is not None:  # the same kernels, compiled by `python -m cdc.core.aot`
    _scan_words = AHEAD_OF_TIME.scan_words
    _count_chunk_words = AHEAD_OF_TIME.count_chunk_words
    is_token_boundary = AHEAD_OF_TIME.is_token_boundary


def _scan(text: bytes, pieces: list[list[int]] | np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The word scan of the pieces: the hashes, a table whose rows hold each word's start,
    end and piece number, and how many words they hold."""
    pieces = np.ascontiguousarray(pieces, np.int64).reshape(-1, 2)
    capacity = sum([(end - start + 1) // 2 for start, end in pieces.tolist()]) or 1  # a word and a gap
    hashes, table = np.empty(capacity, np.uint64), np.empty((capacity, 3), np.int64)
    count = _scan_words(text, pieces, hashes, table)
    return hashes, table, count


def words_of(text: bytes, pieces: list[list[int]] | np.ndarray) -> Words:
    """The words of the pieces of `text`, found in one compiled pass (see `found_words`)."""
    hashes, table, count = _scan(text, pieces)
    return found_words(memoryview(hashes).cast("B"), memoryview(table).cast("B"), count)


def found_words(hashes: memoryview, table: memoryview, count: int, start: int = 0) -> Words:
    """`Words` from what the scan wrote (`hashes`, and `table`'s rows of start, end and
    piece number, both as bytes), `count` words, in ranges from `start`.

    A word is known by the low 64 bits of its XXH3 digest: rapidfuzz compares the items of
    a sequence by hash anyway (Python's `hash` of each `bytes`, before), and reads an
    `array` of them without a Python object per word. Starts, ends and piece numbers are
    arrays too, sliced from one copy of the table: only those at the edges of a change are
    ever read, from Python. Copied out: the scan's output may be written again."""
    words, places = array("Q"), array("q")
    words.frombytes(hashes[:8 * count])
    places.frombytes(table[:24 * count])
    return Words(words, places[0::3], places[1::3], places[2::3], start)


def word_table(text: bytes, pieces: list[list[int]]) -> list[list[int]]:
    """The words of the pieces as [hash, start, end, piece] rows: what the kernel found,
    in plain lists (the reference tests compare it compiled and uncompiled)."""
    words = words_of(text, pieces)
    return [list(row) for row in zip(words.hashes, words.begins, words.ends, words.pieces)]


def count_words(text: bytes, chunks: Sequence, enough: int | None = None) -> int:
    """How many tokens the chunks (a `Chunks` or a list of `Chunk`) hold, in one compiled
    call; given `enough`, counted a few chunks at a time and no further once that many are
    found (see `_count_chunk_words`)."""
    if not len(chunks):
        return 0
    table = getattr(chunks, "table", None)
    if table is None:
        table = np.array([(0, chunk.offset, chunk.length) for chunk in chunks], np.int64)
    return count_rows(text, table, enough)


def count_rows(text: bytes, rows: np.ndarray, enough: int | None = None) -> int:
    """`count_words` of chunks given as int64 rows (offset in column 1, length in 2, as in
    a chunk record's table): what `cdc.core.refine` holds, without a `Chunk` each."""
    if not len(rows):
        return 0
    return int(_count_chunk_words(text, rows, -1 if enough is None else enough))
