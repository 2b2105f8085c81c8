"""The reads the views and the CLI use: pages, generations, versions, change rows with
their stored template-only flag, overview and trend counts; and the dataclasses and named rows
they return (the boilerplate reads are `cdc.store.boilerplate`). Each call opens a read-only
connection (`Store.reading()`) or reads through the one it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import duckdb

from cdc.core.captures import current_generation
from cdc.core.timebins import BINS
from cdc.core.verdicts import TEMPLATE_ONLY, shown_verdict_of
from cdc.store.annotations import annotated_as, annotations_of
from cdc.store.layout import digest_list
from cdc.store.lookups import _one
from cdc.store.rows import changed_share_sql
from cdc.store.schema import TABLES


@dataclass(frozen=True)
class PageInfo:
    natural_key: str
    url: str
    host: str
    retention_class: str | None
    latest_generation: int
    first_seen: datetime
    last_fetched: datetime
    last_checked: datetime
    surt: str | None = None  # the key of a crawl's CDX index (cdc.core.urls.surt_key)


_PAGE_COLUMNS = ("natural_key, url, host, retention_class, latest_generation, first_seen, "
                 "last_fetched, last_checked, surt")


@dataclass(frozen=True)
class GenerationInfo:
    generation: int
    fetched_at: datetime
    length: int
    chunk_count: int
    retained: bool
    verdict: str | None
    similarity: float | None
    unchanged_ratio: float | None
    retained_ratio: float | None
    bytes_added: int | None
    bytes_removed: int | None
    excerpt: str | None
    measure: str | None = None  # edits, chunks, digests (the previous text was gone) or own_edits
    content_digest: bytes = b""


@dataclass(frozen=True)
class Version:
    natural_key: str
    generation: int
    text: bytes
    chunks: list[tuple[bytes, int]]  # digest, length, in order


@dataclass(frozen=True)
class ChangeRow:
    """One row of `changes` with its page's URL and host: a change summary."""

    natural_key: str
    host: str
    generation: int
    previous_generation: int | None
    fetched_at: datetime
    verdict: str
    similarity: float | None
    unchanged_ratio: float | None
    retained_ratio: float | None
    bytes_added: int | None  # None where the change could not be measured (`measure` digests)
    bytes_removed: int | None
    regions: int | None
    excerpt: str | None
    measure: str | None  # edits, chunks, digests (the previous text was gone) or own_edits
    # Every changed chunk is the host's template (a template change), as stored at the last
    # run's end (`cdc.store.templates`); None for a first sighting, or where either
    # generation's chunk list is no longer retained.
    template_only: bool | None = None
    # The change's annotation (`cdc.store.annotations`); None where nobody judged it.
    label: str | None = None
    note: str | None = None
    annotated_by: str | None = None
    surt: str | None = None  # the page's SURT, the key of a crawl's CDX index (cdc.core.urls.surt_key)

    @property
    def shown_verdict(self) -> str:
        """The verdict, or `TEMPLATE_ONLY` for a template-only change (`shown_verdict_of`)."""
        return shown_verdict_of(self.verdict, self.template_only)


_CHANGE_COLUMNS = ("c.natural_key, p.host, c.generation, c.previous_generation, c.fetched_at, "
                   "c.verdict, c.similarity, c.unchanged_ratio, c.retained_ratio, c.bytes_added, "
                   "c.bytes_removed, c.regions, c.excerpt, c.measure, c.template_only, "
                   "a.label, a.note, a.annotated_by, p.surt")


# The first key of a list's order: a page's own changes first, template-only ones after
# (`cdc.core.verdicts.shown_verdict_of` says why).
TEMPLATE_LAST = "c.template_only IS TRUE"


def _annotations_joined(where: str = "") -> str:
    """The join that gives change rows `c` their annotations `a` (`where`: of `annotations a`)."""
    return (f"LEFT JOIN {annotations_of(where)} a "
            "ON a.natural_key = c.natural_key AND a.generation = c.generation")


class HostPages(NamedTuple):
    """A host and how many pages the store holds of it (`Reads.hosts`)."""

    host: str
    pages: int


class HostPage(NamedTuple):
    """One of a host's pages with its latest change (`Reads.host_pages`)."""

    natural_key: str
    latest_generation: int
    last_fetched: datetime
    verdict: str | None
    unchanged_ratio: float | None
    bytes_added: int | None
    bytes_removed: int | None


