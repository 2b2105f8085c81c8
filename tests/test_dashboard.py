"""The dashboard, headless: every page runs on a temporary store and shows the chosen
page's data; page text with markup renders as text; the CSV download equals `cdc export`."""

from __future__ import annotations

import ast
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from cdc.analyst.queries import compare_generations
from cdc.demo import crawl as demo
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import iter_jsonl
from cdc.store import Store
from tests import crawlgen, textgen
from tests.storerows import as_schema_3

ROOT = Path(__file__).resolve().parents[1]
MARKUP = '<script>alert("owned")</script> and <b>bold</b> &amp; more'
PAGES = ("views/site.py", "views/overview.py", "views/compare.py", "views/trends.py",
         "views/boilerplate.py", "views/export.py", "views/search.py")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    """A small crawl whose every figure the tests know, with markup in one page's text."""
    path = tmp_path_factory.mktemp("dashboard") / "cdc.duckdb"
    records = crawlgen.crawl(hosts=2, pages=4, versions=4)
    bodies = crawlgen.page_versions(77, 2)
    records += [crawlgen.record("https://shop0.example/markup", 0, bodies[0]),
                crawlgen.record("https://shop0.example/markup", 1, bodies[1] + " " + MARKUP)]
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    Ingester(Store(path)).run(iter_jsonl(io.BytesIO(data), "test.jsonl"))
    return path


MOVED_URL = "https://shop0.example/moved"
MOVED_MARKUP = "<i>moved</i> & <script>alert('moved')</script>"


@pytest.fixture(scope="module")
def moves_path(tmp_path_factory) -> Path:
    """A host whose pages share a navigation block and a footer (its boilerplate), and one
    page whose second version moves a paragraph holding markup to the end and edits a word."""
    path = tmp_path_factory.mktemp("moves") / "cdc.duckdb"
    records = crawlgen.crawl(hosts=1, pages=4, versions=2)
    paragraphs = textgen.paragraphs(55, 8)
    paragraphs[1] = f"{MOVED_MARKUP} {paragraphs[1]}"
    moved = [paragraphs[0], *paragraphs[2:], paragraphs[1]]
    moved[3] = moved[3].replace(" ", " EDITED ", 1)
    records += [crawlgen.record(MOVED_URL, 0, "\n\n".join(paragraphs)),
                crawlgen.record(MOVED_URL, 1, "\n\n".join(moved))]
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    Ingester(Store(path)).run(iter_jsonl(io.BytesIO(data), "moves.jsonl"))
    return path


@pytest.fixture
def moves_app(moves_path, monkeypatch) -> AppTest:
    monkeypatch.setenv("CDC_DB", str(moves_path))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)


def _cells(html: str, side: str) -> list[tuple[str, str]]:
    """(classes, inner markup) of a column's cells in the side-by-side frame."""
    return re.findall(rf'<div (?:id="[^"]*" )?class="cdc-cell cdc-{side}([^"]*)">(.*?)</div>', html)


def test_compare_shows_blocks_the_edits_inside_them_and_moves_at_both_places(moves_app, moves_path):
    open_page(moves_app, "views/compare.py", url=MOVED_URL)
    [html] = _frames(moves_app)
    store = Store(moves_path)
    first, second = (g.generation for g in store.generations(MOVED_URL))
    old, new = store.version(MOVED_URL, first).text, store.version(MOVED_URL, second).text
    old_cells, new_cells = _cells(html, "old"), _cells(html, "new")
    assert len(old_cells) == len(new_cells)  # rows, a block or a blank on each side
    # Every block of each text is a cell of its own, in order: the paragraph breaks are kept.
    assert len([c for c in old_cells if "cdc-blank" not in c[0]]) == old.count(b"\n") + 1
    assert len([c for c in new_cells if "cdc-blank" not in c[0]]) == new.count(b"\n") + 1
    # Shaded: the edited block only; the moved paragraph is a move, labelled at both ends.
    [(_, edited)] = [c for c in new_cells if "cdc-changed" in c[0]]
    assert '<ins class="cdc-ins">EDITED</ins>' in edited
    [(_, moved_from)] = [c for c in old_cells if "cdc-moved-block" in c[0]]
    [(_, moved_to)] = [c for c in new_cells if "cdc-moved-block" in c[0]]
    escaped = "&lt;i&gt;moved&lt;/i&gt; &amp; &lt;script&gt;alert('moved')&lt;/script&gt;"
    assert escaped in moved_from and escaped in moved_to and "<script>alert" not in html
    assert '<span id="cdc-move-1-from" class="cdc-move-label">move 1 ↓</span>' in moved_from
    assert '<span id="cdc-move-1-to" class="cdc-move-label">move 1 ↑</span>' in moved_to
    assert "cdc-boilerplate" not in html.split("</style>", 1)[1]  # boilerplate counted, shown
    trend, figure = moves_app.get("plotly_chart")  # the page's trend, then the alignment
    assert '"move 1"' in figure.proto.spec and '"compared"' in trend.proto.spec


