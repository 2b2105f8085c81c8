"""A change's added and removed words (`cdc.core.editwords.edit_words`), cut in a compiled
pass where each character's class allows it, are what cutting each edit's text with
`tokens` makes of them: held to that reading on any text, valid UTF-8 or not."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.core import editwords
from cdc.core.editwords import EditWords, edit_words, tokens
from cdc.core.refine import DELETE, INSERT, MOVE, REPLACE, Edit


def read_by_tokens(key: str, edits: list[Edit], old_text: bytes, new_text: bytes) -> EditWords | None:
    """Each edit's text decoded, its whitespace runs made one space, cut by `tokens`:
    the reading the compiled pass must give."""

    def side(text: bytes, added: bool) -> tuple[str, str]:
        kinds = (INSERT, REPLACE) if added else (DELETE, REPLACE)
        pieces = []
        for edit in edits:
            if edit.kind in kinds:
                offset = edit.new_offset if added else edit.old_offset
                length = edit.new_length if added else edit.old_length
                piece = " ".join(text[offset:offset + length].decode("utf-8", "replace").split())
                if piece:
                    pieces.append(piece)
        lines = [line for line in (" ".join(tokens(piece)) for piece in pieces) if line]
        return "\n".join(pieces), " " + " \n ".join(lines) + " " if lines else ""

    (added_text, added_words), (removed_text, removed_words) = side(new_text, True), side(old_text, False)
    if not added_text and not removed_text:
        return None
    return EditWords(key, 1, 1, added_text, removed_text, added_words, removed_words)


# Whatever a page holds: ASCII of every kind (the whitespace `str.split` cuts at but `\s`
# in ASCII does not, \x1c-\x1f), letters with and without a case, one whose lower case is
# two characters, marks, scripts without spaces, fullwidth forms, Unicode spaces, emoji.
PIECES = st.sampled_from([
    "a", "Z", "q", "7", "_", ".", ",", "$", "-", " ", "  ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f",
    "\x00", "\x7f", "\x85", "\xa0", "é", "É", "ß", "İ", "Σ", "ς", "ñ", "\u0301", "\u0e31", "\u200b", "\u200d",
    "’", "“", "—", "…", "─", "¶", "€", "٣", "в", "Д", "े", "त", "价", "格", "、", "。", "か", "カ", "\u3099",
    "ก", "\u3000", "Ａ", "ａ", "１", "😀", "\U00020000", "\ufffd", "word ", "Price: $19.99 ", "\n\n",
])
RAW = st.sampled_from([b"\xed\xa0\x80", b"\xe0\x80\xaf", b"\xc0\xaf", b"\xc3", b"\xe4\xbb", b"\x80", b"\xff",
                       b"\xf0\x9f\x98"])
TEXTS = st.lists(st.one_of(PIECES.map(str.encode), RAW), max_size=40).map(b"".join)


@st.composite
def changes(draw) -> tuple[list[Edit], bytes, bytes]:
    old_text, new_text = draw(TEXTS), draw(TEXTS)
    edits = []
    for _ in range(draw(st.integers(0, 6))):
        old_offset = draw(st.integers(0, len(old_text)))
        new_offset = draw(st.integers(0, len(new_text)))
        old_length = draw(st.integers(0, len(old_text) - old_offset))
        new_length = draw(st.integers(0, len(new_text) - new_offset))
        kind = draw(st.sampled_from([INSERT, DELETE, REPLACE, MOVE]))
        edits.append(Edit(kind, old_offset, old_length, new_offset, new_length))
    return edits, old_text, new_text


@settings(max_examples=400, deadline=None)
@given(changes())
def test_a_changes_words_are_its_edits_texts_cut_by_tokens(change):
    edits, old_text, new_text = change
    assert edit_words("k", 1, 1, edits, old_text, new_text) == read_by_tokens("k", edits, old_text, new_text)


def test_a_character_first_met_is_classed_and_the_text_read_the_same_before_and_after():
    old_text, new_text = "Ünïcödé Ωmega ‰ x".encode(), "Ünïcödé Ωmega ‰ y Ǆ".encode()
    edits = [Edit(REPLACE, 0, len(old_text), 0, len(new_text))]
    for character in "ÜïöéΩ‰Ǆ":
        editwords.character_classes[ord(character)] = editwords.UNKNOWN
    first = edit_words("k", 1, 1, edits, old_text, new_text)
    assert all(editwords.character_classes[ord(c)] != editwords.UNKNOWN for c in "ïöé‰")
    assert first == edit_words("k", 1, 1, edits, old_text, new_text) == read_by_tokens("k", edits, old_text,
                                                                                         new_text)
    assert first.added_words == " ünïcödé ωmega ‰ y ǆ "
