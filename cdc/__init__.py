"""cdc: which part of a page changed between two crawls, how much, and what kind of change.

Content-defined chunking of normalised page text with a Gear rolling hash, comparison of
two versions by their chunk digests, and exact word edits inside the changed regions.

The packages follow the pipeline, each importing only those before it: `core` (normalise,
chunk, compare, refine, moves, the kernels), `sources` (crawl files in, one door), `store`
(the DuckDB file), `ingest` (histories, batches, the cluster, fetching), `present` (figures,
highlighted text, CSV), `analyst` (questions, search, annotations), `demo`, and `cli`.
`runtime` (worker processes, the collector) sits under them all.
"""

from cdc.core.chunking import Chunk, ChunkBatch, Chunker, Chunks, chunk_batch, chunk_content, chunk_many
from cdc.core.compare import ChangeReport, Thresholds, compare
from cdc.core.gear import ChunkParams
from cdc.core.normalize import content_digest, content_for_chunking
from cdc.core.refine import Edit
from cdc.core.spec import SPEC, spec_for
from cdc.core.verdicts import VERDICTS
from cdc.errors import CdcError

__version__ = "0.1.0"



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