class HostActivity(NamedTuple):
    """A host's changes in one time bucket (`Reads.host_activity`)."""

    host: str
    bucket: datetime
    bytes_changed: int | None  # added and removed
    changes: int


class HostChange(NamedTuple):
    """One change on a host's pages (`Reads.host_changes`)."""

    fetched_at: datetime
    share_changed: float | None  # 1 - the smaller kept share; None where not measured
    verdict: str


class TimeSpan(NamedTuple):
    """The first and the last fetch the store knows."""

    first: datetime
    last: datetime


PICK_LIMIT = 200  # keys a URL picker lists at most: type to narrow a host of 100,000 pages


@dataclass(frozen=True)
class PageMatch:
    """A page a URL picker lists; in changed-only mode, with its change in the chosen run."""

    natural_key: str
    verdict: str | None = None  # the run's latest change of the page; None listing every page
    share_changed: float | None = None  # 1 - the smaller kept share
    template_only: bool | None = None  # the change's stored flag; None listing every page, or unknown

    @property
    def shown_verdict(self) -> str | None:
        """The verdict, or `TEMPLATE_ONLY` for a template-only change (`shown_verdict_of`)."""
        return shown_verdict_of(self.verdict, self.template_only)


@dataclass(frozen=True)
class PageMatches:
    """The first `limit` matching pages, and how many match in all."""

    pages: list[PageMatch]
    total: int


def _page_texts(connection: duckdb.DuckDBPyConnection, natural_key: str) -> list[tuple[int, str | None]]:
    """(generation, text or None) of every generation of one page (a lookup by key alone:
    indexed; asked for a generation too, DuckDB scans)."""
    return connection.execute("SELECT generation, text FROM generations WHERE natural_key = ?",
                              [natural_key]).fetchall()


def _versions(connection: duckdb.DuckDBPyConnection, natural_key: str, wanted: set[int],
              page_texts: list[tuple[int, str | None]] | None = None) -> dict[int, Version]:
    """The retained generations among `wanted` of one page, from its texts (`_page_texts`,
    read here unless given) and chunk lists."""
    if page_texts is None:
        page_texts = _page_texts(connection, natural_key)
    texts = {generation: text for generation, text in page_texts
             if generation in wanted and text is not None}
    chunks: dict[int, list[tuple[bytes, int]]] = {g: [] for g in texts}
    for generation, digests, lengths in connection.execute(
            "SELECT generation, digests, lengths FROM chunk_lists WHERE natural_key = ?",
            [natural_key]).fetchall():
        if generation in chunks:
            chunks[generation] = list(zip(digest_list(digests), lengths))
    return {generation: Version(natural_key, generation, text.encode("utf-8"), chunks[generation])
            for generation, text in texts.items()}


