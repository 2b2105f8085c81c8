"""Exact-edit benchmark: the bytes `cdc.compare`'s edits mark as changed, against a word alignment.

On the three revision histories of the shared corpus (`../shared/corpus/`: the Rust book in
English, Chinese and Japanese), every consecutive pair of versions of a page, normalised with
`cdc.content_for_chunking` and chunked with the default parameters, is compared with both
texts given. The reference for what truly changed is independent of cdc's tokens:

- a reference tokenizer (a regular expression here, not cdc's kernel): a Han, kana, CJK
  punctuation or fullwidth character, or a Thai, Lao, Khmer or Burmese character, is a word of
  its own; otherwise a word is a run of non-whitespace characters;
- the two token sequences are aligned by their longest common subsequence (rapidfuzz's Indel
  opcodes over the tokens), after the common prefix and suffix are set aside at token
  boundaries;
- the non-whitespace bytes of tokens outside the alignment are the truly changed bytes, in
  the old text (deleted) and in the new text (inserted).

The `\n` between blocks (norm-v2 writes one block a line) is whitespace here as in cdc's
tokens: it ends a token and is never one, and the alignment runs over the whole text, across
blocks. So a paragraph re-wrapped, split or joined is no change, as cdc reports it (a
comparison whose every word is the same is `unchanged`), and a word may align with its copy
in another block, as in any word diff. That is the right reference for this measure, which
counts changed non-whitespace bytes: a block break is layout, not content; one that made
line breaks tokens would count every re-wrapped paragraph as changed.

cdc's changed bytes are the non-whitespace bytes inside its edits' ranges, on both sides (a
`move` marks its text at both places, as the word alignment, which knows no moves, deletes it
at one and inserts it at the other). Precision is the share of cdc's changed bytes that truly
changed, recall the share of truly changed bytes that cdc marks, both summed over all pairs
(bytes, not pairs, weigh). The time is `cdc.compare` with the texts, per pair, chunks made
beforehand: the refinement's cost and the chunk alignment's.

Run from the repository root (about a minute; `--every N` takes every N-th pair):

    python benchmarks/edits.py
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import re
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rapidfuzz.distance import Indel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's cdc, not an installed one
import cdc
import cdc.core.compiled

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
LANGUAGES = (("en", "rustbook.jsonl.gz"), ("zh", "rustbook-zh.jsonl.gz"), ("ja", "rustbook-ja.jsonl.gz"))
TARGET_PRECISION, TARGET_RECALL = 0.95, 0.99

# The reference's characters that are words of their own: CJK punctuation, kana, Han
# (unified, extension A, compatibility, supplementary planes), fullwidth and halfwidth
# forms, CJK compatibility forms; Thai, Lao, Burmese, Khmer.
SINGLE = (r"\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff"
          r"\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
          r"\U00020000-\U0003ffff")
TOKEN = re.compile(rf"[{SINGLE}]|[^\s{SINGLE}]+")
BREAK = re.compile(rf"[\s{SINGLE}]")  # a token ends before and after these


def load(path: Path) -> dict[str, list[bytes]]:
    """Normalised versions of each page, oldest first."""
    versions: dict[str, list[bytes]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            versions.setdefault(record["url"], []).append(cdc.content_for_chunking(record))
    return versions


def pairs(versions: dict[str, list[bytes]], every: int) -> Iterator[tuple[bytes, bytes]]:
    """Consecutive versions that differ; every `every`-th, in corpus order (deterministic)."""
    number = 0
    for texts in versions.values():
        for old, new in itertools.pairwise(texts):
            if old != new:
                if number % every == 0:
                    yield old, new
                number += 1


def byte_offsets(text: str) -> np.ndarray:
    """Byte offset of each character of `text` in its UTF-8 form (one more at the end)."""
    codes = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    widths = 1 + (codes >= 0x80) + (codes >= 0x800) + (codes >= 0x10000)
    return np.concatenate([[0], np.cumsum(widths)])


def is_boundary(text: str, i: int) -> bool:
    """Whether a reference token can end at character `i` (a whitespace or a single-character
    word on either side)."""
    if i <= 0 or i >= len(text):
        return True
    return bool(BREAK.match(text, i - 1) or BREAK.match(text, i))


def truly_changed(old: bytes, new: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the old and new bytes outside the reference's word alignment."""
    a, b = old.decode("utf-8"), new.decode("utf-8")
    prefix = 0
    limit = min(len(a), len(b))
    while prefix < limit and a[prefix] == b[prefix]:
        prefix += 1
    while not (is_boundary(a, prefix) and is_boundary(b, prefix)):
        prefix -= 1
    suffix = 0
    while suffix < limit - prefix and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]:
        suffix += 1
    while not (is_boundary(a, len(a) - suffix) and is_boundary(b, len(b) - suffix)):
        suffix -= 1
    masks = []
    tokens = []
    for text, raw in ((a, old), (b, new)):
        middle = text[prefix:len(text) - suffix]
        found = [(m.start() + prefix, m.end() + prefix, m.group()) for m in TOKEN.finditer(middle)]
        tokens.append(found)
        masks.append(np.zeros(len(raw), bool))
    offsets = (byte_offsets(a), byte_offsets(b))
    for op in Indel.opcodes([t[2] for t in tokens[0]], [t[2] for t in tokens[1]]):
        if op.tag == "equal":
            continue
        for side, (start, end) in enumerate(((op.src_start, op.src_end), (op.dest_start, op.dest_end))):
            for first, last, _ in tokens[side][start:end]:
                masks[side][offsets[side][first]:offsets[side][last]] = True
    return masks[0], masks[1]


