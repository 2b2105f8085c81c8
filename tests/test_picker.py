"""Issue 15 items 2 and 3: the URL picker's bounded query (changed in a run, by verdict,
template-only left out, search, limit), Compare's trend, and time bins that fit the data.

The store is two crawls a day apart, each its own run, as two real crawls are: on
shop0.example three pages change (one rewritten) and three stay the same; on shop1.example
the navigation changes on every page (a template change) and one page's content changes too.
"""

from __future__ import annotations

import json
import sys
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui
from cdc.core.timebins import bin_range, bin_start, choose_bin
from cdc.ingest.ingester import Ingester
from cdc.present.figures import compare_trend_figure, first_sightings, host_heatmap, verdict_figure
from cdc.sources.jsonl import SourceRecord
from cdc.store import Store
from tests import crawlgen, textgen
from tests.test_dashboard import open_page
from tests.test_template import _template_change

ROOT = Path(__file__).resolve().parents[1]
SHOP0 = [f"https://shop0.example/item/{n}" for n in range(6)]
SHOP1 = [f"https://shop1.example/item/{n}" for n in range(4)]
EDITED = SHOP0[:3] + SHOP1[:1]  # content changed in the second crawl
TEMPLATE_ONLY = SHOP1[1:]  # only the navigation changed
REWRITTEN = SHOP0[2]


def _second(record: dict, body: str | None = None, navigation: str | None = None) -> dict:
    sections = [dict(section) for section in record["sections"]]
    if navigation is not None:
        sections[0]["text"] = navigation
    if body is not None:
        sections[1]["text"] = body
    return {**record, "fetched_at": crawlgen.record("x", 1, "")["fetched_at"], "sections": sections}


