"""The kernels compiled ahead of time (`python -m cdc.core.aot`) are the JIT's, without Numba."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cdc.core.compiled
from cdc import chunk_content, chunk_many
from cdc.core.editwords import edit_words
from cdc.core.normalize import normalize_text, text_blocks
from cdc.core.refine import REPLACE, Edit, word_table
from tests import textgen

ROOT = Path(__file__).resolve().parents[1]
built = pytest.mark.skipif(cdc.core.compiled.AHEAD_OF_TIME is None,
                           reason="kernels not compiled ahead of time here: run python -m cdc.core.aot")


def answers(texts: list[bytes]) -> dict:
    """What the kernels make of `texts`, in this process, as JSON-ready lists."""
    return {
        "chunks": [[[c.offset, c.length, c.hex] for c in chunk_content(t)] for t in texts],
        "many": [[[c.offset, c.length, c.hex] for c in chunks] for chunks in chunk_many(texts)],
        "folded": [normalize_text(t.decode("utf-8", "replace")) for t in texts],
        "blocks": [text_blocks(t.decode("utf-8", "replace")) for t in texts],
        "words": [word_table(t, [[0, len(t) // 2], [len(t) // 2, len(t)]]) for t in texts],
        "edit_words": [list(edit_words("k", 1, 1, [Edit(REPLACE, 0, len(t) // 3, len(t) // 2,
                                                        len(t) - len(t) // 2)], t, t) or ()) for t in texts],
    }


PROBE = """
import json, sys
import cdc.core.compiled
from tests.test_aot import answers
texts = [bytes.fromhex(h) for h in json.loads(sys.stdin.read())]
print(json.dumps({"ahead_of_time": cdc.core.compiled.AHEAD_OF_TIME is not None,
                  "numba": "numba" in sys.modules,
                  **answers(texts)}))
"""


def probe(kernels: str, texts: list[bytes]) -> dict:
    env = {**os.environ, "CDC_KERNELS": kernels, "PYTHONPATH": str(ROOT)}
    env.pop("NUMBA_DISABLE_JIT", None)
    done = subprocess.run([sys.executable, "-c", PROBE], input=json.dumps([t.hex() for t in texts]),
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout)


@pytest.mark.slow  # two fresh processes, one of them compiling the kernels with Numba
@built
def test_ahead_of_time_kernels_answer_as_the_jit_does_and_numba_stays_unloaded():
    texts = [textgen.text(seed, size) for seed, size in ((1, 40_000), (2, 9_000), (3, 100))]
    texts.append("  Prix\u00a0: 19,99\u202f€ \u2003 \t\n naïve café ".encode() * 50)
    texts.append(b"Wrapped\ntext.\n\n- item\n  wrapped\n| row |\n# Head\n```\ncode\n```\n\n    pre\n" * 40)
    ahead, jit = probe("", texts), probe("jit", texts)
    assert ahead["ahead_of_time"] and not ahead["numba"]
    assert not jit["ahead_of_time"] and jit["numba"]
    ours = answers(texts)  # this process: ahead of time too
    assert {key: ahead[key] for key in ours} == {key: jit[key] for key in ours} == ours


@built
def test_a_build_from_other_sources_is_not_used(monkeypatch):
    assert cdc.core.compiled._ahead_of_time() is not None
    compiled = cdc.core.compiled
    monkeypatch.setattr(compiled, "source_digest", lambda: compiled.AHEAD_OF_TIME.source_digest() ^ 1)
    assert cdc.core.compiled._ahead_of_time() is None
    monkeypatch.undo()
    monkeypatch.setenv("CDC_KERNELS", "jit")
    assert cdc.core.compiled._ahead_of_time() is None