def test_compare_dims_or_hides_the_boilerplate_it_leaves_out(moves_app):
    open_page(moves_app, "views/compare.py", url=MOVED_URL)
    moves_app.toggle(key="ignore").set_value(True).run()
    assert not moves_app.exception
    [html] = _frames(moves_app)
    dimmed = [inner for classes, inner in _cells(html, "old") + _cells(html, "new")
              if "cdc-boilerplate" in classes]
    assert dimmed and all(inner.startswith(("Home | Products", "Copyright Example")) for inner in dimmed)
    assert 'id="cdc-move-1-from"' in html
    moves_app.button_group(key="bp-view").set_value("hidden").run()
    assert not moves_app.exception
    [html] = _frames(moves_app)
    assert "Home | Products" not in html and "Copyright Example" not in html
    assert re.search(r'<div class="cdc-gap">\[1 boilerplate block hidden\]</div>', html)
    assert 'id="cdc-move-1-from"' in html and '<ins class="cdc-ins">EDITED</ins>' in html


@pytest.fixture
def app(store_path, monkeypatch) -> AppTest:
    monkeypatch.setenv("CDC_DB", str(store_path))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)


def open_page(app: AppTest, page: str, **query: str) -> AppTest:
    app.run()
    app.switch_page(page)
    for key, value in query.items():
        app.query_params[key] = value
    app.run()
    assert not app.exception, app.exception
    return app


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_without_an_exception(app, page):
    open_page(app, page)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_the_demo_store(demo_path, monkeypatch, page):
    monkeypatch.setenv("CDC_DB", str(demo_path))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    open_page(app, page)


@pytest.mark.slow  # builds the default demo store
def test_first_launch_builds_the_demo_store_and_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CDC_DB", raising=False)
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    app.run()
    assert not app.exception
    assert (tmp_path / "data" / "demo.duckdb").exists()
    assert any("demo data" in caption.value for caption in app.sidebar.caption)
    assert [title.value for title in app.title] == ["What changed on the site"]  # it holds runs
    app.switch_page("views/overview.py")
    app.run()
    assert not app.exception
    assert {m.label: m.value for m in app.metric}["Pages"] == f"{demo.DEFAULT_PAGES:,}"


def test_a_store_of_an_older_layout_opens_upgraded(store_path, tmp_path, monkeypatch):
    old = Store(shutil.copy(store_path, tmp_path / "old.duckdb"))
    as_schema_3(old.path)
    assert old.needs_upgrade() and not Store(store_path).needs_upgrade()
    monkeypatch.setenv("CDC_DB", str(old.path))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    app = open_page(AppTest.from_file(str(ROOT / "app.py"), default_timeout=60), "views/overview.py")
    assert not old.needs_upgrade()
    assert {m.label: m.value for m in app.metric}["Pages"] == f"{Store(store_path).stats()['pages']:,}"
    assert old.changes() == Store(store_path).changes()  # its template flags counted


def test_the_demo_shows_markup_as_text(demo_path, monkeypatch):
    store = Store(demo_path)
    with store.reading() as connection:
        (url,) = connection.execute(
            "SELECT g.natural_key FROM generations g JOIN pages p ON p.natural_key = g.natural_key "
            "AND g.generation = p.latest_generation WHERE contains(g.text, '<script>') AND g.generation > "
            "(SELECT min(generation) FROM generations f WHERE f.natural_key = g.natural_key) "
            "ORDER BY ALL LIMIT 1").fetchone()
    monkeypatch.setenv("CDC_DB", str(demo_path))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    open_page(app, "views/compare.py", url=url)
    html = "\n".join(_frames(app))
    assert "&lt;script&gt;" in html and "<script>alert" not in html


def test_overview_shows_the_store(app, store_path):
    open_page(app, "views/overview.py")
    metrics = {m.label: m.value for m in app.metric}
    stats = Store(store_path).stats()
    assert metrics["Pages"] == f"{stats['pages']:,}" and metrics["Hosts"] == "2"


