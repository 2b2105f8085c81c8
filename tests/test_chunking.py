"""Chunking: parameters, bad input, tiling, golden cut points, streaming, batches, locality."""

from __future__ import annotations

import dataclasses
import itertools
import tracemalloc

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc import Chunk, Chunker, ChunkParams, chunk_batch, chunk_content, chunk_many, compare
from tests import textgen

SMALL = ChunkParams(avg_size=256, min_size=64, max_size=1024)  # many chunks from short inputs
PARAMS = st.sampled_from([ChunkParams(), SMALL, ChunkParams(avg_size=128, min_size=64, max_size=128)])


def cut_points(chunks: list[Chunk]) -> list[tuple[int, int, str]]:
    return [(c.offset, c.length, c.hex) for c in chunks]


def assert_tiles(data: bytes, chunks: list[Chunk], params: ChunkParams) -> None:
    """Chunks cover the input exactly, in order, each but the last within the bounds."""
    assert [c.index for c in chunks] == list(range(len(chunks)))
    position = 0
    for chunk in chunks:
        assert chunk.offset == position
        assert chunk.digest == xxhash.xxh3_128_digest(data[chunk.offset:chunk.end])
        position = chunk.end
    assert position == len(data)
    assert all(params.min_size <= c.length <= params.max_size for c in chunks[:-1])
    if chunks:
        assert 0 < chunks[-1].length <= params.max_size


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


# --- golden cut points: changing any of these is a CHANGELOG entry ---------------------------

GOLDEN_TEXT = [
    (0, 2074, "f98ea6967b695a606dd3ea3e910d4a7d"),
    (2074, 810, "9634b35ab798d23e4a6df9f617fb0a52"),
    (2884, 8192, "4fdf734fc78ad7cc1cb3d07bcba9e8eb"),
    (11076, 1614, "ac1b75c2c58281a337a77a7fe41f3f89"),
    (12690, 3332, "376922c1dbfda5aecf39d355ca52bca6"),
    (16022, 1482, "5ad6754a238e73ffb2d9b342eaf45a5a"),
    (17504, 539, "1ef18bf66bd87f42d2874434928f9c2f"),
    (18043, 3561, "42ab2970138d2ef7b22fbac4b2922034"),
    (21604, 513, "2d6c11e3dc5a1d8a29f42ab77d2a8284"),
    (22117, 1928, "fc1076a3ccdd9854720fa8cfc4611a7f"),
    (24045, 1841, "3b1d3cd9d5b9690476a33b4aae9c53bf"),
    (25886, 2726, "e5f12f5e2b27808f53146b970ca1de1d"),
    (28612, 1388, "7c2eacf345322a4e8696a4db30685b66"),
]


def test_golden_cut_points_of_text():
    assert cut_points(chunk_content(textgen.text(1, 30_000))) == GOLDEN_TEXT


def test_golden_cut_points_of_uniform_bytes():
    """No boundary in a run of one byte: every chunk is max_size, the rest is the tail."""
    chunks = chunk_content(b"x" * 100_000)
    assert [c.length for c in chunks] == [8192] * 12 + [1696]
    assert chunks[0].hex == xxhash.xxh3_128_hexdigest(b"x" * 8192)


def test_golden_cut_points_of_a_short_document():
    assert cut_points(chunk_content(b"short")) == [(0, 5, xxhash.xxh3_128_hexdigest(b"short"))]


# --- properties ----------------------------------------------------------------------------


@given(data=st.binary(max_size=30_000), params=PARAMS)
def test_chunks_tile_the_input_within_bounds(data, params):
    assert_tiles(data, chunk_content(data, params), params)


@given(text=st.text(max_size=5_000), params=PARAMS)
def test_text_tiles_within_bounds(text, params):
    data = text.encode("utf-8", "surrogatepass")
    assert_tiles(data, chunk_content(data, params), params)


@given(data=st.binary(max_size=20_000), cuts=st.lists(st.integers(0, 20_000), max_size=12), params=PARAMS)
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


@given(docs=st.lists(st.binary(max_size=5_000), max_size=20), params=PARAMS)
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
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            for chunk in chunker.feed(data):
                total += chunk.length
            _, peak = tracemalloc.get_traced_memory()
            # What the chunker holds on top of the block it was given, chunk tuples included.
            assert peak - before < 4 * params.max_size + 400_000
            del data
        total += sum(chunk.length for chunk in chunker.finish())
    finally:
        tracemalloc.stop()
    assert total == 100 * block
