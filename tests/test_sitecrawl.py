"""A real site crawled twice by GNU Wget (`tests.sitecrawl`), ingested by `cdc ingest`.

Two kinds of test. Those that hold today check the test bed: the WARCs are Wget's, every
page is ingested in both crawls, the edits are in the extracted text and main-content
extraction finds them. The others assert what issue 13 promises a user, in both
extraction modes: boilerplate found for the banner and the navigation, template-only pages
unchanged with boilerplate left out and flagged template-only in their change rows, moves
reported as moves, changed regions near the change.
"""

from __future__ import annotations

import collections
import gzip

import pytest

from cdc.cli.main import EXIT_OK, main
from cdc.core.urls import canonical_url
from cdc.sources.extract import EXTRACTION_MODES, MAIN_CONTENT, WHOLE_PAGE
from cdc.sources.warc import WarcSummary, iter_warc
from cdc.store import Store
from tests import sitecrawl, sitemeasure
from tests.sitecrawl import BANNER, EDIT_KINDS, NONE, START_PAGE

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sitecrawl")]  # `stores` built once

PAGES = sitecrawl.SUITE_PAGES


@pytest.fixture(scope="module")
def crawls(docs_crawls) -> sitecrawl.TwoCrawls:
    return docs_crawls  # conftest.py's: the crawls of the docs built once for the run


@pytest.fixture(scope="module")
def stores(crawls, tmp_path_factory) -> dict[str, sitemeasure.SiteStore]:
    """Both crawls ingested by `cdc ingest`, once per extraction mode."""
    directory = tmp_path_factory.mktemp("stores")
    result = {}
    for mode in EXTRACTION_MODES:
        db = str(directory / f"{mode}.duckdb")
        files = [str(crawls.crawl1), str(crawls.crawl2)]
        assert main(["--db", db, "ingest", "--quiet", "--extract", mode, *files]) == EXIT_OK
        result[mode] = sitemeasure.SiteStore(Store(db), crawls.manifest)
    return result


def test_the_manifest(crawls):
    manifest = crawls.manifest
    pages = manifest.pages.values()
    assert len(manifest.pages) == PAGES + 1  # and the start page
    kinds = collections.Counter(page.kind for page in pages)
    assert set(kinds) == {*EDIT_KINDS, NONE}
    assert len(manifest.edits()) == round(PAGES * sitecrawl.EDIT_SHARE)
    assert [page.path for page in pages if not page.banner] == [START_PAGE]
    assert len(manifest.template_only()) == PAGES - len(manifest.edits())
    assert all(page.paragraph for page in manifest.edits())
    for page in manifest.edits(sitecrawl.NUMBER):
        assert int(page.new_number) > int(page.old_number)
        assert page.old_number in page.paragraph and page.new_number in page.new_paragraph
        assert len(page.new_paragraph) - len(page.paragraph) == len(page.new_number) - len(page.old_number)
    assert sitecrawl.Manifest.from_json(manifest.to_json()) == manifest


def test_the_crawls_are_wgets(crawls):
    """Both WARCs parse; every page is in each, once; the second crawl is later."""
    for warc in (crawls.crawl1, crawls.crawl2):
        summary = WarcSummary()
        with warc.open("rb") as stream:
            urls = [item.record["url"] for item in iter_warc(stream, warc.name, summary=summary)]
        assert summary.bad == 0 and summary.damaged_at is None
        assert sorted(urls) == sorted(crawls.manifest.pages)
        assert summary.skipped_status == {404: 1}  # robots.txt
        with gzip.open(warc, "rb") as stream:
            assert b"software: Wget/" in stream.read(4096)  # its warcinfo record
    assert max(sitecrawl.warc_dates(crawls.crawl1)) < min(sitecrawl.warc_dates(crawls.crawl2))


@pytest.mark.parametrize("mode", EXTRACTION_MODES)
def test_every_page_ingested_in_both_crawls(stores, crawls, mode):
    site = stores[mode]
    manifest = crawls.manifest
    assert site.store.page_keys() == sorted(canonical_url(url) for url in manifest.pages)
    generations = {url: site.generations(url) for url in manifest.pages}
    assert {url for url, count in generations.items() if count == 2} == {
        page.url for page in manifest.pages.values() if page.banner}
    assert generations[manifest.base_url + START_PAGE] == 1


def test_the_edits_are_in_the_extracted_text(stores, crawls):
    """In the whole page's text, each edit shows as made: inserted text new, deleted text
    gone, the moved paragraph later in the page, the number changed; the banner is new."""
    site = stores[WHOLE_PAGE]
    for page in crawls.manifest.edits():
        comparison = site.comparison(page.url)
        assert sitemeasure.visible(page, comparison.old.text, comparison.new.text) != (None, None), page
    for page in crawls.manifest.template_only():
        comparison = site.comparison(page.url)
        assert sitecrawl.locate(comparison.new.text, BANNER)
        assert not sitecrawl.locate(comparison.old.text, BANNER)


def test_main_content_extraction_finds_the_edits(stores):
    """Issue 13: main-content extraction still finds at least 98% of the edits that change its text."""
    found = sitemeasure.edits_found(stores[MAIN_CONTENT])
    assert found.total >= len(EDIT_KINDS) and found.ratio >= 0.98, found


def test_edits_found_in_whole_page_mode(stores):
    found = sitemeasure.edits_found(stores[WHOLE_PAGE])
    assert found.ratio >= 0.98, found


@pytest.mark.parametrize("mode", EXTRACTION_MODES)
def test_banner_and_navigation_are_boilerplate(stores, mode):
    """Issue 13: the banner, navigation and footer bytes lie in flagged boilerplate on at least
    95% of the pages (main content has no navigation: its banner is what counts)."""
    coverage = sitemeasure.boilerplate_coverage(stores[mode])
    assert coverage.both.ratio >= 0.95, coverage


@pytest.mark.parametrize("mode", EXTRACTION_MODES)
def test_template_only_pages_compare_unchanged(stores, mode):
    unchanged = sitemeasure.template_only_unchanged(stores[mode])
    assert unchanged.ratio >= 0.95, unchanged


@pytest.mark.parametrize("mode", EXTRACTION_MODES)
def test_template_only_changes_are_flagged_in_history(stores, mode):
    flagged = sitemeasure.template_only_flagged(stores[mode])
    assert flagged.ratio >= 0.95, flagged


def test_moves_are_reported_as_moves(stores):
    moves = sitemeasure.moves_found(stores[WHOLE_PAGE])
    assert moves.total and moves.ratio >= 0.9, moves


def test_an_inserted_paragraphs_region_is_near_its_size(stores):
    ratios = sitemeasure.insert_ratios(stores[WHOLE_PAGE])
    assert ratios and sitemeasure.median(ratios) <= 3.0, ratios


def test_without_wget_or_the_docs_the_tests_say_why(monkeypatch, tmp_path):
    monkeypatch.setattr(sitecrawl, "DOCS", tmp_path)
    assert "apt-get install python3.11-doc" in sitecrawl.available()
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "apt-get install wget" in sitecrawl.available()
    with pytest.raises(FileNotFoundError, match="wget"):
        sitecrawl.build_two_crawls(tmp_path)