@pytest.fixture(scope="module")
def two_crawls(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("picker") / "cdc.duckdb"
    bodies = {url: crawlgen.page_versions(n, 2) for n, url in enumerate(SHOP0 + SHOP1)}
    first = {url: crawlgen.record(url, 0, versions[0]) for url, versions in bodies.items()}
    navigation = _template_change(crawlgen.NAVIGATION)
    second = [_second(first[url], textgen.text(500, 6_000).decode() if url == REWRITTEN
                      else bodies[url][1] if url in EDITED else None,
                      navigation if url in SHOP1 else None) for url in SHOP0 + SHOP1]
    store = Store(path)
    for crawl in (list(first.values()), second):
        Ingester(store).run(SourceRecord("crawl", n, record) for n, record in enumerate(crawl, 1))
    return path


@pytest.fixture(scope="module")
def runs(two_crawls) -> tuple[int, int]:
    first, second = sorted(run.run for run in Store(two_crawls).runs())
    return first, second


def keys(matches) -> list[str]:
    return [page.natural_key for page in matches.pages]


# --- the picker's query ----------------------------------------------------------------------


def test_changed_only_lists_the_pages_the_run_changed_template_only_left_out(two_crawls, runs):
    store = Store(two_crawls)
    first, second = runs
    changed = store.match_pages(changed_in=second)
    assert sorted(keys(changed)) == sorted(EDITED) and changed.total == len(EDITED)
    assert all(page.template_only is False for page in changed.pages)
    shares = [page.share_changed for page in changed.pages]
    assert shares == sorted(shares, reverse=True) and changed.pages[0].natural_key == REWRITTEN
    with_template = store.match_pages(changed_in=second, include_template_only=True)
    assert sorted(keys(with_template)) == sorted(EDITED + TEMPLATE_ONLY)
    assert store.match_pages(changed_in=first).total == 0  # first sightings are not changes


def test_changed_only_by_verdict_host_and_search(two_crawls, runs):
    store = Store(two_crawls)
    second = runs[1]
    verdicts = {row.natural_key: row.verdict for key in EDITED for row in store.history(key)[1:]}
    rewritten = verdicts[REWRITTEN]
    assert rewritten != "minor"
    assert keys(store.match_pages(changed_in=second, verdicts=[rewritten])) == [
        key for key in EDITED if verdicts[key] == rewritten]
    minor = store.match_pages(changed_in=second, verdicts=["minor"]).pages
    assert {page.verdict for page in minor} == {"minor"}
    assert sorted(keys(store.match_pages(changed_in=second, host="shop1.example",
                                         include_template_only=True))) == SHOP1
    assert keys(store.match_pages("ITEM/1", changed_in=second)) == [SHOP0[1]]
    assert store.match_pages("item/5", changed_in=second).total == 0  # unchanged


def test_every_page_searched_and_limited_never_all_keys(two_crawls, runs):
    store = Store(two_crawls)
    every = store.match_pages()
    assert keys(every) == sorted(SHOP0 + SHOP1) and every.total == 10
    limited = store.match_pages(limit=3)
    assert keys(limited) == sorted(SHOP0 + SHOP1)[:3] and limited.total == 10
    assert keys(store.match_pages("shop1.example/item/", limit=2)) == SHOP1[:2]
    assert store.match_pages("item/2", host="shop0.example").total == 1
    assert store.match_pages("nothing like it").pages == []
    changed = store.match_pages(changed_in=runs[1], limit=1)
    assert len(changed.pages) == 1 and changed.total == len(EDITED)
    with pytest.raises(ValueError, match="limit"):
        store.match_pages(limit=0)


def test_time_span_is_the_first_and_last_fetch(two_crawls):
    first, last = Store(two_crawls).time_span()
    assert last - first == timedelta(days=1)


# --- time bins ------------------------------------------------------------------------------

T0 = datetime(2026, 3, 2, 9, 30)


@pytest.mark.parametrize(("span", "expected"), [
    (timedelta(0), "hour"), (timedelta(hours=6), "hour"), (timedelta(days=1), "hour"),
    (timedelta(days=2), "hour"), (timedelta(days=3), "day"), (timedelta(days=30), "day"),
    (timedelta(days=92), "day"), (timedelta(days=180), "week"), (timedelta(days=365), "week"),
    (timedelta(days=3 * 365), "month"),
])
def test_the_bin_fits_the_span(span, expected):
    assert choose_bin([T0 + span, T0, T0 + span / 2]) == expected


def test_bins_of_no_times_dates_and_datetimes():
    assert choose_bin([]) == "hour"
    assert choose_bin([date(2026, 1, 1), datetime(2026, 1, 31, 12)]) == "day"
    assert bin_start(T0, "hour") == datetime(2026, 3, 2, 9)
    assert bin_start(T0, "day") == date(2026, 3, 2)
    assert bin_start(date(2026, 3, 8), "week") == date(2026, 3, 2)
    assert bin_start(T0, "month") == date(2026, 3, 1)
    assert bin_range(T0, T0 + timedelta(days=1), "hour")[-1] == datetime(2026, 3, 3, 9)
    assert len(bin_range(T0, T0 + timedelta(days=1), "hour")) == 25
    assert bin_range(date(2025, 11, 15), date(2026, 2, 1), "month") == [
        date(2025, 11, 1), date(2025, 12, 1), date(2026, 1, 1), date(2026, 2, 1)]
    assert len(bin_range(T0, T0 + timedelta(days=365), "hour", limit=50)) == 50
    with pytest.raises(ValueError, match="bin"):
        bin_start(T0, "fortnight")


# --- figures --------------------------------------------------------------------------------


def test_the_verdict_chart_shows_changes_and_counts_first_sightings_apart():
    counts = {"new": 1167, "minor": 80, "rewrite": 11}
    [bar] = verdict_figure(counts).data
    assert list(bar.x) == ["minor", "rewrite"] and list(bar.y) == [80, 11]
    assert first_sightings(counts) == 1167 and first_sightings({"minor": 1}) == 0
    only_new = verdict_figure({"new": 5})
    assert list(only_new.data[0].x) == [] and "no changes" in only_new.layout.annotations[0].text


def test_a_single_heatmap_cell_has_a_scale_from_zero_and_the_span_fills_the_axis():
    [cell] = host_heatmap([("a.example", T0, 17_559.0)], period="week", aggregate="sum").data
    assert (cell.zmin, cell.zmax) == (0, 17_559.0)
    [hourly] = host_heatmap([("a.example", T0 + timedelta(days=1), 10.0)], period="hour", aggregate="sum",
                            span=(T0, T0 + timedelta(days=1))).data
    assert len(hourly.x) == 25 and hourly.x[0] == datetime(2026, 3, 2, 9)
    assert list(hourly.z[0]).count(None) == 24 and hourly.z[0][-1] == 10.0
    monthly = host_heatmap([("a.example", T0, 1.0)], period="month").data[0]
    assert list(monthly.x) == [date(2026, 3, 1)]


def test_the_compare_trend_marks_the_two_generations(two_crawls):
    history = Store(two_crawls).generations(SHOP0[0])
    old, new = (row.generation for row in history)
    figure = compare_trend_figure(history, old, new)
    compared = next(trace for trace in figure.data if trace.name == "compared")
    assert list(compared.customdata) == [old, new] and list(compared.text) == ["from", "to"]
    kept = next(trace for trace in figure.data if trace.name == "kept share")
    assert list(kept.customdata) == [old, new]  # a click names its generation
    assert figure.layout.xaxis.tickformat.startswith("%H")  # a day's crawls: hours
    figure.to_json()


def test_a_click_picks_the_generation_and_the_one_before():
    retained = [10, 20, 30, 40]
    assert ui.compare_pair(retained, 30) == (20, 30)
    assert ui.compare_pair(retained, 10) == (10, 20)  # the first: it and the next
    assert ui.compare_pair(retained, 25) is None  # not retained
    assert ui.compare_pair([10], 10) is None


# --- the dashboard --------------------------------------------------------------------------


@pytest.fixture
def app(two_crawls, monkeypatch) -> AppTest:
    monkeypatch.setenv("CDC_DB", str(two_crawls))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)


