"""The side-by-side HTML: page text escaped, marks exact and well nested, whole characters."""

from __future__ import annotations

import random
import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc import chunk_content, compare
from cdc.present.highlight import (
    FIRST_CHANGE_IDS,
    changes_list,
    char_start,
    move_label_id,
    shorten,
    side_by_side_html,
)
from tests import textgen

OWN_TAGS = {"style", "div", "span", "del", "ins"}
LAYOUT_CLASSES = {"cdc-sbs", "cdc-head", "cdc-cell", "cdc-old", "cdc-new"}
NOT_PAGE_TEXT = {"cdc-head", "cdc-gap", "cdc-move-label"}  # our own words, not the page's
CELL = re.compile(r'<div (?:id="([^"]*)" )?class="(cdc-cell [^"]*)">(.*?)</div>')


class Page(HTMLParser):
    """Parses a fragment, checking nesting; collects tags, classes, ids and each column's
    blocks (the text of its cells, blank cells left out)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.classes: set[str] = set()
        self.ids: list[str] = []
        self.open: list[tuple[str, bool]] = []
        self.blocks: dict[str, list[list[str]]] = {"cdc-old": [], "cdc-new": []}
        self.cell: list[str] | None = None
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        attributes = dict(attrs)
        assert set(attributes) <= {"class", "id"}, attrs
        classes = (attributes.get("class") or "").split()
        self.classes.update(classes)
        if "id" in attributes:
            self.ids.append(attributes["id"])
        if "cdc-cell" in classes:
            assert tag == "div" and self.cell is None, "a cell inside a cell"
            self.cell = []
            if "cdc-blank" not in classes:
                self.blocks["cdc-old" if "cdc-old" in classes else "cdc-new"].append(self.cell)
        skip = bool(NOT_PAGE_TEXT & set(classes))
        self.skipping += skip
        self.open.append((tag, skip))

    def handle_endtag(self, tag):
        opened, skip = self.open.pop()
        assert opened == tag, f"</{tag}> closes <{opened}>"
        self.skipping -= skip
        if tag == "div" and self.cell is not None and not any(t == "div" for t, _ in self.open[1:]):
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None and not self.skipping:
            self.cell.append(data)
        elif self.open and self.open[-1][0] not in ("style", "div") and not self.skipping:
            raise AssertionError(f"text outside a cell: {data!r}")

    def text(self, side: str) -> str:
        """The column's blocks joined by line breaks: the text it shows."""
        return "\n".join("".join(cell) for cell in self.blocks[side])


def parse(fragment: str) -> Page:
    page = Page()
    page.feed(fragment)
    page.close()
    assert not page.open, page.open
    return page


def cells(fragment: str, side: str | None = None) -> list[tuple[str | None, set[str], str]]:
    """(id, classes, inner markup) of each cell, in order; of one column when `side` is given."""
    found = [(identity or None, set(classes.split()), inner)
             for identity, classes, inner in CELL.findall(fragment)]
    return [cell for cell in found if side is None or f"cdc-{side}" in cell[1]]


def columns(fragment: str) -> tuple[str, str]:
    """The old and the new column's markup: their cells' inner markup, in order."""
    return tuple("".join(f'<{" ".join(sorted(c))}>{inner}' for _, c, inner in cells(fragment, side))
                 for side in ("old", "new"))


def body(fragment: str) -> str:
    """The fragment without its style sheet (which names every class)."""
    return fragment.split("</style>", 1)[1]


def first_change_ids(fragment: str) -> list[str]:
    return [identity for identity in parse(fragment).ids if identity.startswith("cdc-first-change")]


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


