"""A real site crawled twice: Debian's python3.11-doc HTML served on loopback, fetched by GNU Wget.

`build_two_crawls(workdir, pages, seed)` copies the docs' HTML pages (all of them, or an
evenly spaced subset of `pages`) into `workdir/site`, serves them with `http.server` on a
free port of 127.0.0.1 and crawls them with `wget --recursive --warc-file`. Then it edits
the files the way sites change and crawls again, into a second WARC:

- a banner paragraph (`BANNER`, about 240 bytes) at the top of every page's main content;
- about one page in seven (chosen by `seed`) gets one real edit: a paragraph inserted, a
  paragraph deleted, a paragraph moved from the top of the main content to its bottom (just
  before its last paragraph, so that the moved block and the blocks around it read as they
  did: the page's own change is the move alone, beside the banner), or a number changed in a
  paragraph.

The `Manifest` is the ground truth: for every URL the edit made, the plain text of the
paragraph concerned (as it reads, whitespace folded), the old and new number, and whether
the page changed only by the banner (template-only). Edits pick only `<p>` paragraphs whose
text occurs once in the page, so each edit can be found again in extracted text
(`locate`). Everything is deterministic but the port and the fetch times.
"""

from __future__ import annotations

import collections
import functools
import gzip
import html
import json
import random
import re
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests import textgen

DOCS = Path("/usr/share/doc/python3.11/html")
BANNER = ("Notice: this documentation site is moving to a new address on the first of March. "
          "Bookmarks and links will keep working for a year after the move; the search index and "
          "the downloads page are being rebuilt, so some results may be missing until then.")
INSERT, DELETE, MOVE, NUMBER, NONE = "insert", "delete", "move", "number", "none"
EDIT_KINDS = (INSERT, DELETE, MOVE, NUMBER)
EDIT_SHARE = 1 / 7  # of the pages that can take an edit
PARAGRAPH_BYTES = (150, 600)  # the text of an inserted, deleted or moved paragraph

MAIN_START = '<div class="body" role="main">'
MAIN_END = '<div class="sphinxsidebar"'  # the sidebar follows the main content
PARAGRAPH = re.compile(r"<p>(.*?)</p>", re.S)  # the docs' plain paragraphs (no class)
TAG = re.compile(r"<[^>]*>")
# A whole number standing alone in running text: not part of a version, a name or a date.
NUMBER_WORD = re.compile(r"(?<![\w.,:/#&-])\d{1,4}(?![\w:/;-]|[.,]\d)")
WARC_DATE = re.compile(rb"^WARC-Date: (\S+)\r$", re.M)
WGET_OK = (0, 8)  # 8: some answers were errors (robots.txt is not there)
BUILDER = 3  # the version of the edits made: bump when what `edit_site` does changes
START_PAGE = "sitemap.html"  # written beside the pages: the crawl starts there
# The crawls the test suite reads (conftest.py's `docs_crawls`, the pins): 80 of the docs' 530
# pages, the two crawls in about five seconds.
SUITE_PAGES, SUITE_SEED = 80, 0


def available() -> str | None:
    """Why a crawl cannot be built here (no wget, no python3.11-doc), or None."""
    if shutil.which("wget") is None:
        return "GNU Wget is not installed (apt-get install wget)"
    if not (DOCS / "index.html").is_file():
        return f"Python's HTML docs are not at {DOCS} (apt-get install python3.11-doc)"
    return None


def plain(fragment: str) -> str:
    """The text of an HTML fragment as it reads: tags dropped, entities decoded, whitespace folded."""
    return " ".join(html.unescape(TAG.sub("", fragment)).split())


def locate(text: bytes, phrase: str, start: int = 0) -> tuple[int, int] | None:
    """(start, end) in `text` of the first occurrence of `phrase` at or after `start`, whatever
    whitespace separates its words (a space, a line break); None when it is not there."""
    words = phrase.split()
    if not words:
        return None
    pattern = re.compile(rb"\s+".join(re.escape(word.encode()) for word in words))
    match = pattern.search(text, start)
    return match.span() if match else None