class Reads:
    """The reads, mixed into `Store`: each opens its own read-only connection, or reads
    through the one given, and returns dataclasses or rows."""

    path: Path

    def stats(self) -> dict[str, int]:
        with self.reading() as connection:
            counts = {table: _one(connection.execute(f"SELECT count(*) FROM {table}"))[0]
                      for table in TABLES if table != "content_chunks"}
            counts["content_chunks"] = _one(connection.execute(
                "SELECT coalesce(sum(len(lengths)), 0)::BIGINT FROM chunk_lists"))[0]
            counts["hosts"] = _one(connection.execute("SELECT count(DISTINCT host) FROM pages"))[0]
            counts["retained_generations"] = _one(connection.execute(
                "SELECT count(*) FROM generations WHERE text IS NOT NULL"))[0]
            # Trimmed by retention since the file was last rewritten: still in it (`finish_run`).
            counts["trimmed_text_bytes"] = self.trimmed_bytes(connection)
        counts["file_bytes"] = self.path.stat().st_size
        return counts

    def page(self, natural_key: str) -> PageInfo | None:
        with self.reading() as connection:
            row = _one(connection.execute(f"SELECT {_PAGE_COLUMNS} FROM pages WHERE natural_key = ?",
                                          [natural_key]))
        return PageInfo(*row) if row else None

    def find_pages(self, fragment: str, limit: int = 20) -> list[str]:
        """Natural keys that contain `fragment`, for "did you mean" and type-ahead."""
        with self.reading() as connection:
            rows = connection.execute(
                "SELECT natural_key FROM pages WHERE contains(natural_key, ?) ORDER BY natural_key LIMIT ?",
                [fragment, limit]).fetchall()
        return [row[0] for row in rows]

    def generations(self, natural_key: str) -> list[GenerationInfo]:
        """Every generation of a page, oldest first, with the change that made it."""
        with self.reading() as connection:
            rows = connection.execute("""
                SELECT generation, fetched_at, length, chunk_count, text IS NOT NULL, content_digest
                FROM generations WHERE natural_key = ?
            """, [natural_key]).fetchall()
            changes = {row[0]: row[1:] for row in connection.execute("""
                SELECT generation, verdict, similarity, unchanged_ratio, retained_ratio,
                       bytes_added, bytes_removed, excerpt, measure
                FROM changes WHERE natural_key = ?
            """, [natural_key]).fetchall()}
        blank = (None,) * 8
        return [GenerationInfo(*row[:5], *changes.get(row[0], blank), content_digest=row[5])
                for row in sorted(rows)]

    def version(self, natural_key: str, generation: int) -> Version | None:
        """A retained generation's text and chunks; None when it is not retained. A number no
        generation starts at names the generation current at that time (a later-found fetch
        of its content can move a generation's start earlier): its `generation` says which."""
        with self.reading() as connection:
            # The page's texts are read anyway: which is current comes from them, not from a
            # query of its own (two versions of a page of the 100,000-page synthetic store,
            # read one call each: 112-120 -> 85-96 ms, medians of 40 pages).
            page_texts = _page_texts(connection, natural_key)
            current = current_generation((number for number, _ in page_texts), generation)
            return None if current is None else _versions(connection, natural_key, {current},
                                                          page_texts).get(current)

    def versions(self, natural_key: str, generations: Sequence[int],
                 connection: duckdb.DuckDBPyConnection | None = None) -> dict[int, Version]:
        """Retained generations of one page, by number, read through one connection (the
        given one: a caller reading many pages opens one, not one per page)."""
        if connection is None:
            with self.reading() as connection:
                return _versions(connection, natural_key, set(generations))
        return _versions(connection, natural_key, set(generations))

    def history(self, natural_key: str) -> list[ChangeRow]:
        """The page's change rows, oldest first, each marked template-only or not."""
        with self.reading() as connection:
            rows = connection.execute(f"""
                SELECT {_CHANGE_COLUMNS} FROM changes c JOIN pages p USING (natural_key)
                {_annotations_joined("WHERE a.natural_key = ?")}
                WHERE c.natural_key = ? ORDER BY c.generation
            """, [natural_key, natural_key]).fetchall()
        return [ChangeRow(*row) for row in rows]

    @staticmethod
    def _change_filters(host: str | None, since: datetime | None, until: datetime | None,
                        verdicts: Sequence[str], min_change: float,
                        run: int | None = None, labels: Sequence[str] = ()) -> tuple[str, list]:
        """A WHERE clause on `changes c` of this module's fixed conditions, and the values to bind."""
        conditions, values = [], []
        if labels:  # changes annotated with one of `labels`
            conditions.append(annotated_as("c"))
            values.append(list(labels))
        if run is not None:  # generations the run saw first
            conditions.append("""EXISTS (SELECT 1 FROM generations g WHERE g.natural_key = c.natural_key
                                 AND g.generation = c.generation AND g.first_run = ?)""")
            values.append(run)
        if host:
            conditions.append("c.natural_key IN (SELECT natural_key FROM pages WHERE host = ?)")
            values.append(host)
        if since:
            conditions.append("c.fetched_at >= ?")
            values.append(since)
        if until:
            conditions.append("c.fetched_at < ?")
            values.append(until)
        if verdicts:
            conditions.append("list_contains(?, c.verdict)")
            values.append(list(verdicts))
        if min_change > 0:
            # A change not measured (its previous text was gone) or a first sighting counts
            # as wholly changed here: `--min-change` keeps them, as it always has.
            conditions.append(f"coalesce({changed_share_sql('c')}, 1) >= ?")
            values.append(min_change)
        return ("WHERE " + " AND ".join(conditions)) if conditions else "", values

    def changes(self, *, host: str | None = None, since: datetime | None = None,
                until: datetime | None = None, verdicts: Sequence[str] = (),
                min_change: float = 0.0, limit: int | None = None,
                run: int | None = None, labels: Sequence[str] = ()) -> list[ChangeRow]:
        """Change summaries, newest first, with their annotations, filtered (`run`: of the
        generations that run saw first, by id; `labels`: of the changes annotated so); what
        the CSV export writes."""
        where, values = self._change_filters(host, since, until, verdicts, min_change, run, labels)
        tail = "LIMIT ?" if limit is not None else ""
        if limit is not None:
            values.append(limit)
        order = "ORDER BY c.fetched_at DESC, c.natural_key, c.generation DESC"
        with self.reading() as connection:
            # The newest rows of `changes` alone first, then their pages: joined first, the
            # 50 newest of the 100,000-page demo store took ten times as long.
            rows = connection.execute(f"""
                SELECT {_CHANGE_COLUMNS}
                FROM (SELECT * FROM changes c {where} {order} {tail}) c JOIN pages p USING (natural_key)
                {_annotations_joined()}
                {order}
            """, values).fetchall()
        return [ChangeRow(*row) for row in rows]

    def count_changes(self, *, host: str | None = None, since: datetime | None = None,
                      until: datetime | None = None, verdicts: Sequence[str] = (),
                      min_change: float = 0.0, run: int | None = None, labels: Sequence[str] = ()) -> int:
        where, values = self._change_filters(host, since, until, verdicts, min_change, run, labels)
        with self.reading() as connection:
            return _one(connection.execute(
                f"SELECT count(*) FROM changes c {where}", values))[0]

    def host_pages(self, host: str) -> list[HostPage]:
        """A host's pages, in key order, each with its latest change."""
        with self.reading() as connection:
            rows = connection.execute("""
                SELECT p.natural_key, p.latest_generation, p.last_fetched, c.verdict,
                       c.unchanged_ratio, c.bytes_added, c.bytes_removed
                FROM pages p LEFT JOIN changes c
                  ON c.natural_key = p.natural_key AND c.generation = p.latest_generation
                WHERE p.host = ? ORDER BY p.natural_key
            """, [host]).fetchall()
        return [HostPage(*row) for row in rows]

    def hosts(self) -> list[HostPages]:
        """Every host, in order, with its pages' count."""
        with self.reading() as connection:
            rows = connection.execute(
                "SELECT host, count(*) FROM pages GROUP BY host ORDER BY host").fetchall()
        return [HostPages(*row) for row in rows]

    # --- overview and trends ------------------------------------------------------------------

    def verdict_counts(self) -> dict[str, int]:
        """How many change rows have each verdict, the template-only ones counted apart under
        `TEMPLATE_ONLY` (what the lists show of them) rather than under their verdict."""
        with self.reading() as connection:
            return dict(connection.execute("""
                SELECT CASE WHEN template_only THEN ? ELSE verdict END AS shown, count(*)
                FROM changes GROUP BY shown ORDER BY shown""", [TEMPLATE_ONLY]).fetchall())

    def biggest_changes(self, limit: int = 20) -> list[ChangeRow]:
        """The largest changes (by share changed, then bytes) among each page's latest ones,
        template-only changes after every change of a page's own (`TEMPLATE_LAST`): a banner
        that is half of a short page is no large change of that page."""
        with self.reading() as connection:
            rows = connection.execute(f"""
                SELECT {_CHANGE_COLUMNS} FROM changes c JOIN pages p USING (natural_key)
                {_annotations_joined()}
                WHERE c.verdict NOT IN ('new', 'unchanged') AND c.generation = p.latest_generation
                ORDER BY {TEMPLATE_LAST}, {changed_share_sql("c")} DESC,
                         c.bytes_added + c.bytes_removed DESC, c.natural_key
                LIMIT ?
            """, [limit]).fetchall()
        return [ChangeRow(*row) for row in rows]

    def host_activity(self, bucket: str = "day") -> list[HostActivity]:
        """Per host and time bucket (hour, day, week or month: `cdc.core.timebins.BINS`): bytes
        changed and changes (first generations left out: a new page is not a change)."""
        if bucket not in BINS:
            raise ValueError(f"bucket is one of {', '.join(BINS)}, got {bucket!r}")
        with self.reading() as connection:
            rows = connection.execute("""
                SELECT p.host, date_trunc(?, c.fetched_at) AS bucket,
                       sum(c.bytes_added + c.bytes_removed)::BIGINT, count(*)
                FROM changes c JOIN pages p USING (natural_key)
                WHERE c.verdict <> 'new'
                GROUP BY ALL ORDER BY p.host, bucket
            """, [bucket]).fetchall()
        return [HostActivity(*row) for row in rows]

    def time_span(self) -> TimeSpan | None:
        """The first and the last fetch the store knows (None when it has none): the time the
        crawls cover, which the dashboard's time axes are chosen from."""
        with self.reading() as connection:
            first, last = _one(connection.execute("""
                SELECT least(min(f), (SELECT min(fetched_at) FROM fetches)),
                       greatest(max(f), (SELECT max(fetched_at) FROM fetches))
                FROM (SELECT fetched_at AS f FROM changes)"""))
        return None if first is None else TimeSpan(first, last)

    def host_changes(self, host: str) -> list[HostChange]:
        """Every change on a host's pages (first sightings left out), oldest first."""
        with self.reading() as connection:
            rows = connection.execute(f"""
                SELECT c.fetched_at, {changed_share_sql("c")}, c.verdict
                FROM changes c JOIN pages p USING (natural_key)
                WHERE p.host = ? AND c.verdict <> 'new' ORDER BY c.fetched_at
            """, [host]).fetchall()
        return [HostChange(*row) for row in rows]

    def match_pages(self, search: str = "", *, host: str | None = None, changed_in: int | None = None,
                    verdicts: Sequence[str] = (), include_template_only: bool = False,
                    limit: int = PICK_LIMIT) -> PageMatches:
        """Pages for a URL picker: at most `limit` of them and the total, never every key.

        `search` is a part of the URL (case-insensitive); `host` one host's pages. Given
        `changed_in` (a run id), only the pages with a change that run saw first (not a first
        sighting, not `unchanged`), of `verdicts` if given, largest change first, each with
        its latest such change; template-only changes (the stored flag) are left out unless
        `include_template_only`, and then listed after the pages' own changes. Otherwise every
        page, in key order. One scan of `pages` (and of the run's change rows): no key list is
        loaded to be filtered in Python."""
        if limit < 1:
            raise ValueError(f"limit is at least 1, got {limit}")
        conditions, values = ["TRUE"], []
        if host:
            conditions.append("p.host = ?")
            values.append(host)
        if search.strip():
            conditions.append("contains(lower(p.natural_key), lower(?))")
            values.append(search.strip())
        if changed_in is None:
            query = f"""SELECT natural_key, NULL, NULL, NULL, count(*) OVER () FROM pages p
                        WHERE {" AND ".join(conditions)} ORDER BY natural_key LIMIT ?"""
        else:
            if verdicts:
                conditions.append("list_contains(?, c.verdict)")
                values.append(list(verdicts))
            if not include_template_only:
                conditions.append("c.template_only IS NOT TRUE")
            values.insert(0, changed_in)
            query = f"""
                SELECT natural_key, verdict, changed, template_only, count(*) OVER () FROM (
                    SELECT c.natural_key, c.verdict, c.template_only,
                           {changed_share_sql("c")} AS changed
                    FROM changes c JOIN pages p USING (natural_key)
                    JOIN generations g ON g.natural_key = c.natural_key AND g.generation = c.generation
                    WHERE g.first_run = ? AND c.verdict NOT IN ('new', 'unchanged')
                      AND {" AND ".join(conditions)}
                    QUALIFY row_number() OVER (PARTITION BY c.natural_key ORDER BY c.generation DESC) = 1)
                ORDER BY template_only IS TRUE, changed DESC NULLS LAST, natural_key LIMIT ?"""
        with self.reading() as connection:
            rows = connection.execute(query, [*values, limit]).fetchall()
        return PageMatches([PageMatch(*row[:4]) for row in rows], rows[0][4] if rows else 0)

    def page_keys(self, host: str | None = None) -> list[str]:
        """Natural keys of every page, or of one host's, in order: for pickers."""
        with self.reading() as connection:
            if host is None:
                rows = connection.execute("SELECT natural_key FROM pages ORDER BY natural_key").fetchall()
            else:
                rows = connection.execute(
                    "SELECT natural_key FROM pages WHERE host = ? ORDER BY natural_key", [host]).fetchall()
        return [row[0] for row in rows]
