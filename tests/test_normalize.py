"""Normalisation: the one notion of the content, one block per line, robust to odd records, idempotent."""

from __future__ import annotations

import unicodedata

import pytest
import xxhash
from hypothesis import example, given
from hypothesis import strategies as st

from cdc import content_digest, content_for_chunking
from cdc.core.normalize import (
    CLEAN,
    _blocks_by_characters,
    _clean,
    _fold,
    _fold_section,
    content_parts,
    fold_lines,
    normalize_text,
    text_blocks,
)


def test_the_seed_shape():
    record = {
        "url": "https://example.com/a",
        "title": "  Price   list ",
        "description": "Our prices\tthis week",
        "sections": [{"heading": "Fruit", "text": "Apples  $1.99\nPears $2.49"}, {"text": ""}],
    }
    assert content_for_chunking(record) == b"Price list\nOur prices this week\nApples $1.99 Pears $2.49"


MARKDOWN = """Let’s jump into Rust by working through a hands-on project together! This
chapter introduces you to a few common Rust concepts.

- [Installation](ch01-01-installation.md)
    - [Hello, World!](ch01-02-hello-world.md)
* a list item that is long enough to wrap
  onto a second line
1. first
2) second

| Name | Price |
|------|-------|
| tea  | 7.50  |
## Setting Up a New Project
To set up a new project, go to the *projects* directory that you created in
Chapter 1:

```console
$ cargo new guessing_game
$    cd   guessing_game
```

    an indented
    code block
"""

MARKDOWN_BLOCKS = [
    "Let’s jump into Rust by working through a hands-on project together! This chapter introduces "
    "you to a few common Rust concepts.",
    "- [Installation](ch01-01-installation.md)",
    "- [Hello, World!](ch01-02-hello-world.md)",
    "* a list item that is long enough to wrap onto a second line",
    "1. first",
    "2) second",
    "| Name | Price |",
    "|------|-------|",
    "| tea | 7.50 |",
    "## Setting Up a New Project",
    "To set up a new project, go to the *projects* directory that you created in Chapter 1:",
    "```console",
    "$ cargo new guessing_game",
    "$ cd guessing_game",
    "```",
    "an indented",
    "code block",
]


def test_section_text_is_read_as_blocks():
    """Paragraphs apart at blank lines, wrapped lines joined; list items, table rows, headings,
    fenced and indented code lines each a block (the corpus is Markdown wrapped at 80 columns)."""
    assert text_blocks(MARKDOWN) == MARKDOWN_BLOCKS
    record = {"title": "Programming a\nGuessing Game", "description": "Let’s jump\n\ninto Rust",
              "sections": [{"text": MARKDOWN}, {"text": "  \n\n "}, {"text": "last"}]}
    assert content_for_chunking(record).decode() == "\n".join(
        ["Programming a Guessing Game", "Let’s jump into Rust", *MARKDOWN_BLOCKS, "last"])


def test_extracted_html_keeps_its_block_lines():
    """The extractor writes blocks blank-line separated: each stays a block."""
    from cdc.sources.extract import WHOLE_PAGE, html_to_record

    page = (b"<title>T</title><nav><a>Home</a> | <a>Docs</a></nav><p>Para one\nwrapped in source.</p>"
            b"<ul><li>one</li><li>two</li></ul><table><tr><td>a</td><td>b</td></tr></table>"
            b"<div>div text</div><footer>Foot</footer>")
    record = html_to_record(page, "https://e.com/", "2024", mode=WHOLE_PAGE)
    assert content_for_chunking(record) == (
        b"T\nHome | Docs\nPara one wrapped in source.\none\ntwo\na b\ndiv text\nFoot")


def test_one_block_per_line_text_needs_blank_lines_or_sections_to_stay_blocks():
    """"a\nb" is one wrapped paragraph or two blocks: as a section's text, running-text lines
    join, while list items, table rows, headings and fenced lines stay apart. Blank-line
    separated, or a section each, every line stays a block."""
    normalised = content_for_chunking({"title": "Title", "sections": [{"text": MARKDOWN}]})
    lines = normalised.decode().split("\n")
    assert content_for_chunking({"sections": [{"text": "\n\n".join(lines)}]}) == normalised
    assert content_for_chunking({"sections": [{"text": line} for line in lines]}) == normalised
    joined = content_for_chunking({"sections": [{"text": normalised.decode()}]}).decode().split("\n")
    assert joined[0] == "Title " + MARKDOWN_BLOCKS[0]  # running text after running text: wrapping
    assert joined[1:-1] == lines[2:-2]
    assert joined[-1] == "an indented code block"  # folding took the indent that kept them apart


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


LINE_CHARACTERS = st.sampled_from(list(" \t\n-*+#|`~1.)ab\u00a0\u3000\x00é")) | st.characters()
LINES = st.lists(st.text(LINE_CHARACTERS, max_size=12), max_size=30).map("\n".join)


@given(LINES | st.text())
def test_blocks_normalised_again_change_nothing(text):
    """Each block is one folded line; blank-line separated or one per section, the blocks read
    back as themselves."""
    blocks = text_blocks(text)
    assert all(block and "\n" not in block and block == normalize_text(block) for block in blocks)
    assert text_blocks("\n\n".join(blocks)) == blocks
    assert content_parts({"sections": [{"text": b} for b in blocks]}) == blocks


@given(LINES)
def test_the_compiled_block_reading_agrees_with_the_per_character_path(text):
    assert _fold_section(text) == "\n".join(_blocks_by_characters(text)).encode()
    ascii_only = text.encode("ascii", "ignore").decode()
    assert _fold_section(ascii_only) == "\n".join(_blocks_by_characters(ascii_only)).encode()


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
@example("A\x00\u0301")  # a deleted control between a letter and its accent: they compose (Á)
@example("\x00\u0301A")
def test_the_compiled_fold_agrees_with_the_per_character_path(text):
    assert _fold(text) == _by_characters(text)
    assert _fold(text * 3) == _by_characters(text * 3)  # long enough for the compiled pass


WIDE_SPACES = "".join(chr(c) for c in range(0x80, 0x3001) if chr(c).isspace())


NEAR_SPACES = st.sampled_from(list(WIDE_SPACES + "\u2027\u2030\u200c\u205e\xc2\xe3"))  # and their neighbours


@given(st.text(TRICKY | NEAR_SPACES | st.characters(), max_size=300))
@example("a\n\n b \u3000\n\u2029c\x85")
def test_the_compiled_line_fold_is_folding_each_line_alone(text):
    folded = (" ".join(line.split()) for line in text.split("\n"))
    assert fold_lines(text) == "\n\n".join(line for line in folded if line)
