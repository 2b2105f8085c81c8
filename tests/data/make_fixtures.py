"""Write the JSONL fixtures of tests/test_sources.py, real and deliberately broken.

Run once from anywhere (`python tests/data/make_fixtures.py`); the output is deterministic.
Every file is a few KB:

- pages.jsonl: good records in the seed's shape (url, fetched_at, title, description, sections).
- pages.jsonl.gz, pages-no-gz-suffix: the same, gzip-compressed; the second has no .gz name.
- mixed.jsonl: good records interleaved with bad lines (see MIXED_LINES for which is where).
- truncated.jsonl.gz: a gzip file cut off in the middle of a record.
- garbage.gz: the gzip magic bytes, then text that is not gzip.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

WORDS = ("crawl page section change chunk digest price catalogue spring counter paragraph "
         "heading archive record version fetch server header content table figure note").split()


def page(number: int, words: int = 24, seed: int = 0) -> dict:
    """A record in the seed's shape, with text that differs from page to page."""
    rng = random.Random(seed * 1_000 + number)
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return {
        "url": f"https://example.com/page/{number}",
        "fetched_at": f"2024-03-{number % 28 + 1:02d}T12:00:00Z",
        "title": f"Page {number}",
        "description": f"The description of page {number}.",
        "sections": [
            {"heading": "Introduction", "text": text},
            {"heading": "Prices", "text": f"Item {number} costs ${number}.99 — café crème"},
        ],
    }


def jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(record, ensure_ascii=False).encode() + b"\n" for record in records)


PAGES = [page(number) for number in range(1, 5)]

# (line number, bytes of the line without its newline, what the reader makes of it)
MIXED_LINES = [
    (1, json.dumps(page(1)).encode(), "record"),
    (2, b'{"url": "https://example.com/broken", "title": }', "bad: not valid JSON"),
    (3, json.dumps(page(3)).encode(), "record"),
    (4, b'{"title": "a page with no address", "sections": []}', "bad: no url"),
    (5, b'["https://example.com/page/5", "a list, not an object"]', "bad: got list"),
    (6, b'{"url": "https://example.com/latin1", "title": "caf\xe9 cr\xe8me"}', "bad: invalid UTF-8"),
    (7, json.dumps(page(7), ensure_ascii=False).encode(), "record"),
    (8, b"", "blank: skipped"),
    (9, json.dumps(page(9)).encode() + b"\r", "record (CRLF line)"),
    (10, b'{"url": 42, "title": "the url is a number"}', "bad: no url"),
    (11, b'{"url": "https://example.com/page/11", "fetched_at": true}', "bad: fetched_at"),
    (12, json.dumps(page(12)).encode(), "record (last line, no newline)"),
]


def truncated_gzip() -> bytes:
    """Gzip of 40 records, cut so that the readable data ends inside a record."""
    data = jsonl([page(number, words=40, seed=1) for number in range(1, 41)])
    compressed = gzip.compress(data, mtime=0)
    cut = len(compressed) // 2
    readable = zlib.decompressobj(wbits=31).decompress(compressed[:cut])
    assert readable.count(b"\n") >= 5 and not readable.endswith(b"\n"), "move the cut"
    return compressed[:cut]


def fixtures() -> dict[str, bytes]:
    """File name to content, for every fixture."""
    pages = jsonl(PAGES)
    return {
        "pages.jsonl": pages,
        "pages.jsonl.gz": gzip.compress(pages, mtime=0),
        "pages-no-gz-suffix": gzip.compress(pages, mtime=0),
        "mixed.jsonl": b"\n".join(line for _, line, _ in MIXED_LINES),
        "truncated.jsonl.gz": truncated_gzip(),
        "garbage.gz": b"\x1f\x8b" + b"this is not gzip data: only the first two bytes are\n" * 4,
    }


def write_fixtures(directory: Path = HERE) -> list[Path]:
    paths = []
    for name, content in fixtures().items():
        path = directory / name
        path.write_bytes(content)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for path in write_fixtures():
        print(f"{path.stat().st_size:6d}  {path.name}")
