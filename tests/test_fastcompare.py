"""The compiled paths of `cdc.compare` answer as the general path and rapidfuzz do.

`cdc.core.fastcompare` runs a whole comparison in one kernel, aligning with `cdc.core.lcs`
instead of rapidfuzz; `cdc.core.refine` without moves runs its per-change loops compiled
(`cdc.core.wordchanges`). Each is held here to its reference: rapidfuzz's own pairs, and
the general path's report (taken by passing a list of the same chunks, which the compiled
path does not read), on generated edits and on the corpus. `tests/test_pins.py` pins them
all on every corpus pair.
"""

from __future__ import annotations

import copy
import itertools
import pickle
from array import array

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Indel, LCSseq

from cdc import chunk_content, compare
from cdc.core import compare as compare_module
from cdc.core import refine as refine_module
from cdc.core.lcs import changed_stretches, lcs_length, lcs_matches
from cdc.core.moves import find_moves, find_moves_here
from cdc.core.refine import stretches
from tests import textgen


def rapidfuzz_opcodes(first: np.ndarray, second: np.ndarray) -> list[tuple]:
    return Indel.opcodes(array("Q", first.tobytes()), array("Q", second.tobytes())).as_list()


def rapidfuzz_pairs(first: np.ndarray, second: np.ndarray) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in rapidfuzz_opcodes(first, second):
        if tag == "equal":
            pairs += zip(range(i1, i2), range(j1, j2))
    return pairs


def compiled_pairs(first: np.ndarray, second: np.ndarray) -> list[tuple[int, int]]:
    first_at, second_at = np.empty(len(first) + 1, np.int64), np.empty(len(second) + 1, np.int64)
    count = lcs_matches(first, second, first_at, second_at)
    return list(zip(first_at[:count].tolist(), second_at[:count].tolist()))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=150), st.lists(st.integers(0, 5), max_size=150))
def test_the_compiled_alignment_pairs_what_rapidfuzz_pairs(first, second):
    first, second = np.array(first, np.uint64), np.array(second, np.uint64)
    expected = rapidfuzz_pairs(first, second)
    assert compiled_pairs(first, second) == expected
    assert lcs_length(first, second) == len(expected) == LCSseq.similarity(
        array("Q", first.tobytes()), array("Q", second.tobytes()))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=150), st.lists(st.integers(0, 5), max_size=150))
def test_the_compiled_changed_stretches_are_rapidfuzz_opcodes_stretches(first, second):
    first, second = np.array(first, np.uint64), np.array(second, np.uint64)
    assert changed_stretches(first, second) == stretches(rapidfuzz_opcodes(first, second))


def test_an_alignment_whose_log_would_pass_its_bound_is_left_to_rapidfuzz():
    """Two words in random order, 25,000 a side: rows change blocks by the hundred, and
    the log would pass MAX_LOGGED changes; half as many fit, and pair as rapidfuzz does."""
    rng = np.random.default_rng(7)
    first, second = rng.integers(0, 2, 25_000).astype(np.uint64), rng.integers(0, 2, 25_000).astype(np.uint64)
    assert changed_stretches(first, second) is None
    first, second = first[:12_000], second[:12_000]
    assert changed_stretches(first, second) == stretches(rapidfuzz_opcodes(first, second))