def test_a_price_edit_is_wrapped_exactly_and_only_its_block_is_shaded(price_change):
    old, new = price_change
    report = report_for(old, new)
    assert [e.kind for e in report.edits] == ["replace"]
    fragment = side_by_side_html(old, new, report)
    old_column, new_column = columns(fragment)
    assert re.search(r'<del [^>]*class="[^"]*cdc-del[^"]*">\$19\.99</del>', old_column)
    assert re.search(r'<ins [^>]*class="[^"]*cdc-ins[^"]*">\$24\.99</ins>', new_column)
    assert "<ins" not in old_column and "<del" not in new_column
    for side, mark in (("old", "$19.99</del>"), ("new", "$24.99</ins>")):
        [shaded] = [cell for cell in cells(fragment, side) if "cdc-changed" in cell[1]]
        assert mark in shaded[2]  # the one shaded block is the one with the edit
    assert "cdc-removed" not in body(fragment) and "cdc-added" not in body(fragment)  # no chunk shading


def test_first_change_anchors_are_on_the_first_changed_blocks(price_change):
    old, new = price_change
    fragment = side_by_side_html(old, new, report_for(old, new))
    assert parse(fragment).ids == list(FIRST_CHANGE_IDS)
    for side, identity in zip(("old", "new"), FIRST_CHANGE_IDS):
        first = next(cell for cell in cells(fragment, side) if "cdc-changed" in cell[1])
        assert first[0] == identity


def test_identical_texts_have_no_marks_and_keep_their_blocks():
    page = textgen.text(2, 9000)
    fragment = side_by_side_html(page, page, report_for(page, page))
    parsed = parse(fragment)
    assert parsed.classes == LAYOUT_CLASSES
    assert parsed.ids == []
    assert parsed.tags == {"style", "div"}
    assert changes_list(page, page, report_for(page, page)) == []
    # One cell per block, the two columns' blocks side by side on every row.
    lines = page.decode().split("\n")
    assert len(lines) > 5 and parsed.text("cdc-old") == parsed.text("cdc-new") == page.decode()
    pair = [{"cdc-cell", "cdc-old"}, {"cdc-cell", "cdc-new"}]
    assert [c for _, c, _ in cells(fragment)] == pair * len(lines)


def test_empty_texts():
    fragment = side_by_side_html(b"", b"", compare([], []))
    assert parse(fragment).classes == LAYOUT_CLASSES - {"cdc-cell"} and not cells(fragment)
    new = textgen.text(4, 3000)
    fragment = side_by_side_html(b"", new, report_for(b"", new))
    parsed = parse(fragment)
    assert parsed.text("cdc-new") == new.decode() and parsed.text("cdc-old") == ""
    assert parsed.ids == list(FIRST_CHANGE_IDS)  # the old column's is its first blank
    old_cells = cells(fragment, "old")
    assert old_cells and all("cdc-blank" in c for _, c, _ in old_cells)
    assert old_cells[0][0] == FIRST_CHANGE_IDS[0]


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


def test_moved_chunks_are_moves_in_both_columns():
    old = textgen.text(3, 40_000)
    new = old[:10_000] + old[20_000:30_000] + old[10_000:20_000] + old[30_000:]
    old_chunks, new_chunks = chunk_content(old), chunk_content(new)
    report = compare(old_chunks, new_chunks, old_text=old, new_text=new)
    assert report.moved
    fragment = side_by_side_html(old, new, report)
    parse(fragment)  # moves and edits overlap; still well nested
    old_column, new_column = columns(fragment)
    assert 'class="cdc-move-from' in old_column and 'cdc-move-to' in new_column
    assert "cdc-moved-block" in old_column and "cdc-moved-block" in new_column
    # With the texts, the moved chunks are move edits, listed once, both offsets known.
    moved = [row for row in changes_list(old, new, report, old_chunks=old_chunks) if row["kind"] == "move"]
    assert moved
    assert all(row["old_text"] == row["new_text"] and row["old_offset"] is not None for row in moved)
    # Without the texts (no edits), the moved chunks are marked: in the old column given its chunks.
    chunks_only = compare(old_chunks, new_chunks)
    old_column, new_column = columns(side_by_side_html(old, new, chunks_only))
    assert "cdc-moved" in new_column and "cdc-moved" not in old_column
    fragment = side_by_side_html(old, new, chunks_only, old_chunks=old_chunks)
    parse(fragment)
    old_column, new_column = columns(fragment)
    assert "cdc-moved" in old_column and "cdc-moved" in new_column
    assert "cdc-removed" in old_column and "cdc-added" in new_column
    rows = changes_list(old, new, chunks_only, old_chunks=old_chunks)
    moved = [row for row in rows if row["kind"] == "moved"]
    assert len(moved) == len(chunks_only.moved)
    assert all(row["old_text"] == row["new_text"] and row["old_offset"] is not None for row in moved)


