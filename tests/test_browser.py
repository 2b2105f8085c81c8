"""End to end in a real browser: `streamlit run app.py` on a loopback port, Debian's
Chromium driven by Playwright, Compare opened by its link, figure and highlighted text
awaited, a screenshot saved; a moved paragraph joined across the columns and the
boilerplate switch dimming, then hiding, the host's template; and the landing page, the
Site view, followed by its links: a template change's pages, then one page's Compare.

Set CDC_SCREENSHOT to a path to keep the screenshots. The README's are made by
`docs/screenshots.py`, which drives the same server and pages."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest

from cdc.analyst.queries import compare_generations
from cdc.demo.build import build_demo
from cdc.store import Store
from ui import compare_pair

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Flags that keep a sandboxed, offline Chromium from reaching for the network or a GPU.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
    pytest.mark.slow,
    pytest.mark.xdist_group("browser"),  # one worker starts the module's server (docs/testing.md)
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_healthy(base: str, process: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"streamlit exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as answer:
                if answer.read() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError("streamlit did not answer in time")


@contextmanager
def app_server(store_path: Path) -> Iterator[str]:
    """`streamlit run app.py -- --db STORE` on a free loopback port, until the block ends; its
    base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--", "--db", str(store_path)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base, process)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store_path = tmp_path_factory.mktemp("browser") / "demo.duckdb"
    build_demo(store_path, pages=24, generations=4)
    with app_server(store_path) as base:
        yield base, Store(store_path)


ROW_HEIGHT = 35  # pixels: a row of Streamlit's data grid, its header row as tall


def grid_cell(grid, column: int, row: int) -> str:
    """A data grid's cell text (the grid is drawn on a canvas; its accessible table holds the
    text, a link column's cell the link)."""
    return grid.locator(f"#glide-cell-{column}-{row}").inner_text()


def follow_grid_link(page, grid, row: int):
    """Click the link in a data grid's `row` (0: the first below the header) as a user does,
    and the page it opens (a link column opens its link in a new tab). The canvas holds no
    elements to click: the mouse goes along the row until the grid shows a pointer, which it
    does over a link only."""
    canvas = grid.locator("canvas").first
    box = canvas.bounding_box()
    y = box["y"] + ROW_HEIGHT * (row + 1) + ROW_HEIGHT / 2
    for x in range(int(box["x"]) + 4, int(box["x"] + box["width"]), 8):
        page.mouse.move(x, y)
        if page.evaluate("([x, y]) => getComputedStyle(document.elementFromPoint(x, y)).cursor",
                         [x, y]) == "pointer":
            with page.context.expect_page(timeout=30_000) as opened:
                page.mouse.click(x + 4, y)
            new = opened.value
            new.wait_for_load_state()
            return new
    raise AssertionError(f"no link in row {row} of the grid")


@contextmanager
def browser_page(height: int) -> Iterator:
    """A page of a new headless Chromium, 1400 pixels wide."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": height})
        finally:
            browser.close()


@contextmanager
def compare_page(link: str, height: int) -> Iterator:
    """A Chromium page opened at a Compare link, its figure drawn."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": height})
            page.goto(link, timeout=60_000)
            page.wait_for_selector(".js-plotly-plot", timeout=60_000)
            yield page
        finally:
            browser.close()


PRICE_ONLY = re.compile(r"\$\d+\.\d\d → \$\d+\.\d\d")  # an excerpt of a price change alone


def price_change(store: Store):
    """The change row of a price change (a minor change whose excerpt names dollars) between
    two retained generations (Compare shows those only): one not flagged a template change, and
    of the price alone, where there is one; else of any minor change. A price change makes the
    clearest picture; any minor change proves the same."""
    changes = [row for row in store.changes(verdicts=["minor"]) if row.previous_generation]
    prices = sorted((row for row in changes if "$" in (row.excerpt or "")),
                    key=lambda row: (bool(row.template_only), not PRICE_ONLY.fullmatch(row.excerpt)))

    def retained(row) -> bool:
        kept = {g.generation for g in store.generations(row.natural_key) if g.retained}
        return {row.previous_generation, row.generation} <= kept

    return next(row for row in prices + changes if retained(row))


def compare_link(base: str, key: str, old: int, new: int) -> str:
    return f"{base}/compare?" + urlencode({"url": key, "from": old, "to": new})


def site_page_shown(page, base: str) -> None:
    """Open the landing page, the Site view, and wait for its tables."""
    page.goto(base + "/", timeout=60_000)
    page.get_by_role("heading", name="What changed on the site").wait_for(timeout=60_000)
    page.locator("[data-testid=stDataFrame]").first.locator("#glide-cell-0-0").wait_for(
        state="attached", timeout=60_000)


