"""Runs as the CLI and the dashboard read them: the list of runs, one run by id or label, and
what changed on a site between two runs (`site_diff`), with the dataclasses they return.

What two runs saw is two sets of `page_runs` rows: a page's latest fetch in each run and its
content digest. A page in B and not in A is new; in A and not in B, not seen again; in both
with the same digest, unchanged; with another digest, changed, unless the change row of its
generation at B says `unchanged` (the words are all the same: the digests differ by how an
older cdc normalised the text, as after `cdc migrate`), which counts as unchanged in every
count and list. A changed page's generations are those current at each run's fetch (the last
to start by then), and its verdict, measures, excerpt and stored template-only flag are the
change row of the generation at B (`cdc.store.templates`). All of it is one set-based pass: the
changed pages are gathered once into a temporary table, which the counts, the page of
changed pages and the template groups read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import duckdb
import xxhash

from cdc.core.verdicts import UNCHANGED, changed_share, shown_verdict_of, verdict_order
from cdc.errors import RunError, RunNotFoundError
from cdc.store.annotations import annotated_as, annotations_of
from cdc.store.lookups import _one
from cdc.store.rows import changed_share_sql
from cdc.store.runs import RUN_COUNTS

FINISHED, NOT_FINISHED = "finished", "did not finish"
SHOWN_RUNS = 10  # runs an unknown-run error names
DEFAULT_PAGE_SIZE = 50
TEMPLATE_EXAMPLES = 3  # pages a template change names

# The runs' columns, and when each one's crawl began and ended: its first and last capture
# (a run ingests a crawl that may be older than the runs before it: a backfill).
_RUN_COLUMNS = ("run, label, started_at, ended_at, inputs, " + ", ".join(RUN_COUNTS)
                + ", (SELECT min(fetched_at) FROM page_runs c WHERE c.run = runs.run) AS crawled"
                + ", (SELECT max(fetched_at) FROM page_runs c WHERE c.run = runs.run) AS last_captured")

# A page's latest fetch in one run (binds the run): a finished run has one row a page
# (`finish_run` keeps the latest), a killed one may have a row per batch that saw the page.
_FINISHED_RUN_PAGES = "SELECT natural_key, fetched_at, content_digest AS digest FROM page_runs WHERE run = ?"
_RUN_PAGES = """SELECT natural_key, max(fetched_at) AS fetched_at,
                       arg_max(content_digest, fetched_at) AS digest
                FROM page_runs WHERE run = ? GROUP BY natural_key"""


def _both_runs(a: RunInfo, b: RunInfo, host: str | None) -> tuple[str, list]:
    """Every page seen by run A or run B (on `host`, if given), and the values to bind."""
    pages_a, pages_b = (_FINISHED_RUN_PAGES if run.finished else _RUN_PAGES for run in (a, b))
    on_host = "WHERE natural_key IN (SELECT natural_key FROM pages WHERE host = ?)" if host else ""
    query = f"""
        SELECT natural_key, a.fetched_at AS fetched_a, b.fetched_at AS fetched_b,
               a.digest AS digest_a, b.digest AS digest_b
        FROM ({pages_a}) a FULL JOIN ({pages_b}) b USING (natural_key) {on_host}"""
    return query, [a.run, b.run, *([host] if host else [])]


# The changed pages' change rows and the generation at A, from the temporary table
# `site_pages`. The generation current at a fetch is the last one that started by then
# (numbers order as fetch times do): a join and a max, a tenth of what an ASOF join on the
# generations cost on 100,000 pages. The pages' hosts and URLs are joined later, to the rows
# that need them (a string carried through this grouping cost a third more).
_CHANGED_ROWS = """
    SELECT c.natural_key, s.generation_a, c.generation, c.previous_generation, c.verdict, c.template_only,
           c.bytes_added, c.bytes_removed, c.unchanged_ratio, c.retained_ratio, c.excerpt, c.measure,
           c.template_edit
    FROM (SELECT x.natural_key,
                 max(g.generation) FILTER (WHERE g.fetched_at <= x.fetched_a) AS generation_a,
                 max(g.generation) FILTER (WHERE g.fetched_at <= x.fetched_b) AS generation_b
          FROM site_pages x JOIN generations g USING (natural_key)
          WHERE x.digest_a <> x.digest_b
          GROUP BY x.natural_key) s
    JOIN changes c ON c.natural_key = s.natural_key AND c.generation = s.generation_b"""

# The changed pages whose change says their words are all the same (verdict `unchanged`, the
# two sides' digests differing by how the text was cut into lines: an older normalisation's
# text against a newer's): unchanged, as are those whose every change since A says so. One
# that changed more than once between the two runs, with a change of words before its
# latest, is changed: its latest row is not the whole of what changed since A.
_SAME_WORDS = """
    CREATE TEMP TABLE same_words AS
    SELECT natural_key FROM site_changes s
    WHERE s.verdict = ? AND NOT EXISTS (
        SELECT 1 FROM changes c
        WHERE c.natural_key = s.natural_key AND c.generation > s.generation_a
          AND c.generation < s.generation AND c.verdict <> ?)"""

# Largest change of the page's own first: the share changed (`changed_share`), then the
# bytes; an unmeasured change (its previous text was gone) last of those; then the
# template-only changes, which change none of the page's own text (as `TEMPLATE_LAST`),
# however large a share of a short page the template is. A change of the page's own beside
# a template change is measured on the page's own text at the run's end (`own_edits`,
# `cdc.store.templates`), so its stored measures already leave the template out.
_LARGEST_FIRST = (f"ORDER BY template_only IS TRUE, {changed_share_sql()} DESC NULLS LAST, "
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
    last_captured: datetime | None = None  # its last capture: when its crawl ended

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
    measure: str | None  # edits, chunks, digests or own_edits (`cdc.store.rows`)
    label: str | None = None  # the change's annotation (`cdc annotate`); None: not judged

    @property
    def shown_verdict(self) -> str:
        """The verdict, or `template_only` for a template-only change: what a list shows."""
        return shown_verdict_of(self.verdict, self.template_only)

    @property
    def share_changed(self) -> float | None:
        """What "largest change first" orders by (`changed_share`)."""
        return changed_share(self.unchanged_ratio, self.retained_ratio)

    @property
    def compare_query(self) -> dict[str, str | int]:
        """The Compare view's query string of this change (`/compare?url=&from=&to=`)."""
        return {"url": self.natural_key, "from": self.generation_a, "to": self.generation_b}