def test_a_moved_paragraph_is_a_move_at_both_places_labelled_and_escaped():
    paragraphs = textgen.paragraphs(12, 10)
    paragraphs[2] = "<script>alert('moved & escaped')</script> " + paragraphs[2]
    new_paragraphs = paragraphs[:2] + paragraphs[3:8] + [paragraphs[2]] + paragraphs[8:]
    old, new = "\n".join(paragraphs).encode(), "\n".join(new_paragraphs).encode()
    report = report_for(old, new)
    assert [e.kind for e in report.edits] == ["move"]
    fragment = side_by_side_html(old, new, report)
    parsed = parse(fragment)
    assert parsed.text("cdc-old") == old.decode() and parsed.text("cdc-new") == new.decode()
    old_column, new_column = columns(fragment)
    assert re.search(r'<span [^>]*class="[^"]*cdc-move-from[^"]*">&lt;script&gt;', old_column)
    assert re.search(r'<span [^>]*class="[^"]*cdc-move-to[^"]*">&lt;script&gt;', new_column)
    assert "<script>" not in fragment
    # The moved block, labelled "move 1" at both ends, pointing at each other, each facing a
    # blank; nothing else is shaded.
    rows = list(zip(cells(fragment, "old"), cells(fragment, "new"), strict=False))
    assert len(cells(fragment, "old")) == len(cells(fragment, "new")) == len(paragraphs) + 1
    (from_row,) = [n for n, (o, _) in enumerate(rows) if "cdc-moved-block" in o[1]]
    (to_row,) = [n for n, (_, w) in enumerate(rows) if "cdc-moved-block" in w[1]]
    assert from_row < to_row
    assert "cdc-blank" in rows[from_row][1][1] and "cdc-blank" in rows[to_row][0][1]
    assert f'<span id="{move_label_id(1, "from")}" class="cdc-move-label">move 1 ↓</span>' in old_column
    assert f'<span id="{move_label_id(1, "to")}" class="cdc-move-label">move 1 ↑</span>' in new_column
    assert "cdc-changed" not in body(fragment)
    [row] = changes_list(old, new, report)
    assert row["kind"] == "move" and row["old_text"] == row["new_text"]


def test_an_edit_inside_a_moved_paragraph_is_marked_inside_the_move():
    paragraphs = textgen.paragraphs(12, 10)
    words = paragraphs[6].split(" ")
    words[5] = "REPLACED"
    new_paragraphs = [" ".join(words), *paragraphs[:6], *paragraphs[7:]]
    old, new = "\n".join(paragraphs).encode(), "\n".join(new_paragraphs).encode()
    report = report_for(old, new)
    assert sorted(e.kind for e in report.edits) == ["move", "replace"]
    fragment = side_by_side_html(old, new, report)
    parse(fragment)
    [(_, old_classes, old_inner)] = [c for c in cells(fragment, "old") if "cdc-moved-block" in c[1]]
    [(_, new_classes, new_inner)] = [c for c in cells(fragment, "new") if "cdc-moved-block" in c[1]]
    old_word = paragraphs[6].split(" ")[5]
    assert f'<del class="cdc-del cdc-move-from">{old_word}</del>' in old_inner
    assert '<ins class="cdc-ins cdc-move-to">REPLACED</ins>' in new_inner
    assert "move 1 ↑" in old_inner and "move 1 ↓" in new_inner  # it went up
    assert "cdc-changed" not in old_classes | new_classes


