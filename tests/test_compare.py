"""Comparison: the seed's tests, measures, moves, boilerplate, verdicts and exact edits."""

from __future__ import annotations

import itertools
import re

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc import ChunkParams, Edit, Thresholds, chunk_content, compare
from cdc.core.refine import word_table
from tests import textgen


def diff(old: bytes, new: bytes, **kwargs):
    return compare(chunk_content(old), chunk_content(new), old_text=old, new_text=new, **kwargs)


def shown(text: bytes, offset: int, length: int) -> bytes:
    return text[offset:offset + length]


# --- the seed's tests --------------------------------------------------------------------------


def test_seed_insertion_literal_periodic_case():
    """The seed's first test as written: a 15-byte phrase repeated, 3,000 bytes.

    Periodic text under max_size has no boundary, so each version is one chunk and the
    chunk-level similarity is 0.0: the seed's `similarity > 0.9` cannot hold for any chunker
    with a 512-byte minimum. With the texts at hand, the word-level edits still find exactly
    the inserted sentence and call the change minor.
    """
    original = b"paragraph one. " * 200
    edited = b"paragraph one. " * 5 + b"INSERTED SENTENCE. " + b"paragraph one. " * 195
    chunk_report = compare(chunk_content(original), chunk_content(edited))
    assert len(chunk_content(original)) == len(chunk_content(edited)) == 1
    assert chunk_report.similarity == 0.0
    assert len(chunk_report.changed_regions) <= 2
    report = diff(original, edited)
    assert report.edits == [Edit("insert", 75, 0, 75, len(b"INSERTED SENTENCE."))]
    assert report.verdict == "minor"


