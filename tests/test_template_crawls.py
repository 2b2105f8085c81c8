"""Template-only changes on real GNU Wget crawls of the docs (`tests.sitecrawl`): which changes
are template-only, how the lists rank and label them, and which changes count as unchanged.

The docs are crawled twice (the banner on every page, a real edit on one page in seven: the
moves among them), each crawl ingested as a run of its own; then once more, at the same
URLs, with two paragraphs of a few pages joined into one (the same words, other blocks):
a change whose verdict is `unchanged`.
"""

from __future__ import annotations

import collections
import itertools
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from cdc.analyst.queries import compare_generations
from cdc.cli.main import EXIT_OK, main
from cdc.core.urls import canonical_url
from cdc.core.verdicts import TEMPLATE_ONLY, UNCHANGED
from cdc.store import Store
from tests import sitecrawl
from tests.sitecrawl import MOVE, NONE
from tests.test_site_view import app_on, pages_table, rerun

# One xdist worker runs the module: its third crawl serves the site again at the port of the
# run's docs crawls (conftest.py's `docs_crawls`), which one server at a time can hold.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("template-crawls")]

PAGES = sitecrawl.SUITE_PAGES  # conftest.py's `docs_crawls`, as tests/test_sitecrawl.py reads them
JOINED_PAGES = 4  # pages whose two paragraphs the third crawl joins into one


@dataclass(frozen=True)
class Docs:
    store: Store
    crawls: sitecrawl.TwoCrawls
    joined: list[str]  # natural keys of the pages the third crawl joined two paragraphs on


def _join_two_paragraphs(page: str) -> str | None:
    """The page with two neighbouring plain paragraphs of its main content made one (a space
    between their texts); None when it has no such pair."""
    paragraphs = sitecrawl.main_paragraphs(page)
    for first, second in itertools.pairwise(paragraphs):
        if first.text and second.text and not page[first.end:second.start].strip():
            return f"{page[:first.end - len('</p>')]} {page[second.start + len('<p>'):]}"
    return None


def _crawl_joined(crawls: sitecrawl.TwoCrawls, workdir: Path) -> tuple[Path, list[str]]:
    """A third crawl of the site as the second saw it, at its URLs (its port), with two
    paragraphs joined on `JOINED_PAGES` unedited pages; the WARC and those pages' URLs."""
    site = workdir / "site3"
    shutil.copytree(crawls.crawl1.parent / "site", site)
    joined = []
    for page in sorted(crawls.manifest.pages.values(), key=lambda page: page.path):
        if page.kind != NONE or not page.banner or len(joined) == JOINED_PAGES:
            continue
        text = _join_two_paragraphs((site / page.path).read_text(encoding="utf-8"))
        if text is not None:
            (site / page.path).write_text(text, encoding="utf-8")
            joined.append(page.url)
    port = urlsplit(crawls.manifest.base_url).port
    with sitecrawl.SiteServer(site, port) as server:
        assert server.base_url == crawls.manifest.base_url
        sitecrawl._wait_for_next_second()
        only = sorted(page.path for page in crawls.manifest.pages.values()
                      if page.path != sitecrawl.START_PAGE)
        warc = sitecrawl.crawl(server.base_url + sitecrawl.START_PAGE, workdir / "crawl3", only)
    return warc, joined


@pytest.fixture(scope="module")
def docs(docs_crawls, tmp_path_factory) -> Docs:
    """The two docs crawls (conftest.py's) and a third that joins paragraphs, each ingested as a
    run of its own."""
    directory, crawls = tmp_path_factory.mktemp("template-docs"), docs_crawls
    crawl3, joined = _crawl_joined(crawls, directory)
    db = str(directory / "docs.duckdb")
    runs = (("docs-before", crawls.crawl1), ("docs-after", crawls.crawl2), ("docs-joined", crawl3))
    for label, warc in runs:
        assert main(["--db", db, "ingest", "--quiet", "--run", label, str(warc)]) == EXIT_OK
    return Docs(Store(db), crawls, [canonical_url(url) for url in joined])


def _pages(docs: Docs, kind: str) -> list[str]:
    return [canonical_url(page.url) for page in docs.crawls.manifest.edits(kind)]


def test_a_page_with_the_banner_and_a_moved_paragraph_is_not_template_only(docs):
    store, moved = docs.store, _pages(docs, MOVE)
    assert moved
    listed = store.site_diff("docs-before", "docs-after", limit=1_000).pages
    diff = {page.natural_key: page for page in listed}
    for key in moved:
        # What makes the page a test: besides the move, every chunk gained is the host's
        # template (the banner), and no chunk was lost: counted as a multiset, the change is
        # the template's alone.
        comparison = compare_generations(store, key, *(g.generation for g in store.generations(key)[:2]))
        old, new = (collections.Counter(digest for digest, _ in version.chunks)
                    for version in (comparison.old, comparison.new))
        template = store.template_digests(store.page(key).host)
        assert comparison.report.moved and new - old and set(new - old) <= template and not old - new, key
        # The order tells: the page's own paragraph moved, a change of its own.
        assert store.history(key)[1].template_only is False, key
        assert diff[key].template_only is False
        assert diff[key].shown_verdict == diff[key].verdict != TEMPLATE_ONLY


