"""The Site view, headless: what changed between two crawl runs, on the demo store and on two
real Wget crawls of Python's docs (`tests.sitecrawl`), each ingested as a run of its own.

It is the landing page once a store holds two finished runs; its counts are `site_diff`'s;
the banner added to every page of the second docs crawl is one template change with its
page count, and its link lists exactly its pages; every filter round-trips through the query
string; page text stays in table cells (text) and option labels.
"""

from __future__ import annotations

import shutil
import sys
from datetime import date
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from cdc.analyst.annotations import annotate
from cdc.cli.main import EXIT_OK, main
from cdc.core.urls import canonical_url
from cdc.store import Store
from tests import crawlgen, sitecrawl
from tests.sitecrawl import BANNER

ROOT = Path(__file__).resolve().parents[1]
# One xdist worker runs the module, so that its store of the docs crawls (`docs`) and the demo
# store are built once (docs/testing.md).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("site-view")]
TITLE = "What changed on the site"
PAGE_SIZE = 50  # views/site.py


@pytest.fixture(scope="module")
def docs(docs_crawls, tmp_path_factory) -> tuple[Path, sitecrawl.Manifest]:
    """The two docs crawls (conftest.py's), each ingested with its own run label: the store and
    the edits made."""
    crawls = docs_crawls
    db = str(tmp_path_factory.mktemp("site-docs") / "docs.duckdb")
    for label, warc in (("docs-before", crawls.crawl1), ("docs-after", crawls.crawl2)):
        assert main(["--db", db, "ingest", "--quiet", "--run", label, str(warc)]) == EXIT_OK
    return Path(db), crawls.manifest


def app_on(path: Path, monkeypatch, **query: str) -> AppTest:
    """The app on the store at `path`, opened at its landing page with this query string."""
    monkeypatch.setenv("CDC_DB", str(path))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for name, value in query.items():
        app.query_params[name] = value
    app.run()
    assert not app.exception, app.exception
    return app


def rerun(app: AppTest) -> AppTest:
    app.run()
    assert not app.exception, app.exception
    return app


def metrics(app: AppTest) -> dict[str, str]:
    return {metric.label: metric.value for metric in app.metric}


def expected_metrics(diff) -> dict[str, str]:
    labels = {"minor": "Minor", "rewrite": "Rewrite", "different_page": "Different page",
              "changed": "Changed, not measured"}
    counts = {"New pages": diff.new, "Not seen again": diff.not_seen_again, "Changed": diff.changed,
              "Unchanged": diff.unchanged, "Template only": diff.template_only}
    counts |= {labels[verdict]: count for verdict, count in diff.verdicts.items()}
    return {label: f"{count:,}" for label, count in counts.items()}


def template_table(app: AppTest):
    [table] = [frame.value for frame in app.dataframe if "examples" in frame.value.columns]
    return table


def pages_table(app: AppTest):
    [table] = [frame.value for frame in app.dataframe if "open" in frame.value.columns]
    return table


def query(app: AppTest) -> dict[str, str]:
    return {name: app.query_params[name] for name in app.query_params}


