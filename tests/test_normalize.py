"""Normalisation: the one notion of the content, robust to odd records, idempotent."""

from __future__ import annotations

import unicodedata

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from cdc import content_digest, content_for_chunking
from cdc.normalize import CLEAN, _clean, _fold, content_parts, normalize_text


def test_the_seed_shape():
    record = {
        "url": "https://example.com/a",
        "title": "  Price   list ",
        "description": "Our prices\tthis week",
        "sections": [{"heading": "Fruit", "text": "Apples  $1.99\nPears $2.49"}, {"text": ""}],
    }
    assert content_for_chunking(record) == b"Price list\nOur prices this week\nApples $1.99 Pears $2.49"


def test_unicode_is_composed_so_two_encodings_give_the_same_bytes():
    decomposed = {"title": "Cafe\u0301 cre\u0300me"}
    composed = {"title": "Café crème"}
    assert content_for_chunking(decomposed) == content_for_chunking(composed) == "Café crème".encode()


def test_whitespace_of_every_kind_is_folded():
    record = {"title": "a\u00a0\u00a0b\u2003c\r\n\td\u3000e"}
    assert content_for_chunking(record) == b"a b c d e"


def test_control_and_invisible_characters_are_dropped():
    record = {"title": "ab\x00c\x07d\x1be\u00adf\u200bg\ufeffh\x7fi"}
    assert content_for_chunking(record) == b"abcdefghi"


def test_lone_surrogates_become_replacement_characters():
    assert content_for_chunking({"title": "a\ud800b"}) == "a\ufffdb".encode()


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"title": None, "description": None, "sections": None},
        {"title": 42, "description": 3.5, "sections": "just a string"},
        {"title": ["not", "text"], "description": {"x": 1}, "sections": {"text": "a dict"}},
        {"sections": [None, 7, "loose text", {"text": None}, {"heading": "no text"}, {"text": ["x"]}]},
        {"title": True, "description": b"bytes \xff here"},
        {"title": "ok", "url": 5, "fetched_at": None},
    ],
)
def test_records_with_odd_fields_normalise_without_raising(record):
    data = content_for_chunking(record)
    assert isinstance(data, bytes)
    data.decode("utf-8")


def test_numbers_are_written_out_and_other_types_are_empty():
    assert content_for_chunking({"title": 42, "description": True, "sections": [7, None]}) == b"42\n7"


def test_a_record_must_be_a_mapping():
    with pytest.raises(TypeError, match="list"):
        content_for_chunking(["title"])


@given(st.text())
def test_normalising_text_twice_changes_nothing(text):
    once = normalize_text(text)
    assert normalize_text(once) == once
    once.encode("utf-8")


@given(st.fixed_dictionaries({}, optional={
    "title": st.none() | st.text() | st.integers(),
    "description": st.none() | st.text(),
    "sections": st.lists(st.fixed_dictionaries({}, optional={"text": st.none() | st.text()}), max_size=5),
}))
def test_normalising_a_normalised_record_changes_nothing(record):
    data = content_for_chunking(record)
    again = {"sections": [{"text": part} for part in content_parts(record)]}
    assert content_for_chunking(again) == data


def test_content_digest_is_the_xxh3_128_of_the_normalised_bytes():
    data = content_for_chunking({"title": "Hello", "sections": [{"text": "world"}]})
    assert content_digest(data) == xxhash.xxh3_128_digest(b"Hello\nworld")
    assert len(content_digest(data)) == 16
    assert content_digest(content_for_chunking({"title": " Hello ", "sections": [{"text": "world "}]})) \
        == content_digest(data)


def _by_characters(text: str) -> bytes:
    """The per-character path alone: what every faster path must agree with."""
    text = unicodedata.normalize("NFC", CLEAN.sub(_clean, text))
    return " ".join(text.split()).encode("utf-8")


TRICKY = st.sampled_from(list(" \t\n\r\x0b\x0c\x1c\x1f\x00\x07\x1b\x7f\x85\xa0\xad\u2000\u200b\u2028\u2060"
                              "\u3000\u1680\ufeffab é€\u0301"))


@given(st.text(TRICKY | st.characters(), max_size=400))
def test_the_compiled_fold_agrees_with_the_per_character_path(text):
    assert _fold(text) == _by_characters(text)
    assert _fold(text * 3) == _by_characters(text * 3)  # long enough for the compiled pass
