"""Deterministic, non-periodic text for tests: pseudo-English from a fixed vocabulary.

Real pages are not periodic; the seed's test input is (a 15-byte phrase repeated), and no
content-defined chunker can find boundaries in it. This text has the statistics that matter
(words, sentences, paragraphs) and is the same on every machine.
"""

from __future__ import annotations

import random

VOCABULARY = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when "
    "crawl page change chunk digest boundary version content price section paragraph index "
    "rolling hash window store generation host server request response archive record "
    "analyst pipeline market weather river mountain library garden machine question answer "
    "quickly slowly carefully between through against during without before after under"
).split()


def paragraphs(seed: int, count: int, sentences: int = 6) -> list[str]:
    """`count` paragraphs of `sentences` sentences each."""
    rng = random.Random(seed)
    result = []
    for _ in range(count):
        body = []
        for _ in range(sentences):
            words = [rng.choice(VOCABULARY) for _ in range(rng.randint(6, 18))]
            words[0] = words[0].capitalize()
            body.append(" ".join(words) + ".")
        result.append(" ".join(body))
    return result


def text(seed: int, size: int) -> bytes:
    """About `size` bytes of paragraphs joined by newlines (cut at `size`)."""
    parts: list[str] = []
    total = 0
    index = 0
    while total < size:
        paragraph = paragraphs(seed * 1_000_003 + index, 1)[0]
        parts.append(paragraph)
        total += len(paragraph) + 1
        index += 1
    return "\n".join(parts).encode()[:size]


def lines(specs: list[tuple[int, int]]) -> bytes:
    """Lines of the given (length, seed) each, joined by newlines: block-structured input."""
    return b"\n".join(bytes(97 + (seed + 7 * j) % 26 for j in range(length)) for length, seed in specs)