def test_banner_only_pages_are_template_only_labelled_so_and_listed_after_the_pages_own_changes(docs, capsys):
    store = docs.store
    diff = store.site_diff("docs-before", "docs-after", limit=1_000)
    banner_only = {canonical_url(page.url) for page in docs.crawls.manifest.template_only()}
    flagged = [page for page in diff.pages if page.template_only]
    assert {page.natural_key for page in flagged} <= banner_only
    assert len(flagged) == diff.template_only == len(banner_only)
    # Among them a page whose own text is its title alone: the banner after it gave the title
    # a line end (another digest), not another word.
    contents = canonical_url(docs.crawls.manifest.base_url + "contents.html")
    assert contents in {page.natural_key for page in flagged}
    # Short pages whose only change is the banner measure as rewrites (the banner is half of
    # them): what the lists show is that their change is the template's.
    assert any(page.verdict == "rewrite" for page in flagged)
    assert {page.shown_verdict for page in flagged} == {TEMPLATE_ONLY}
    own = [page for page in diff.pages if not page.template_only]
    assert diff.pages == own + flagged, "every change of a page's own before the template-only ones"
    edited = {canonical_url(page.url) for page in docs.crawls.manifest.edits()}
    assert edited <= {page.natural_key for page in own}
    # The command line: no template-only page listed as a rewrite, none before a page's own.
    command = ["--db", str(store.path), "site-diff", "docs-before", "docs-after", "--limit", "1000"]
    assert main(command) == EXIT_OK
    listed = [line.split() for line in capsys.readouterr().out.splitlines() if "://" in line]
    assert len(listed) == diff.changed
    assert [row[0] for row in listed] == [page.shown_verdict for page in diff.pages]
    assert not [row for row in listed if row[0] == "rewrite" and row[1] == "yes"]
    # The Overview's chart of verdicts counts them apart, not as rewrites.
    counts = store.verdict_counts()
    changes = [row for row in store.changes() if row.previous_generation]
    assert counts[TEMPLATE_ONLY] == sum(row.template_only is True for row in changes)
    own_rewrites = sum(row.verdict == "rewrite" and not row.template_only for row in changes)
    assert counts.get("rewrite", 0) == own_rewrites < sum(row.verdict == "rewrite" for row in changes)
    # The Overview's biggest changes (each page's latest, from the last crawl): the same order.
    biggest = store.biggest_changes(limit=1_000)
    template_last = [row.template_only is True for row in biggest]
    assert template_last == sorted(template_last) and not template_last[0]
    assert {row.shown_verdict for row in biggest if row.template_only} <= {TEMPLATE_ONLY}


def test_a_change_of_the_same_words_counts_as_unchanged(docs, capsys):
    store = docs.store
    assert len(docs.joined) == JOINED_PAGES
    for key in docs.joined:  # a new generation (other blocks), the same words
        after, joined = store.history(key)[-2:]
        assert joined.verdict == UNCHANGED and after.generation == joined.previous_generation, key
    diff = store.site_diff("docs-after", "docs-joined")
    assert (diff.changed, diff.verdicts, diff.template_only, diff.pages) == (0, {}, 0, [])
    assert diff.unchanged == diff.seen_by_both == PAGES + 1
    assert main(["--db", str(store.path), "site-diff", "docs-after", "docs-joined"]) == EXIT_OK
    figures = dict(line.rsplit(maxsplit=1) for line in capsys.readouterr().out.splitlines()[1:6])
    assert {name.strip(): count for name, count in figures.items()} == {
        "pages seen by both": str(PAGES + 1), "unchanged": str(PAGES + 1), "changed": "0",
        "template only": "0", "new pages": "0"}
    # So does the run that saw them: `cdc runs` counts them unchanged.
    joined_run = store.run("docs-joined")
    assert (joined_run.changed, joined_run.unchanged) == (0, PAGES + 1)
    assert store.run("docs-after").changed == PAGES
    # Across both runs, the joined pages count as what the first run changed.
    both = store.site_diff("docs-before", "docs-joined", limit=1_000)
    assert both.changed == store.site_diff("docs-before", "docs-after").changed


def test_the_site_and_overview_views_label_template_only_changes_and_list_them_last(docs, monkeypatch):
    store = docs.store
    diff = store.site_diff("docs-before", "docs-after", limit=50)
    app = app_on(store.path, monkeypatch, a="1", b="2")
    table = pages_table(app)
    assert list(table["page"]) == [page.natural_key for page in diff.pages]
    flags = list(table["template only"])
    assert flags == sorted(flags) and True in flags and not flags[0]
    assert {verdict for flag, verdict in zip(flags, table["verdict"]) if flag} == {"Template only"}
    assert "Template only" not in {verdict for flag, verdict in zip(flags, table["verdict"]) if not flag}
    app.switch_page("views/overview.py")
    rerun(app)
    [biggest] = [frame.value for frame in app.dataframe if "what changed" in frame.value.columns]
    shown = list(biggest["verdict"])
    template = [verdict == "template only" for verdict in shown]
    assert template == sorted(template) and True in template and not template[0]