def dim_boilerplate(page) -> str:
    """Switch Compare to leave the host's boilerplate out; once the texts dim it, the first
    dimmed block's text."""
    page.get_by_text("Leave the host's boilerplate out").click()
    frame = page.frame_locator("iframe").first
    frame.locator(".cdc-boilerplate").first.wait_for(timeout=60_000)
    dimmed = frame.locator(".cdc-boilerplate").first.inner_text()
    page.wait_for_timeout(800)  # let the figure redraw
    return dimmed


def test_compare_opens_by_its_link_with_the_figure_and_the_highlighted_text(server, tmp_path):
    base, store = server
    change = price_change(store)
    link = compare_link(base, change.natural_key, change.previous_generation, change.generation)
    shot = Path(os.environ.get("CDC_SCREENSHOT") or tmp_path / "compare.png")
    with compare_page(link, 1300) as page:
        frame = page.frame_locator("iframe").first
        frame.locator(".cdc-ins, .cdc-del").first.wait_for(timeout=60_000)
        assert change.natural_key.split("://")[1] in page.content()
        page.wait_for_timeout(500)  # let the figure finish drawing
        page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def a_move(store: Store) -> tuple[str, int, int]:
    """A page and two generations between which a paragraph moved (the demo moves some)."""
    for key in store.page_keys():
        generations = [g.generation for g in store.generations(key) if g.retained]
        for old, new in itertools.pairwise(generations):
            report = compare_generations(store, key, old, new, ignore_boilerplate=True).report
            if any(edit.kind == "move" for edit in report.edits):
                return key, old, new
    raise AssertionError("the demo store has no move")


def test_a_move_is_joined_across_and_the_boilerplate_is_dimmed_then_hidden(server, tmp_path):
    base, store = server
    key, old, new = a_move(store)
    link = compare_link(base, key, old, new)
    wanted = os.environ.get("CDC_SCREENSHOT")
    shot = Path(wanted).with_name("compare-move.png") if wanted else tmp_path / "compare-move.png"
    with compare_page(link, 1500) as page:
        frame = page.frame_locator("iframe").first
        frame.locator("#cdc-move-1-from").wait_for(timeout=60_000)
        assert frame.locator("#cdc-move-1-to").count() == 1
        assert frame.locator(".cdc-moved-block").count() >= 2
        frame.locator("svg.cdc-links path").first.wait_for(state="attached", timeout=10_000)
        # A click on one end of the move scrolls the frame to the other end.
        frame.locator("#cdc-move-1-to").click()
        page.wait_for_timeout(300)
        top = frame.locator("#cdc-move-1-from").evaluate("label => label.getBoundingClientRect().top")
        assert 0 <= top <= 400
        assert page.locator(".js-plotly-plot").get_by_text("move 1").count() >= 1
        # The switch leaves the host's boilerplate out: dimmed in the texts, then hidden.
        dimmed = dim_boilerplate(page)
        page.screenshot(path=str(shot))
        page.locator("[data-testid=stButtonGroup]").get_by_text("hidden", exact=True).click()
        frame.get_by_text("boilerplate block").first.wait_for(timeout=60_000)
        assert frame.locator(".cdc-boilerplate").count() == 0
        assert frame.get_by_text(dimmed, exact=True).count() == 0
        assert frame.locator("#cdc-move-1-from").count() == 1
    assert shot.stat().st_size > 10_000


# The traces of the Compare view's trend (the figure with a "compared" trace), by name, once
# it is drawn.
TREND_TRACES = """async () => {
  for (let tries = 0; tries < 600; tries++) {
    const plot = [...document.querySelectorAll(".js-plotly-plot")]
        .find((element) => (element.data || []).some((trace) => trace.name === "compared"));
    if (plot) {
      return Object.fromEntries(plot.data.map((trace) => [trace.name, {
          customdata: Array.from(trace.customdata || []), text: Array.from(trace.text || [])}]));
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return null;
}"""


# Where on the screen the trend's point `index` of "kept share" is drawn (Plotly's own axes
# turn the data into pixels).
TREND_POINT = """(index) => {
  const plot = [...document.querySelectorAll(".js-plotly-plot")]
      .find((element) => (element.data || []).some((trace) => trace.name === "compared"));
  const trace = plot._fullData.find((each) => each.name === "kept share");
  const xaxis = plot._fullLayout.xaxis, yaxis = plot._fullLayout.yaxis;
  const box = plot.getBoundingClientRect();
  return [box.left + xaxis._offset + xaxis.d2p(trace.x[index]),
          box.top + yaxis._offset + yaxis.d2p(trace.y[index])];
}"""


