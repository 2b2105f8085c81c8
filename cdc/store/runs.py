"""Crawl runs: each `cdc ingest` and `cdc fetch` is a run with an id, a label, its start and
end, its inputs and its counts; the pages it saw are in `page_runs`.

A run ends by trimming the texts of the pages it saw to their retention limit, in the same
transaction that records its counts: within a run every text stays at hand, so a version
that arrives after its neighbours (another file of the same crawl) is measured with exact
edits, however the run's records were split into files and batches. Then, in that
transaction still, the templates of the hosts it touched are counted again and the
template-only flags set (`cdc.store.templates`): after the trim, so they are counted over the
generations that are left, as they are judged from then on. Last, the watches' hits among
the changes the run measured, and those of the runs before it that did not finish, are
recorded (`cdc.store.search`, `watched_runs`): read from the matches the runs' batches made
as they were written (`cdc.store.indexwriter`), and matched against the runs' index rows for
a watch they did not start with, beside the trim and the templates, in a connection of their
own (that reading reads nothing the run's end writes), then filtered by the flags and
measures once those are set.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from cdc.core.verdicts import UNCHANGED
from cdc.store.indexwriter import copy_watches
from cdc.store.lookups import _for_keys, _one
from cdc.store.schema import DEAD_TEXT
from cdc.store.search import WatchMatching
from cdc.store.templates import unflagged_pages

COMPACT_SHARE = 0.5  # of the file's bytes, texts trimmed since the last compaction: then compact it
RUN_COUNTS = ("records", "pages", "new_pages", "changed", "unchanged", "older", "skipped", "failed")

# The generations a run saw first among its pages' (`{keys}`) whose change says `unchanged`:
# the same words as the generation before, cut into other lines (an older cdc's text after
# `cdc migrate`). Binds the run and the verdict, compared as a pair after the join: a filter
# of one table's column would join its scan's key filter, and a scan of two filters reads the
# whole table instead of looking the keys up in the index (`cdc.store.lookups._by_key_pairs`).
_SAME_WORDS = """
    SELECT count(*) FROM changes c JOIN generations g USING (natural_key, generation)
    WHERE c.natural_key IN ({keys}) AND g.natural_key IN ({keys}) AND (g.first_run, c.verdict) = (?, ?)"""


def _counted_as_unchanged(counts: dict[str, int], same_words: int) -> dict[str, int]:
    """The run's counts with its changes of the same words moved from `changed` to
    `unchanged`: a change whose verdict is `unchanged` counts as unchanged, as in a site diff."""
    if not same_words or counts.get("changed") is None:
        return counts
    return {**counts, "changed": max(counts["changed"] - same_words, 0),
            "unchanged": (counts.get("unchanged") or 0) + same_words}


def default_label(inputs: Sequence[str]) -> str:
    """What a run ingested, when it was given no label."""
    names = [Path(name).name if name != "-" else "standard input" for name in inputs]
    if not names:
        return "ingest"
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Runs:
    """Runs, mixed into `Store` after `Writer` and `Templates` (whose `_trim` and
    `_refresh_templates` a run's end calls): started before a run's first batch, finished
    after its last."""

    def start_run(self, label: str | None, inputs: Sequence[str]) -> int:
        """A new run's id (one more than the last), recorded as started now."""
        with self.writing() as connection:
            (run,) = _one(connection.execute("SELECT coalesce(max(run), 0) + 1 FROM runs"))
            connection.execute(
                "INSERT INTO runs (run, label, started_at, inputs) VALUES (?, ?, ?, ?)",
                [run, label or default_label(inputs), _now(), [str(name) for name in inputs]])
            copy_watches(connection, run)  # its batches match these as they are written
        return run

    def finish_run(self, run: int, counts: dict[str, int], pages: Iterable[str]) -> None:
        """Record a run's end and counts, trim the texts of the pages it saw, and set the
        template-only flags of their hosts' change rows.

        A trimmed text's bytes stay in the file, its row deleted (`_trim`), until the store
        is rewritten whole (`compact`): once the texts trimmed since the last rewrite pass
        `COMPACT_SHARE` of the file. A first import of a crawl history, which trims most of
        what it brought, is compacted at its end; runs of recrawls, after many of them."""
        with self.writing() as connection:
            # Every core: the run's workers are done (a writer's one thread is for its batches,
            # beside them). The 100,000-page run's end of benchmarks/search.py: 1.72 -> 1.29 s.
            connection.execute(f"SET threads = {os.cpu_count() or 1}")
            with WatchMatching(connection, run, beside=True) as matching:  # beside the trim and the flags
                pages = sorted(pages)
                dead = self._trim(connection, pages) + self.trimmed_bytes(connection)
                self.set_meta(connection, DEAD_TEXT, str(dead))
                # A run that did not finish (killed) left rows unflagged: they are flagged with
                # the next run's, found by their state (once flagged, never again).
                self._refresh_templates(connection, sorted({*pages, *unflagged_pages(connection, pages)}))
                # After the flags: a watch leaves template-only changes out.
                self._record_watch_hits(connection, run, matching)
            # One row per page for the run: the latest of those its batches wrote.
            connection.execute("""
                CREATE OR REPLACE TEMP TABLE seen AS
                SELECT natural_key, run, max(fetched_at) AS fetched_at,
                       arg_max(content_digest, fetched_at) AS content_digest
                FROM page_runs WHERE run = ? GROUP BY natural_key, run""", [run])
            connection.execute("DELETE FROM page_runs WHERE run = ?", [run])
            connection.execute("INSERT INTO page_runs SELECT * FROM seen")
            connection.execute("DROP TABLE seen")
            same_words = sum(count for (count,) in _for_keys(connection, _SAME_WORDS, pages, "changes",
                                                             [run, UNCHANGED]))
            counts = _counted_as_unchanged(counts, same_words)
            assignments = ", ".join(f"{name} = ?" for name in RUN_COUNTS)
            connection.execute(f"UPDATE runs SET ended_at = ?, {assignments} WHERE run = ?",
                               [_now(), *(counts.get(name) for name in RUN_COUNTS), run])
        if dead > COMPACT_SHARE * self.path.stat().st_size:
            self.compact()