def reported(old: bytes, new: bytes, edits: list) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the non-whitespace bytes inside the edits' ranges, old and new."""
    masks = (np.zeros(len(old), bool), np.zeros(len(new), bool))
    for edit in edits:
        masks[0][edit.old_offset:edit.old_offset + edit.old_length] = True
        masks[1][edit.new_offset:edit.new_offset + edit.new_length] = True
    for mask, text in zip(masks, (old, new)):
        raw = np.frombuffer(text, np.uint8)
        mask &= ~((raw == 32) | ((raw >= 9) & (raw <= 13)))
    return masks


@dataclass
class Tally:
    pairs: int = 0
    both: int = 0  # changed bytes cdc reports that truly changed
    ours: int = 0
    truth: int = 0
    moves: int = 0
    seconds: list[float] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.pairs += other.pairs
        self.both += other.both
        self.ours += other.ours
        self.truth += other.truth
        self.moves += other.moves
        self.seconds += other.seconds

    @property
    def precision(self) -> float:
        return self.both / self.ours if self.ours else 1.0

    @property
    def recall(self) -> float:
        return self.both / self.truth if self.truth else 1.0


def measure(versions: dict[str, list[bytes]], every: int) -> Tally:
    tally = Tally()
    for old, new in pairs(versions, every):
        old_chunks, new_chunks = cdc.chunk_content(old), cdc.chunk_content(new)
        started = time.perf_counter()
        report = cdc.compare(old_chunks, new_chunks, old_text=old, new_text=new)
        tally.seconds.append(time.perf_counter() - started)
        ours = reported(old, new, report.edits)
        truth = truly_changed(old, new)
        tally.pairs += 1
        tally.moves += sum(edit.kind == "move" for edit in report.edits)
        for mine, true in zip(ours, truth):
            tally.both += int(np.count_nonzero(mine & true))
            tally.ours += int(np.count_nonzero(mine))
            tally.truth += int(np.count_nonzero(true))
    return tally


def row(name: str, tally: Tally) -> str:
    ms = [s * 1000 for s in tally.seconds] or [0.0]
    return (f"{name:<8} {tally.pairs:>6,} {tally.truth:>12,} {tally.ours:>12,} {tally.precision:>9.3f} "
            f"{tally.recall:>7.3f} {tally.moves:>6,} {statistics.median(ms):>9.3f} {sum(ms) / 1000:>8.2f}")


def verdict(tally: Tally) -> str:
    ok = tally.precision >= TARGET_PRECISION and tally.recall >= TARGET_RECALL
    return "PASS" if ok else "FAIL"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the folder of the three histories")
    parser.add_argument("--every", type=int, default=1, help="take every N-th pair (default all)")
    args = parser.parse_args(argv)
    if args.every < 1:
        parser.error("--every must be at least 1")
    started = time.perf_counter()
    print(f"kernels: {'ahead of time' if cdc.core.compiled.AHEAD_OF_TIME is not None else 'JIT'}; "
          f"targets: precision >= {TARGET_PRECISION}, recall >= {TARGET_RECALL}")
    print(f"{'history':<8} {'pairs':>6} {'true bytes':>12} {'cdc bytes':>12} {'precision':>9} "
          f"{'recall':>7} {'moves':>6} {'median ms':>9} {'total s':>8}")
    overall = Tally()
    lines = []
    for name, filename in LANGUAGES:
        path = args.corpus / filename
        if not path.is_file():
            raise SystemExit(f"corpus not found: {path} (pass --corpus FOLDER)")
        tally = measure(load(path), args.every)
        overall.add(tally)
        print(row(name, tally), flush=True)
        lines.append(f"{name}: {verdict(tally)}")
    print(row("overall", overall))
    lines.append(f"overall: {verdict(overall)}")
    print("  ".join(lines))
    print(f"total benchmark time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
