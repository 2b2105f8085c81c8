"""The side-by-side HTML: page text escaped, marks exact and well nested, whole characters."""

from __future__ import annotations

import random
import re
from html.parser import HTMLParser

import pytest

from cdc import chunk_content, compare
from cdc.highlight import FIRST_CHANGE_IDS, changes_list, char_start, shorten, side_by_side_html
from tests import textgen

OWN_TAGS = {"style", "div", "span", "del", "ins", "br"}
LAYOUT_CLASSES = {"cdc-sbs", "cdc-col", "cdc-old", "cdc-new", "cdc-head", "cdc-text"}
VOID_TAGS = {"br"}


class Page(HTMLParser):
    """Parses a fragment, checking nesting; collects tags, classes, ids and each column's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.classes: set[str] = set()
        self.ids: list[str] = []
        self.open: list[str] = []
        self.column: str | None = None
        self.texts = {"cdc-old": [], "cdc-new": []}
        self.in_head_or_gap = 0

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        attributes = dict(attrs)
        assert set(attributes) <= {"class", "id"}, attrs
        classes = (attributes.get("class") or "").split()
        self.classes.update(classes)
        if "id" in attributes:
            self.ids.append(attributes["id"])
        for side in ("cdc-old", "cdc-new"):
            if side in classes:
                self.column = side
        if tag == "br":
            self.texts[self.column].append("\n")
            return
        if {"cdc-head", "cdc-gap"} & set(classes):
            self.in_head_or_gap += 1
            classes.append("-skip")
        self.open.append((tag, "-skip" in classes))

    def handle_endtag(self, tag):
        assert tag not in VOID_TAGS
        opened, skipping = self.open.pop()
        assert opened == tag, f"</{tag}> closes <{opened}>"
        self.in_head_or_gap -= skipping

    def handle_data(self, data):
        if self.column and not self.in_head_or_gap and self.open and self.open[0][0] != "style":
            self.texts[self.column].append(data)

    def text(self, side: str) -> str:
        return "".join(self.texts[side])


def parse(fragment: str) -> Page:
    page = Page()
    page.feed(fragment)
    page.close()
    assert not page.open, page.open
    return page


def columns(fragment: str) -> tuple[str, str]:
    """The old and the new column's markup."""
    old, new = fragment.split('<div class="cdc-col cdc-new">')
    return old.split('<div class="cdc-col cdc-old">')[1], new


def report_for(old: bytes, new: bytes):
    return compare(chunk_content(old), chunk_content(new), old_text=old, new_text=new)


@pytest.fixture(scope="module")
def price_change() -> tuple[bytes, bytes]:
    page = textgen.text(11, 8000)
    at = page.index(b" ", 4000) + 1
    old = page[:at] + b"Now only $19.99 per month. " + page[at:]
    return old, old.replace(b"$19.99", b"$24.99")


def test_page_text_is_escaped_and_the_only_tags_are_the_modules():
    page = textgen.text(5, 6000)
    at = page.index(b" ", 3000) + 1
    old = page[:at] + b"<script>alert(1)</script> and <b>bold</b> & <a href='x'>link</a> " + page[at:]
    new = old.replace(b"alert(1)", b"alert(2)").replace(b"<b>bold", b"<b>bolder")
    fragment = side_by_side_html(old, new, report_for(old, new))
    assert "<script>" not in fragment and "<b>" not in fragment and "<a " not in fragment
    assert "&lt;script&gt;" in fragment and "&lt;b&gt;" in fragment and "&amp;" in fragment
    parsed = parse(fragment)
    assert parsed.tags <= OWN_TAGS
    assert all(name.startswith("cdc-") for name in parsed.classes)
    assert parsed.text("cdc-old") == old.decode() and parsed.text("cdc-new") == new.decode()


