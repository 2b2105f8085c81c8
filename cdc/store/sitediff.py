"""Runs as the CLI and the dashboard read them: the list of runs, one run by id or label, and
what changed on a site between two runs (`site_diff`), with the dataclasses they return.

What two runs saw is two sets of `page_runs` rows: a page's latest fetch in each run and its
content digest. A page in B and not in A is new; in A and not in B, not seen again; in both
with the same digest, unchanged; with another digest, changed. A changed page's generations
are those current at each run's fetch (an ASOF join on the generations' first fetches), and
its verdict, measures and excerpt are the change row of the generation at B, with its
template-only flag (`reads._with_template_only`). All of it is one set-based pass: the
changed pages are gathered once into a temporary table, which the counts, the page of
changed pages and the template groups read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import duckdb
import xxhash

from cdc.errors import RunError, RunNotFoundError
from cdc.store.lookups import _one
from cdc.store.reads import _CHANGE_COLUMNS, BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE, _with_template_only
from cdc.store.runs import RUN_COUNTS

FINISHED, NOT_FINISHED = "finished", "did not finish"
SHOWN_RUNS = 10  # runs an unknown-run error names
DEFAULT_PAGE_SIZE = 50
TEMPLATE_EXAMPLES = 3  # pages a template change names
CHANGE_VERDICTS = ("minor", "rewrite", "different_page", "changed")  # smallest first; changed: unmeasured

# The runs' columns, and when each one's crawl began: its first capture (a run ingests a
# crawl that may be older than the runs before it: a backfill).
_RUN_COLUMNS = ("run, label, started_at, ended_at, inputs, " + ", ".join(RUN_COUNTS)
                + ", (SELECT min(fetched_at) FROM page_runs c WHERE c.run = runs.run) AS crawled")

# A page's latest fetch in one run (binds the run): a finished run has one row a page, a
# killed one may have a row per batch that saw the page.
_RUN_PAGES = """SELECT natural_key, max(fetched_at) AS fetched_at,
                       arg_max(content_digest, fetched_at) AS digest
                FROM page_runs WHERE run = ? GROUP BY natural_key"""

# Every page seen by run A or run B (binds A, then B), with its host and URL.
_BOTH_RUNS = f"""
    SELECT x.*, p.url, p.host
    FROM (SELECT natural_key, a.fetched_at AS fetched_a, b.fetched_at AS fetched_b,
                 a.digest AS digest_a, b.digest AS digest_b
          FROM ({_RUN_PAGES}) a FULL JOIN ({_RUN_PAGES}) b USING (natural_key)) x
    JOIN pages p USING (natural_key)"""

# The changed pages' change rows, as `_with_template_only` wants them (`_CHANGE_COLUMNS`),
# plus the generation at A and the page's URL; from the temporary table `site_pages`.
_CHANGED_ROWS = f"""
    SELECT {_CHANGE_COLUMNS}, s.url, s.generation_a
    FROM (SELECT x.natural_key, x.url, ga.generation AS generation_a, gb.generation AS generation_b
          FROM site_pages x
          ASOF LEFT JOIN generations ga ON ga.natural_key = x.natural_key AND x.fetched_a >= ga.fetched_at
          ASOF LEFT JOIN generations gb ON gb.natural_key = x.natural_key AND x.fetched_b >= gb.fetched_at
          WHERE x.digest_a <> x.digest_b) s
    JOIN changes c ON c.natural_key = s.natural_key AND c.generation = s.generation_b
    JOIN pages p ON p.natural_key = s.natural_key"""

# Largest change first: the share changed (1 - the smaller kept share), then the bytes; an
# unmeasured change (its previous text was gone) last.
_LARGEST_FIRST = ("ORDER BY 1 - least(unchanged_ratio, retained_ratio) DESC NULLS LAST, "
                  "coalesce(bytes_added, 0) + coalesce(bytes_removed, 0) DESC, natural_key")


@dataclass(frozen=True)
class RunInfo:
    """One crawl run: a `cdc ingest`, a `cdc fetch` or a cluster ingest. The counts are None
    for a run that did not finish (killed) and for the run of pages stored before runs were
    recorded."""

    run: int
    label: str
    started_at: datetime
    ended_at: datetime | None  # None: the run did not finish
    inputs: tuple[str, ...]
    records: int | None
    pages: int | None
    new_pages: int | None
    changed: int | None
    unchanged: int | None
    older: int | None
    skipped: int | None
    failed: int | None
    crawled: datetime | None = None  # its first capture: when its crawl began (None: it saw no page)

    @property
    def crawl_order(self) -> tuple[datetime, int]:
        """What orders runs as crawls: when each crawl began, not when it was ingested."""
        return (self.crawled or self.started_at, self.run)

    @property
    def finished(self) -> bool:
        return self.ended_at is not None

    @property
    def status(self) -> str:
        return FINISHED if self.finished else NOT_FINISHED

    def counts(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in RUN_COUNTS}


@dataclass(frozen=True)
class ChangedPage:
    """A page whose content differs between two runs: the generations current at each run's
    fetch, and the change row of the one at B (its verdict, bytes and excerpt)."""

    natural_key: str
    url: str  # the last URL the page was fetched at
    host: str
    generation_a: int  # current at run A's fetch of the page
    generation_b: int  # current at run B's fetch
    previous_generation: int | None  # what the change row measured against: generation_a,
    # unless the page changed more than once between the two fetches
    verdict: str  # minor, rewrite, different_page, or changed (unmeasured)
    template_only: bool | None  # every changed chunk is the host's template; None: unknown
    bytes_added: int | None  # None where the change was not measured
    bytes_removed: int | None
    unchanged_ratio: float | None
    retained_ratio: float | None
    excerpt: str | None
    measure: str | None  # edits, chunks, or digests

    @property
    def share_changed(self) -> float | None:
        """1 - the smaller kept share: what "largest change first" orders by."""
        if self.unchanged_ratio is None or self.retained_ratio is None:
            return None
        return 1 - min(self.unchanged_ratio, self.retained_ratio)

    @property
    def compare_query(self) -> dict[str, str | int]:
        """The Compare view's query string of this change (`/compare?url=&from=&to=`)."""
        return {"url": self.natural_key, "from": self.generation_a, "to": self.generation_b}


