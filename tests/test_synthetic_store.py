"""The benchmarks' synthetic store (`benchmarks/synthetic_store.py`), written in bulk, holds what
ingest would leave: a consistent store of this schema, generations numbered by capture time, a
finished run per crawl whose `page_runs` make `Store.site_diff` agree with the change rows, and
the template-only flags of a site-wide template change."""

from __future__ import annotations

import pytest

from benchmarks.synthetic_store import build_store
from cdc.core.captures import capture_id
from cdc.store import SCHEMA_VERSION, Store
from tests.storerows import consistency_problems, store_rows

PAGES, CRAWLS, HOSTS = 120, 3, 4


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return build_store(tmp_path_factory.mktemp("synthetic") / "synthetic.duckdb", pages=PAGES,
                       generations=CRAWLS, hosts=HOSTS, seed=3)


def test_it_is_a_consistent_store_of_this_schema(synthetic):
    assert Store(synthetic.path).meta()["schema_version"] == str(SCHEMA_VERSION)
    assert not any(consistency_problems(synthetic.path).values()), consistency_problems(synthetic.path)
    assert synthetic.generations == PAGES * CRAWLS
    page = Store(synthetic.path).page(Store(synthetic.path).page_keys()[0])
    assert page.surt and page.surt.endswith(")/" + page.natural_key.split("/", 3)[3].lower())


def test_generations_are_numbered_by_capture_time_and_first_seen_by_their_crawl(synthetic):
    rows = store_rows(synthetic.path, ("generations", "changes", "fetches", "runs", "page_runs"))
    for key, generation, fetched_at, *_, first_run in rows["generations"]:
        assert generation == capture_id(fetched_at)
        assert (key, fetched_at, first_run) in {(k, f, run) for k, f, _, run, _ in rows["fetches"]}
    measure = -3  # then template_only and template_edit
    # Measured with exact edits; a change of the template and of the page's own, on the page's
    # own text, by the template refresh (`cdc.store.templates`).
    assert {row[measure] for row in rows["changes"] if row[2] is not None} == {"edits", "own_edits"}
    assert {row[measure] for row in rows["changes"] if row[2] is None} == {None}
    runs = Store(synthetic.path).runs()
    assert [run.run for run in runs] == [3, 2, 1] and all(run.finished for run in runs)
    assert [(run.pages, run.new_pages, run.changed) for run in runs] == [
        (PAGES, 0, PAGES), (PAGES, 0, PAGES), (PAGES, PAGES, 0)]
    assert len(rows["page_runs"]) == len(rows["fetches"]) == PAGES * CRAWLS


def test_the_site_diff_of_its_last_two_runs_agrees_with_its_change_rows(synthetic):
    store = Store(synthetic.path)
    diff = store.site_diff(CRAWLS - 1, CRAWLS, limit=PAGES)
    assert (diff.new, diff.not_seen_again, diff.unchanged, diff.changed) == (0, 0, 0, PAGES)
    changes = {row.natural_key: row for row in store.changes(run=CRAWLS)}  # what the last run saw first
    assert len(diff.pages) == len(changes) == PAGES
    verdicts: dict[str, int] = {}
    for page in diff.pages:
        row = changes[page.natural_key]
        assert page.generation_b == row.generation and page.generation_a == row.previous_generation
        assert page.previous_generation == page.generation_a
        assert (page.verdict, page.bytes_added, page.bytes_removed, page.excerpt) == (
            row.verdict, row.bytes_added, row.bytes_removed, row.excerpt)
        if not row.template_only:
            verdicts[row.verdict] = verdicts.get(row.verdict, 0) + 1
    assert sum(diff.verdicts.values()) + diff.template_only == PAGES
    # Host 0 changed its header on every page, and nothing else: one template change. A page
    # that became a different page before (a header of its own) is not template-only.
    on_host_0 = {page.natural_key for page in diff.pages if page.host == "www.site000.example.com"}
    flagged = {page.natural_key for page in diff.pages if page.template_only}
    assert len(on_host_0) == PAGES // HOSTS and flagged <= on_host_0 and len(flagged) >= 0.8 * len(on_host_0)
    (group,) = diff.template_changes
    assert (group.host, group.pages) == ("www.site000.example.com", len(flagged))
    assert diff.template_only == len(flagged) and diff.verdicts == verdicts


def test_the_same_parameters_give_the_same_store(synthetic, tmp_path):
    again = build_store(tmp_path / "again.duckdb", pages=PAGES, generations=CRAWLS, hosts=HOSTS, seed=3)
    tables = ("pages", "generations", "chunk_lists", "changes", "fetches", "page_runs", "runs")
    assert store_rows(again.path, tables) == store_rows(synthetic.path, tables)