def test_a_price_edit_is_wrapped_exactly(price_change):
    old, new = price_change
    report = report_for(old, new)
    assert [e.kind for e in report.edits] == ["replace"]
    old_column, new_column = columns(side_by_side_html(old, new, report))
    assert re.search(r'<del [^>]*class="[^"]*cdc-del[^"]*">\$19\.99</del>', old_column)
    assert re.search(r'<ins [^>]*class="[^"]*cdc-ins[^"]*">\$24\.99</ins>', new_column)
    assert "<ins" not in old_column and "<del" not in new_column
    assert 'class="cdc-removed"' in old_column and 'class="cdc-added"' in new_column


def test_first_change_anchors_come_first(price_change):
    old, new = price_change
    fragment = side_by_side_html(old, new, report_for(old, new))
    assert parse(fragment).ids == list(FIRST_CHANGE_IDS)
    old_column, new_column = columns(fragment)
    # The anchor is on the first marked element, before any other mark.
    assert old_column.index('id="cdc-first-change-old"') < old_column.index("cdc-removed")
    assert new_column.index('id="cdc-first-change-new"') < new_column.index("cdc-added")


def test_identical_texts_have_no_marks():
    page = textgen.text(2, 9000)
    fragment = side_by_side_html(page, page, report_for(page, page))
    parsed = parse(fragment)
    assert parsed.classes == LAYOUT_CLASSES
    assert parsed.ids == []
    assert parsed.tags == {"style", "div", "br"}
    assert changes_list(page, page, report_for(page, page)) == []


def test_empty_texts():
    fragment = side_by_side_html(b"", b"", compare([], []))
    assert parse(fragment).classes == LAYOUT_CLASSES
    new = textgen.text(4, 3000)
    fragment = side_by_side_html(b"", new, report_for(b"", new))
    parsed = parse(fragment)
    assert parsed.text("cdc-new") == new.decode() and parsed.text("cdc-old") == ""
    assert parsed.ids == list(FIRST_CHANGE_IDS)  # the old column's mark is the insertion point
    assert 'class="cdc-point-ins"' in columns(fragment)[0]


MULTIBYTE = ["日本語", "価格", "über", "naïve", "🙂", "—", "crawl", "страница", "a", "ok."]


def multibyte_text(seed: int, words: int) -> bytes:
    rng = random.Random(seed)
    return " ".join(rng.choice(MULTIBYTE) for _ in range(words)).encode()