@dataclass(frozen=True)
class TemplateChange:
    """Template-only changes on one host that say the same (their excerpt): one edit of the
    site's template, on many pages."""

    host: str
    excerpt: str | None
    pages: int
    sample: str  # the natural key of one of the pages, for a Compare link
    examples: tuple[str, ...] = ()  # the first few of its pages' natural keys, `sample` first

    @property
    def key(self) -> str:
        """A short stable name of this change (its host and excerpt), for a link that lists its
        pages: `site_diff(..., template_change=key)`."""
        return xxhash.xxh3_64_hexdigest(f"{self.host}\0{self.excerpt or ''}".encode())[:12]


@dataclass(frozen=True)
class SiteDiff:
    """What changed on a site (or on one host) between run A and run B.

    `changed` counts every page whose content differs; `verdicts` splits those that are not
    template-only by verdict, and `template_only` counts the template changes apart, so
    `changed == sum(verdicts.values()) + template_only` (None when not asked for: then
    `verdicts` holds every changed page). `pages` is one page of the changed pages, largest
    change first, from `offset`; `changed` is their total, for paging.
    """

    run_a: RunInfo
    run_b: RunInfo
    host: str | None
    new: int  # pages run B saw and run A did not
    not_seen_again: int  # pages run A saw and run B did not
    changed: int
    unchanged: int
    verdicts: dict[str, int]  # changed pages that are not template-only, by verdict, in
    # `CHANGE_VERDICTS` order
    template_only: int | None
    template_changes: list[TemplateChange] = field(default_factory=list)  # most pages first
    pages: list[ChangedPage] = field(default_factory=list)
    offset: int = 0

    @property
    def seen_by_both(self) -> int:
        return self.changed + self.unchanged


