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

import xxhash

NORMALIZATION_VERSION = "norm-v1"

# C0 and C1 controls other than whitespace (which folding handles), DEL, and invisible
# formatting characters that CMSs sprinkle into otherwise unchanged text.
INVISIBLE = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u00ad\u200b\u2060\ufeff]")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
ASCII_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f]")


def normalize_text(text: str) -> str:
    """Clean, compose (NFC) and fold whitespace to single spaces; idempotent."""
    if text.isascii():  # known without a scan: most pages, and no composing or surrogates
        text = ASCII_CONTROL.sub("", text)
    else:
        text = INVISIBLE.sub("", text)
        text = LONE_SURROGATE.sub("\ufffd", text)
        text = unicodedata.normalize("NFC", text)
    return " ".join(text.split())


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


def content_parts(record: Mapping) -> list[str]:
    """The record's normalised non-empty parts: title, description, section texts."""
    if not isinstance(record, Mapping):
        raise TypeError(f"a record is a mapping (dict), got {type(record).__name__}")
    raw = [_field_text(record.get("title")), _field_text(record.get("description"))]
    raw += _section_texts(record.get("sections"))
    parts = []
    for text in raw:
        folded = normalize_text(text)
        if folded:
            parts.append(folded)
    return parts


def content_for_chunking(record: Mapping) -> bytes:
    """Stable, reader-facing text of a record, as UTF-8: what is chunked and fingerprinted."""
    return "\n".join(content_parts(record)).encode("utf-8")


def content_digest(data: bytes) -> bytes:
    """The whole-page fingerprint: XXH3-128 (16 bytes) of the normalised content."""
    return xxhash.xxh3_128_digest(data)
