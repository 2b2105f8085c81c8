"""Structure benchmark: boilerplate, template changes, moves and region sizes on a real crawl.

Input: two GNU Wget crawls of Debian's python3.11-doc HTML (all ~530 pages), served on
loopback, with the site edited between them (`tests/sitecrawl.py`): a ~240-byte banner
paragraph added to every page, and about one page in seven given one real edit (a
paragraph inserted, deleted, moved from the top of the main content to its bottom, or a
number changed). The WARCs and their manifest (the ground truth) are built once and kept
in data/bench/sitecrawl/ (`--rebuild` makes them again).

Both crawls are ingested by `cdc ingest` into a fresh store for each extraction mode
(`--extract whole`, `--extract main`), and from the stores, through the public API
(`tests/sitemeasure.py`), issue 13's measures:

1. Pages whose banner, and whose navigation lines and footer ("index modules | next |
   previous |", "Python » 3.11 Documentation »", "Report a Bug Show Source", the
   "© Copyright ..." footer; found in the extracted text, whatever the whitespace), lie
   inside chunks whose digest is the host's boilerplate (more than 5% of its pages, at
   least 3), out of the pages with the banner. Target: at least 95%.
2. Template-only pages (banner only) that `compare(..., ignore=boilerplate)` calls
   `unchanged`. Target: at least 95%. Also shown: how many of them have their stored change
   row flagged `template_only` (what `cdc history` and `cdc export` show),
   and the mean chunks per generation.
   Also: the pages with a moved paragraph (beside the banner) whose change row is flagged
   `template_only` (target: none: a move is the page's own change), those of any real
   edit, and the template-only changes that the Overview's biggest changes list after every
   change of a page's own (target: all).
3. Moved paragraphs covered (90% of their bytes) by one `Edit` of kind "move". Target: 90%.
4. Median over pages with one inserted paragraph of the bytes of `changed_regions` over
   the truly inserted bytes (the paragraph and the banner). Target: at most 3x.
5. The manifest's edits that change the extracted text and that an edit of the comparison
   overlaps. Target (main content): at least 98%; the whole page's is shown for reference.

Target lines print PASS or FAIL (reported, not enforced: exit status 0). Run from the
repository root:

    python benchmarks/structure.py              # about a minute the first time (the crawls)
    python benchmarks/structure.py --pages 80   # a smaller site, as the tests build it
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cdc
from cdc.cli.main import EXIT_OK
from cdc.cli.main import main as cdc_main
from cdc.sources.extract import MAIN_CONTENT, WHOLE_PAGE
from cdc.store import Store
from tests import sitecrawl, sitemeasure

CACHE = Path("data/bench/sitecrawl")
TARGET_BOILERPLATE = 0.95
TARGET_TEMPLATE_UNCHANGED = 0.95
TARGET_MOVES = 0.90
TARGET_INSERT_RATIO = 3.0
TARGET_EDITS_FOUND = 0.98


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def ingest(crawls: sitecrawl.TwoCrawls, mode: str, db: Path) -> float:
    """Both crawls into a fresh store by `cdc ingest --extract MODE`; seconds taken."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as summary:  # shown only when it failed
        code = cdc_main(["--db", str(db), "ingest", "--quiet", "--extract", mode,
                         str(crawls.crawl1), str(crawls.crawl2)])
    if code != EXIT_OK:
        raise SystemExit(f"cdc ingest --extract {mode} exited with {code}:\n{summary.getvalue()}")
    return time.perf_counter() - start