@pytest.mark.parametrize("seed", range(6))
def test_long_alignments_with_few_distinct_items_pair_as_rapidfuzz_does(seed):
    rng = np.random.default_rng(seed)
    first = rng.integers(0, 3 + seed, 700 + 97 * seed).astype(np.uint64)  # many 32-bit blocks, many ties
    second = first.copy()
    for _ in range(8):
        at = int(rng.integers(0, len(second)))
        second = np.insert(np.delete(second, at), at // 2, rng.integers(0, 9, 20).astype(np.uint64))
    assert compiled_pairs(first, second) == rapidfuzz_pairs(first, second)


@pytest.mark.parametrize("seed", range(4))
def test_a_page_of_words_edited_here_and_there_pairs_as_rapidfuzz_does(seed):
    """Thousands of words of a page's vocabulary (a few very common, most rare), with small
    edits all through: rows that change a block or two, carries through all-ones blocks,
    long runs of rows logged and rewound."""
    rng = np.random.default_rng(100 + seed)
    first = (rng.zipf(1.3, 3000 + 500 * seed) % 1500).astype(np.uint64)
    second = first.copy()
    for _ in range(40):
        at = int(rng.integers(0, len(second)))
        kind = rng.integers(0, 3)
        if kind == 0:
            second = np.insert(second, at, (rng.zipf(1.3, 3) % 1500).astype(np.uint64))
        elif kind == 1:
            second = np.delete(second, range(at, min(at + 4, len(second))))
        else:
            second[at] = rng.integers(0, 1500)
    assert compiled_pairs(first, second) == rapidfuzz_pairs(first, second)
    assert compiled_pairs(second, first) == rapidfuzz_pairs(second, first)


@st.composite
def moved_tokens(draw) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The deleted and the inserted tokens of a few changes: stretches of text deleted in
    one change and inserted in another, in any order (moves that cross), edited lightly on
    the way or not, between stretches of their own; a vocabulary small or large."""
    vocabulary = draw(st.sampled_from([4, 40, 1000]))
    words = st.lists(st.integers(0, vocabulary), min_size=1, max_size=30)
    stretches = draw(st.lists(words, min_size=1, max_size=7))
    old, old_groups = [], []
    for number, stretch in enumerate(stretches):
        old += stretch
        old_groups += [number // 2] * len(stretch)  # two stretches a change
    new, new_groups = [], []
    for number, taken in enumerate(draw(st.permutations(range(len(stretches))))):
        stretch = list(stretches[taken])
        if draw(st.booleans()):  # edited on the way, or text of its own
            at = draw(st.integers(0, len(stretch)))
            stretch[at:at + draw(st.integers(0, 3))] = draw(st.lists(st.integers(0, vocabulary), max_size=4))
        if draw(st.integers(0, 4)) == 0:
            stretch = draw(words)
        new += stretch
        new_groups += [(number + draw(st.integers(0, 1))) // 2] * len(stretch)
    new_groups = sorted(new_groups)
    return (np.array(old, np.uint64), np.array(old_groups, np.int64), np.array(new, np.uint64),
            np.array(new_groups, np.int64))


@settings(max_examples=400, deadline=None)
@given(moved_tokens())
def test_the_compiled_moves_are_those_found_in_python(tokens):
    old, old_groups, new, new_groups = tokens
    assert find_moves(old, old_groups, new, new_groups) == find_moves_here(
        old.tolist(), old_groups.tolist(), new.tolist(), new_groups.tolist())


@pytest.mark.parametrize("gap", [7, 8, 9])
def test_a_moved_stretch_edited_in_the_middle_is_one_move_or_two_as_in_python(gap):
    """Anchors `gap` tokens apart: chained up to GAP_TOKENS, then near enough to be one."""
    before, after = range(100, 112), range(300, 312)
    old = [1, 2, 3, *before, *range(200, 200 + gap), *after, 4, 5]
    new = [6, 7, *before, *range(400, 400 + gap), *after, 8]
    old_groups = [0] * 3 + [1] * (len(old) - 3)
    new_groups = [0] * (len(new) - 1) + [1]
    found = find_moves(np.array(old, np.uint64), np.array(old_groups), np.array(new, np.uint64),
                       np.array(new_groups))
    assert found == find_moves_here(old, old_groups, new, new_groups)
    assert len(found) == (1 if gap <= 8 else 2)


def general(old: bytes, new: bytes):
    """The report of the general path: the same chunks as a list, which it alone reads."""
    return compare(list(chunk_content(old)), list(chunk_content(new)), old_text=old, new_text=new)


def same_reports(old: bytes, new: bytes) -> None:
    compiled = compare(chunk_content(old), chunk_content(new), old_text=old, new_text=new)
    reference = general(old, new)
    assert compiled == reference
    assert repr(compiled) == repr(reference)  # the floats bit for bit


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.tuples(st.floats(0, 1), st.integers(0, 3), st.binary(max_size=60)),
                                        max_size=6))
def test_the_compiled_comparison_reports_as_the_general_path(seed, changes):
    old = textgen.text(seed, 6_000)
    new = bytearray(old)
    for where, kind, piece in changes:
        at = int(where * len(new))
        if kind == 0:
            new[at:at] = piece
        elif kind == 1:
            del new[at:at + len(piece)]
        elif kind == 2:
            new[at:at + len(piece)] = piece
        else:  # a paragraph moved
            end = new.find(b"\n\n", at)
            block = bytes(new[at:end if end > 0 else at + 300])
            del new[at:at + len(block)]
            new[len(new) // 3:len(new) // 3] = block
    same_reports(old, bytes(new))


def test_the_refinement_without_moves_edits_as_the_python_rules(corpus_versions, monkeypatch):
    pairs = [(old, new) for versions in list(corpus_versions.values())[:40]
             for old, new in itertools.pairwise(versions) if old != new]
    assert pairs
    found = [general(old, new) for old, new in pairs]
    monkeypatch.setattr(refine_module, "_edits_without_moves", lambda *args: None)
    assert [general(old, new) for old, new in pairs] == found


def test_two_chunks_lists_and_their_texts_take_the_compiled_path(corpus_versions):
    versions = next(v for v in corpus_versions.values() if len(v) > 1 and v[0] != v[1])
    old, new = versions[0], versions[1]
    compiled = compare_module._compare_compiled(chunk_content(old), chunk_content(new), old, new,
                                                compare_module.DEFAULT_THRESHOLDS)
    assert isinstance(compiled, compare_module.ChangeReport)
    assert compiled == general(old, new)


def test_a_compiled_report_reads_its_chunk_lists_when_asked_and_pickles_whole(corpus_versions):
    versions = next(v for v in corpus_versions.values() if len(v) > 1 and v[0] != v[1])
    old, new = versions[0], versions[1]
    reference = general(old, new)
    compiled = compare(chunk_content(old), chunk_content(new), old_text=old, new_text=new)
    assert pickle.loads(pickle.dumps(compiled)) == reference  # before its lists are read
    assert copy.copy(compiled) == reference
    assert (compiled.alignment, compiled.added, compiled.removed) == (
        reference.alignment, reference.added, reference.removed)
    assert pickle.loads(pickle.dumps(compiled)) == reference  # after
    with pytest.raises(AttributeError):
        compiled.no_such_field  # noqa: B018
