"""End to end in a real browser: `streamlit run app.py` on a loopback port, Debian's
Chromium driven by Playwright, Compare opened by its link, figure and highlighted text
awaited, a screenshot saved; a moved paragraph joined across the columns and the
boilerplate switch dimming, then hiding, the host's template.

Set CDC_SCREENSHOT to a path to keep the screenshots (the README's come from here: the
price change at that path, the move beside it as compare-move.png)."""

from __future__ import annotations

import itertools
import os
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

from cdc.demo import build_demo
from cdc.queries import compare_generations
from cdc.store import Store

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Flags that keep a sandboxed, offline Chromium from reaching for the network or a GPU.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")


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


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store_path = tmp_path_factory.mktemp("browser") / "demo.duckdb"
    build_demo(store_path, pages=24, generations=4)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--", "--db", str(store_path)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base, process)
        yield base, Store(store_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


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


def test_compare_opens_by_its_link_with_the_figure_and_the_highlighted_text(server, tmp_path):
    base, store = server
    changes = [row for row in store.changes(verdicts=["minor"]) if row.previous_generation]
    # A price change makes the clearest picture; any minor change proves the same.
    change = next((row for row in changes if "$" in (row.excerpt or "")), changes[0])
    link = f"{base}/compare?" + urlencode({"url": change.natural_key, "from": change.previous_generation,
                                          "to": change.generation})
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
    link = f"{base}/compare?" + urlencode({"url": key, "from": old, "to": new})
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
        page.get_by_text("Leave the host's boilerplate out").click()
        frame.locator(".cdc-boilerplate").first.wait_for(timeout=60_000)
        dimmed = frame.locator(".cdc-boilerplate").first.inner_text()
        page.wait_for_timeout(800)  # let the figure redraw
        page.screenshot(path=str(shot))
        page.locator("[data-testid=stButtonGroup]").get_by_text("hidden", exact=True).click()
        frame.get_by_text("boilerplate block").first.wait_for(timeout=60_000)
        assert frame.locator(".cdc-boilerplate").count() == 0
        assert frame.get_by_text(dimmed, exact=True).count() == 0
        assert frame.locator("#cdc-move-1-from").count() == 1
    assert shot.stat().st_size > 10_000