def test_a_rerun_after_an_ingest_shows_the_new_pages(tmp_path, monkeypatch):
    """The views' reads are cached, but never past a writer's commit."""
    path = tmp_path / "cdc.duckdb"
    records = crawlgen.crawl(hosts=2, pages=4, versions=2)
    Ingester(Store(path)).run(iter_jsonl(io.BytesIO("".join(json.dumps(r) + "\n" for r in records).encode()),
                                         "first.jsonl"))
    monkeypatch.setenv("CDC_DB", str(path))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    app = open_page(AppTest.from_file(str(ROOT / "app.py"), default_timeout=60), "views/overview.py")
    assert {m.label: m.value for m in app.metric}["Pages"] == "8"
    app.run()  # a rerun with nothing new: the same, read from the cache
    assert {m.label: m.value for m in app.metric}["Pages"] == "8"
    more = [crawlgen.record("https://new.example/page", 0, crawlgen.page_versions(5, 1)[0])]
    Ingester(Store(path)).run(iter_jsonl(io.BytesIO("".join(json.dumps(r) + "\n" for r in more).encode()),
                                         "second.jsonl"))
    app.run()
    assert not app.exception
    assert {m.label: m.value for m in app.metric}["Pages"] == "9"
    assert {m.label: m.value for m in app.metric}["Hosts"] == "3"


def test_a_link_to_a_generation_past_retention_says_so(app, store_path):
    url = "https://shop1.example/item/2"
    numbers = [g.generation for g in Store(store_path).generations(url)]
    open_page(app, "views/compare.py", url=url, **{"from": str(numbers[0]), "to": str(numbers[1])})
    assert any(f"Generation {numbers[0]}" in w.value and "retention" in w.value for w in app.warning)
    assert app.selectbox(key="from").value in numbers[1:]  # a retained one, said so above


def test_compare_shows_the_url_and_generations_of_the_query_string(app, store_path):
    url = "https://shop1.example/item/2"
    open_page(app, "views/compare.py", url=url)
    assert app.selectbox(key="url").value == url
    expected = compare_generations(Store(store_path), url).report
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Verdict"] == expected.verdict
    assert metrics["Unchanged (new text)"] == f"{expected.unchanged_ratio:.1%}"
    numbers = [g.generation for g in Store(store_path).generations(url)]
    assert app.selectbox(key="to").value == numbers[3] and app.selectbox(key="from").value == numbers[2]
    open_page(app, "views/compare.py", url=url, **{"from": str(numbers[1]), "to": str(numbers[2])})
    assert (app.selectbox(key="from").value, app.selectbox(key="to").value) == (numbers[1], numbers[2])
    # A number inside a generation (after its first fetch) opens that generation.
    open_page(app, "views/compare.py", url=url, **{"from": str(numbers[1] + 5), "to": str(numbers[2])})
    assert app.selectbox(key="from").value == numbers[1]


def _frames(app: AppTest) -> list[str]:
    return [element.proto.srcdoc for element in app.get("iframe")]


def test_page_text_with_markup_renders_as_text(app):
    open_page(app, "views/compare.py", url="https://shop0.example/markup")
    html = "\n".join(_frames(app))
    assert "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;" in html or \
        "&lt;script&gt;alert(\"owned\")&lt;/script&gt;" in html
    assert '<script>alert("owned")' not in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "&amp;amp;" in html  # the page's literal "&amp;", escaped once more


def test_the_csv_download_equals_cdc_export(app, store_path, monkeypatch):
    downloads = {}  # what the page registered for each download button, made on a click
    register = MediaFileManager.add_deferred

    def keep(self, data_callable, *args, **kwargs):
        file_id = register(self, data_callable, *args, **kwargs)
        downloads[file_id] = data_callable
        return file_id

    monkeypatch.setattr(MediaFileManager, "add_deferred", keep)
    open_page(app, "views/export.py")
    app.selectbox(key="export-host").set_value("shop1.example")
    app.multiselect(key="export-verdicts").set_value(["minor"])
    app.run()
    assert not app.exception
    data = downloads[app.get("download_button")[0].proto.deferred_file_id]()
    exported = subprocess.run([sys.executable, "-m", "cdc", "--db", str(store_path), "export",
                               "--host", "shop1.example", "--verdict", "minor"],
                              capture_output=True, timeout=120, check=True).stdout
    assert data == exported
    assert data.count(b"\r\n") == 1 + 4 * 3


def test_trends_and_boilerplate_show_the_chosen_page_and_host(app):
    open_page(app, "views/trends.py", url="https://shop0.example/item/1")
    assert any("shop0.example/item/1: 4 generations" in h.value for h in app.subheader)
    open_page(app, "views/boilerplate.py", **{"bp-host": "shop1.example"})
    assert any(h.value.startswith("shop1.example:") for h in app.subheader)


def test_a_store_that_cannot_be_opened_is_a_message_not_a_traceback(tmp_path, monkeypatch):
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes(b"not a database at all")
    monkeypatch.setenv("CDC_DB", str(broken))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.run()
    assert not app.exception
    assert app.error and "cannot open the store" in app.error[0].value


def test_the_library_never_imports_streamlit():
    for path in (ROOT / "cdc").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(name.split(".")[0] == "streamlit" for name in names), path