def test_seed_insertion_intent_on_realistic_text(corpus_versions):
    """The first seed test's intent: one sentence into a real page leaves it similar."""
    original = max((v for versions in corpus_versions.values() for v in versions), key=len)
    position = original.index(b". ", len(original) // 2) + 2
    edited = original[:position] + b"INSERTED SENTENCE. " + original[position:]
    report = compare(chunk_content(original), chunk_content(edited))
    assert report.similarity > 0.9  # a fixed-size chunker would score about 0
    assert len(report.changed_regions) <= 2
    assert report.unchanged_ratio > 0.9


def test_seed_insertion_intent_on_generated_text():
    original = textgen.text(21, 60_000)
    position = original.index(b". ", 20_000) + 2
    edited = original[:position] + b"INSERTED SENTENCE. " + original[position:]
    report = diff(original, edited)
    assert report.similarity > 0.9
    assert len(report.changed_regions) <= 2
    assert report.edits == [Edit("insert", position, 0, position, len(b"INSERTED SENTENCE."))]


def test_seed_identical_content_is_unchanged():
    data = b"stable content " * 500
    assert compare(chunk_content(data), chunk_content(data)).changed is False


def test_seed_chunk_sizes_stay_within_bounds():
    chunks = chunk_content(b"x" * 100_000, ChunkParams(avg_size=2048, min_size=512, max_size=8192))
    assert all(512 <= c.length <= 8192 for c in chunks[:-1])


def test_seed_complete_rewrite_scores_low():
    a, b = b"alpha content " * 300, b"entirely different words " * 300
    assert compare(chunk_content(a), chunk_content(b)).similarity < 0.1


# --- measures -----------------------------------------------------------------------------------


@given(st.binary(max_size=20_000) | st.text(max_size=3_000).map(str.encode))
def test_a_version_compared_with_itself_reports_nothing(data):
    chunks = chunk_content(data)
    report = compare(chunks, chunks, old_text=data, new_text=data)
    assert not report.changed
    assert report.similarity == 1.0
    assert report.added == report.removed == report.moved == report.edits == []
    assert report.changed_regions == report.removed_regions == []
    assert report.alignment == [(i, i) for i in range(len(chunks))]
    assert report.unchanged_ratio == report.retained_ratio == 1.0
    assert report.verdict == "unchanged"


def test_two_empty_versions_are_unchanged():
    report = compare([], [], old_text=b"", new_text=b"")
    assert (report.changed, report.similarity, report.verdict) == (False, 1.0, "unchanged")


def test_a_page_that_appears_or_empties_is_a_different_page():
    text = textgen.text(2, 5_000)
    assert diff(b"", text).verdict == "different_page"
    gone = diff(text, b"")
    assert gone.verdict == "different_page"
    assert gone.retained_ratio == 0.0 and gone.bytes_removed == len(text)


def test_regions_and_ratios_locate_a_replaced_paragraph():
    paragraphs = textgen.paragraphs(4, 30)
    old = "\n".join(paragraphs).encode()
    new_paragraphs = list(paragraphs)
    new_paragraphs[15] = textgen.paragraphs(99, 1, sentences=10)[0]
    new = "\n".join(new_paragraphs).encode()
    report = diff(old, new)
    start = new.index(new_paragraphs[15].encode())
    end = start + len(new_paragraphs[15])
    assert report.changed_regions, "the new paragraph is in an added chunk"
    assert all(offset < end and offset + length > start for offset, length in report.changed_regions)
    assert report.verdict == "minor"
    assert 0.8 < report.unchanged_ratio < 1.0
    assert report.bytes_added <= len(new_paragraphs[15]) + 2


def test_a_moved_section_is_reported_as_moved_not_removed_and_added():
    sections = [textgen.text(seed, 9_000).decode() for seed in (31, 32, 33, 34)]
    old = "\n".join(sections).encode()
    new = "\n".join([sections[0], sections[2], sections[3], sections[1]]).encode()
    report = diff(old, new)
    assert report.changed and report.moved
    old_digests = {c.digest for c in chunk_content(old)}
    moved_text = sections[1].encode()
    for chunk in report.moved:
        assert chunk.digest in old_digests
        assert chunk not in report.added
        assert new[chunk.offset:chunk.end] in moved_text
    assert sum(c.length for c in report.moved) > len(moved_text) // 2
    # The moved text is not reported as words deleted and inserted.
    assert report.bytes_added < len(moved_text) // 2
    assert report.verdict == "minor"
    moved_indexes = {c.index for c in report.moved}
    assert moved_indexes <= {new_index for _, new_index in report.alignment}
    # The moved chunks are move edits too: text that left one place and reached another.
    moves = [edit for edit in report.edits if edit.kind == "move"]
    assert moves and sum(edit.new_length for edit in moves) > len(moved_text) // 2
    for edit in moves:
        assert shown(old, edit.old_offset, edit.old_length) == shown(new, edit.new_offset, edit.new_length)
        assert shown(new, edit.new_offset, edit.new_length) in moved_text


def test_ignored_digests_are_left_out_of_every_measure():
    boilerplate = textgen.text(40, 5_000)
    old = boilerplate + b"\n" + textgen.text(41, 4_000)
    new = boilerplate + b"\n" + textgen.text(42, 4_000)
    shared = {c.digest for c in chunk_content(old)} & {c.digest for c in chunk_content(new)}
    assert shared
    plain = diff(old, new)
    ignoring = diff(old, new, ignore=shared)
    assert plain.similarity > 0.0 and ignoring.similarity == 0.0
    assert ignoring.unchanged_ratio < plain.unchanged_ratio
    # The boilerplate's tail shares a chunk with the new text: that part counts as kept.
    start = len(boilerplate) + 1
    old_end, new_end = len(old.rstrip()), len(new.rstrip())
    assert ignoring.edits == [Edit("replace", start, old_end - start, start, new_end - start)]
    for chunk in ignoring.added + ignoring.removed + ignoring.moved:
        assert chunk.digest not in shared
    assert ignoring.alignment == []


def test_chunks_and_lists_of_the_same_chunks_compare_alike():
    """`compare` reads a `Chunks` by its columns and a list chunk by chunk: the two ways
    give the same report, with boilerplate left out or not, moves and repeats included."""
    paragraphs = [textgen.text(60 + i, 700) for i in range(8)]
    old = b"\n".join(paragraphs + paragraphs[:1])
    new = b"\n".join([paragraphs[5], *paragraphs[:5], textgen.text(70, 900), *paragraphs[6:]])
    old_chunks, new_chunks = chunk_content(old), chunk_content(new)
    ignored = {old_chunks[0].digest, new_chunks[-1].digest}
    for ignore in (frozenset(), ignored):
        for texts in ({}, {"old_text": old, "new_text": new}):
            columns = compare(old_chunks, new_chunks, ignore=ignore, **texts)
            listed = compare(list(old_chunks), list(new_chunks), ignore=ignore, **texts)
            assert columns == listed
            assert columns.moved or columns.edits


def test_verdict_thresholds_are_configurable():
    old = textgen.text(50, 20_000)
    new = old.replace(b"crawl", b"CRAWL", 3)
    assert diff(old, new).verdict == "minor"
    assert diff(old, new, thresholds=Thresholds(minor=1.0)).verdict == "rewrite"
    assert diff(old, new, thresholds=Thresholds(minor=1.0, different_page=1.0)).verdict == "different_page"
    with pytest.raises(ValueError, match="different_page"):
        Thresholds(minor=0.2, different_page=0.5)


def test_a_large_deletion_is_not_minor():
    old = textgen.text(60, 40_000)
    report = diff(old, old[:15_000])
    assert report.unchanged_ratio > 0.95
    assert report.retained_ratio < 0.5
    assert report.verdict == "rewrite"


# --- exact edits ------------------------------------------------------------------------------------


def test_a_price_change_in_a_50kb_page_is_exactly_that_word_replaced():
    page = textgen.text(70, 50_000)
    position = page.index(b" ", 31_000) + 1
    old = page[:position] + b"Now only $19.99 per month. " + page[position:]
    new = page[:position] + b"Now only $24.99 per month. " + page[position:]
    report = diff(old, new)
    at = position + len(b"Now only ")
    assert report.edits == [Edit("replace", at, 6, at, 6)]
    assert shown(old, at, 6) == b"$19.99" and shown(new, at, 6) == b"$24.99"
    assert report.verdict == "minor"
    assert report.unchanged_ratio == pytest.approx(1 - 6 / len(new))


def test_an_inserted_sentence_is_an_insertion_of_exactly_that_sentence():
    old = textgen.text(71, 50_000)
    position = old.index(b". ", 12_345) + 2
    sentence = b"Prices rise again at the river market this week."
    new = old[:position] + sentence + b" " + old[position:]
    report = diff(old, new)
    assert report.edits == [Edit("insert", position, 0, position, len(sentence))]


def test_a_deleted_sentence_is_a_deletion_of_exactly_that_sentence():
    new = textgen.text(72, 30_000)
    position = new.index(b". ", 20_000) + 2
    sentence = b"This sentence was removed from the page."
    old = new[:position] + sentence + b" " + new[position:]
    report = diff(old, new)
    assert report.edits == [Edit("delete", position, len(sentence), position, 0)]


def test_edits_inside_a_chunk_boundary_cover_whole_words():
    """A changed word that straddles a chunk boundary is still reported whole."""
    old = textgen.text(73, 30_000)
    chunks = chunk_content(old)
    boundary = chunks[3].offset
    start = old.rindex(b" ", 0, boundary) + 1
    end = old.index(b" ", boundary)
    new = old[:start] + b"REPLACEMENT" + old[end:]
    report = diff(old, new)
    assert report.edits == [Edit("replace", start, end - start, start, len(b"REPLACEMENT"))]


def test_unrelated_texts_are_one_replacement_not_a_scatter_of_common_words():
    old = textgen.text(80, 6_000)
    new = textgen.text(81, 6_000)
    report = diff(old, new)
    assert len(report.edits) <= 3
    assert report.verdict == "different_page"


def test_edits_are_empty_without_texts_and_texts_must_match_chunks():
    old, new = textgen.text(90, 5_000), textgen.text(91, 5_000)
    assert compare(chunk_content(old), chunk_content(new)).edits == []
    with pytest.raises(ValueError, match="both"):
        compare(chunk_content(old), chunk_content(new), old_text=old)
    with pytest.raises(ValueError, match="old_text"):
        compare(chunk_content(old), chunk_content(new), old_text=old[:-1], new_text=new)


# A token as the word scan sees one: a Han or kana character alone, else a run of non-space.
WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]|[^\s\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]+")
VOCAB = ["crawl", "page", "über", "naïve", "日本語", "価格", "🙂", "$19.99", "a", "ok.", "—"]