@dataclass(frozen=True)
class TemplateChange:
    """Template-only changes on one host that make the same edit (the same template chunks
    gained and lost: `changes.template_edit`) or say the same (their excerpt): one edit of the
    site's template, on many pages (`_template_groups`)."""

    host: str
    excerpt: str | None  # what most of its pages' change rows say changed
    pages: int
    sample: str  # the natural key of one of the pages, for a Compare link
    examples: tuple[str, ...] = ()  # the first few of its pages' natural keys, `sample` first
    edits: tuple[str, ...] = ()  # its pages' `template_edit`s

    @property
    def key(self) -> str:
        """A short stable name of this change (its host and edits), for a link that lists its
        pages: `site_diff(..., template_change=key)`."""
        return xxhash.xxh3_64_hexdigest(f"{self.host}\0{','.join(map(str, self.edits))}".encode())[:12]


@dataclass(frozen=True)
class SiteDiff:
    """What changed on a site (or on one host) between run A and run B.

    `changed` counts every page whose content differs, but for those whose change row says
    `unchanged` (the same words; `unchanged` counts them); `verdicts` splits those that are
    not template-only by verdict, and `template_only` counts the template changes apart, so
    `changed == sum(verdicts.values()) + template_only`. `pages` is one page of the changed
    pages, the largest change of a page's own first and the template-only ones after, from
    `offset`; `changed` is their total, for paging.
    """

    run_a: RunInfo
    run_b: RunInfo
    host: str | None
    new: int  # pages run B saw and run A did not
    not_seen_again: int  # pages run A saw and run B did not
    changed: int
    unchanged: int
    verdicts: dict[str, int]  # changed pages that are not template-only, by verdict, in
    # `cdc.core.verdicts.SHOWN_ORDER`
    template_only: int
    template_changes: list[TemplateChange] = field(default_factory=list)  # most pages first
    pages: list[ChangedPage] = field(default_factory=list)
    offset: int = 0
    listed: int | None = None  # the changed pages the list's filters pick (a template change,
    # labels), for paging; None when the list is not filtered: `changed` is its total

    @property
    def seen_by_both(self) -> int:
        return self.changed + self.unchanged

    @property
    def site_wide_changes(self) -> list[TemplateChange]:
        """The template changes on two or more pages: the edits of a host's template. A
        template-only change of one page (a block the host repeats, edited there alone) is
        no such edit: `one_page_template_changes` counts those."""
        return [change for change in self.template_changes if change.pages > 1]

    @property
    def one_page_template_changes(self) -> int:
        return sum(change.pages == 1 for change in self.template_changes)


