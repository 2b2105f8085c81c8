"""Chunk requests from stdin with the kernels uncompiled: the reference for the JIT build.

Run with NUMBA_DISABLE_JIT=1. Reads one JSON request per line,
{"data": base64, "avg": int, "min": int, "max": int, "split": [int, ...]},
and answers one JSON line: the chunks of `chunk_content`, of `chunk_many`, and of a
`Chunker` fed the data cut at `split`, each as [offset, length, hex digest] triples; and
the words `cdc.core.refine` finds in the pieces the cuts make, as [hash, start, end, piece],
and what the other word kernels say of the data (`word_checks`).
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
from cdc.core.refine import word_table
from cdc.core.regions import bound, join_windows, pair_words
from cdc.core.words import count_words, is_token_boundary


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
        "word_checks": word_checks(data, chunk_content(data, params)),
    }


def _shifted(rows: np.ndarray, at: int) -> np.ndarray:
    """Chunk rows of the data with one byte inserted at `at` (as `word_checks` edits it):
    the chunk holding `at` one longer, those after it one further on."""
    rows = rows.copy()
    for k in range(len(rows)):
        if rows[k, 1] > at:
            rows[k, 1] += 1
        elif rows[k, 1] + rows[k, 2] > at or k == len(rows) - 1:
            rows[k, 2] += 1
    return rows


def word_checks(data: bytes, chunks) -> dict:
    """What the word kernels other than the scan say of `data`: the token boundaries, the
    tokens of its chunks (all, a run in the middle, and counted up to a few), and the ranges
    to diff of the data and a copy edited in the middle, cut where the chunks are."""
    middle = chunks[len(chunks) // 3:len(chunks) // 3 + 5]
    edited = data[:len(data) // 2] + b"x" + data[len(data) // 2:]
    return {
        "boundaries": [bool(is_token_boundary(data, i)) for i in range(len(data) + 1)],
        "counts": [count_words(data, chunks), count_words(data, middle), count_words(data, chunks, 3),
                   count_words(data, list(chunks), 7)],
        "bounds": [[pieces.tolist() for pieces in bound(data, edited, [[start, len(data) - start]],
                                                        [[start, len(edited) - start]], edges)]
                   for start in (0, len(data) // 3, len(data) // 2)
                   for edges in ((0, 0, 0, 0), (1, max(0, start - 300), 1, len(data)))
                   if start <= len(data) - start],
        "pairs": [[[list(words.hashes), list(words.begins), list(words.ends), list(words.pieces),
                    words.start] for window in pair_words(data, rows, moved, edited, edited_rows, set(), runs)
                   for words in window]
                  for rows in [chunks.table if hasattr(chunks, "table") else np.zeros((0, 5), np.int64)]
                  for edited_rows in [_shifted(rows, len(data) // 2)]
                  for runs in ([(k, k + 1, k, k + 1) for k in range(0, len(rows), 3)],
                               [(len(rows) // 2, len(rows) // 2, len(rows) // 2, len(rows) // 2 + 1)])
                  if rows.size
                  for moved in (set(), {k for k in range(len(rows)) if k % 3 == 0 and k % 2 == 0})],
        "windows": [[list(window) for window in join_windows(data, rows, moved, data, rows, moved, runs)]
                    if runs else []
                    for rows in [chunks.table if hasattr(chunks, "table") else np.zeros((0, 5), np.int64)]
                    for runs in [[(k, k + 1, k, k + 1) for k in range(0, len(rows), 3)]]
                    for moved in (set(), {k for k in range(len(rows)) if k % 3 == 0 and k % 2 == 0})],
    }


def main() -> None:
    # Plain Python wraps uint64 arithmetic silently only when told to.
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for line in sys.stdin:
            print(json.dumps(answer(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