def measure(site: sitemeasure.SiteStore, mode: str) -> None:
    print(f"boilerplate on {site.host}: {len(site.boilerplate)} chunks")
    coverage = sitemeasure.boilerplate_coverage(site)
    both = coverage.both.ratio
    print(f"target: banner, navigation and footer in flagged boilerplate >= {TARGET_BOILERPLATE:.0%} of "
          f"pages: {coverage.both}  (banner {coverage.banner}, navigation and footer "
          f"{coverage.navigation if coverage.navigation.total else 'not in the text'})  "
          f"{verdict(both >= TARGET_BOILERPLATE)}")
    unchanged = sitemeasure.template_only_unchanged(site)
    print(f"target: template-only pages unchanged with boilerplate left out >= "
          f"{TARGET_TEMPLATE_UNCHANGED:.0%}: {unchanged}  "
          f"{verdict(unchanged.ratio >= TARGET_TEMPLATE_UNCHANGED)}")
    flagged = sitemeasure.template_only_flagged(site)
    print(f"template-only pages whose change row is flagged template_only (cdc history, export): "
          f"{flagged}")
    moved = sitemeasure.edited_flagged(site, sitecrawl.MOVE)
    print(f"target: pages with a moved paragraph (and the banner) flagged template_only = 0: {moved}  "
          f"{verdict(moved.total > 0 and moved.hits == 0)}")
    edited = sitemeasure.edited_flagged(site)
    print(f"pages with any real edit flagged template_only: {edited}")
    ranked = sitemeasure.template_only_ranked_last(site)
    print(f"target: template-only changes listed after every change of a page's own (Overview): {ranked}  "
          f"{verdict(ranked.hits == ranked.total)}")
    stats = site.store.stats()
    print(f"chunks per generation: {stats['content_chunks'] / max(stats['generations'], 1):.0f} (mean)")
    moves = sitemeasure.moves_found(site)
    print(f"target: moved paragraphs reported as moves >= {TARGET_MOVES:.0%}: {moves}  "
          f"{verdict(moves.ratio >= TARGET_MOVES)}")
    ratios = sitemeasure.insert_ratios(site)
    median = sitemeasure.median(ratios)
    spread = f" (min {min(ratios):.1f}x, max {max(ratios):.1f}x)" if ratios else ""
    print(f"target: changed regions / truly changed bytes, median of {len(ratios)} pages with an inserted "
          f"paragraph <= {TARGET_INSERT_RATIO:g}x: {median:.1f}x{spread}  "
          f"{verdict(median <= TARGET_INSERT_RATIO)}")
    found = sitemeasure.edits_found(site)
    if mode == MAIN_CONTENT:
        print(f"target: main-content extraction finds the edits that change its text >= "
              f"{TARGET_EDITS_FOUND:.0%}: {found}  {verdict(found.ratio >= TARGET_EDITS_FOUND)}")
    else:
        print(f"edits that change the text and are found: {found}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=None, help="a subset of the docs' pages (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="chooses the edited pages and edits")
    parser.add_argument("--rebuild", action="store_true", help="crawl again instead of using the cache")
    args = parser.parse_args(argv)
    reason = sitecrawl.available()
    if reason:
        raise SystemExit(reason)

    print("cdc structure benchmark")
    print(f"  cdc {cdc.__version__}, spec {cdc.SPEC}")
    cache = CACHE / f"{args.pages or 'all'}-seed{args.seed}"
    built = (sitecrawl.build_two_crawls if args.rebuild else sitecrawl.cached_two_crawls)(
        cache, args.pages, args.seed)
    manifest = built.manifest
    kinds = collections.Counter(page.kind for page in manifest.edits())
    by_kind = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    how = f"crawled in {built.seconds:.1f} s" if built.seconds else "cached"
    print(f"  input: {cache}/ ({how}): {len(manifest.pages)} pages; crawl1 "
          f"{built.crawl1.stat().st_size / 1e6:.1f} MB, crawl2 {built.crawl2.stat().st_size / 1e6:.1f} MB")
    print(f"  edits: {len(manifest.edits())} pages ({by_kind}); "
          f"{len(manifest.template_only())} template-only (banner only)")
    print()
    with tempfile.TemporaryDirectory(prefix="cdc-structure-") as work:
        for mode in (WHOLE_PAGE, MAIN_CONTENT):
            db = Path(work) / f"{mode}.duckdb"
            seconds = ingest(built, mode, db)
            print(f"== cdc ingest --extract {mode} (both crawls, {seconds:.1f} s) ==")
            measure(sitemeasure.SiteStore(Store(db), manifest), mode)
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