def test_an_insertion_marks_its_point_in_the_old_column():
    page = textgen.text(8, 8000)
    at = page.index(b". ", 4000) + 2
    new = page[:at] + b"A brand new sentence about weather. " + page[at:]
    report = report_for(page, new)
    assert [e.kind for e in report.edits] == ["insert"]
    fragment = side_by_side_html(page, new, report)
    old_column, new_column = columns(fragment)
    assert 'class="cdc-point-ins"></span>' in old_column
    assert re.search(r'<ins [^>]*>A brand new sentence about weather\.</ins>', new_column)
    [old_block] = [c for c in cells(fragment, "old") if "cdc-changed" in c[1]]
    assert 'class="cdc-point-ins"' in old_block[2]


def test_an_inserted_paragraph_faces_a_blank_and_keeps_the_breaks():
    paragraphs = textgen.paragraphs(21, 8)
    inserted = "An inserted paragraph, with <i>markup</i> & an ampersand."
    old = "\n".join(paragraphs).encode()
    new = "\n".join([*paragraphs[:4], inserted, *paragraphs[4:]]).encode()
    report = report_for(old, new)
    assert [e.kind for e in report.edits] == ["insert"]
    fragment = side_by_side_html(old, new, report)
    parsed = parse(fragment)
    assert parsed.blocks["cdc-new"][4] == [inserted] and len(parsed.blocks["cdc-old"]) == 8
    old_cells, new_cells = cells(fragment, "old"), cells(fragment, "new")
    assert "cdc-blank" in old_cells[4][1] and "cdc-changed" in new_cells[4][1]
    assert old_cells[4][0] == FIRST_CHANGE_IDS[0] and new_cells[4][0] == FIRST_CHANGE_IDS[1]
    assert "cdc-point-ins" not in body(fragment)  # the blank shows where
    assert [c for _, c, _ in old_cells].count({"cdc-cell", "cdc-old"}) == 8  # the rest unshaded
    assert "&lt;i&gt;markup&lt;/i&gt; &amp; an" in new_cells[4][2]


def boilerplate_page() -> tuple[bytes, bytes, list, list, frozenset[bytes]]:
    """Two versions sharing a navigation run and a footer (the "boilerplate"), a word changed."""
    navigation = [f"Menu item number {n} of the site's own <nav> & links, long enough to stand alone"
                  for n in range(4)]
    footer = "Copyright notice of the example site: all rights reserved, see the licence page for more."
    body = textgen.paragraphs(31, 6)
    old = "\n".join(navigation + body + [footer]).encode()
    body[3] = body[3].replace(" the ", " a ", 1)
    new = "\n".join(navigation + body + [footer]).encode()
    old_chunks, new_chunks = chunk_content(old), chunk_content(new)
    template = {c.digest for c in old_chunks if old[c.offset:c.end].startswith((b"Menu", b"Copyright"))}
    assert len(template) >= 2
    return old, new, old_chunks, new_chunks, frozenset(template)


@pytest.mark.parametrize("view", ["shown", "dimmed", "hidden"])
def test_boilerplate_blocks_are_shown_dimmed_or_hidden(view):
    old, new, old_chunks, new_chunks, template = boilerplate_page()
    report = compare(old_chunks, new_chunks, old_text=old, new_text=new, ignore=template)
    fragment = side_by_side_html(old, new, report, old_chunks=old_chunks, new_chunks=new_chunks,
                                 boilerplate=template, boilerplate_view=view)
    parsed = parse(fragment)
    dimmed = [c for c in cells(fragment) if "cdc-boilerplate" in c[1]]
    if view == "shown":
        assert not dimmed and parsed.text("cdc-old") == old.decode()
    elif view == "dimmed":
        assert dimmed and all(inner.startswith(("Menu", "Copyright")) for _, _, inner in dimmed)
        assert parsed.text("cdc-old") == old.decode() and parsed.text("cdc-new") == new.decode()
        assert "&lt;nav&gt; &amp; links" in dimmed[0][2]
    else:
        assert not dimmed and "Menu item" not in fragment and "Copyright" not in fragment
        notes = re.findall(r'<div class="cdc-gap">([^<]*)</div>', fragment)
        assert notes == ["[4 boilerplate blocks hidden]", "[1 boilerplate block hidden]"]
        assert parsed.text("cdc-old") == old.decode().split("\n", 4)[4].rsplit("\n", 1)[0]
    changed = [c for c in cells(fragment) if "cdc-changed" in c[1]]
    assert len(changed) == 2 and "<del" in changed[0][2] and "<ins" in changed[1][2]