@dataclass(frozen=True)
class PageEdit:
    """What was done to one page between the two crawls."""

    url: str
    path: str  # relative to the site's root
    kind: str  # one of EDIT_KINDS, or NONE
    banner: bool  # the banner was added (every page with a main content)
    paragraph: str = ""  # the inserted, deleted or moved paragraph; for a number, the paragraph before
    new_paragraph: str = ""  # for a number: the paragraph after the change
    old_number: str = ""
    new_number: str = ""

    @property
    def template_only(self) -> bool:
        """Changed by the banner alone: a site-wide template change."""
        return self.banner and self.kind == NONE


@dataclass
class Manifest:
    """The ground truth of a two-crawl build: every page's edit, by URL."""

    base_url: str
    seed: int
    banner: str
    pages: dict[str, PageEdit] = field(default_factory=dict)
    builder: int = 0  # BUILDER when built: a cached build by another version is built again

    def edits(self, kind: str | None = None) -> list[PageEdit]:
        """Pages with a real edit (of `kind`, if given), in URL order."""
        return [page for _, page in sorted(self.pages.items())
                if page.kind != NONE and (kind is None or page.kind == kind)]

    def template_only(self) -> list[PageEdit]:
        return [page for _, page in sorted(self.pages.items()) if page.template_only]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        pages = {url: PageEdit(**page) for url, page in data.pop("pages").items()}
        return cls(**data, pages=pages)


@dataclass(frozen=True)
class TwoCrawls:
    crawl1: Path
    crawl2: Path
    manifest: Manifest
    seconds: float  # to build: copy, two crawls and the edits


# --- editing the HTML -------------------------------------------------------------------------


@dataclass(frozen=True)
class Paragraph:
    start: int  # of "<p>" in the page's HTML
    end: int  # after "</p>"
    inner: str
    text: str  # as it reads


def main_paragraphs(page: str) -> list[Paragraph]:
    """The plain `<p>` paragraphs of the page's main content, in order."""
    start = page.find(MAIN_START)
    if start < 0:
        return []
    end = page.find(MAIN_END, start)
    end = len(page) if end < 0 else end
    return [Paragraph(m.start(), m.end(), m.group(1), plain(m.group(1)))
            for m in PARAGRAPH.finditer(page, start, end)]


def _sized(paragraph: Paragraph) -> bool:
    return PARAGRAPH_BYTES[0] <= len(paragraph.text.encode()) <= PARAGRAPH_BYTES[1]


def _unique(paragraphs: list[Paragraph], page_text: str) -> list[Paragraph]:
    """Paragraphs whose text occurs once in the page: an edit to one is found again unambiguously."""
    return [p for p in paragraphs if p.text and page_text.count(p.text) == 1]


def add_banner(page: str, banner: str = BANNER) -> str | None:
    """The page with the banner at the top of its main content; None if it has none."""
    at = page.find(MAIN_START)
    if at < 0:
        return None
    at += len(MAIN_START)
    return f'{page[:at]}\n<p class="site-banner">{html.escape(banner)}</p>{page[at:]}'


def _new_paragraph(rng: random.Random) -> str:
    """A paragraph of pseudo-English, 150-600 bytes, different on every call."""
    while True:
        text = textgen.paragraphs(rng.randrange(1 << 30), 1, sentences=rng.randint(2, 4))[0]
        if PARAGRAPH_BYTES[0] <= len(text) <= PARAGRAPH_BYTES[1]:
            return text


def _number_in(paragraph: Paragraph) -> tuple[int, int] | None:
    """Where a standalone number is in the paragraph's HTML, outside its tags; None if nowhere."""
    inner, position = paragraph.inner, 0
    for tag in [*TAG.finditer(inner), None]:
        end = len(inner) if tag is None else tag.start()
        match = NUMBER_WORD.search(inner, position, end)
        if match:
            return match.span()
        position = end if tag is None else tag.end()
    return None