def words_outside(text: bytes, ranges: list[tuple[int, int]]) -> list[str]:
    kept = bytearray(text)
    for offset, length in ranges:
        kept[offset:offset + length] = b" " * length
    return WORD.findall(bytes(kept).decode())


@settings(max_examples=80, deadline=None)
@given(
    base=st.lists(st.sampled_from(VOCAB), min_size=0, max_size=1_500),
    changes=st.lists(st.tuples(st.integers(0, 1_500), st.integers(0, 4),
                               st.lists(st.sampled_from(VOCAB), max_size=5)), max_size=6),
    glue=st.sampled_from([" ", "\n", ""]),
)
def test_edits_account_for_every_changed_word_and_never_split_a_character(base, changes, glue):
    new_words = list(base)
    for at, removed, inserted in changes:
        at = min(at, len(new_words))
        new_words[at:at + removed] = inserted
    old = " ".join(base).encode() if glue != "" else "".join(base).encode()
    new = (glue or "").join(new_words).encode() if glue else "".join(new_words).encode()
    report = diff(old, new)
    for edit in report.edits:
        assert edit.kind in ("insert", "delete", "replace", "move")
        shown(old, edit.old_offset, edit.old_length).decode("utf-8")  # whole characters
        shown(new, edit.new_offset, edit.new_length).decode("utf-8")
        assert 0 <= edit.old_offset <= len(old) and 0 <= edit.new_offset <= len(new)
    # A move covers its text at both places, so the words outside every edit still agree.
    assert words_outside(old, [(e.old_offset, e.old_length) for e in report.edits]) == \
        words_outside(new, [(e.new_offset, e.new_length) for e in report.edits])


