"""The README's screenshots, made again from real pages of the demo store: the app on a demo
store built here (the default demo: 300 pages, 8 crawls, a run each), in Debian's headless
Chromium, through the same server and pages as `tests/test_browser.py`.

- `site.png`: the landing page, the Site view of the latest two runs;
- `compare.png`: Compare on a price change (the first minor change whose excerpt names dollars);
- `compare-move.png`: Compare on a moved paragraph, the host's boilerplate left out (dimmed).

Run from the repository root (about a minute):

    python docs/screenshots.py             # into docs/
    python docs/screenshots.py --out DIR   # elsewhere
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this working tree's cdc and tests, before any installed copy

from cdc.demo.build import build_demo  # noqa: E402
from cdc.store import Store  # noqa: E402
from tests.test_browser import (  # noqa: E402
    CHROMIUM,
    a_move,
    app_server,
    browser_page,
    compare_link,
    compare_page,
    dim_boilerplate,
    price_change,
    site_page_shown,
)


def cjk_font_missing() -> bool:
    """Whether fontconfig knows no Japanese font: the demo's Japanese and Chinese pages would
    show as boxes."""
    try:
        found = subprocess.run(["fc-list", ":lang=ja", "family"], capture_output=True, text=True, check=False)
    except OSError:
        return False
    return not found.stdout.strip()


def shoot(out: Path, store_path: Path) -> list[Path]:
    store = Store(store_path)
    shots = [out / "site.png", out / "compare.png", out / "compare-move.png"]
    with app_server(store_path) as base:
        with browser_page(1400) as page:
            site_page_shown(page, base)
            page.wait_for_timeout(1000)  # let the tables finish drawing
            page.screenshot(path=str(shots[0]))
        change = price_change(store)
        link = compare_link(base, change.natural_key, change.previous_generation, change.generation)
        with compare_page(link, 1900) as page:  # tall enough for the texts around the edit
            page.frame_locator("iframe").first.locator(".cdc-ins, .cdc-del").first.wait_for(timeout=60_000)
            page.wait_for_timeout(500)  # let the figure finish drawing
            page.screenshot(path=str(shots[1]), full_page=True)
        key, old, new = a_move(store)
        with compare_page(compare_link(base, key, old, new), 1500) as page:
            page.frame_locator("iframe").first.locator("#cdc-move-1-from").wait_for(timeout=60_000)
            dim_boilerplate(page)
            page.screenshot(path=str(shots[2]))
    print(f"site.png: the Site view of runs {[run.run for run in store.runs() if run.finished][1::-1]}")
    print(f"compare.png: {change.natural_key}, {change.previous_generation} -> {change.generation} "
          f"({change.excerpt})")
    print(f"compare-move.png: {key}, {old} -> {new}")
    return shots


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="directory (default: docs/)")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"Chromium is missing at {CHROMIUM} (Debian's package `chromium`)")
    if cjk_font_missing():
        print("warning: no Japanese font (Debian's fonts-noto-cjk): the demo's Japanese and Chinese "
              "text shows as boxes", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cdc-screenshots-") as work:
        store_path = Path(work) / "demo.duckdb"
        build_demo(store_path)
        for shot in shoot(args.out, store_path):
            print(f"wrote {shot} ({shot.stat().st_size / 1e3:,.0f} KB)")


if __name__ == "__main__":
    main()
