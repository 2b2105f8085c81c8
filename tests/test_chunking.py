"""Chunking: parameters, bad input, tiling, golden cut points, blocks, streaming, batches, locality."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
import tracemalloc
from collections.abc import Sequence

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc import Chunk, Chunker, ChunkParams, Chunks, chunk_batch, chunk_content, chunk_many, compare
from cdc.core.chunking import _PARALLEL_MIN_BYTES, _capacity
from tests import textgen

SMALL = ChunkParams(avg_size=256, min_size=64, max_size=1024)  # many chunks from short inputs
PARAMS = st.sampled_from([ChunkParams(), SMALL, ChunkParams(avg_size=128, min_size=64, max_size=128)])
# Block-structured input: lines of many lengths, short and long, some empty.
BLOCKY = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 25)), max_size=120).map(textgen.lines)


def cut_points(chunks: list[Chunk]) -> list[tuple[int, int, str]]:
    return [(c.offset, c.length, c.hex) for c in chunks]


def assert_tiles(data: bytes, chunks: list[Chunk], params: ChunkParams) -> None:
    """Chunks cover the input exactly, in order, none over max_size, each but the last at
    least min_size or ending at a block end (a newline); no more than `_capacity` of them."""
    assert [c.index for c in chunks] == list(range(len(chunks)))
    position = 0
    for chunk in chunks:
        assert chunk.offset == position
        assert chunk.digest == xxhash.xxh3_128_digest(data[chunk.offset:chunk.end])
        position = chunk.end
    assert position == len(data)
    assert all(0 < c.length <= params.max_size for c in chunks)
    assert all(c.length >= params.min_size or data[c.end - 1] == 0x0A for c in chunks[:-1])
    assert len(chunks) <= _capacity(len(data))


def blocks_alone(data: bytes, chunks: list[Chunk]) -> None:
    """Every block with text ends a chunk at its newline, and starts one unless empty lines
    come before it (they go with it)."""
    starts, ends = {c.offset for c in chunks}, {c.end for c in chunks}
    position, after_text = 0, True
    for line in data.split(b"\n"):
        end = position + len(line) + 1
        if line:
            assert not after_text or position in starts
            assert min(end, len(data)) in ends
        after_text = bool(line)
        position = end


# --- parameters and bad input ---------------------------------------------------------------


def test_defaults_are_the_seeds():
    assert (ChunkParams().avg_size, ChunkParams().min_size, ChunkParams().max_size) == (2048, 512, 8192)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"avg_size": 1000}, "1000"),
        ({"min_size": 10, "avg_size": 64, "max_size": 128}, "10"),
        ({"min_size": 4096}, "4096"),
        ({"max_size": 1024}, "1024"),
        ({"avg_size": "2048"}, "'2048'"),
        ({"max_size": 1 << 31}, str(1 << 31)),
    ],
)
def test_invalid_params_raise_value_error_naming_the_value(kwargs, named):
    with pytest.raises(ValueError, match=named):
        ChunkParams(**kwargs)


def test_params_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ChunkParams().avg_size = 4096


@pytest.mark.parametrize("bad", ["some text", 42, None, [1, 2, 3], np.zeros(4, np.uint8)])
def test_data_that_is_not_bytes_like_is_a_type_error_naming_the_type(bad):
    name = type(bad).__name__
    with pytest.raises(TypeError, match=name):
        chunk_content(bad)
    with pytest.raises(TypeError, match=name):
        chunk_many([b"fine", bad])
    with pytest.raises(TypeError, match=name):
        Chunker().feed(bad)


def test_empty_input_gives_no_chunks():
    assert chunk_content(b"") == []
    assert chunk_many([b"", b""]) == [[], []]
    assert chunk_many([]) == []
    chunker = Chunker()
    assert chunker.feed(b"") == []
    assert chunker.finish() == []


def test_bytearray_and_memoryview_chunk_like_bytes():
    data = textgen.text(7, 20_000)
    expected = chunk_content(data)
    assert chunk_content(bytearray(data)) == expected
    assert chunk_content(memoryview(data)) == expected
    assert chunk_content(memoryview(data)[::1]) == expected
    shifted = memoryview(b"xx" + data)[2:]
    assert chunk_content(shifted) == expected
    assert chunk_many([bytearray(data), memoryview(data), data]) == [expected] * 3


def test_a_finished_chunker_refuses_more_input():
    chunker = Chunker()
    chunker.finish()
    with pytest.raises(ValueError, match="finished"):
        chunker.feed(b"more")


def test_chunk_is_an_immutable_record_with_hex():
    chunk = chunk_content(b"hello world")[0]
    assert chunk == Chunk(0, 0, 11, xxhash.xxh3_128_digest(b"hello world"))
    assert chunk.hex == xxhash.xxh3_128_hexdigest(b"hello world")
    assert len(chunk.digest) == 16
    with pytest.raises(AttributeError):
        chunk.offset = 3


def test_chunks_are_an_immutable_sequence_of_chunk_tuples():
    """What chunk_content and chunk_many return: a Sequence[Chunk] held as arrays, that
    reads, slices and compares as the list of its chunks would."""
    data = textgen.text(4, 20_000)
    chunks = chunk_content(data)
    as_list = list(chunks)
    assert isinstance(chunks, Chunks) and isinstance(chunks, Sequence) and len(as_list) > 10
    assert all(type(chunk) is Chunk for chunk in as_list)
    assert chunks == as_list and as_list == chunks and chunks != as_list[:-1]
    assert chunks == chunk_many([data])[0] == chunk_batch([data]).chunks_of(0)
    assert len(chunks) == len(as_list) and chunks[0] == as_list[0] and chunks[-2] == as_list[-2]
    assert chunks[3:7] == as_list[3:7] and chunks[::-3] == as_list[::-3] and chunks[7:3] == []
    assert chunks.index(as_list[5]) == 5 and as_list[5] in chunks
    assert list(reversed(chunks)) == as_list[::-1]
    with pytest.raises(IndexError):
        chunks[len(as_list)]
    assert chunks.offsets.tolist() == [c.offset for c in as_list]
    assert chunks.lengths.tolist() == [c.length for c in as_list]
    assert [row.tobytes() for row in chunks.digests] == [c.digest for c in as_list]
    for column in (chunks.offsets, chunks.lengths, chunks.digests):
        with pytest.raises(ValueError, match="read-only"):
            column[0] = 0
    with pytest.raises(TypeError):
        chunks[0] = as_list[1]
    with pytest.raises(TypeError):
        hash(chunks)  # equal to a list, so unhashable as a list is
    assert pickle.loads(pickle.dumps(chunks)) == chunks
    assert repr(chunk_content(b"hi")) == f"Chunks([{chunk_content(b'hi')[0]!r}])"


# --- golden cut points: changing any of these is a CHANGELOG entry ---------------------------

GOLDEN_TEXT = [  # paragraphs of 200-700 bytes: one chunk each
    (0, 375, "da78b55b2c2b9a17e45d35120fc2da1e"),
    (375, 406, "9163427cce524e328136c866b2660f19"),
    (781, 448, "1e8673c687d53ef29242300f6247d71c"),
    (1229, 523, "e41d04d614354dd1dd678d789bf8476d"),
    (1752, 436, "127395e5ff255f543f30ead0e3664e30"),
    (2188, 356, "6fdebf13c947be3cd19e71a5e28c5daf"),
    (2544, 437, "ab9765b9dfe7d17b88fbb49eafdca634"),
    (2981, 313, "9645811caf981a0111a323f9ea8a96f6"),
    (3294, 412, "19f6d5e51c38e6f5a7d04966c8307f6e"),
    (3706, 433, "3317c3f5be8d51338494a07cb5f184aa"),
    (4139, 381, "92af493ff11350c53918915bb82d85d0"),
    (4520, 335, "fb6e729ba83a165a766cc87a6a1eafae"),
    (4855, 540, "af569b1ec2147b1dc7acc1832f2bff07"),
    (5395, 417, "a04989bb5001b8cf3b31b545b0a5a0d1"),
    (5812, 535, "703248d72422734bcbd0f295617711c4"),
    (6347, 480, "ac30aa27e0ffcc1b7031092d0dedff54"),
    (6827, 497, "693ebf0d7f7450700608f5249e2eaa05"),
    (7324, 482, "1581644aab2878958812291414c93060"),
    (7806, 194, "752eb70a78c24f7b27f0f6d55d081ddd"),
]


def test_golden_cut_points_of_text():
    assert cut_points(chunk_content(textgen.text(1, 8_000))) == GOLDEN_TEXT


GOLDEN_PAGE = [  # title, menu lines, separators, banner, 2 paragraphs, code lines, footer: a chunk a line
    (0, 17, "3e8c487bbe153a236387af5d3e9693ba"),  # Spring catalogue
    (17, 7, "4a62bbb75dfe1e974cc1a0c58e1fb987"),  # Home 0
    (24, 11, "f7e40a9a33410cd392963f5104c47b28"),  # Products 1
    (35, 9, "e773bdcc9e72e67bfa29c4f81e58faee"),  # Offers 2
    (44, 8, "5e39cf553bf7cc7603d2387f1cc404b8"),  # About 3
    (52, 10, "b3524ea4cb78a96b627005f5a77d773f"),  # Contact 4
    (62, 7, "6c1664144f99ad7acadb411daa15ff91"),  # Blog 5
    (69, 2, "c3348050157b0ace3acc7a0c3b723b04"),  # |
    (71, 3, "54c5f3078ed532852e5ad694e774ee4f"),  # »
    (74, 228, "711e35fcfcab05cb6219635c665274e5"),  # the banner
    (302, 113, "c14a3bf334530b8e71b5fadb73163507"),
    (415, 77, "0a30bbb93d2bedd165cc0b3af1ce4627"),
    (492, 10, "f753ff5ff2434c8d051d71782328523a"),  # ```python
    (502, 6, "d51773c6cf5f1226b35fa3e28d5a0c30"),  # if x:
    (508, 2, "27f49b533d0832bf5b0707bdf39762a4"),  # {
    (510, 2, "c98f0308f7000a35101a5da11ef7c7d1"),  # }
    (512, 2, "c98f0308f7000a35101a5da11ef7c7d1"),  # }
    (514, 4, "9d32853afcd37bd9da8fc6cac69c328c"),  # ```
    (518, 34, "6ede2992f947cd00f20f17a217514729"),  # the footer
]


def test_golden_cut_points_of_a_page_of_blocks():
    page = (b"Spring catalogue\n" + b"".join(MENU.splitlines(keepends=True)[:6]) + b"|\n\xc2\xbb\n"
            + BANNER + paragraphs(7, 2) + b"```python\nif x:\n{\n}\n}\n```\n"
            + b"Copyright 2026 Example Shops Ltd.\n")
    assert cut_points(chunk_content(page)) == GOLDEN_PAGE


def test_golden_cut_points_of_uniform_bytes():
    """No boundary in a run of one byte: every chunk is max_size, the rest is the tail."""
    chunks = chunk_content(b"x" * 100_000)
    assert [c.length for c in chunks] == [8192] * 12 + [1696]
    assert chunks[0].hex == xxhash.xxh3_128_hexdigest(b"x" * 8192)


def test_golden_cut_points_of_a_short_document():
    assert cut_points(chunk_content(b"short")) == [(0, 5, xxhash.xxh3_128_hexdigest(b"short"))]


# --- blocks ---------------------------------------------------------------------------------

MENU = b"".join(f"{name} {i}\n".encode() for i, name in enumerate(
    "Home Products Offers About Contact Blog Careers Press Investors Help Sitemap Privacy Terms Cookies "
    "Jobs News Events Partners Support Docs Status Community Forum Store Gifts Deals Returns Shipping "
    "Legal Team".split()))
BANNER = (b"Our shops close early on Friday 24 May for the staff party; orders placed online after noon "
          b"ship on Monday. Thank you for your patience, and see you at the summer sale, which opens on "
          b"the first of June in every shop and online.\n")


def paragraphs(seed: int, count: int) -> bytes:
    return "\n".join(textgen.paragraphs(seed, count, sentences=2)).encode() + b"\n"


def pieces(data: bytes, chunks: list[Chunk], lo: int, hi: int) -> list[bytes]:
    return [data[c.offset:c.end] for c in chunks if lo <= c.offset and c.end <= hi]


def test_a_long_block_is_a_chunk_of_its_own_whatever_surrounds_it():
    """A banner paragraph (~240 bytes) and a long navigation line: each one chunk on every page."""
    nav_line = b"Home | Products | Offers | About us | Contact | Blog | Careers | Help\n"
    for seed in range(30):
        before = textgen.text(seed, 20 + 53 * seed) + b"\n"  # ends in a block of any length
        data = before + nav_line + BANNER + paragraphs(seed + 100, 1 + seed % 4) + nav_line
        chunks = chunk_content(data)
        assert pieces(data, chunks, 0, len(data)).count(BANNER) == 1
        assert pieces(data, chunks, 0, len(data)).count(nav_line) == 2
        blocks_alone(data, chunks)
    assert len(BANNER) == 228


def test_a_block_ends_a_chunk_below_min_size():
    data = paragraphs(3, 5)
    chunks = chunk_content(data)
    assert [c.end for c in chunks] == [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    assert max(c.length for c in chunks) < ChunkParams().min_size


def test_a_menu_chunks_line_by_line_whatever_comes_before():
    """A menu of thirty short lines: a chunk a line on every page, after a long block or after
    a page's own short lines, so a site's navigation is found line by line."""
    menus = set()
    for seed in range(20):
        before = paragraphs(seed, 1 + seed % 3)
        if seed % 2:
            before += f"Posted on {seed} May\nBy staff\n|\n".encode()
        data = before + MENU + paragraphs(seed + 50, 2)
        menus.add(tuple(pieces(data, chunk_content(data), len(before), len(before) + len(MENU))))
    assert menus == {tuple(MENU.splitlines(keepends=True))}


def test_separators_are_chunks_and_empty_lines_go_with_the_next_block():
    data = b"Python docs\n|\n\xc2\xbb\n\n\nLibrary reference\n}\n"
    assert pieces(data, chunk_content(data), 0, len(data)) == [
        b"Python docs\n", b"|\n", b"\xc2\xbb\n", b"\n\nLibrary reference\n", b"}\n"]


@pytest.mark.parametrize(("data", "chunks"), [
    (b"x" * 1_000_000, 123),  # one block, no newline, no Gear boundary: max_size cuts
    (b"a\n" * 100_000, 100_000),  # a chunk a line: within the bound, half the bytes
    (b"\n" * 100_000, 13),  # only newlines: empty lines, with no block after them: max_size cuts
    (textgen.text(8, 1_000_000).replace(b"\n", b" "), 382),  # a 1 MB paragraph: Gear cuts
], ids=["1 MB of one byte", "100,000 one-character lines", "only newlines", "a 1 MB paragraph"])
def test_pathological_input_stays_within_bounds(data, chunks):
    """Sizes, not timings: a chunk count proportional to the input, every chunk within bounds,
    and twice the input makes twice the chunks (linear work: each chunk's end is found by one
    forward scan from its start)."""
    result = chunk_content(data)
    assert len(result) == chunks
    assert_tiles(data, result, ChunkParams())
    assert abs(len(chunk_content(data * 2)) - 2 * chunks) <= 2
    streamed = Chunker()
    assert [c for lo in range(0, len(data), 65_536) for c in streamed.feed(data[lo:lo + 65_536])] \
        + streamed.finish() == result


def test_many_short_lines_are_a_chunk_each_within_capacity():
    """100,000 lines of 12 bytes: a chunk each, under the bound `_capacity` promises."""
    data = b"".join(f"line {i:07d}\n".encode() for i in range(100_000))
    chunks = chunk_content(data)
    assert_tiles(data, chunks, ChunkParams())
    assert len(chunks) == 100_000
    separators = b"|\n" * 50_000  # the most chunks per byte the rule allows
    assert len(chunk_content(separators)) == 50_000 <= _capacity(len(separators))


# --- properties ----------------------------------------------------------------------------


@given(data=st.binary(max_size=30_000), params=PARAMS)
def test_chunks_tile_the_input_within_bounds(data, params):
    assert_tiles(data, chunk_content(data, params), params)


@given(text=st.text(max_size=5_000), params=PARAMS)
def test_text_tiles_within_bounds(text, params):
    data = text.encode("utf-8", "surrogatepass")
    assert_tiles(data, chunk_content(data, params), params)


@given(data=BLOCKY, params=PARAMS)
def test_blocks_tile_within_bounds_and_long_blocks_stand_alone(data, params):
    chunks = chunk_content(data, params)
    assert_tiles(data, chunks, params)
    if params.max_size > 200:  # every block fits in a chunk
        blocks_alone(data, chunks)


@given(data=st.binary(max_size=20_000) | BLOCKY, cuts=st.lists(st.integers(0, 20_000), max_size=12),
       params=PARAMS)
def test_streaming_equals_one_shot_however_the_input_is_split(data, cuts, params):
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    chunker = Chunker(params)
    streamed = []
    for lo, hi in itertools.pairwise(bounds):
        streamed += chunker.feed(data[lo:hi])
    streamed += chunker.finish()
    assert streamed == chunk_content(data, params)


def test_streaming_byte_by_byte_equals_one_shot():
    data = textgen.text(3, 6_000)
    chunker = Chunker(SMALL)
    streamed = []
    for i in range(len(data)):
        streamed += chunker.feed(data[i:i + 1])
    assert streamed + chunker.finish() == chunk_content(data, SMALL)


@given(docs=st.lists(st.binary(max_size=5_000) | BLOCKY, max_size=20), params=PARAMS)
def test_chunk_many_equals_chunk_content(docs, params):
    expected = [chunk_content(doc, params) for doc in docs]
    assert chunk_many(docs, params) == expected
    assert chunk_many(docs, params, threads=1) == expected


def test_chunk_many_on_threads_equals_chunk_content():
    """Large enough that the work is split over threads."""
    docs = [textgen.text(seed, 4_000 + 997 * seed) for seed in range(120)]
    expected = [chunk_content(doc) for doc in docs]
    for threads in (2, 3, 8):
        assert chunk_many(docs, threads=threads) == expected


def test_documents_with_more_chunks_than_a_batch_reserves_are_chunked_alone():
    """A batch first makes room for a chunk per 32 bytes; pages of one-character lines have
    one per 2. In every position among ordinary pages, on one thread or several, they come
    out whole (the room grows)."""
    ordinary = [textgen.text(seed, 40_000) for seed in range(8)]
    dense = [b"|\n" * (20_000 + seed) for seed in range(3)]
    docs = [*ordinary[:3], dense[0], *ordinary[3:6], *dense[1:], *ordinary[6:]]
    expected = [chunk_content(doc) for doc in docs]
    assert sum(map(len, docs)) > _PARALLEL_MIN_BYTES
    for threads in (1, 2):
        assert chunk_many(docs, threads=threads) == expected
        batch = chunk_batch(docs, threads=threads)
        assert [batch.chunks_of(i) for i in range(len(docs))] == expected


def test_chunk_batch_holds_the_same_chunks_as_arrays():
    docs = [textgen.text(seed, 3_000 * seed) for seed in range(12)]
    batch = chunk_batch(docs)
    for i, doc in enumerate(docs):
        expected = chunk_content(doc)
        assert batch.chunks_of(i) == expected
        lo, hi = batch.starts[i], batch.starts[i] + batch.counts[i]
        assert batch.offsets[lo:hi].tolist() == [c.offset for c in expected]
        assert batch.lengths[lo:hi].tolist() == [c.length for c in expected]
        assert [bytes(row) for row in batch.digests[lo:hi]] == [c.digest for c in expected]


@settings(max_examples=60)
@given(position=st.integers(0, 60_000), inserted=st.binary(min_size=1, max_size=300))
def test_an_insertion_changes_only_the_chunks_around_it(position, inserted):
    params = ChunkParams()
    original = textgen.text(11, 60_000)
    edited = original[:position] + inserted + original[position:]
    report = compare(chunk_content(original, params), chunk_content(edited, params))
    # Before the insertion nothing moves; after it the cut points fall back into step within
    # a few chunks (each step out of phase has probability about min/avg of repeating).
    window_new = (position - params.max_size, position + len(inserted) + 10 * params.max_size)
    window_old = (position - params.max_size, position + 10 * params.max_size)
    for chunk in report.added:
        assert window_new[0] <= chunk.offset and chunk.end <= window_new[1]
    for chunk in report.removed:
        assert window_old[0] <= chunk.offset and chunk.end <= window_old[1]
    assert report.unchanged_ratio > 0.5


def test_a_large_input_streams_in_memory_bounded_by_max_size():
    """100 MB through Chunker, holding at most a few max_size blocks at a time."""
    params = ChunkParams()
    rng = np.random.default_rng(5)
    block = 1 << 20
    tracemalloc.start()
    try:
        chunker = Chunker(params)
        total = 0
        for _ in range(100):
            data = rng.integers(0, 256, block, dtype=np.uint8).tobytes()
            # Fed in 64 KB pieces: random bytes hold a newline every 256 bytes or so, so a piece
            # completes ~250 chunks, whose tuples count below; a 1 MB piece would return 4,000.
            for lo in range(0, block, 1 << 16):
                piece = data[lo:lo + (1 << 16)]
                before, _ = tracemalloc.get_traced_memory()
                tracemalloc.reset_peak()
                for chunk in chunker.feed(piece):
                    total += chunk.length
                _, peak = tracemalloc.get_traced_memory()
                # What the chunker holds on top of the piece it was given, chunk tuples included.
                assert peak - before < 4 * params.max_size + 400_000
                del piece
            del data
        total += sum(chunk.length for chunk in chunker.finish())
    finally:
        tracemalloc.stop()
    assert total == 100 * block


def test_chunks_from_lengths_are_columns_equal_to_the_chunks_they_describe():
    """A stored chunk list becomes a `Chunks` (the columns compare reads without a `Chunk`
    per chunk), equal to the chunks it was stored from, from a digest list or one blob."""
    from cdc.core.chunks import Chunks, chunks_from_lengths, stored_columns

    chunks = chunk_content(b"The quick brown fox jumps over the lazy dog. " * 400)
    digests, lengths = stored_columns(chunks)
    for stored in (digests, [digests[at:at + 16] for at in range(0, len(digests), 16)]):
        rebuilt = chunks_from_lengths(stored, lengths)
        assert isinstance(rebuilt, Chunks)
        assert list(rebuilt) == list(chunks)
    assert list(chunks_from_lengths(b"", [])) == []
