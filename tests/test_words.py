"""Exact edits in every script, and moves: tokens per script, the cleanup counted in tokens,
moved paragraphs as `move` edits with the edits inside them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc import Edit, chunk_content, compare
from cdc.core.refine import is_token_boundary, word_table
from tests import textgen


def diff(old: bytes, new: bytes):
    return compare(chunk_content(old), chunk_content(new), old_text=old, new_text=new)


def shown(text: bytes, offset: int, length: int) -> bytes:
    return text[offset:offset + length]


def tokens(text: str) -> list[str]:
    data = text.encode()
    return [data[begin:end].decode() for _, begin, end, _ in word_table(data, [[0, len(data)]])]


def only_edit(old: str, new: str) -> tuple[Edit, str, str]:
    report = diff(old.encode(), new.encode())
    assert len(report.edits) == 1, report.edits
    edit = report.edits[0]
    return (edit, shown(old.encode(), edit.old_offset, edit.old_length).decode(),
            shown(new.encode(), edit.new_offset, edit.new_length).decode())


# --- tokens -------------------------------------------------------------------------------------


def test_scripts_without_spaces_are_one_character_a_token():
    assert tokens("所有権はRustの「借用」です。") == \
        ["所", "有", "権", "は", "Rust", "の", "「", "借", "用", "」", "で", "す", "。"]
    assert tokens("这个函数返回一个整数，") == list("这个函数返回一个整数，")
    assert tokens("ＡＢ１") == ["Ａ", "Ｂ", "１"]  # fullwidth forms
    # Thai vowel and tone marks stay with their consonant; Hangul and Cyrillic are words.
    assert tokens("กินข้าว 한국어 문장 привет мир") == \
        ["กิ", "น", "ข้", "า", "ว", "한국어", "문장", "привет", "мир"]
    assert tokens("Cafe\u0301 x") == ["Cafe\u0301", "x"]  # a combining accent stays in its word


def test_a_newline_ends_every_token():
    assert tokens("第一段。\n第二段。\nword\nnext") == \
        ["第", "一", "段", "。", "第", "二", "段", "。", "word", "next"]


MIXED = "ab жи 日本語 かな カナ 。、 ก ิ ้ ข 한 \u0301\n\t"


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=MIXED, max_size=120))
def test_token_boundaries_are_where_the_scan_cuts(text):
    """`is_token_boundary`, used where a stretch is widened and trimmed, agrees with the
    compiled scan: every token starts and ends on a boundary, and no character start
    inside a token is one."""
    data = text.encode()
    inside = set()
    for _, begin, end, _ in word_table(data, [[0, len(data)]]):
        assert is_token_boundary(data, begin) and is_token_boundary(data, end)
        inside |= {i for i in range(begin + 1, end) if not 0x80 <= data[i] < 0xC0}
    assert not any(is_token_boundary(data, i) for i in inside)


# --- edits in every script ---------------------------------------------------------------------------


def test_a_chinese_edit_is_exactly_the_character_that_changed():
    old = "所有权是 Rust 最为与众不同的特性。这个函数返回一个整数，调用者拥有它。"
    edit, before, after = only_edit(old, old.replace("一个整数", "两个整数"))
    assert (edit.kind, before, after) == ("replace", "一", "两")
    assert edit.old_offset == old.encode().index("一个整数".encode())


def test_japanese_edits_are_exactly_the_characters_that_changed():
    old = "所有権はRustの最もユニークな機能であり、言語全体に深い影響を与えています。"
    edit, before, after = only_edit(old, old.replace("ユニーク", "独特"))
    assert (edit.kind, before, after) == ("replace", "ユニーク", "独特")
    inserted = old.replace("言語全体", "言語の全体")
    edit, before, after = only_edit(old, inserted)
    assert (edit.kind, before, after) == ("insert", "", "の")
    assert edit.new_offset == inserted.encode().index("の全体".encode())


def test_a_thai_edit_keeps_the_marks_with_their_consonants():
    old = "ฉันกินข้าวทุกวัน และดื่มน้ำมาก"
    edit, before, after = only_edit(old, old.replace("ข้าว", "ขนม"))
    assert edit.kind == "replace"
    assert before in "ข้าว" and after in "ขนม" and (before, after) != ("", "")
    for part in (before, after):
        part.encode().decode("utf-8")
        assert not part or part[0] not in "\u0e34\u0e49"  # no mark without its consonant


LATIN = "the cat sat on a mat near the old red door of our house the river".split()
CYRILLIC = "кот сидел на ковре возле старой красной двери нашего большого дома у тихой реки вон там".split()


def test_the_cleanup_is_the_same_in_latin_and_cyrillic():
    """Cyrillic letters are two bytes, Latin one: the cleanup counts words, so the same
    edits at the same word positions give the same edits in both."""
    for words in (LATIN, CYRILLIC):
        assert len(words) == 16
    changes = [(2, "X"), (4, "Y"), (5, "Z"), (11, "W")]  # a single equal word between 2 and 4

    def positions(words: list[str]) -> list[tuple[str, list[int], list[int]]]:
        new_words = list(words)
        for at, word in changes:
            new_words[at] = word
        old, new = " ".join(words).encode(), " ".join(new_words).encode()

        def indexes(text: bytes, offset: int, length: int) -> list[int]:
            if not length:
                return []
            return list(range(text[:offset].count(b" "), text[:offset + length].count(b" ") + 1))

        return [(e.kind, indexes(old, e.old_offset, e.old_length), indexes(new, e.new_offset, e.new_length))
                for e in diff(old, new).edits]

    latin = positions(LATIN)
    assert latin == positions(CYRILLIC)
    assert latin == [("replace", [2, 3, 4, 5], [2, 3, 4, 5]), ("replace", [11], [11])]


def test_the_cleanup_is_the_same_for_chinese_characters_and_words():
    """The same pattern in Chinese, where each character is a token."""
    old = "我们今天在河边的老房子里看见一只黑色的猫和它的朋友们"
    chars = list(old)
    for at, char in ((2, "明"), (4, "湖"), (5, "东"), (11, "屋")):
        chars[at] = char
    report = diff(old.encode(), "".join(chars).encode())
    assert [(e.kind, shown(old.encode(), e.old_offset, e.old_length).decode()) for e in report.edits] == \
        [("replace", "今天在河"), ("replace", "里")]


@settings(max_examples=100, deadline=None)
@given(old=st.text(max_size=400), new=st.text(max_size=400), glue=st.sampled_from(["", " ", "\n"]))
def test_edit_offsets_are_always_on_character_boundaries(old, new, glue):
    old_bytes = old.encode()
    new_bytes = (old[: len(old) // 2] + glue + new + glue + old[len(old) // 2:]).encode()
    for edit in diff(old_bytes, new_bytes).edits:
        shown(old_bytes, edit.old_offset, edit.old_length).decode("utf-8")
        shown(new_bytes, edit.new_offset, edit.new_length).decode("utf-8")
        for text, offset in ((old_bytes, edit.old_offset), (new_bytes, edit.new_offset)):
            assert offset == len(text) or not 0x80 <= text[offset] < 0xC0


# --- blocks -----------------------------------------------------------------------------------------

# A chapter of a Markdown book, one block a line as the normalisation writes it: in the old
# version the paragraph after the code keeps its source's line breaks, in the new one it is
# one line, and the listing and its output became includes (the shape of a real revision of
# the Rust book's chapter 11). The only "```" line of the old text that stands alone comes
# after the output; the chunk alignment, which counts chunks, pairs it with the new text's
# "```" before the paragraph.
FENCED_EN = ["For now, let us ignore the top two lines and focus on the function to see how it works.",
             "Note the test annotation before the fn line: this attribute indicates this is a test",
             "function, so the test runner knows to treat this function as a test. We could also have",
             "non-test functions in the tests module to help set up common scenarios or do operations."]
FENCED_JA = ["今のところ、上の二行は無視して、関数がどのように動くかに注目しましょう。",
             "関数の前にある注釈に注意してください。この属性は、これがテスト関数であることを示すので、",
             "テストランナーはこの関数をテストとして扱うことを知っています。テストモジュールには、",
             "よくある場面を準備したり共通の処理を行ったりする、テストではない関数を置くこともできます。"]


INCLUDE = "{{#rustdoc_include ../listings/ch11-writing-automated-tests/listing-11-01/src/lib.rs}}"


def fenced(lines: list[str], wrapped: bool) -> str:
    intro = "Let us create a new library project called adder that will add two numbers together.\n"
    after = "Cargo compiled and ran the test and printed the result of every test that it ran in the crate.\n"
    if wrapped:
        return (intro + "```rust\nfn it_works() {\nlet result = 2 + 2;\nassert_eq!(result, 4);\n}\n```\n"
                + "\n".join(lines)
                + "\n$ cargo test Compiling adder v0.1.0 (file:///projects/adder) Finished dev in 0.22 secs\n"
                + "running 1 test test tests::it_works ... ok test result: ok. 1 passed; 0 failed\n"
                + "```\n" + after)
    return (intro + "```rust\n" + INCLUDE + "\n```\n" + " ".join(lines) + "\n" + after)


@pytest.mark.parametrize("lines", [FENCED_EN, FENCED_JA], ids=["en", "ja"])
def test_a_paragraph_whose_line_breaks_alone_changed_is_no_edit_across_a_short_chunk(lines):
    """The paragraph is the same words in the same place: no edit touches it on either side
    (it was a `move` of the whole paragraph while each changed stretch of chunks was diffed
    alone), and what did change is the listing and the output."""
    old, new = fenced(lines, wrapped=True).encode(), fenced(lines, wrapped=False).encode()
    report = diff(old, new)
    old_start, new_start = old.index(lines[0].encode()), new.index(lines[0].encode())
    old_end = old.index(lines[-1].encode()) + len(lines[-1].encode())
    new_end = new_start + len(" ".join(lines).encode())
    for edit in report.edits:
        assert edit.kind != "move"
        assert edit.old_offset + edit.old_length <= old_start or edit.old_offset >= old_end, edit
        assert edit.new_offset + edit.new_length <= new_start or edit.new_offset >= new_end, edit
    assert [shown(new, e.new_offset, e.new_length) for e in report.edits if e.new_length] == \
        [INCLUDE.encode()]
    deleted = b" ".join(shown(old, e.old_offset, e.old_length) for e in report.edits)
    assert b"fn it_works()" in deleted and b"$ cargo test" in deleted and b"0 failed" in deleted


def test_the_word_diff_reads_only_around_the_changes(monkeypatch):
    """Two one-word edits 40 paragraphs apart stay two stretches: the unchanged text between
    them holds far more words than they do, so no word alignment could cross it, and it is
    not read as part of either."""
    import cdc.core.refine

    paragraphs = textgen.paragraphs(21, 60)
    new_paragraphs = list(paragraphs)
    for at in (10, 50):
        words = new_paragraphs[at].split()
        words[3] = "CHANGED"
        new_paragraphs[at] = " ".join(words)
    old, new = "\n".join(paragraphs).encode(), "\n".join(new_paragraphs).encode()
    read = []
    pair_words = cdc.core.refine.pair_words

    def reading(*arguments):  # the bytes each window's words span, on both sides
        windows = pair_words(*arguments)
        read.extend(words.ends[-1] - words.begins[0] for window in windows for words in window if words.ends)
        return windows

    monkeypatch.setattr(cdc.core.refine, "pair_words", reading)
    report = diff(old, new)
    assert [shown(new, e.new_offset, e.new_length) for e in report.edits] == [b"CHANGED", b"CHANGED"]
    assert sum(read) < (len(old) + len(new)) / 10


@pytest.mark.parametrize("old, new, line", [
    ("Variables are immutable by default; this is one of the many nudges Rust gives you:\n```\n"
     "This code does not compile yet, so read the error message that the compiler prints.\n",
     "Here we look at mutability in a little more detail, and why it matters\n```\n"
     "Errors from rustc exist to help find mistakes in programs.\n", "```"),
    ("変数は標準で不変になります。これは、Rustが提供する安全性のひとつです:\n```\n"
     "このコードはまだコンパイルできないので、エラーメッセージを読んでみましょう。\n",
     "ここで、可変性について少し詳しく見ていきます\n```\n"
     "コンパイラが出すエラーは、間違いを見つける手助けになります。\n", "```"),
], ids=["en", "ja"])
def test_an_unchanged_line_between_two_changed_ones_is_no_part_of_an_edit(old, new, line):
    """The cleanup takes a stray equal word into the change around it, but an unchanged
    block (here a code fence, one token) between two changed blocks stays unchanged."""
    old_bytes, new_bytes = old.encode(), new.encode()
    old_at, new_at = old_bytes.index(line.encode()), new_bytes.index(line.encode())
    report = diff(old_bytes, new_bytes)
    assert report.edits
    for edit in report.edits:
        assert not edit.old_offset <= old_at < edit.old_offset + edit.old_length, edit
        assert not edit.new_offset <= new_at < edit.new_offset + edit.new_length, edit


# --- moves ------------------------------------------------------------------------------------------


def moved(paragraphs: list[str], source: int, target: int) -> list[str]:
    result = [p for i, p in enumerate(paragraphs) if i != source]
    result.insert(target, paragraphs[source])
    return result


def test_a_moved_paragraph_is_one_move_with_both_offsets():
    paragraphs = textgen.paragraphs(7, 12)
    old = "\n".join(paragraphs).encode()
    new = "\n".join(moved(paragraphs, 3, 9)).encode()
    paragraph = paragraphs[3].encode()
    report = diff(old, new)
    assert report.edits == [Edit("move", old.index(paragraph), len(paragraph),
                                 new.index(paragraph), len(paragraph))]
    assert report.verdict == "minor" and report.unchanged_ratio == 1.0
    assert report.bytes_added == report.bytes_removed == 0


def test_a_moved_chinese_paragraph_is_one_move():
    paragraphs = ["第一章介绍了如何安装编译器以及如何编写第一个程序。",
                  "所有权是本书最重要的概念之一，请仔细阅读这一部分。",
                  "结构体让你可以把相关的值组合在一起并为它们命名。",
                  "枚举允许你通过列举可能的成员来定义一个类型。"]
    old = "\n".join(paragraphs).encode()
    new = "\n".join(moved(paragraphs, 1, 3)).encode()
    paragraph = paragraphs[1].encode()
    assert diff(old, new).edits == [Edit("move", old.index(paragraph), len(paragraph),
                                         new.index(paragraph), len(paragraph))]


def test_a_lightly_edited_moved_paragraph_is_a_move_and_the_edit_inside_it():
    paragraphs = textgen.paragraphs(8, 12)
    old = "\n".join(paragraphs).encode()
    words = paragraphs[3].split()
    words[10] = "REPLACED"
    new_paragraphs = moved(paragraphs, 3, 9)
    new_paragraphs[9] = " ".join(words)
    new = "\n".join(new_paragraphs).encode()
    report = diff(old, new)
    source, target = old.index(paragraphs[3].encode()), new.index(new_paragraphs[9].encode())
    move, inner = report.edits
    assert move == Edit("move", source, len(paragraphs[3]), target, len(new_paragraphs[9]))
    assert inner.kind == "replace"
    assert shown(old, inner.old_offset, inner.old_length) == paragraphs[3].split()[10].encode()
    assert shown(new, inner.new_offset, inner.new_length) == b"REPLACED"
    assert source <= inner.old_offset < source + len(paragraphs[3])
    assert target <= inner.new_offset < target + len(new_paragraphs[9])
    assert report.verdict == "minor"


def test_a_common_word_or_short_phrase_in_two_places_is_not_a_move():
    paragraphs = textgen.paragraphs(9, 8)
    old_words = " ".join(paragraphs).split()
    new_words = list(old_words)
    del new_words[40]  # "the" taken out here...
    new_words.insert(200, old_words[40])  # ...and put in there
    phrase = new_words[100:106]  # six words: under the minimum
    del new_words[100:106]
    new_words[300:300] = phrase
    report = diff(" ".join(old_words).encode(), " ".join(new_words).encode())
    assert report.edits and all(edit.kind != "move" for edit in report.edits)


def test_two_paragraphs_swapped_far_apart_are_moves():
    paragraphs = textgen.paragraphs(10, 16)
    swapped = list(paragraphs)
    swapped[2], swapped[12] = swapped[12], swapped[2]
    old, new = "\n".join(paragraphs).encode(), "\n".join(swapped).encode()
    report = diff(old, new)
    moves = [edit for edit in report.edits if edit.kind == "move"]
    assert moves and all(edit.kind == "move" for edit in report.edits)
    for edit in moves:
        assert shown(old, edit.old_offset, edit.old_length) == shown(new, edit.new_offset, edit.new_length)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), source=st.integers(0, 11), target=st.integers(0, 11),
       changed=st.lists(st.integers(0, 40), max_size=3))
def test_inside_a_move_its_edits_turn_the_old_text_into_the_new(seed, source, target, changed):
    paragraphs = textgen.paragraphs(seed, 12)
    words = paragraphs[source].split()
    for at in changed:
        words[at % len(words)] = "CHANGED"
    new_paragraphs = moved(paragraphs, source, target)
    new_paragraphs[target] = " ".join(words)
    old, new = "\n".join(paragraphs).encode(), "\n".join(new_paragraphs).encode()
    report = diff(old, new)
    for move in (edit for edit in report.edits if edit.kind == "move"):
        inside = [e for e in report.edits if e.kind != "move"
                  and move.old_offset <= e.old_offset <= move.old_offset + move.old_length
                  and move.new_offset <= e.new_offset <= move.new_offset + move.new_length]
        rebuilt = bytearray(shown(old, move.old_offset, move.old_length))
        for edit in sorted(inside, key=lambda e: e.old_offset, reverse=True):
            start = edit.old_offset - move.old_offset
            replacement = shown(new, edit.new_offset, edit.new_length)
            rebuilt[start:start + edit.old_length] = b" " + replacement + b" "
        assert rebuilt.split() == shown(new, move.new_offset, move.new_length).split()
    assert report.edits == sorted(report.edits, key=lambda e: (e.new_offset, e.kind != "move"))
