"""cdc: which part of a page changed between two crawls, how much, and what kind of change.

Content-defined chunking of normalised page text with a Gear rolling hash, comparison of
two versions by their chunk digests, and exact word edits inside the changed regions.
"""

from cdc.chunking import (
    DEFAULT_PARAMS,
    Chunk,
    ChunkBatch,
    Chunker,
    ChunkParams,
    Chunks,
    chunk_batch,
    chunk_content,
    chunk_many,
)
from cdc.compare import VERDICTS, ChangeReport, Thresholds, compare
from cdc.errors import CdcError
from cdc.normalize import NORMALIZATION_VERSION, content_digest, content_for_chunking
from cdc.refine import Edit

__version__ = "0.1.0"

SPEC = f"{DEFAULT_PARAMS.spec}/{NORMALIZATION_VERSION}"
"""Names everything that decides the digests: algorithm and gear table, sizes, digest,
normalisation. Digests made under another SPEC are never compared."""


def spec_for(params: ChunkParams) -> str:
    """The SPEC string for chunks made with `params`."""
    return f"{params.spec}/{NORMALIZATION_VERSION}"


__all__ = [
    "SPEC",
    "VERDICTS",
    "CdcError",
    "ChangeReport",
    "Chunk",
    "ChunkBatch",
    "ChunkParams",
    "Chunker",
    "Chunks",
    "Edit",
    "Thresholds",
    "chunk_batch",
    "chunk_content",
    "chunk_many",
    "compare",
    "content_digest",
    "content_for_chunking",
    "spec_for",
]
