"""Template-only changes: every changed chunk is the host's boilerplate.

A crawl of twelve pages of one host whose shared navigation changes on every page between
two crawls (a site-wide template change), and on one page the content changes too.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cdc.cli import main
from cdc.ingest import Ingester
from cdc.queries import compare_generations
from cdc.sources import SourceRecord
from cdc.store import Store
from tests import crawlgen
from tests.test_dashboard import open_page

ROOT = Path(__file__).resolve().parents[1]

PAGES = 12
HOST = "https://shop.example"
EDITED = f"{HOST}/item/3"  # its content changes as well


def _template_change(navigation: str) -> str:
    """The navigation with one word replaced a quarter of the way in: inside a chunk of navigation alone."""
    middle = len(navigation) // 4
    at = navigation.index(" ", middle) + 1
    end = navigation.index(" ", at)
    return navigation[:at] + "Sale" + navigation[end:]


@pytest.fixture
def store(tmp_path, monkeypatch) -> Store:
    records = [crawlgen.record(f"{HOST}/item/{n}", 0, crawlgen.page_versions(n, 1)[0]) for n in range(PAGES)]
    changed = []
    for n, first in enumerate(records):
        record = {**first, "fetched_at": crawlgen.record("x", 1, "")["fetched_at"],
                  "sections": [dict(section) for section in first["sections"]]}
        record["sections"][0]["text"] = _template_change(crawlgen.NAVIGATION)
        if record["url"] == EDITED:
            record["sections"][1]["text"] = crawlgen.page_versions(n, 2)[1]
        changed.append(record)
    store = Store(tmp_path / "cdc.duckdb")
    Ingester(store).run(SourceRecord("crawl", number, record)
                        for number, record in enumerate(records + changed, start=1))
    return store


def test_a_template_change_is_template_only_and_a_content_change_is_not(store):
    for n in range(PAGES):
        first, second = store.history(_key(store, n))
        assert first.template_only is None, "a first sighting has nothing to compare"
        assert second.verdict != "unchanged"
        assert second.template_only is (f"{HOST}/item/{n}" != EDITED), _key(store, n)


def _key(store: Store, n: int) -> str:
    return next(key for key in store.page_keys() if key.endswith(f"/item/{n}"))


def test_with_boilerplate_left_out_a_template_only_change_compares_unchanged(store):
    template_page, content_page = f"{HOST}/item/1", EDITED
    assert compare_generations(store, template_page).report.verdict != "unchanged"
    assert compare_generations(store, template_page, ignore_boilerplate=True).report.verdict == "unchanged"
    assert compare_generations(store, content_page, ignore_boilerplate=True).report.verdict != "unchanged"


def test_export_and_history_show_template_only(store, capsys):
    assert main(["--db", str(store.path), "export"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    flags = {(row["url"], row["generation"]): row["template_only"] for row in rows}
    first, second = str(crawlgen.generation(0)), str(crawlgen.generation(1))
    assert flags[(_key(store, 1), second)] == "true"
    assert flags[(_key(store, 3), second)] == "false"
    assert flags[(_key(store, 1), first)] == ""

    assert main(["--db", str(store.path), "history", f"{HOST}/item/1"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()[1:]
    column = header.split().index("template")
    assert {row.split()[0]: row.split()[column + 1] for row in rows} == {first: "-", second: "yes"}


def test_the_compare_view_says_a_template_change_is_one(store, monkeypatch):
    monkeypatch.setenv("CDC_DB", str(store.path))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    for url, expected in ((_key(store, 1), True), (_key(store, 3), False)):
        app = open_page(AppTest.from_file(str(ROOT / "app.py"), default_timeout=60), "views/compare.py",
                        url=url, **{"from": str(crawlgen.generation(0)), "to": str(crawlgen.generation(1))})
        assert any("A template change" in info.value for info in app.info) is expected