class SiteDiffs:
    """Runs and what changed between two of them, mixed into `Store`."""

    def latest_crawls(self, count: int = 2) -> list[RunInfo]:
        """The finished runs whose crawls began last, oldest of them first (`latest_crawls`)."""
        return latest_crawls(self.runs(), count)

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
                  limit: int = DEFAULT_PAGE_SIZE, offset: int = 0,
                  template_change: str | None = None, labels: Sequence[str] = ()) -> SiteDiff:
        """What changed between run A and run B, on every host or on `host`: counts, and the
        changed pages from `offset`, at most `limit` of them, largest change first, each with
        its change's annotation label.

        `template_change` (a `TemplateChange.key`) lists that template change's pages only (none
        when no change of this diff has that key), `labels` the pages whose change is annotated
        with one of them; the counts stay the whole diff's, and `listed` counts the list."""
        if limit < 0 or offset < 0:
            raise ValueError(f"limit and offset are at least 0, got {limit} and {offset}")
        with self.reading() as connection:
            a, b = self._resolve_run(connection, run_a), self._resolve_run(connection, run_b)
            if a.crawl_order > b.crawl_order:
                raise RunError(f"run {a.run} ({a.label}) crawled after run {b.run} ({b.label}): give the "
                               "earlier crawl first")
            both, values = _both_runs(a, b, host)
            connection.execute(f"CREATE TEMP TABLE site_pages AS {both}", values)
            (new, gone, unchanged), = connection.execute("""
                SELECT count(*) FILTER (WHERE fetched_a IS NULL),
                       count(*) FILTER (WHERE fetched_b IS NULL),
                       count(*) FILTER (WHERE digest_a = digest_b)
                FROM site_pages""").fetchall()
            connection.execute(f"CREATE TEMP TABLE site_changes AS {_CHANGED_ROWS}")
            # The pages whose words are all the same are unchanged, in every count and list.
            (same_words,), = connection.execute(
                "SELECT count(*) FROM site_changes WHERE verdict = ?", [UNCHANGED]).fetchall()
            if same_words:
                connection.execute(_SAME_WORDS, [UNCHANGED, UNCHANGED])
                (same_words,), = connection.execute("SELECT count(*) FROM same_words").fetchall()
                connection.execute("DELETE FROM site_changes WHERE natural_key IN (SELECT * FROM same_words)")
                unchanged += same_words
            verdicts = dict(sorted(connection.execute("""
                SELECT verdict, count(*) FROM site_changes WHERE template_only IS NOT TRUE
                GROUP BY verdict""").fetchall(), key=lambda item: verdict_order(item[0])))
            (changed, template_only), = connection.execute(
                "SELECT count(*), count(*) FILTER (WHERE template_only) FROM site_changes").fetchall()
            groups = _template_groups(connection.execute("""
                SELECT p.host, s.template_edit, s.excerpt, count(*), min(s.natural_key, ?)
                FROM site_changes s JOIN pages p USING (natural_key) WHERE s.template_only
                GROUP BY ALL""", [TEMPLATE_EXAMPLES]).fetchall())
            conditions, values = [], []
            if template_change is not None:
                chosen = next((group for group in groups if group.key == template_change), None)
                conditions.append("""template_only AND list_contains(?, template_edit)
                                     AND natural_key IN (SELECT natural_key FROM pages WHERE host = ?)""")
                values += [list(chosen.edits), chosen.host] if chosen else [[], None]  # None: no rows
            if labels:
                conditions.append(annotated_as("site_changes"))
                values.append(list(labels))
            where = ("WHERE " + " AND ".join(conditions)) if conditions else ""
            listed = _one(connection.execute(f"SELECT count(*) FROM site_changes {where}", values))[0] \
                if conditions else None
            rows = connection.execute(f"""
                SELECT natural_key, p.url, p.host, s.* EXCLUDE (natural_key, template_edit)
                FROM (SELECT l.*, a.label FROM (
                          SELECT * FROM site_changes {where} {_LARGEST_FIRST} LIMIT ? OFFSET ?) l
                      LEFT JOIN {annotations_of()} a
                        ON a.natural_key = l.natural_key AND a.generation = l.generation) s
                JOIN pages p USING (natural_key) {_LARGEST_FIRST}""", [*values, limit, offset]).fetchall()
        return SiteDiff(a, b, host, new, gone, changed, unchanged, verdicts, template_only, groups,
                        [ChangedPage(*row) for row in rows], offset, listed)