def possible_edits(page: str) -> dict[str, list[Paragraph]]:
    """For each kind of edit, the paragraphs it can be made at (empty when it cannot be made)."""
    paragraphs = main_paragraphs(page)
    if len(paragraphs) < 4:
        return {kind: [] for kind in EDIT_KINDS}
    candidates = _unique(paragraphs, plain(page))
    third = len(paragraphs) // 3
    top = {p.start for p in paragraphs[:max(third, 1)]}
    middle = {p.start for p in paragraphs[1:-1]}
    return {
        INSERT: [p for p in paragraphs[1:-1]],  # the new paragraph goes after one of these
        DELETE: [p for p in candidates if p.start in middle and _sized(p)],
        MOVE: [p for p in candidates if p.start in top and _sized(p)],
        NUMBER: [p for p in candidates if _number_in(p) is not None],
    }


def apply_edit(page: str, kind: str, at: Paragraph, rng: random.Random) -> tuple[str, dict]:
    """The page with one edit made at paragraph `at`, and the manifest's fields for it."""
    if kind == INSERT:
        text = _new_paragraph(rng)
        return f"{page[:at.end]}\n<p>{html.escape(text)}</p>{page[at.end:]}", {"paragraph": text}
    if kind == DELETE:
        return page[:at.start] + page[at.end:], {"paragraph": at.text}
    if kind == MOVE:  # to before the last paragraph: after it, it would end the text without
        # the line end it had, and the last block would gain one (two more changed blocks)
        last = main_paragraphs(page)[-1]
        moved = page[at.start:at.end]
        return (page[:at.start] + page[at.end:last.start] + moved + "\n" + page[last.start:],
                {"paragraph": at.text})
    if kind == NUMBER:
        start, end = _number_in(at)
        old = at.inner[start:end]
        new = str(int(old) + rng.randint(1, 9))
        inner = at.inner[:start] + new + at.inner[end:]
        return (f"{page[:at.start]}<p>{inner}</p>{page[at.end:]}",
                {"paragraph": at.text, "new_paragraph": plain(inner), "old_number": old, "new_number": new})
    raise ValueError(f"edit kind must be one of {EDIT_KINDS}, got {kind!r}")


def edit_site(root: Path, paths: list[str], base_url: str, seed: int) -> Manifest:
    """Add the banner to every page under `root` and make the seeded real edits, in place."""
    rng = random.Random(seed)
    manifest = Manifest(base_url, seed, BANNER, builder=BUILDER)
    texts = {path: (root / path).read_text(encoding="utf-8") for path in paths}
    editable = [path for path in paths if any(possible_edits(texts[path]).values())]
    chosen = sorted(rng.sample(editable, min(len(editable), max(len(EDIT_KINDS),
                                                                  round(len(paths) * EDIT_SHARE)))))
    kinds = {path: EDIT_KINDS[n % len(EDIT_KINDS)] for n, path in enumerate(chosen)}
    for path in paths:
        url = base_url + path
        page = add_banner(texts[path])
        if page is None:
            manifest.pages[url] = PageEdit(url, path, NONE, banner=False)
            continue
        kind, fields = kinds.get(path, NONE), {}
        if kind != NONE:
            options = possible_edits(page)
            if not options[kind]:  # the page cannot take its kind: the rarest so far that it can
                made = collections.Counter(edit.kind for edit in manifest.pages.values())
                kind = min((k for k in EDIT_KINDS if options[k]), key=made.__getitem__)
            page, fields = apply_edit(page, kind, rng.choice(options[kind]), rng)
        (root / path).write_text(page, encoding="utf-8")
        manifest.pages[url] = PageEdit(url, path, kind, banner=True, **fields)
    return manifest


# --- serving and crawling ---------------------------------------------------------------------


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class SiteServer:
    """A directory served by `http.server` on a free loopback port (or on `port`: a later crawl
    of a site at the URLs of an earlier one), in a background thread."""

    def __init__(self, root: Path, port: int = 0) -> None:
        handler = functools.partial(_QuietHandler, directory=root)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> SiteServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def write_start_page(root: Path, paths: list[str]) -> None:
    """`START_PAGE`: a link to every page, so one recursive crawl reaches them all. (Each start
    URL given to wget is a crawl of its own that fetches everything it reaches again.)"""
    links = "".join(f'<li><a href="{html.escape(path)}">{html.escape(path)}</a></li>\n' for path in paths)
    (root / START_PAGE).write_text(f"<!DOCTYPE html><html><head><title>Site map</title></head><body>"
                                   f"<h1>Site map</h1><ul>\n{links}</ul></body></html>\n", encoding="utf-8")