def _charts(app: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]


def test_the_changed_only_picker_lists_only_changed_pages(app):
    open_page(app, "views/compare.py")
    assert app.toggle(key="changed-only").value is True  # two runs: on by default
    assert {option.split(" · ")[0] for option in app.selectbox(key="url").options} == {
        ui.short_url(key) for key in EDITED}
    assert app.selectbox(key="url").value == REWRITTEN  # largest change first
    app.toggle(key="pick-template").set_value(True).run()
    assert not app.exception
    assert len(app.selectbox(key="url").options) == len(EDITED + TEMPLATE_ONLY)
    app.text_input(key="url-search").set_value("shop1").run()
    assert not app.exception
    assert {option.split(" · ")[0] for option in app.selectbox(key="url").options} == {
        ui.short_url(key) for key in SHOP1}
    app.toggle(key="changed-only").set_value(False).run()
    assert not app.exception
    assert len(app.selectbox(key="url").options) == len(SHOP1)


def test_compare_shows_the_trend_with_the_two_generations_marked(app, two_crawls):
    open_page(app, "views/compare.py", url=SHOP1[0])
    old, new = (row.generation for row in Store(two_crawls).generations(SHOP1[0]))
    [trend] = [chart for chart in _charts(app) if any(t.get("name") == "compared" for t in chart["data"])]
    compared = next(t for t in trend["data"] if t.get("name") == "compared")
    assert compared["customdata"] == [old, new] and compared["text"] == ["from", "to"]
    # A link to a page the changed-only list leaves out still opens it.
    open_page(app, "views/compare.py", url=SHOP1[1])
    assert app.selectbox(key="url").value == SHOP1[1]


def test_overview_bins_two_crawls_a_day_apart_by_hour(app, two_crawls):
    open_page(app, "views/overview.py")
    assert any(h.value.endswith("per host and hour") for h in app.subheader)
    heatmap = next(chart["data"][0] for chart in _charts(app) if chart["data"][0]["type"] == "heatmap")
    assert len(heatmap["x"]) > 1 and heatmap["zmin"] == 0
    verdicts = next(chart["data"][0] for chart in _charts(app) if chart["data"][0]["type"] == "bar")
    assert "new" not in verdicts["x"]
    assert any("First sightings" in c.value and f"**{len(SHOP0 + SHOP1)}**" in c.value for c in app.caption)


def test_trends_bin_the_host_distribution_by_its_span(app):
    open_page(app, "views/trends.py", url=SHOP0[0])
    assert any(h.value == "Change on shop0.example, per hour" for h in app.subheader)
