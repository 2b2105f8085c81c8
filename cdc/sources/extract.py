"""HTML bytes to a record in the seed's shape, with Resiliparse.

`html_to_record` decodes the body (`decode_html`), parses it with Resiliparse's lenient
HTML5 parser and keeps the title, the meta description and the text, split into sections
at headings, one block per paragraph (a paragraph, list item, table row, line of
preformatted text or of navigation: each line of Resiliparse's text), blank-line separated,
so normalisation keeps each of them a block. The text is the page's main content
(`MAIN_CONTENT`, Resiliparse's main-content heuristics drop navigation, sidebars and
footers) or all of its visible text (`WHOLE_PAGE`). Broken markup is parsed the way a
browser would; a body that is not HTML at all gives a record with empty text. Neither raises.

`text_to_record` takes text a crawler extracted already (the `conversion` records of Common
Crawl's WET files, `GIVEN_TEXT`) as it is: each line a block, nothing left out.
"""

from __future__ import annotations

import codecs
import html
import re

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding, map_encoding_to_html5
from resiliparse.parse.html import HTMLTree

from cdc.core.normalize import fold_lines

__all__ = ["EXTRACTION_MODES", "GIVEN_TEXT", "MAIN_CONTENT", "TEXT_MODES", "WHOLE_PAGE", "decode_html",
           "html_to_record", "text_to_record"]

MAIN_CONTENT = "main"
"""Only the main content: Resiliparse's heuristics leave out navigation and footers."""
WHOLE_PAGE = "whole"
"""All visible text of the page."""
EXTRACTION_MODES = (MAIN_CONTENT, WHOLE_PAGE)
"""The ways cdc turns HTML into text."""
GIVEN_TEXT = "wet"
"""Text extracted by the crawler (WET `conversion` records), taken as it is: no HTML to extract."""
TEXT_MODES = (*EXTRACTION_MODES, GIVEN_TEXT)
"""Every way a store's text can have been made; a store holds one (`Store.claim_extraction_mode`)."""

# Resiliparse's "minimal_html" output keeps headings as <h1>..</h6>, with text HTML-escaped,
# so splitting at headings, dropping the remaining tags and unescaping is exact.
HEADING = re.compile(r"<h[1-6]>(.*?)</h[1-6]>", re.S)
TAG = re.compile(r"<[^>]*>")
LINE_TAG = re.compile(r"<[^>\n]*>")  # TAG within one line
# Bytes no text file holds: a body with many of them is binary, not HTML.
BINARY_BYTES = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]")
BINARY_SAMPLE = 4096
BINARY_SHARE = 0.05


def _codec(label: str | None) -> str | None:
    """A Python codec for a charset label, mapped as browsers map it (WHATWG), or None."""
    if not label or not isinstance(label, str):
        return None
    mapped = map_encoding_to_html5(label.strip().strip("\"'"), fallback_utf8=False)
    if not mapped:
        return None
    try:
        return codecs.lookup(mapped).name
    except LookupError:
        return None


def decode_html(body: bytes, declared_charset: str | None) -> str:
    """The page as text: the HTTP header's charset if valid and it decodes the body, else the
    HTML meta charset, else a detected one; undecodable bytes become U+FFFD. Never raises."""
    declared = _codec(declared_charset)
    if declared is not None:
        try:
            text = body.decode(declared)
        except UnicodeDecodeError:  # a wrong declared charset: detect instead
            pass
        else:
            return text[1:] if text[:1] == "\ufeff" else text
    try:
        # The meta charset in the first 1024 bytes if there is one, else uchardet's guess.
        detected = _codec(detect_encoding(body, from_html_meta=True)) or "utf-8"
        return bytes_to_str(body, detected, errors="replace")
    except (LookupError, UnicodeError, TypeError, ValueError):
        return body.decode("utf-8", errors="replace")


def _looks_binary(body: bytes) -> bool:
    sample = body[:BINARY_SAMPLE]
    return bool(sample) and len(BINARY_BYTES.findall(sample)) > BINARY_SHARE * len(sample)


def _plain(fragment: str) -> str:
    return " ".join(html.unescape(TAG.sub(" ", fragment)).split())


def _blocks_by_line(fragment: str) -> str:
    """`_blocks` a line at a time: the reference, and the path for the rare fragment in
    which an entity stands for a line break (`&#10;` is a space within its line)."""
    return "\n\n".join(line for line in map(_plain, fragment.split("\n")) if line)


def _blocks(fragment: str) -> str:
    """The lines of a fragment of Resiliparse's text (it puts each block element on a line
    of its own), as text, tags dropped, each folded, blank-line separated.

    One pass of each kind over the whole fragment, the lines folded by a kernel
    (`fold_lines`), not Python calls per line (hundreds per page): `TAG` within a line is
    `LINE_TAG` over the fragment, and no entity spans a line, so dropping tags and
    unescaping the whole fragment is doing it line by line, unless an entity made a line
    break."""
    text = html.unescape(LINE_TAG.sub(" ", fragment))
    if text.count("\n") != fragment.count("\n"):
        return _blocks_by_line(fragment)
    return fold_lines(text)


def _sections(marked: str) -> list[dict]:
    """Resiliparse's minimal-HTML text as sections, a new one at each heading."""
    sections = []
    start, heading = 0, ""
    for match in HEADING.finditer(marked):
        text = _blocks(marked[start:match.start()])
        if text or heading:
            sections.append({"heading": heading, "text": text})
        heading, start = _plain(match.group(1)), match.end()
    text = _blocks(marked[start:])
    if text or heading:
        sections.append({"heading": heading, "text": text})
    return sections


def _description(tree: HTMLTree) -> str:
    head = tree.head
    if head is None:
        return ""
    for meta in head.query_selector_all("meta[name]"):
        if (meta.getattr("name") or "").strip().lower() == "description":
            return " ".join((meta.getattr("content") or "").split())
    return ""


def html_to_record(body: bytes, url: str, fetched_at: str, declared_charset: str | None = None,
                   mode: str = MAIN_CONTENT) -> dict:
    """A record (`url`, `fetched_at`, `title`, `description`, `sections`, `extraction`) of an
    HTML page. Raises ValueError only for an unknown `mode` (a caller's mistake)."""
    if mode not in EXTRACTION_MODES:
        raise ValueError(f"extraction mode must be one of {EXTRACTION_MODES}, got {mode!r}")
    record = {"url": url, "fetched_at": fetched_at, "title": "", "description": "",
              "sections": [], "extraction": mode}
    if not body or _looks_binary(body):
        return record
    try:
        tree = HTMLTree.parse(decode_html(body, declared_charset))
        record["title"] = " ".join((tree.title or "").split())
        record["description"] = _description(tree)
        marked = extract_plain_text(tree, preserve_formatting="minimal_html",
                                    main_content=mode == MAIN_CONTENT)
    except Exception:  # a page the parser rejects is an empty page, not a crash
        return record
    record["sections"] = _sections(marked)
    return record


def text_to_record(body: bytes, url: str, fetched_at: str) -> dict:
    """A record of text a crawler extracted (a WET `conversion` record's UTF-8 block): one
    section, each non-blank line a block of its own (the extractor writes a block a line), as
    `html_to_record` makes them. Never raises: undecodable bytes become U+FFFD."""
    text = body.decode("utf-8", errors="replace")
    if text[:1] == "\ufeff":
        text = text[1:]
    blocks = "\n\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
    return {"url": url, "fetched_at": fetched_at, "title": "", "description": "",
            "sections": [{"heading": "", "text": blocks}] if blocks else [], "extraction": GIVEN_TEXT}