def listed_pages(path: Path, monkeypatch, link_query: dict[str, str], total: int) -> list[str]:
    """Every page of the changed-pages table, page by page, opened as the link opens it."""
    keys = []
    for page in range(1, -(-total // PAGE_SIZE) + 1):
        app = app_on(path, monkeypatch, **link_query, page=str(page))
        assert query(app)["page"] == str(page)
        keys += list(pages_table(app)["page"])
    return keys


# --- the demo store ---------------------------------------------------------------------------


def test_with_two_runs_it_is_the_landing_page_at_the_latest_two(demo_path, monkeypatch):
    app = app_on(demo_path, monkeypatch)
    assert [title.value for title in app.title] == [TITLE]
    store = Store(demo_path)
    newest, previous = (run.run for run in store.runs()[:2])
    assert (app.selectbox(key="site-a").value, app.selectbox(key="site-b").value) == (previous, newest)
    assert query(app) == {"a": str(previous), "b": str(newest), "page": "1"}
    diff = store.site_diff(previous, newest, limit=PAGE_SIZE)
    assert metrics(app) == expected_metrics(diff)
    table = pages_table(app)
    assert list(table["page"]) == [page.natural_key for page in diff.pages]  # largest change first
    first = diff.pages[0]
    link = urlsplit(table["open"][0])
    assert link.path == "compare"
    assert dict(parse_qsl(link.query)) == {name: str(value) for name, value in first.compare_query.items()}
    # The Overview is still one click away.
    app.switch_page("views/overview.py")
    rerun(app)
    assert metrics(app)["Pages"] == f"{store.stats()['pages']:,}"


def test_the_label_filter_lists_the_pages_whose_change_an_analyst_marked(demo_path, monkeypatch, tmp_path):
    path = tmp_path / "demo.duckdb"  # a copy: the annotations are this test's alone
    shutil.copy(demo_path, path)
    store = Store(path)
    newest, previous = (run.run for run in store.runs()[:2])
    diff = store.site_diff(previous, newest, limit=PAGE_SIZE)
    significant, noise = diff.pages[3], diff.pages[7]
    annotate(store, significant.natural_key, significant.generation_b, "significant", "=the price", "ann")
    annotate(store, noise.natural_key, noise.generation_b, "noise", None, "ann")
    app = app_on(path, monkeypatch, label="significant")
    assert app.multiselect(key="site-labels").value == ["significant"]
    assert list(pages_table(app)["page"]) == [significant.natural_key]
    assert list(pages_table(app)["label"]) == ["significant"]
    assert metrics(app) == expected_metrics(diff)  # the counts stay the whole diff's
    app.multiselect(key="site-labels").set_value(["significant", "noise"])
    rerun(app)
    assert query(app)["label"] == "significant,noise"
    assert set(pages_table(app)["page"]) == {significant.natural_key, noise.natural_key}
    app.multiselect(key="site-labels").set_value(["unsure"])
    rerun(app)
    assert all("open" not in frame.value.columns for frame in app.dataframe)  # no page listed
    assert any("annotated unsure" in caption.value for caption in app.caption)
    app.multiselect(key="site-labels").set_value([])
    rerun(app)
    assert "label" not in query(app)
    table = pages_table(app)
    assert list(table["page"]) == [page.natural_key for page in diff.pages]
    assert dict(zip(table["page"], table["label"]))[significant.natural_key] == "significant"
    # The Export view filters by label too, its preview carrying the note.
    app.switch_page("views/export.py")
    rerun(app)
    app.multiselect(key="export-labels").set_value(["significant"])
    rerun(app)
    assert "1 changes match" in [caption.value for caption in app.caption]
    [preview] = [frame.value for frame in app.dataframe]
    assert (list(preview["url"]), list(preview["label"]), list(preview["note"])) == (
        [significant.natural_key], ["significant"], ["=the price"])


def test_runs_and_a_host_from_the_query_string_and_back(demo_path, monkeypatch):
    store = Store(demo_path)
    app = app_on(demo_path, monkeypatch, a="2", b="4", host="news.example")
    assert metrics(app) == expected_metrics(store.site_diff(2, 4, "news.example"))
    assert {"a": "2", "b": "4", "host": "news.example"}.items() <= query(app).items()
    app.selectbox(key="site-host").set_value("")  # all hosts
    app.selectbox(key="site-a").set_value(3)
    rerun(app)
    assert "host" not in query(app) and query(app)["a"] == "3"
    assert metrics(app) == expected_metrics(store.site_diff(3, 4))
    again = app_on(demo_path, monkeypatch, **query(app))  # the shared link
    assert metrics(again) == metrics(app)
    assert pages_table(again).equals(pages_table(app))


def test_two_dates_pick_the_latest_crawl_begun_by_each(demo_path, monkeypatch):
    store = Store(demo_path)
    days = {run.run: run.crawled.date() for run in store.runs()}
    assert store.run_on(days[3]).run == 3 and store.run_on(days[1].replace(day=days[1].day - 1)) is None
    app = app_on(demo_path, monkeypatch, by="dates", date_a=str(days[2]), date_b=str(days[5]))
    assert app.radio(key="site-by").value == "dates"
    assert app.date_input(key="site-date-a").value == days[2]
    assert metrics(app) == expected_metrics(store.site_diff(2, 5))
    assert query(app)["date_b"] == str(days[5]) and "a" not in query(app)
    app.date_input(key="site-date-b").set_value(days[4])
    rerun(app)
    assert metrics(app) == expected_metrics(store.site_diff(2, 4))
    assert query(app)["date_b"] == str(days[4])
    late = app_on(demo_path, monkeypatch, by="dates", date_a=str(date(1999, 1, 1)), date_b=str(days[5]))
    assert late.error and "No finished crawl began on or before 1999-01-01" in late.error[0].value


def test_a_demo_template_change_lists_its_pages(demo_path, monkeypatch):
    store = Store(demo_path)
    diff = store.site_diff(3, 4)
    change = diff.template_changes[0]
    app = app_on(demo_path, monkeypatch, a="3", b="4")
    table = template_table(app)
    # The edits on two or more pages; one on a single page (a repeated block edited there
    # alone) is counted apart.
    assert list(table["pages"]) == [group.pages for group in diff.template_changes if group.pages > 1]
    single = sum(group.pages == 1 for group in diff.template_changes)
    assert any(f"Also {single:,} template-only change" in c.value for c in app.caption) == (single > 0)
    link = dict(parse_qsl(urlsplit(table["list"][0]).query))
    assert link == {"a": "3", "b": "4", "group": change.key}
    listed = app_on(demo_path, monkeypatch, **link)
    pages = [page.natural_key for page in store.site_diff(3, 4, template_change=change.key).pages]
    assert list(pages_table(listed)["page"]) == pages and len(pages) == change.pages
    assert set(change.examples) <= set(pages) and set(pages_table(listed)["template only"]) == {True}
    assert listed.selectbox(key="site-group").value == change.key
    assert metrics(listed) == expected_metrics(diff)  # the counts stay the whole diff's
    listed.selectbox(key="site-group").set_value("")
    rerun(listed)
    assert "group" not in query(listed) and len(pages_table(listed)) == diff.changed


def test_a_stale_or_broken_query_string_opens_the_defaults(demo_path, monkeypatch):
    app = app_on(demo_path, monkeypatch, a="nope", b="99", page="-3", group="feedfacecafe", host="x.example")
    assert query(app) == {"a": "4", "b": "5", "page": "1"}
    backwards = app_on(demo_path, monkeypatch, a="5", b="4")
    assert backwards.error and "put the earlier run first" in backwards.error[0].value


def test_page_text_stays_text(demo_path, monkeypatch):
    app = app_on(demo_path, monkeypatch, a="1", b="5")
    shown = [element.value for element in [*app.markdown, *app.caption, *app.info]]
    assert not any("<script" in text or "<b>" in text for text in shown)


def test_a_store_with_one_run_lands_on_the_overview_and_says_how_to_add_one(tmp_path, monkeypatch):
    path = tmp_path / "one.duckdb"
    records = crawlgen.crawl(hosts=1, pages=3, versions=2)
    jsonl = crawlgen.write_jsonl(tmp_path / "one.jsonl", records)
    assert main(["--db", str(path), "ingest", "--quiet", "--run", "only", str(jsonl)]) == EXIT_OK
    app = app_on(path, monkeypatch)
    assert [title.value for title in app.title] == ["Overview"]
    app.switch_page("views/site.py")
    rerun(app)
    [message] = app.info
    assert "1 finished crawl run;" in message.value and "cdc ingest --run LABEL" in message.value


# --- two real crawls of a site ----------------------------------------------------------------


def test_on_two_crawls_the_banner_is_one_template_change_that_lists_its_pages(docs, monkeypatch):
    path, manifest = docs
    store = Store(path)
    app = app_on(path, monkeypatch)
    assert [title.value for title in app.title] == [TITLE]
    assert app.selectbox(key="site-a").format_func(1).startswith("run 1 · docs-before · ")
    diff = store.site_diff("docs-before", "docs-after", limit=PAGE_SIZE)
    assert metrics(app) == expected_metrics(diff)
    assert diff.changed == len(manifest.edits()) + len(manifest.template_only())
    assert diff.new == diff.not_seen_again == 0
    # The banner, on every page of the second crawl, is shown once, with its page count.
    table = template_table(app)
    [banner] = [group for group in diff.template_changes if BANNER.split(". ")[0] in (group.excerpt or "")]
    assert diff.template_changes == [banner] and list(table["pages"]) == [banner.pages]
    banner_only = {canonical_url(page.url) for page in manifest.template_only()}
    assert banner.pages == diff.template_only >= 0.9 * len(banner_only)
    assert len(table["examples"][0]) == 3
    # Its link lists its pages, two pages of the table, and only banner-only pages.
    link = dict(parse_qsl(urlsplit(table["list"][0]).query))
    assert link == {"a": "1", "b": "2", "group": banner.key}
    listed = listed_pages(path, monkeypatch, link, banner.pages)
    assert len(listed) == len(set(listed)) == banner.pages and set(listed) <= banner_only
    # Every changed page, paged, largest change first: the real edits among them.
    every = listed_pages(path, monkeypatch, {"a": "1", "b": "2"}, diff.changed)
    assert every == [page.natural_key for page in store.site_diff(1, 2, limit=diff.changed).pages]
    assert {canonical_url(page.url) for page in manifest.edits()} <= set(every)


def test_on_two_crawls_the_filters_round_trip(docs, monkeypatch):
    path, _ = docs
    app = app_on(path, monkeypatch)
    [host] = [name for name in app.selectbox(key="site-host").options if name != "all hosts"]
    [change] = Store(path).site_diff(1, 2, host).template_changes
    app.selectbox(key="site-host").set_value(host)
    rerun(app)
    app.selectbox(key="site-group").set_value(change.key)
    rerun(app)
    app.number_input(key="site-page").set_value(2)
    rerun(app)
    shared = query(app)
    assert shared == {"a": "1", "b": "2", "host": host, "group": change.key, "page": "2"}
    again = app_on(path, monkeypatch, **shared)
    assert query(again) == shared
    assert again.number_input(key="site-page").value == 2
    assert pages_table(again).equals(pages_table(app)) and len(pages_table(again)) > 0


VIEW_TITLES = {"views/overview.py": "Overview", "views/compare.py": "Compare", "views/trends.py": "Trends",
               "views/boilerplate.py": "Boilerplate", "views/export.py": "Export change summaries"}


@pytest.mark.parametrize("view", list(VIEW_TITLES))
def test_on_two_crawls_every_other_view_shows_the_crawls(docs, monkeypatch, view):
    """Each view on the two real crawls: its page, no error, and what it shows is the store's."""
    path, manifest = docs
    store = Store(path)
    app = app_on(path, monkeypatch)
    app.switch_page(view)
    rerun(app)
    assert [title.value for title in app.title] == [VIEW_TITLES[view]] and not app.error
    if view == "views/overview.py":
        assert metrics(app)["Pages"] == f"{store.stats()['pages']:,}"
    if view in ("views/compare.py", "views/trends.py"):
        # The picker lists the changed pages of the latest run, template-only ones left out:
        # those of the site diff, the pages the docs were edited on among them.
        picked = {option.split(" · ")[0] for option in app.selectbox(key="url").options}
        diff = store.site_diff(1, 2, limit=10_000)
        changed = {page.natural_key.split("://", 1)[-1] for page in diff.pages if not page.template_only}
        edited = {canonical_url(page.url).split("://", 1)[-1] for page in manifest.edits()}
        assert picked == changed and edited <= picked
    if view == "views/compare.py":
        assert "Verdict" in metrics(app)
        # Its first page, the largest change, changed its own text beside the new banner: the
        # lists measure it on the page's own text, and Compare, which shows both whole, says so.
        assert any("by the page's own text alone" in info.value for info in app.info), app.info
    if view == "views/boilerplate.py":
        assert any(frame.value.shape[0] > 0 for frame in app.dataframe)  # the docs' navigation


def test_on_two_crawls_a_page_s_own_edit_beside_the_banner_is_what_its_change_says(docs):
    """Every page given an edit of its own got the banner too: its change is measured on its
    own text (`own_edits`, the host's template left out), so its excerpt is its own edit, not
    the banner that every page gained."""
    path, manifest = docs
    store = Store(path)
    banner_start = " ".join(BANNER.split()[:6])
    assert manifest.edits() and all(page.banner for page in manifest.edits())
    missed = []
    for page in manifest.edits():
        change = store.history(canonical_url(page.url))[-1]
        assert change.measure == "own_edits" and change.template_only is False, (page.url, change)
        assert banner_start not in change.excerpt, (page.url, page.kind, change.excerpt)
        if page.kind == sitecrawl.NUMBER:  # "80), → 85),": the words around the number
            before, _, after = change.excerpt.partition(" → ")
            shown = page.old_number in before and page.new_number in after
        else:  # inserted, deleted or moved: the paragraph's own words
            shown = len(set(page.paragraph.split()) & set(change.excerpt.split())) >= 3
        if not shown:
            missed.append((page.url, page.kind, change.excerpt))
    # Where the extraction cut the lines around an inserted paragraph otherwise (a list that
    # became lines of text), the page's first edit of its own begins before the paragraph, and
    # the excerpt's 120 characters of it can end before the paragraph does: one page of ten.
    assert len(missed) <= len(manifest.edits()) // 10, missed