def test_a_changed_boilerplate_block_is_not_hidden():
    old, new, old_chunks, new_chunks, template = boilerplate_page()
    new = new.replace(b"Menu item number 2", b"Menu item number 9")
    new_chunks = chunk_content(new)
    report = compare(old_chunks, new_chunks, old_text=old, new_text=new)  # boilerplate counted
    fragment = side_by_side_html(old, new, report, old_chunks=old_chunks, new_chunks=new_chunks,
                                 boilerplate=template, boilerplate_view="hidden")
    assert "Menu item number <del" in fragment or "<del class=\"cdc-del\">2</del>" in fragment
    assert "<ins class=\"cdc-ins\">9</ins>" in fragment
    with pytest.raises(ValueError, match=r"boilerplate_view.*'faded'"):
        side_by_side_html(old, new, report, boilerplate_view="faded")


def test_context_elides_unchanged_blocks(price_change):
    old, new = price_change
    report = report_for(old, new)
    full = side_by_side_html(old, new, report)
    short = side_by_side_html(old, new, report, context_blocks=1)
    assert "cdc-gap" not in full.split("</style>")[1]
    assert 'class="cdc-gap"' in short and len(short) < len(full)
    assert "$19.99</del>" in short and "$24.99</ins>" in short
    assert first_change_ids(short) == list(FIRST_CHANGE_IDS)
    assert len(cells(short, "old")) == 3  # the changed block and one on each side
    assert re.search(r'<div class="cdc-gap">\[… [0-9]+ unchanged blocks …\]</div>', short)


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


BLOCKS = [*textgen.paragraphs(77, 12), "<b>bold</b> & <script>x</script>", "Home | Shop", "",
          "日本語の段落。"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(range(len(BLOCKS))), min_size=0, max_size=14),
       st.lists(st.tuples(st.sampled_from(["insert", "delete", "move", "word"]), st.integers(0, 30),
                          st.integers(0, 30)), max_size=4))
def test_any_block_edits_keep_every_block_in_order_escaped_and_well_nested(picks, operations):
    old_blocks = [BLOCKS[k] for k in picks]
    new_blocks = list(old_blocks)
    for kind, at, to in operations:
        if kind == "insert":
            new_blocks.insert(at % (len(new_blocks) + 1), BLOCKS[to % len(BLOCKS)])
        elif new_blocks and kind == "delete":
            del new_blocks[at % len(new_blocks)]
        elif new_blocks and kind == "move":
            new_blocks.insert(to % len(new_blocks), new_blocks.pop(at % len(new_blocks)))
        elif new_blocks:
            words = new_blocks[at % len(new_blocks)].split(" ")
            words[to % len(words)] = "CHANGED"
            new_blocks[at % len(new_blocks)] = " ".join(words)
    old, new = "\n".join(old_blocks).encode(), "\n".join(new_blocks).encode()
    report = report_for(old, new)
    fragment = side_by_side_html(old, new, report)
    parsed = parse(fragment)
    assert parsed.text("cdc-old") == old.decode() and parsed.text("cdc-new") == new.decode()
    assert "<script>" not in fragment and "<b>" not in fragment
    assert len(cells(fragment, "old")) == len(cells(fragment, "new"))  # every row has both sides
    moves = sum(e.kind == "move" for e in report.edits)
    for number in range(1, moves + 1):
        assert parsed.ids.count(move_label_id(number, "from")) == 1
        assert parsed.ids.count(move_label_id(number, "to")) == 1
    if report.edits:
        assert first_change_ids(fragment)  # some column opens at a change
