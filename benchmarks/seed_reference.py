"""The seed guide's code as written ("Detecting Content Changes With Rolling Hashes").

Kept only as a pure-Python peer for `benchmarks/chunking.py`; nothing in `cdc` uses it.
The code is copied as the guide gives it (Rabin-Karp rolling hash, BLAKE2b-128 hex
digests, set-based comparison); the only change is that the guide's imports, spread
through its text, are gathered here at the top.
"""

import hashlib
from dataclasses import dataclass


class RollingHash:
    """Rabin-Karp style rolling hash: O(1) to advance the window by one byte."""

    BASE = 257
    MOD = (1 << 61) - 1

    def __init__(self, window: int = 48):
        self.window = window
        self.value = 0
        self.buffer: list[int] = []
        # BASE^(window-1) mod MOD, for removing the outgoing byte.
        self.high = pow(self.BASE, window - 1, self.MOD)

    def push(self, byte: int) -> int:
        if len(self.buffer) == self.window:
            outgoing = self.buffer.pop(0)
            self.value = (self.value - outgoing * self.high) % self.MOD
        self.buffer.append(byte)
        self.value = (self.value * self.BASE + byte) % self.MOD
        return self.value


@dataclass(frozen=True)
class Chunk:
    index: int
    offset: int
    length: int
    digest: str


def chunk_content(data: bytes, avg_size: int = 2048,
                  min_size: int = 512, max_size: int = 8192) -> list[Chunk]:
    """Split on content-defined boundaries so an edit only shifts nearby chunks."""
    mask = (1 << (avg_size.bit_length() - 1)) - 1     # ~1-in-avg_size chance per byte
    roller = RollingHash()
    chunks: list[Chunk] = []
    start = 0

    for position, byte in enumerate(data):
        value = roller.push(byte)
        length = position - start + 1
        if length < min_size:
            continue
        if (value & mask) == 0 or length >= max_size:
            block = data[start:position + 1]
            chunks.append(Chunk(len(chunks), start, len(block),
                                hashlib.blake2b(block, digest_size=16).hexdigest()))
            start = position + 1
            roller = RollingHash()

    if start < len(data):
        block = data[start:]
        chunks.append(Chunk(len(chunks), start, len(block),
                            hashlib.blake2b(block, digest_size=16).hexdigest()))
    return chunks


@dataclass
class ChangeReport:
    changed: bool
    similarity: float
    added: list[Chunk]
    removed: list[Chunk]
    changed_regions: list[tuple[int, int]]      # (offset, length) in the new document


def compare(old: list[Chunk], new: list[Chunk]) -> ChangeReport:
    old_digests = {c.digest for c in old}
    new_digests = {c.digest for c in new}
    shared = old_digests & new_digests
    union = old_digests | new_digests

    added = [c for c in new if c.digest not in old_digests]
    removed = [c for c in old if c.digest not in new_digests]

    regions, current = [], None
    for chunk in added:
        if current and chunk.offset == current[0] + current[1]:
            current = (current[0], current[1] + chunk.length)      # merge adjacent
        else:
            if current:
                regions.append(current)
            current = (chunk.offset, chunk.length)
    if current:
        regions.append(current)

    return ChangeReport(
        changed=bool(added or removed),
        similarity=len(shared) / len(union) if union else 1.0,
        added=added, removed=removed, changed_regions=regions,
    )


def content_for_chunking(record: dict) -> bytes:
    """Stable, reader-facing text: the same input the change fingerprint uses."""
    parts = [record.get("title") or "", record.get("description") or ""]
    parts.extend(section.get("text", "") for section in record.get("sections", []))
    text = "\n".join(" ".join(p.split()) for p in parts if p)
    return text.encode("utf-8")
