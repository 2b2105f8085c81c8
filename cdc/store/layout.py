"""A `chunk_lists` row: a retained generation's chunks in order, as their 16-byte digests
end to end in one BLOB (`digests`) and a list of their lengths; and the ways the store cuts
such rows into a row per chunk, in SQL (`_chunks_of`, and `_digests_of` for digests alone)
and in Arrow (`content_chunk_rows`).
Why a list row and not a row per chunk: `cdc.store.schema`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc.core.chunks import DIGEST_SIZE


def _chunks_of(lists: str) -> str:
    """A row per chunk of the `chunk_lists` rows of `lists` (a table, or a subquery with its
    alias): their other columns, `chunk_index`, `digest` and `length`."""
    return f"""(SELECT * EXCLUDE (digests, lengths),
               digests[{DIGEST_SIZE} * chunk_index + 1 : {DIGEST_SIZE} * (chunk_index + 1)] AS digest,
               lengths[chunk_index + 1] AS length
        FROM (SELECT *, unnest(range(len(lengths)))::INTEGER AS chunk_index FROM {lists}))"""


def _digests_of(lists: str, *, in_order: bool = False) -> str:
    """A row per chunk digest of the `chunk_lists` rows of the query `lists` (which has a
    `digests` column): its other columns and `digest`, and with `in_order` the chunk's place
    in its list (`chunk_index`: what tells a moved block from one left in place). Cheaper
    than `_chunks_of` where only digests count (the templates): no lengths are read or cut."""
    dropped = "digests" if in_order else "digests, chunk_index"
    return f"""(SELECT * EXCLUDE ({dropped}),
               digests[{DIGEST_SIZE} * chunk_index + 1 : {DIGEST_SIZE} * (chunk_index + 1)] AS digest
        FROM (SELECT *, unnest(range(octet_length(digests) // {DIGEST_SIZE})) AS chunk_index
              FROM ({lists})))"""


def content_chunk_rows(lists: pa.Table) -> pa.Table:
    """`chunk_lists` rows as `content_chunks` rows, a row per chunk, in list order."""
    lengths = lists.column("lengths").combine_chunks()
    parents = pc.list_parent_indices(lengths)
    starts = pc.take(lengths.offsets, parents)
    index = pc.subtract(pa.array(np.arange(len(parents), dtype=np.int32)), pc.cast(starts, pa.int32()))
    # The digests end to end, cut into 16-byte values (a BLOB a chunk, as the view shows).
    joined = b"".join(lists.column("digests").to_pylist())
    digests = pa.FixedSizeBinaryArray.from_buffers(pa.binary(DIGEST_SIZE), len(parents),
                                                   [None, pa.py_buffer(joined)]).cast(pa.binary())
    return pa.table({
        "natural_key": pc.take(lists.column("natural_key"), parents),
        "generation": pc.take(lists.column("generation"), parents),
        "chunk_index": index,
        "digest": digests,
        "length": lengths.flatten(),
    })


def digest_rows(lists: Sequence[tuple[str, str, int, bytes]]) -> pa.Table:
    """`chunk_lists` rows with their host first (host, natural_key, generation, digests) as a
    row per chunk digest, in list order: host, natural_key, generation, chunk_index and
    digest, as `_digests_of(..., in_order=True)` makes them in SQL, cut here by NumPy: DuckDB
    cuts BLOBs at about a microsecond a digest. The host and key are dictionary-encoded (an
    index into the lists' own), so a row takes 44 bytes; DuckDB reads them as VARCHAR."""
    hosts, keys, generations, digests = (list(column) for column in zip(*lists)) if lists else ([],) * 4
    counts = np.fromiter((len(value) // DIGEST_SIZE for value in digests), np.int64, len(digests))
    parents = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
    index = np.arange(len(parents)) - np.repeat(np.cumsum(counts) - counts, counts)
    # Whole digests only, as the SQL's range(octet_length // 16) takes them.
    joined = b"".join(value if len(value) == DIGEST_SIZE * count else value[:DIGEST_SIZE * count]
                      for value, count in zip(digests, counts.tolist()))
    cut = pa.FixedSizeBinaryArray.from_buffers(pa.binary(DIGEST_SIZE), len(parents),
                                               [None, pa.py_buffer(joined)]).cast(pa.binary())
    take = pa.array(parents)
    return pa.table({
        "host": pa.DictionaryArray.from_arrays(take, pa.array(hosts, pa.string())),
        "natural_key": pa.DictionaryArray.from_arrays(take, pa.array(keys, pa.string())),
        "generation": pc.take(pa.array(generations, pa.int64()), take),
        "chunk_index": pa.array(index, pa.int64()),
        "digest": cut,
    })


def digest_list(digests: bytes) -> list[bytes]:
    """The digests of a `chunk_lists` row, one per chunk."""
    return [digests[at:at + DIGEST_SIZE] for at in range(0, len(digests), DIGEST_SIZE)]
