"""The compiled kernels cut exactly where the same source cuts when run as plain Python."""

from __future__ import annotations

import base64
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc import Chunker, ChunkParams, chunk_content
from cdc.core.refine import word_table
from tests import textgen
from tests.reference_worker import word_checks

ROOT = Path(__file__).resolve().parents[1]


class Reference:
    """A worker process running the kernels with NUMBA_DISABLE_JIT=1."""

    def __init__(self) -> None:
        env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.reference_worker"], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def chunk(self, data: bytes, params: ChunkParams, split: list[int]) -> dict:
        request = {"data": base64.b64encode(data).decode(), "avg": params.avg_size,
                   "min": params.min_size, "max": params.max_size, "split": split}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the reference worker died"
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


@pytest.fixture(scope="module")
def reference():
    worker = Reference()
    yield worker
    worker.close()


def compiled(data: bytes, params: ChunkParams, split: list[int]) -> list[list]:
    bounds = sorted({0, len(data), *(s for s in split if s < len(data))})
    chunker = Chunker(params)
    streamed = []
    for lo, hi in itertools.pairwise(bounds):
        streamed += chunker.feed(data[lo:hi])
    assert streamed + chunker.finish() == chunk_content(data, params)
    return [[c.offset, c.length, c.hex] for c in chunk_content(data, params)]


PARAMS = st.sampled_from([ChunkParams(), ChunkParams(avg_size=256, min_size=64, max_size=1024),
                          ChunkParams(avg_size=64, min_size=64, max_size=64)])


# Lines short and long, so every path of the block rules runs.
BLOCKY = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 25)), max_size=60).map(textgen.lines)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=6_000) | st.text(max_size=2_000).map(str.encode) | BLOCKY
       | st.text(alphabet="ab жи 日本語 かな 。 กิ้ข 한 \u0301\n\ufe0f", max_size=2_000).map(str.encode),
       params=PARAMS, split=st.lists(st.integers(0, 6_000), max_size=5))
def test_compiled_equals_uncompiled(reference, data, params, split):
    expected = reference.chunk(data, params, split)
    assert expected["jit_disabled"]
    ours = compiled(data, params, split)
    assert ours == expected["one_shot"] == expected["many"] == expected["streamed"]
    bounds = sorted({0, len(data), *(s for s in split if s < len(data))})
    assert word_table(data, [list(pair) for pair in itertools.pairwise(bounds)]) == expected["words"]
    assert word_checks(data, chunk_content(data, params)) == expected["word_checks"]


def test_compiled_equals_uncompiled_on_text(reference):
    """Realistic text long enough for every path of the boundary search."""
    menu = b"".join(f"Menu entry {i}\n".encode() for i in range(40))
    for seed, size in ((1, 30_000), (2, 9_000), (3, 17)):
        data = textgen.text(seed, size) + menu + textgen.text(seed, size).replace(b"\n", b" ")
        for params in (ChunkParams(), ChunkParams(avg_size=256, min_size=64, max_size=1024)):
            expected = reference.chunk(data, params, [size // 3, size // 2, len(data) - 300])
            assert compiled(data, params, [size // 3]) == expected["one_shot"] == expected["streamed"]