def crawl(start_url: str, warc_stem: Path, only: list[str] | None = None) -> Path:
    """Crawl the site with GNU Wget from `start_url`, links followed (to the paths `only`, if
    given: a subset's links to pages left out are not fetched); the WARC.gz written."""
    downloads = warc_stem.with_suffix(".files")
    accept = [] if only is None else [
        "--accept-regex=/(" + "|".join(re.escape(path) for path in [START_PAGE, *only]) + ")$"]
    result = subprocess.run(
        ["wget", "--recursive", "--level=inf", "--no-parent", "--accept=html", *accept, "--no-verbose",
         "--delete-after", f"--directory-prefix={downloads}", f"--warc-file={warc_stem}", start_url],
        capture_output=True, text=True, timeout=600, check=False)
    if result.returncode not in WGET_OK:
        raise RuntimeError(f"wget failed ({result.returncode}): {result.stderr[-2000:]}")
    shutil.rmtree(downloads, ignore_errors=True)
    return warc_stem.with_name(warc_stem.name + ".warc.gz")


def select_pages(pages: int | None) -> list[str]:
    """The docs' HTML pages (relative paths), all or `pages` of them evenly spaced, in order."""
    every = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.html"))
    if pages is None or pages >= len(every):
        return every
    return [every[n * len(every) // pages] for n in range(pages)]


def _wait_for_next_second() -> None:
    """WARC-Date has whole seconds: the second crawl starts in a later second than the first ended."""
    time.sleep(1.0 - time.time() % 1.0 + 0.01)


def build_two_crawls(workdir: Path, pages: int | None = None, seed: int = 0) -> TwoCrawls:
    """Two Wget crawls of the docs (all pages, or `pages` of them) before and after the edits:
    `workdir/crawl1.warc.gz`, `workdir/crawl2.warc.gz` and `workdir/manifest.json`."""
    reason = available()
    if reason:
        raise FileNotFoundError(reason)
    started = time.perf_counter()
    workdir = Path(workdir)
    site = workdir / "site"
    shutil.rmtree(site, ignore_errors=True)
    paths = select_pages(pages)
    for path in paths:
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DOCS / path, site / path)
    write_start_page(site, paths)
    with SiteServer(site) as server:
        start_url = server.base_url + START_PAGE
        only = None if pages is None else paths
        crawl1 = crawl(start_url, workdir / "crawl1", only)
        manifest = edit_site(site, paths, server.base_url, seed)
        manifest.pages[start_url] = PageEdit(start_url, START_PAGE, NONE, banner=False)
        _wait_for_next_second()
        crawl2 = crawl(start_url, workdir / "crawl2", only)
    (workdir / "manifest.json").write_text(manifest.to_json())
    return TwoCrawls(crawl1, crawl2, manifest, time.perf_counter() - started)


def cached_two_crawls(workdir: Path, pages: int | None = None, seed: int = 0) -> TwoCrawls:
    """`build_two_crawls`, unless `workdir` already holds a build of the same pages and seed."""
    workdir = Path(workdir)
    crawl1, crawl2, saved = (workdir / "crawl1.warc.gz", workdir / "crawl2.warc.gz",
                             workdir / "manifest.json")
    if crawl1.exists() and crawl2.exists() and saved.exists():
        manifest = Manifest.from_json(saved.read_text())
        built = sorted(page.path for page in manifest.pages.values() if page.path != START_PAGE)
        if (manifest.builder, manifest.seed, built) == (BUILDER, seed, select_pages(pages)):
            return TwoCrawls(crawl1, crawl2, manifest, 0.0)
    return build_two_crawls(workdir, pages, seed)


def warc_dates(warc: Path) -> list[str]:
    """The WARC-Date of every record of a WARC.gz (for checking the crawls' times)."""
    with gzip.open(warc, "rb") as stream:
        return [date.decode() for date in WARC_DATE.findall(stream.read())]