class SiteDiffs:
    """Runs and what changed between two of them, mixed into `Store`."""

    def latest_crawls(self, count: int = 2) -> list[RunInfo]:
        """The finished runs whose crawls began last, oldest of them first: what a site diff
        compares by default (a backfill's run, however recent, holds an older crawl)."""
        finished = [info for info in self.runs() if info.finished and info.crawled is not None]
        return sorted(finished, key=lambda info: info.crawl_order)[-count:]

    def runs(self) -> list[RunInfo]:
        """Every run, newest first."""
        with self.reading() as connection:
            rows = connection.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY run DESC").fetchall()
        return [_run_info(row) for row in rows]

    def run(self, ref: int | str) -> RunInfo:
        """A run by its id, or by its label (the latest run with that label); a
        `RunNotFoundError` naming the known runs when there is none."""
        with self.reading() as connection:
            return self._resolve_run(connection, ref)

    def _resolve_run(self, connection: duckdb.DuckDBPyConnection, ref: int | str) -> RunInfo:
        text = str(ref).strip()
        row = None
        if text.isdigit():
            row = _one(connection.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run = ?", [int(text)]))
        if row is None:
            row = _one(connection.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE label = ? ORDER BY run DESC LIMIT 1", [text]))
        if row is not None:
            return _run_info(row)
        known = connection.execute("SELECT run, label FROM runs ORDER BY run DESC LIMIT ?",
                                   [SHOWN_RUNS + 1]).fetchall()
        if not known:
            raise RunNotFoundError(f"no run {text!r}: {self.path} has no runs yet; `cdc ingest` makes one")
        named = ", ".join(f"{run} ({label})" for run, label in known[:SHOWN_RUNS])
        more = ", ..." if len(known) > SHOWN_RUNS else ""
        raise RunNotFoundError(f"no run with id or label {text!r} in {self.path}; its runs, newest first: "
                               f"{named}{more} (`cdc runs` lists them all)")

    def run_captures(self) -> dict[int, tuple[datetime, datetime]]:
        """Each run's first and last capture (the fetch times of the pages it saw), by run id:
        when its crawl happened, which its start and end (when it was ingested) need not say.
        A run that saw no page is left out."""
        with self.reading() as connection:
            rows = connection.execute(
                "SELECT run, min(fetched_at), max(fetched_at) FROM page_runs GROUP BY run").fetchall()
        return {run: (first, last) for run, first, last in rows}

    def run_on(self, day: date) -> RunInfo | None:
        """The latest finished run whose crawl began on or before `day` (its first capture that
        day or earlier): what "the crawl of that date" picks. None when no crawl began by then."""
        end = datetime.combine(day, datetime.min.time()) + timedelta(days=1)
        with self.reading() as connection:
            row = _one(connection.execute(f"""
                SELECT {_RUN_COLUMNS} FROM runs
                WHERE ended_at IS NOT NULL
                  AND crawled < ?
                ORDER BY crawled DESC, run DESC LIMIT 1""", [end]))
        return None if row is None else _run_info(row)

    def site_diff(self, run_a: int | str, run_b: int | str, host: str | None = None, *,
                  limit: int = DEFAULT_PAGE_SIZE, offset: int = 0, with_template: bool = True,
                  template_change: str | None = None) -> SiteDiff:
        """What changed between run A and run B, on every host or on `host`: counts, and the
        changed pages from `offset`, at most `limit` of them, largest change first.

        The template-only flags are most of the cost (they count every retained chunk of the
        hosts); `with_template=False` leaves them unknown (None), for a first quick answer.
        `template_change` (a `TemplateChange.key`) lists that template change's pages only (none
        when no change of this diff has that key); the counts stay the whole diff's."""
        if limit < 0 or offset < 0:
            raise ValueError(f"limit and offset are at least 0, got {limit} and {offset}")
        with self.reading() as connection:
            a, b = self._resolve_run(connection, run_a), self._resolve_run(connection, run_b)
            if a.crawl_order > b.crawl_order:
                raise RunError(f"run {a.run} ({a.label}) crawled after run {b.run} ({b.label}): give the "
                               "earlier crawl first")
            where, values = ("WHERE p.host = ?", [host]) if host else ("", [])
            connection.execute(f"CREATE TEMP TABLE site_pages AS {_BOTH_RUNS} {where}",
                               [a.run, b.run, *values])
            (new, gone, unchanged), = connection.execute("""
                SELECT count(*) FILTER (WHERE fetched_a IS NULL),
                       count(*) FILTER (WHERE fetched_b IS NULL),
                       count(*) FILTER (WHERE digest_a = digest_b)
                FROM site_pages""").fetchall()
            if with_template:
                connection.execute(f"CREATE TEMP TABLE site_changes AS {_with_template_only(_CHANGED_ROWS)}",
                                   [BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE])
            else:
                connection.execute(f"CREATE TEMP TABLE site_changes AS "
                                   f"SELECT *, NULL::BOOLEAN AS template_only FROM ({_CHANGED_ROWS})")
            verdicts = dict(sorted(connection.execute("""
                SELECT verdict, count(*) FROM site_changes WHERE template_only IS NOT TRUE
                GROUP BY verdict""").fetchall(), key=_verdict_order))
            (changed, template_only), = connection.execute(
                "SELECT count(*), count(*) FILTER (WHERE template_only) FROM site_changes").fetchall()
            groups = [TemplateChange(host_, excerpt, pages, examples[0], tuple(examples))
                      for host_, excerpt, pages, examples in connection.execute("""
                SELECT host, excerpt, count(*) AS pages, min(natural_key, ?)
                FROM site_changes WHERE template_only GROUP BY host, excerpt
                ORDER BY pages DESC, host, excerpt""", [TEMPLATE_EXAMPLES]).fetchall()]
            where, values = "", []
            if template_change is not None:
                chosen = next((group for group in groups if group.key == template_change), None)
                where = "WHERE template_only AND host = ? AND excerpt IS NOT DISTINCT FROM ?"
                values = [chosen.host, chosen.excerpt] if chosen else [None, None]  # None: no rows
            rows = connection.execute(f"""
                SELECT natural_key, url, host, generation_a, generation, previous_generation, verdict,
                       template_only, bytes_added, bytes_removed, unchanged_ratio, retained_ratio,
                       excerpt, measure
                FROM site_changes {where} {_LARGEST_FIRST} LIMIT ? OFFSET ?""",
                                      [*values, limit, offset]).fetchall()
        return SiteDiff(a, b, host, new, gone, changed, unchanged, verdicts,
                        template_only if with_template else None, groups,
                        [ChangedPage(*row) for row in rows], offset)


def _verdict_order(item: tuple[str, int]) -> tuple[int, str]:
    verdict = item[0]
    return (CHANGE_VERDICTS.index(verdict) if verdict in CHANGE_VERDICTS else len(CHANGE_VERDICTS), verdict)


def _run_info(row: tuple) -> RunInfo:
    run, label, started_at, ended_at, inputs, *counts, crawled = row
    return RunInfo(run, label, started_at, ended_at, tuple(inputs or ()), *counts, crawled=crawled)