def _template_groups(rows: list[tuple]) -> list[TemplateChange]:
    """The template changes of a diff's template-only pages, from their counts by host, edit
    and excerpt (each row: host, edit, excerpt, pages, the first few page keys).

    Pages that make the same edit of the template are one change; so are pages whose change
    says the same (their excerpt): the same banner inserted above a page whose only other
    text is its title makes another edit where the title's line end moved too, but it is the
    same change to a reader. A change is the connected whole of both relations on its host,
    its excerpt the one most of its pages give (of those, the first in order), most pages
    first. (An excerpt is cut short: two edits whose first 120 characters agree, up to three
    of them, join.)"""
    parent: dict[tuple, tuple] = {}

    def root(node: tuple) -> tuple:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for host, edit, excerpt, _, _ in rows:
        if excerpt:  # an unknown or empty excerpt says nothing
            parent[root(("edit", host, edit))] = root(("excerpt", host, excerpt))
    members: dict[tuple, list[tuple]] = {}
    for row in rows:
        members.setdefault(root(("edit", row[0], row[1])), []).append(row)
    groups = []
    for found in members.values():
        said: dict[str | None, int] = {}
        for _, _, excerpt, pages, _ in found:
            said[excerpt] = said.get(excerpt, 0) + pages
        excerpt = min(said, key=lambda text: (-said[text], text is None, text or ""))
        examples = tuple(sorted(key for row in found for key in row[4])[:TEMPLATE_EXAMPLES])
        groups.append(TemplateChange(found[0][0], excerpt, sum(said.values()), examples[0], examples,
                                     tuple(sorted({row[1] for row in found}, key=str))))
    return sorted(groups, key=lambda group: (-group.pages, group.host, group.excerpt or "", group.edits))


def latest_crawls(runs: list[RunInfo], count: int = 2) -> list[RunInfo]:
    """Of `runs`, the finished ones whose crawls began last, oldest of them first: what a site
    diff compares by default (a backfill's run, however recent, holds an older crawl)."""
    finished = [info for info in runs if info.finished and info.crawled is not None]
    return sorted(finished, key=lambda info: info.crawl_order)[-count:]


def _run_info(row: tuple) -> RunInfo:
    run, label, started_at, ended_at, inputs, *counts, crawled, last_captured = row
    return RunInfo(run, label, started_at, ended_at, tuple(inputs or ()), *counts, crawled=crawled,
                   last_captured=last_captured)
