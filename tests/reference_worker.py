"""Chunk requests from stdin with the kernels uncompiled: the reference for the JIT build.

Run with NUMBA_DISABLE_JIT=1. Reads one JSON request per line,
{"data": base64, "avg": int, "min": int, "max": int, "split": [int, ...]},
and answers one JSON line: the chunks of `chunk_content`, of `chunk_many`, and of a
`Chunker` fed the data cut at `split`, each as [offset, length, hex digest] triples; and
the words `cdc.refine` finds in the pieces the cuts make, as [hash, start, end, piece].
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import sys
import warnings

import numpy as np

from cdc import Chunker, ChunkParams, chunk_content, chunk_many
from cdc.refine import word_table


def triples(chunks):
    return [[c.offset, c.length, c.hex] for c in chunks]


def answer(request: dict) -> dict:
    data = base64.b64decode(request["data"])
    params = ChunkParams(request["avg"], request["min"], request["max"])
    bounds = sorted({0, len(data), *(s for s in request["split"] if s < len(data))})
    chunker = Chunker(params)
    streamed = []
    for lo, hi in itertools.pairwise(bounds):
        streamed += chunker.feed(data[lo:hi])
    streamed += chunker.finish()
    return {
        "jit_disabled": os.environ.get("NUMBA_DISABLE_JIT") == "1",
        "one_shot": triples(chunk_content(data, params)),
        "many": triples(chunk_many([data], params)[0]),
        "streamed": triples(streamed),
        "words": word_table(data, [list(pair) for pair in itertools.pairwise(bounds)]),
    }


def main() -> None:
    # Plain Python wraps uint64 arithmetic silently only when told to.
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for line in sys.stdin:
            print(json.dumps(answer(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