def test_the_site_view_leads_to_a_template_change_s_pages_and_on_to_compare(server):
    from playwright.sync_api import expect

    base, store = server
    a, b = [run.run for run in store.runs() if run.finished][1::-1]
    diff = store.site_diff(a, b)
    [change] = diff.template_changes[:1]  # the demo changes templates at its last crawl
    with browser_page(1200) as page:
        site_page_shown(page, base)  # the landing page: Site, the latest two runs
        changed = page.locator("[data-testid=stMetric]").filter(has=page.get_by_text("Changed", exact=True))
        assert changed.inner_text().split()[-1] == f"{diff.changed:,}"
        templates = page.locator("[data-testid=stDataFrame]").first  # then the changed pages
        assert (grid_cell(templates, 0, 0), grid_cell(templates, 1, 0)) == (change.host, str(change.pages))

        listed = follow_grid_link(page, templates, 0)  # "List its pages"
        assert f"group={change.key}" in listed.url
        shown = f"the pages of one template change: {change.host}, {change.pages:,} pages"
        expect(listed.get_by_role("combobox", name="Show")).to_have_value(
            re.compile("^" + re.escape(shown)), timeout=60_000)
        pages = listed.locator("[data-testid=stDataFrame]").last
        # The list of pages is drawn after the table of template changes, which is the last
        # grid until it is (CI once read the host from it): a page's URL in its first cell.
        expect(pages.locator("#glide-cell-0-0")).to_contain_text("://", timeout=60_000)
        rows = pages.locator("[role=row]").count() - 1  # less the header
        keys = {grid_cell(pages, 0, row) for row in range(rows)}
        expected = store.site_diff(a, b, template_change=change.key)
        assert keys == {page.natural_key for page in expected.pages} and len(keys) == change.pages
        first = next(page for page in expected.pages if page.natural_key == grid_cell(pages, 0, 0))
        assert grid_cell(pages, 1, 0) == "compare?" + urlencode(
            {"url": first.natural_key, "to": first.generation_b, "from": first.generation_a})

        compare = follow_grid_link(listed, pages, 0)  # "Compare"
        assert compare.url.startswith(f"{base}/compare?")
        compare.wait_for_selector(".js-plotly-plot", timeout=60_000)
        frame = compare.frame_locator("iframe").first
        frame.locator("ins.cdc-ins").first.wait_for(timeout=60_000)
        assert frame.locator("del.cdc-del").count() >= 1
        for label in (f"generation {first.generation_a}", f"generation {first.generation_b}"):
            assert frame.get_by_text(label, exact=True).count() >= 1
        # The marked words are the two generations' own: removed ones from A's text, added B's.
        texts = [store.version(first.natural_key, number).text.decode()
                 for number in (first.generation_a, first.generation_b)]
        for text, marks in zip(texts, (frame.locator("del.cdc-del"), frame.locator("ins.cdc-ins"))):
            for mark in marks.all()[:10]:
                assert mark.inner_text().strip() in text
        # The page's trend beside the texts: every generation of the page, the two compared
        # ringed "from" and "to" (read from the drawn Plotly figure's own data).
        traces = compare.evaluate(TREND_TRACES)
        generations = [g.generation for g in store.generations(first.natural_key)]
        assert traces["kept share"]["customdata"] == generations
        assert traces["compared"]["customdata"] == [first.generation_a, first.generation_b]
        assert traces["compared"]["text"] == ["from", "to"]
        # A click on another retained generation's point compares it with the one before it.
        retained = [g.generation for g in store.generations(first.natural_key) if g.retained]
        clicked = next(number for number in retained[::-1]
                       if compare_pair(retained, number) != (first.generation_a, first.generation_b))
        x, y = compare.evaluate(TREND_POINT, generations.index(clicked))
        compare.mouse.click(x, y)
        older, newer = compare_pair(retained, clicked)
        expect(compare).to_have_url(re.compile(rf"from={older}&to={newer}|to={newer}&from={older}"),
                                    timeout=60_000)
        picker = compare.get_by_role("combobox", name="To generation")
        expect(picker).to_have_value(str(newer), timeout=60_000)