def test_corpus_pairs_have_consistent_edits(corpus_versions):
    """Every consecutive pair of the real corpus: edits inside the texts, whole characters."""
    pairs = 0
    for versions in corpus_versions.values():
        for old, new in itertools.pairwise(versions):
            report = diff(old, new)
            pairs += 1
            assert report.changed == (old != new) or not report.changed
            for edit in report.edits:
                shown(old, edit.old_offset, edit.old_length).decode("utf-8")
                shown(new, edit.new_offset, edit.new_length).decode("utf-8")
                assert edit.old_offset + edit.old_length <= len(old)
                assert edit.new_offset + edit.new_length <= len(new)
            assert words_outside(old, [(e.old_offset, e.old_length) for e in report.edits]) == \
                words_outside(new, [(e.new_offset, e.new_length) for e in report.edits])
    assert pairs > 3_000


def test_dropping_one_of_two_identical_sections_is_a_removal():
    block_a, block_b, block_c = (textgen.text(seed, 20_000) for seed in (101, 102, 103))
    old = block_a + b"\n" + block_b + b"\n" + block_a + b"\n" + block_c
    new = block_a + b"\n" + block_b + b"\n" + block_c
    chunks_only = compare(chunk_content(old), chunk_content(new))
    with_texts = diff(old, new)
    assert chunks_only.bytes_removed >= len(block_a) - 2 * 8192
    assert chunks_only.verdict == with_texts.verdict == "rewrite"


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=" \t\n\r\x0b\x0cab\u00e9\u2003\u0436", max_size=200).map(str.encode),
       cuts=st.lists(st.integers(0, 300), max_size=4))
def test_words_are_what_bytes_split_finds_with_their_xxh3(text, cuts):
    """Refine's compiled word scan, in scripts written with spaces: the words of each piece
    are `bytes.split()`'s, at their offsets, each known by the low 64 bits of its XXH3-128
    digest (a cut inside a character leaves its bytes a word of their own)."""
    bounds = sorted({0, len(text), *(cut for cut in cuts if cut < len(text))})
    pieces = [list(pair) for pair in itertools.pairwise(bounds)]
    expected = []
    for number, (start, end) in enumerate(pieces):
        position = start
        for word in text[start:end].split():
            position = text.index(word, position)
            digest = xxhash.xxh3_128_digest(word)
            expected.append([int.from_bytes(digest[8:], "big"), position, position + len(word), number])
            position += len(word)
    assert word_table(text, pieces) == expected


def test_chunks_that_differ_around_the_same_words_are_no_change():
    """A line break turned into a space re-cuts the chunks, and a banner left out as
    boilerplate re-cuts its neighbours: the words are the same, so the verdict is unchanged."""
    paragraphs = textgen.paragraphs(11, 6)
    old = "\n".join(paragraphs).encode()
    rewrapped = ("\n".join(paragraphs[:3]) + " " + "\n".join(paragraphs[3:])).encode()
    report = compare(chunk_content(old), chunk_content(rewrapped), old_text=old, new_text=rewrapped)
    assert report.changed and not report.edits and report.verdict == "unchanged"
    # Without the texts the chunks are all there is to go by.
    assert compare(chunk_content(old), chunk_content(rewrapped)).verdict != "unchanged"
