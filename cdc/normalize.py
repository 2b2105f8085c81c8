"""The one notion of "the content" of a page: the bytes that are chunked and fingerprinted.

`content_for_chunking` is the seed's function made robust. Title, description and the text
of each section, in that order, each folded to single spaces, joined by newlines. Before
folding, text is cleaned: control characters and invisible formatting characters (soft
hyphens, zero-width spaces, byte-order marks) are dropped, lone surrogates become U+FFFD,
and the result is put in Unicode NFC, so that two encodings of the same text give the same
bytes. Missing, `None` or wrong-typed fields count as empty; numbers are written out.
Normalising normalised text changes nothing.

Change detection, the whole-page fingerprint and deduplication all use these bytes:
three notions of the content would give three verdicts about whether a page changed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

import numpy as np
import xxhash

from cdc.compiled import AHEAD_OF_TIME, njit

NORMALIZATION_VERSION = "norm-v1"

# C0 and C1 controls other than whitespace (which folding handles), DEL, invisible formatting
# characters that CMSs sprinkle into otherwise unchanged text, and lone surrogates (group 1).
CLEAN = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u00ad\u200b\u2060\ufeff]|([\ud800-\udfff])")
# For ASCII text the same cleaning is a byte translation: controls deleted, and the four
# separators that `str.split` counts as whitespace (but `bytes.split` does not) made spaces.
ASCII_DELETE = bytes([*range(0x00, 0x09), *range(0x0E, 0x1C), 0x7F])
ASCII_TABLE = bytes.maketrans(bytes(range(0x1C, 0x20)), b"    ")


SHORT_TEXT = 64  # bytes; shorter text is folded by byte methods in C rather than the kernel


def _clean(match: re.Match) -> str:
    return "\ufffd" if match.group(1) else ""


# In UTF-8: what CLEAN removes (but ASCII controls and lone surrogates, found otherwise),
# and whitespace beyond ASCII, which `bytes.split` would not fold. C2 starts U+0080-U+00BF:
# the C1 controls, the soft hyphen, NEL and the no-break space among them.
NEEDS_CHARACTERS = re.compile(
    rb"\xc2|\xe2\x80[\x80-\x8b\xa8\xa9\xaf]|\xe2\x81[\x9f\xa0]|\xef\xbb\xbf|\xe1\x9a\x80|\xe3\x80\x80")


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
        if b >= 0xC2 and (b == 0xC2 or (i + 2 < size and (
                (b == 0xE2 and src[i + 1] == 0x80 and (src[i + 2] <= 0x8B or src[i + 2] == 0xA8
                                                      or src[i + 2] == 0xA9 or src[i + 2] == 0xAF))
                or (b == 0xE2 and src[i + 1] == 0x81 and (src[i + 2] == 0x9F or src[i + 2] == 0xA0))
                or (b == 0xEF and src[i + 1] == 0xBB and src[i + 2] == 0xBF)
                or (b == 0xE1 and src[i + 1] == 0x9A and src[i + 2] == 0x80)
                or (b == 0xE3 and src[i + 1] == 0x80 and src[i + 2] == 0x80)))):
            return -1
        if owed:
            out[n] = 32
            n += 1
            owed = False
        out[n] = b
        n += 1
    return n


if AHEAD_OF_TIME is not None:  # the same kernel, compiled by `python -m cdc.aot`
    _fold_bytes = AHEAD_OF_TIME.fold_bytes


def _fold(text: str) -> bytes:
    """`normalize_text` as UTF-8 bytes. Most text takes one compiled pass over its bytes;
    regular expressions over characters and NFC run only on the text that needs them (a
    per-character pass over every page costs more than the rest of normalisation)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        data = None
    if data is not None and (text.isascii() or unicodedata.is_normalized("NFC", text)):
        if len(data) < SHORT_TEXT:  # a compiled call costs more than these few bytes
            if text.isascii() or not NEEDS_CHARACTERS.search(data):
                return b" ".join(data.translate(ASCII_TABLE, ASCII_DELETE).split())
        else:
            out = np.empty(len(data), np.uint8)
            length = _fold_bytes(data, out)
            if length >= 0:
                return out[:length].tobytes()
    text = unicodedata.normalize("NFC", CLEAN.sub(_clean, text))
    return " ".join(text.split()).encode("utf-8")


def normalize_text(text: str) -> str:
    """Clean, compose (NFC) and fold whitespace to single spaces; idempotent."""
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


def _raw_parts(record: Mapping) -> list[str]:
    if not isinstance(record, Mapping):
        raise TypeError(f"a record is a mapping (dict), got {type(record).__name__}")
    raw = [_field_text(record.get("title")), _field_text(record.get("description"))]
    return raw + _section_texts(record.get("sections"))


def content_parts(record: Mapping) -> list[str]:
    """The record's normalised non-empty parts: title, description, section texts."""
    return [folded.decode("utf-8") for folded in map(_fold, _raw_parts(record)) if folded]


def content_for_chunking(record: Mapping) -> bytes:
    """Stable, reader-facing text of a record, as UTF-8: what is chunked and fingerprinted."""
    return b"\n".join(folded for folded in map(_fold, _raw_parts(record)) if folded)


def content_digest(data: bytes) -> bytes:
    """The whole-page fingerprint: XXH3-128 (16 bytes) of the normalised content."""
    return xxhash.xxh3_128_digest(data)