def test_compare_marks_the_change_beside_the_verdict_and_shows_the_note_as_text(server, tmp_path):
    """The control beside the verdict sets the change's label, note and name in the store (a
    write by `cdc annotate` in a process of its own), and the note, untrusted, comes back as
    literal text: no element made of its markup, no link of its Markdown."""
    base, store = server
    change = price_change(store)
    link = compare_link(base, change.natural_key, change.previous_generation, change.generation)
    note = '<img src=x onerror="document.title=\'owned\'"> [a link](http://evil.example) **loud** =1+1'
    wanted = os.environ.get("CDC_SCREENSHOT")
    shot = Path(wanted).with_name("compare-annotate.png") if wanted else tmp_path / "compare-annotate.png"
    with compare_page(link, 1000) as page:
        page.get_by_text("Not judged yet.").wait_for(timeout=60_000)
        page.get_by_role("button", name="Judge this change").click()
        form = page.locator("[data-testid=stPopoverBody]")
        form.get_by_text(f"The change that made generation {change.generation} against generation "
                         f"{change.previous_generation}").wait_for(timeout=30_000)
        form.get_by_role("radio", name="significant").click()
        form.get_by_label("Note").fill(note)
        form.get_by_label("Your name").fill("Ann Analyst")
        page.screenshot(path=str(shot))
        form.get_by_role("button", name="Save").click()
        page.get_by_role("button", name="Significant").wait_for(timeout=90_000)
        said = page.get_by_text("by Ann Analyst")
        said.wait_for(timeout=60_000)
        assert note in said.inner_text()  # every character as typed, as text
        assert page.locator("img[src=x]").count() == 0
        assert page.locator("a[href*='evil.example']").count() == 0
        assert page.title() != "owned"
    saved = store.annotation(change.natural_key, change.generation)
    assert (saved.generation, saved.label, saved.note, saved.annotated_by) == (
        change.generation, "significant", note, "Ann Analyst")
    assert shot.stat().st_size > 10_000


def searched_word(store: Store):
    """A word one change added between two retained generations, not a template change, and
    the library's hits for it (what the Search page must list)."""
    from cdc.analyst.search import SearchQuery, search

    with store.reading() as connection:
        rows = connection.execute("""
            SELECT w.natural_key, w.generation, w.added_words FROM change_words w
            JOIN changes c USING (natural_key, generation)
            WHERE c.template_only IS NOT TRUE AND len(w.added_words) > 0 ORDER BY ALL""").fetchall()
    for key, generation, words in rows:
        kept = {g.generation for g in store.generations(key) if g.retained}
        change = next(row for row in store.history(key) if row.generation == generation)
        if not {change.previous_generation, generation} <= kept:
            continue
        for word in words.split():
            if word.isalpha() and len(word) > 5:
                hits = search(store, SearchQuery(added=word)).hits
                if 0 < len(hits) <= 10 and (hits[0].natural_key, hits[0].generation) == (key, generation):
                    return word, hits
    raise AssertionError("no searchable word in the demo store")


def test_the_search_page_lists_the_hits_and_leads_to_compare_at_the_change(server, tmp_path):
    base, store = server
    word, hits = searched_word(store)
    with browser_page(1000) as page:
        page.goto(f"{base}/search?" + urlencode({"q": word.upper(), "side": "added"}), timeout=60_000)
        page.get_by_role("heading", name="Search the changes").wait_for(timeout=60_000)
        grid = page.locator("[data-testid=stDataFrame]").first
        grid.locator("#glide-cell-0-0").wait_for(state="attached", timeout=60_000)
        rows = grid.locator("[role=row]").count() - 1
        assert [grid_cell(grid, 0, row) for row in range(rows)] == [hit.url for hit in hits]
        assert grid_cell(grid, 2, 0) == "added" and word in grid_cell(grid, 3, 0).lower()
        assert page.get_by_text(f"of {len(hits):,} hits").count() == 1
        with page.expect_download(timeout=60_000) as download:
            page.get_by_role("button", name="Download CSV").click()
        lines = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("url,host,generation") and len(lines) == len(hits) + 1
        if os.environ.get("CDC_SCREENSHOT"):
            page.screenshot(path=str(Path(os.environ["CDC_SCREENSHOT"]).with_suffix(".search.png")),
                            full_page=True)
        compare = follow_grid_link(page, grid, 0)  # "Compare", at the change
        assert compare.url == f"{base}/" + ui_compare_link(hits[0])
        compare.wait_for_selector(".js-plotly-plot", timeout=60_000)
        frame = compare.frame_locator("iframe").first
        frame.locator("ins.cdc-ins").first.wait_for(timeout=60_000)
        inserted = " ".join(mark.inner_text() for mark in frame.locator("ins.cdc-ins").all())
        assert word in inserted.lower()


def ui_compare_link(hit) -> str:
    from ui import compare_link

    return compare_link(hit.natural_key, hit.previous_generation, hit.generation)
