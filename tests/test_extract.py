"""HTML to a record with Resiliparse: charsets, sections, modes, broken and non-HTML bodies."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from cdc.core.normalize import content_for_chunking
from cdc.sources.extract import MAIN_CONTENT, WHOLE_PAGE, decode_html, html_to_record

RANDOM = random.Random(20240501)

PAGE = b"""<!DOCTYPE html>
<html><head><title> Spring  catalogue </title>
<meta name="Description" content="Prices and   opening hours">
</head><body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/shop">Shop</a></li>
<li><a href="/about">About</a></li></ul></nav>
<main><article>
<h1>Our shop</h1><p>We sell tea and coffee from small farms, roasted every week in town.</p>
<p>Our spring catalogue is out now: ask at the counter for a printed copy of it.</p>
<h2>Prices</h2><p>A pound of house blend costs $19.99 and a tin of green tea $7.50.</p>
</article></main>
<footer>Copyright 2024 The Shop &amp; Co. All rights reserved.</footer>
</body></html>"""


def test_record_shape_title_description_and_sections():
    record = html_to_record(PAGE, "https://shop.example/", "2024-05-01T12:00:00Z")
    assert set(record) == {"url", "fetched_at", "title", "description", "sections", "extraction"}
    assert record["url"] == "https://shop.example/"
    assert record["fetched_at"] == "2024-05-01T12:00:00Z"
    assert record["title"] == "Spring catalogue"
    assert record["description"] == "Prices and opening hours"
    assert record["extraction"] == MAIN_CONTENT
    headings = [s["heading"] for s in record["sections"]]
    assert headings == ["Our shop", "Prices"]
    assert "$19.99" in record["sections"][1]["text"]
    assert all(set(s) == {"heading", "text"} for s in record["sections"])
    assert content_for_chunking(record)  # the record is one normalisation accepts


def test_whole_page_mode_keeps_navigation_and_footer():
    whole = html_to_record(PAGE, "https://shop.example/", "2024-05-01", mode=WHOLE_PAGE)
    text = " ".join(s["text"] for s in whole["sections"])
    assert whole["extraction"] == WHOLE_PAGE
    assert "Copyright 2024 The Shop & Co." in text
    assert "$19.99" in text


def test_unknown_mode_is_a_callers_mistake():
    with pytest.raises(ValueError, match="extraction mode"):
        html_to_record(PAGE, "https://shop.example/", "2024-05-01", mode="everything")


def test_text_is_unescaped_once():
    record = html_to_record(b"<p>a &lt;b&gt; tag &amp;amp; more &#169;</p>", "https://e.com/", "2024")
    assert record["sections"][0]["text"] == "a <b> tag &amp; more \u00a9"


def test_header_charset_wins():
    body = "<html><head><title>Caf\u00e9</title></head><body><p>cr\u00e8me br\u00fbl\u00e9e</p></body></html>"
    record = html_to_record(body.encode("iso-8859-1"), "https://e.com/", "2024",
                            declared_charset="ISO-8859-1")
    assert record["title"] == "Caf\u00e9"
    assert "cr\u00e8me br\u00fbl\u00e9e" in record["sections"][0]["text"]


def test_meta_charset_without_header():
    body = '<html><head><meta charset="koi8-r"><title>\u041f\u0440\u0438\u0432\u0435\u0442</title></head>' \
           '<body><p>\u0414\u043e\u0431\u0440\u044b\u0439 \u0434\u0435\u043d\u044c</p></body></html>'
    record = html_to_record(body.encode("koi8-r"), "https://e.com/", "2024")
    assert record["title"] == "\u041f\u0440\u0438\u0432\u0435\u0442"


def test_wrong_or_unknown_declared_charset_falls_back():
    body = "<p>na\u00efve \u2014 caf\u00e9</p>".encode()
    assert "na\u00efve \u2014 caf\u00e9" in decode_html(body, "no-such-charset")
    assert "na\u00efve" in decode_html(body, None)
    # Declared UTF-8 but Windows-1252 bytes: detection, never an exception.
    assert "caf" in decode_html("<p>caf\u00e9 cr\u00e8me</p>".encode("cp1252"), "utf-8")
    assert isinstance(decode_html(os.urandom(4096), "utf-8"), str)
    assert decode_html(b"", "utf-16") == ""


@pytest.mark.parametrize("body", [
    b"<html><body><p>unclosed <b>bold <div><h2>Head</h3> text <table><td>cell",
    b"</p></div></body><p>end tags first</p><<<>>>",
    b"<h1></h1><h2></h2>",
    b"\xef\xbb\xbf<p>a BOM first</p>",
])
def test_broken_markup_gives_a_record(body):
    record = html_to_record(body, "https://e.com/", "2024")
    assert record["url"] == "https://e.com/"
    assert isinstance(record["sections"], list)


def test_broken_markup_keeps_text():
    record = html_to_record(b"<p>unclosed <b>bold <div><h2>Head</h3> text &amp; more",
                            "https://e.com/", "2024")
    assert [s["heading"] for s in record["sections"]] == ["", "Head"]
    assert record["sections"][1]["text"] == "text & more"


@pytest.mark.parametrize("body", [
    RANDOM.randbytes(20_000), b"\x00" * 1000, b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + RANDOM.randbytes(500),
    b"", b"just words, no markup"])
def test_non_html_body_gives_an_empty_or_plain_record(body):
    record = html_to_record(body, "https://e.com/", "2024")
    assert record["title"] == ""
    text = " ".join(s["text"] for s in record["sections"])
    assert text in ("", "just words, no markup")


DOCS = Path("/usr/share/doc/python3.11/html")


@pytest.mark.skipif(not (DOCS / "library" / "json.html").exists(), reason="python3.11-doc not installed")
def test_real_page_from_the_python_docs():
    record = html_to_record((DOCS / "library" / "json.html").read_bytes(),
                            "https://docs.python.org/3.11/library/json.html", "2024-01-01")
    assert record["title"].startswith("json \u2014 JSON encoder and decoder")
    headings = [s["heading"] for s in record["sections"]]
    assert headings[0] == "json \u2014 JSON encoder and decoder"
    assert "Basic Usage" in headings
    main_text = " ".join(s["text"] for s in record["sections"])
    assert "Table of Contents" not in headings  # the sidebar is not main content
    assert len(main_text) > 10_000


def test_an_entity_for_a_line_break_stays_within_its_block():
    # `&#10;` in the text is a space within its paragraph, as when each line was folded alone.
    record = html_to_record(b"<html><body><p>one&#10;two &NewLine; three</p><p>four</p></body></html>",
                            "https://example.com/", "2024-05-01", "utf-8", WHOLE_PAGE)
    assert [section["text"] for section in record["sections"]] == ["one two three\n\nfour"]


def test_fragments_fold_as_line_by_line():
    """The whole-fragment passes of `_blocks` give what folding each line alone gives."""
    from cdc.sources.extract import _blocks, _blocks_by_line

    pieces = ["a", "b", " ", "\n", "\t", "\r", "\x0b", "\x1c", "\x85", "\xa0", "\u2028", "\u3000",
              "<", ">", "<p>", "</p>", "&amp;", "&#10;", "&#x0a;", "&NewLine;", "&#13;", "&nbsp;",
              "&lt;", "&", ";", "é"]
    rng = random.Random(21)
    for _ in range(20_000):
        fragment = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert _blocks(fragment) == _blocks_by_line(fragment), repr(fragment)
