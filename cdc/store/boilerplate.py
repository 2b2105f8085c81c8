"""The boilerplate reads: digests that recur across a host's pages and across hosts, where a
digest is found, and the bytes of chunks cut from their generations' texts; and the named rows
they return. Mixed into `Store`; `cdc.analyst.boilerplate` makes the reports of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import duckdb

from cdc.store.layout import _chunks_of, _digests_of
from cdc.store.lookups import _by_keys
from cdc.store.templates import BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE, TEMPLATE_DIGESTS

# The chunk lists the boilerplate queries count, joined with their pages first: of one host's
# latest generations (binds the host);
_HOST_LISTS = """
    SELECT c.natural_key, c.generation, c.digests, c.lengths
    FROM chunk_lists c JOIN pages p
      ON p.natural_key = c.natural_key AND c.generation = p.latest_generation
    WHERE p.host = ?"""
# and the chunks of every page's latest generation, with its host.
_LATEST_CHUNKS = _chunks_of("""(
    SELECT p.host, l.natural_key, l.generation, l.digests, l.lengths
    FROM chunk_lists l JOIN pages p
      ON p.natural_key = l.natural_key AND l.generation = p.latest_generation)""")


class ChunkPlace(NamedTuple):
    """Where a chunk is: a page's generation, and its place in that generation's chunk list."""

    natural_key: str
    generation: int
    chunk_index: int


class HostDigest(NamedTuple):
    """A digest on many of a host's pages (`Boilerplate.host_boilerplate`): how many and what share,
    one place it is found, and (asked for) the bytes of that chunk."""

    digest: bytes
    pages: int
    share: float  # of the host's pages
    natural_key: str
    generation: int
    chunk_index: int
    sample: bytes | None = None


class SharedDigest(NamedTuple):
    """A digest on the pages of several hosts (`Boilerplate.shared_across_hosts`)."""

    digest: bytes
    host_count: int
    hosts: list[str]  # in order
    pages: int
    place: ChunkPlace  # the first place it is found
    sample: bytes | None = None  # that chunk's bytes, when asked for


class Boilerplate:
    """The boilerplate reads, mixed into `Store`: each opens its own read-only connection, or
    reads through the one given."""

    def host_boilerplate(self, host: str, share: float, min_pages: int,
                         with_samples: bool = False) -> list[HostDigest]:
        """Digests on more than `share` of a host's pages (latest generations), at least
        `min_pages` of them, most pages first, with one place to cut a sample from (and,
        `with_samples`, the sample's bytes, read through the same connection). The count
        reads the digests alone; the place's offset and length are taken from its chunk
        list, for the few digests kept (an offset summed for every chunk of the host, to
        keep ten, cost a tenth of the query), so a sample costs one lookup of its text."""
        place = ("""SELECT c.*, coalesce(list_sum(l.lengths[1:c.sample.chunk_index]), 0) AS "offset",
                         l.lengths[c.sample.chunk_index + 1] AS length
                  FROM kept c JOIN host_lists l
                    ON l.natural_key = c.sample.natural_key AND l.generation = c.sample.generation"""
                 if with_samples else "SELECT * FROM kept")
        listed = _digests_of("SELECT natural_key, generation, digests FROM host_lists", in_order=True)
        with self.reading() as connection:
            rows = connection.execute(f"""
                WITH host_lists AS ({_HOST_LISTS}),
                host_size AS (SELECT count(*) AS pages FROM pages WHERE host = ?),
                kept AS (
                    SELECT digest, count(DISTINCT natural_key) AS pages,
                           count(DISTINCT natural_key) / h.pages AS share,
                           min(struct_pack(natural_key := natural_key, generation := generation,
                                           chunk_index := chunk_index)) AS sample
                    FROM {listed} CROSS JOIN host_size h
                    GROUP BY digest, h.pages
                    HAVING count(DISTINCT natural_key) >= ? AND count(DISTINCT natural_key) > ? * h.pages
                )
                SELECT digest, pages, share, sample.natural_key, sample.generation, sample.chunk_index
                       {', "offset", length' if with_samples else ""}
                FROM ({place})
                ORDER BY pages DESC, digest
            """, [host, host, min_pages, share]).fetchall()
            if not with_samples:
                return [HostDigest(*row) for row in rows]
            texts = self._texts(connection, {(row[3], row[4]) for row in rows})
        return [HostDigest(*row[:6], None if (text := texts.get((row[3], row[4]))) is None
                           else text[row[6]:row[6] + row[7]]) for row in rows]

    def _texts(self, connection: duckdb.DuckDBPyConnection,
               wanted: set[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
        """The UTF-8 texts of retained generations, by (natural_key, generation)."""
        keys = sorted({key for key, _ in wanted})
        return {(key, generation): text for key, generation, text in _by_keys(connection, """
            SELECT natural_key, generation, encode(text) FROM generations WHERE natural_key IN ({keys})
        """, keys, lambda row: (row[0], row[1]) in wanted and row[2] is not None)}

    def boilerplate_digests(self, host: str, share: float, min_pages: int) -> set[bytes]:
        return {row.digest for row in self.host_boilerplate(host, share, min_pages)}

    def template_digests(self, host: str, share: float = BOILERPLATE_SHARE,
                         min_pages: int = BOILERPLATE_MIN_PAGES) -> set[bytes]:
        """The host's template: its boilerplate rule counted over every retained generation,
        not only the latest, so a comparison across a site-wide change leaves out both the
        template it replaced and the new one (what template-only changes are judged by)."""
        with self.reading() as connection:
            rows = connection.execute(f"""
                WITH host_size AS (SELECT host, count(*) AS pages FROM pages WHERE host = ? GROUP BY host)
                {TEMPLATE_DIGESTS}
            """, [host, min_pages, share]).fetchall()
        return {row[1] for row in rows}

    def shared_across_hosts(self, min_hosts: int = 2, limit: int = 1000,
                            with_samples: bool = False) -> list[SharedDigest]:
        """Digests in the latest generations of pages on `min_hosts` or more hosts, most hosts
        first (and, `with_samples`, each one's sample bytes, read through the same connection)."""
        with self.reading() as connection:
            rows = connection.execute(f"""
                WITH c AS (SELECT * FROM {_LATEST_CHUNKS})
                SELECT c.digest, count(DISTINCT c.host) AS hosts, list(DISTINCT c.host ORDER BY c.host),
                       count(DISTINCT c.natural_key) AS pages,
                       min(struct_pack(natural_key := c.natural_key, generation := c.generation,
                                       chunk_index := c.chunk_index)) AS sample
                FROM c
                GROUP BY c.digest HAVING count(DISTINCT c.host) >= ?
                ORDER BY hosts DESC, pages DESC, c.digest LIMIT ?
            """, [min_hosts, limit]).fetchall()
            shared = [SharedDigest(*row[:4], ChunkPlace(**row[4])) for row in rows]
            if not with_samples:
                return shared
            samples = self.chunk_texts([row.place for row in shared], connection)
        return [row._replace(sample=sample) for row, sample in zip(shared, samples)]

    def pages_with_digest(self, digest: bytes) -> list[ChunkPlace]:
        """Every retained place (page, generation, chunk index) that holds a digest."""
        with self.reading() as connection:
            # No index finds a digest inside a list row: one scan of them all.
            rows = connection.execute(f"""
                SELECT natural_key, generation, chunk_index FROM {_chunks_of("chunk_lists")}
                WHERE digest = ? ORDER BY natural_key, generation, chunk_index
            """, [digest]).fetchall()
        return list(map(ChunkPlace._make, rows))

    def chunk_texts(self, places: Sequence[tuple[str, int, int]],
                    connection: duckdb.DuckDBPyConnection | None = None) -> list[bytes | None]:
        """The bytes of retained chunks, each given as (natural_key, generation, chunk_index),
        cut from their generations' texts; None where not retained."""
        if connection is None:
            with self.reading() as connection:
                return self.chunk_texts(places, connection)
        wanted = {(key, generation) for key, generation, _ in places}
        keys = sorted({key for key, _ in wanted})
        # Two lookups by key for all the places (indexed), not two per page.
        texts = self._texts(connection, wanted)
        lengths = {(key, generation): lengths for key, generation, lengths in _by_keys(connection, """
            SELECT natural_key, generation, lengths FROM chunk_lists WHERE natural_key IN ({keys})
        """, keys, lambda row: (row[0], row[1]) in texts)}
        result = []
        for key, generation, index in places:
            chunks = lengths.get((key, generation), [])
            if (key, generation) not in texts or index >= len(chunks):
                result.append(None)
                continue
            offset = sum(chunks[:index])
            result.append(texts[key, generation][offset:offset + chunks[index]])
        return result