def test_regions_ending_inside_a_character_decode_whole():
    old = multibyte_text(1, 4000)
    at = old.index(b" ", len(old) // 2) + 1
    new = old[:at] + multibyte_text(2, 300) + b" " + old[at:]
    report = report_for(old, new)
    ends = [o for region in report.removed_regions for o in (region[0], sum(region))]
    ends += [o for region in report.changed_regions for o in (region[0], sum(region))]
    mid_character = [o for o in ends if o < len(new) and char_start(new, o) != o]
    mid_character += [o for o in ends if o < len(old) and char_start(old, o) != o]
    assert mid_character, "the test needs a region edge inside a character"
    fragment = side_by_side_html(old, new, report)
    assert "\N{REPLACEMENT CHARACTER}" not in fragment
    parsed = parse(fragment)
    assert parsed.text("cdc-old") == old.decode() and parsed.text("cdc-new") == new.decode()
    for row in changes_list(old, new, report):
        assert "\N{REPLACEMENT CHARACTER}" not in row["old_text"] + row["new_text"]


def test_moved_chunks_are_marked_in_both_columns_given_the_old_chunks():
    old = textgen.text(3, 40_000)
    new = old[:10_000] + old[20_000:30_000] + old[10_000:20_000] + old[30_000:]
    old_chunks, new_chunks = chunk_content(old), chunk_content(new)
    report = compare(old_chunks, new_chunks, old_text=old, new_text=new)
    assert report.moved
    old_column, new_column = columns(side_by_side_html(old, new, report))
    assert "cdc-moved" in new_column and "cdc-moved" not in old_column
    fragment = side_by_side_html(old, new, report, old_chunks=old_chunks)
    old_column, new_column = columns(fragment)
    assert "cdc-moved" in old_column and "cdc-moved" in new_column
    parse(fragment)  # moves, regions and edits overlap; still well nested
    # With the texts, the moved chunks are move edits, listed once, both offsets known.
    moved = [row for row in changes_list(old, new, report, old_chunks=old_chunks) if row["kind"] == "move"]
    assert moved
    assert all(row["old_text"] == row["new_text"] and row["old_offset"] is not None for row in moved)
    assert 'class="cdc-move-from' in old_column and 'cdc-move-to' in new_column
    chunks_only = compare(old_chunks, new_chunks)
    rows = changes_list(old, new, chunks_only, old_chunks=old_chunks)
    moved = [row for row in rows if row["kind"] == "moved"]
    assert len(moved) == len(chunks_only.moved)
    assert all(row["old_text"] == row["new_text"] and row["old_offset"] is not None for row in moved)


def test_a_moved_paragraph_is_outlined_at_both_places_and_escaped():
    paragraphs = textgen.paragraphs(12, 10)
    paragraphs[2] = "<script>alert('moved & escaped')</script> " + paragraphs[2]
    new_paragraphs = paragraphs[:2] + paragraphs[3:8] + [paragraphs[2]] + paragraphs[8:]
    old, new = "\n".join(paragraphs).encode(), "\n".join(new_paragraphs).encode()
    report = report_for(old, new)
    assert [e.kind for e in report.edits] == ["move"]
    fragment = side_by_side_html(old, new, report)
    parse(fragment)
    old_column, new_column = columns(fragment)
    assert re.search(r'<span [^>]*class="[^"]*cdc-move-from[^"]*">&lt;script&gt;', old_column)
    assert re.search(r'<span [^>]*class="[^"]*cdc-move-to[^"]*">&lt;script&gt;', new_column)
    assert "<script>" not in fragment
    [row] = changes_list(old, new, report)
    assert row["kind"] == "move" and row["old_text"] == row["new_text"]


def test_an_insertion_marks_its_point_in_the_old_column():
    page = textgen.text(8, 8000)
    at = page.index(b". ", 4000) + 2
    new = page[:at] + b"A brand new sentence about weather. " + page[at:]
    report = report_for(page, new)
    assert [e.kind for e in report.edits] == ["insert"]
    old_column, new_column = columns(side_by_side_html(page, new, report))
    assert 'class="cdc-point-ins"></span>' in old_column
    assert re.search(r'<ins [^>]*>A brand new sentence about weather\.</ins>', new_column)


def test_context_elides_unchanged_text(price_change):
    old, new = price_change
    report = report_for(old, new)
    full = side_by_side_html(old, new, report)
    short = side_by_side_html(old, new, report, context=40)
    assert "cdc-gap" not in full.split("</style>")[1]
    assert 'class="cdc-gap"' in short and len(short) < len(full)
    assert "$19.99</del>" in short and "$24.99</ins>" in short
    assert parse(short).ids == list(FIRST_CHANGE_IDS)


def test_changes_list(price_change):
    old, new = price_change
    report = report_for(old, new)
    [row] = changes_list(old, new, report)
    edit = report.edits[0]
    assert row == {"kind": "replace", "old_text": "$19.99", "new_text": "$24.99",
                   "old_offset": edit.old_offset, "old_length": 6,
                   "new_offset": edit.new_offset, "new_length": 6}
    chunk_only = compare(chunk_content(old), chunk_content(new))  # no texts: no edits
    rows = changes_list(old, new, chunk_only)
    assert [row["kind"] for row in rows] == ["removed", "added"]
    assert "$19.99" in rows[0]["old_text"] or "…" in rows[0]["old_text"]


def test_shorten_keeps_both_ends():
    assert shorten("a  b\nc") == "a b c"
    long = "start " + "x" * 300 + " end"
    shown = shorten(long, 41)
    assert len(shown) == 41 and shown.startswith("start") and shown.endswith("end") and "…" in shown
