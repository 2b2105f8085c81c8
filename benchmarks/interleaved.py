"""Interleaved shards benchmark: `cdc ingest --workers 2` against the plain ingest, from the command line.

The requirement: `cdc ingest --workers 2` on eight interleaved shards of a crawl of at least
200 MB, timed from the command line (cluster start included): identical store to the plain
ingest, at most 1.3x its wall time, and at least 1.4x as fast as `--workers 1`.

What is measured:

1. The crawl (made once, in data/bench/interleaved/): every record of the three real
   revision histories in `../shared/corpus/` (the Rust book in English, Chinese and
   Japanese: 6,985 records, 331 URLs) rendered as the HTML page its docs site serves: a
   header with the site's navigation, a sidebar listing every chapter of that book (the
   corpus's URLs, each under its latest title, the page's own marked active, as mdBook
   marks it), the title as `<h1>`, each section as `<h2>` with its Markdown lines as
   paragraphs, list items, quotes and `<pre>` code blocks, and a footer. Each page is a WARC
   `response` record (HTTP/1.1 200, text/html; charset=utf-8, WARC-Date its fetch time)
   written by warcio, a gzip member per record. All records are sorted by fetch time and
   dealt round-robin into 8 shards: each file is in fetch order, and each page's versions
   are spread over all 8, so a plain ingest, which reads the files one after another, meets
   most versions after a later one of the same page and puts them in place ("older than
   stored"). The three books rendered give 199.9 MB of WARC, short of 200 MB (1 MB = 10^6
   bytes), so the Japanese book is also crawled on a second host that mirrors it, as docs
   sites are mirrored (`MIRRORS`: its GitHub Pages site), at the same times: the same pages
   under other URLs, which the store keeps as pages of their own. In all 8,543 records of
   436 URLs on 4 hosts, 239.3 MB of WARC, 74.7 MB gzipped.
2. Four peers, each run as a user runs it, `python -m cdc --db STORE ingest --quiet SHARD...`
   in a fresh process into a fresh store, round-robin, `--runs` rounds, no warm-up round
   (a first launch is what users pay; with the kernels compiled ahead of time, `python -m
   cdc.core.aot`, there is no JIT cache to warm, and the shards stay in the OS's file cache):
   - plain: no flag, which on this machine is `--processes 2` (the default is the cores);
   - `--processes 1`: one process, for context;
   - `--workers 1` and `--workers 2`: a local Dask cluster started for the run and stopped
     after it, inside the timed command.
   Wall times are medians; MB/s are of uncompressed WARC; CPU s is the median CPU time of
   the command and the processes it waited for (its helpers, a cluster's workers), which
   shows when a peer did not get the cores it asked for on a shared machine. Peak MB is the
   largest resident set of the command or one of its processes (`benchmarks/measured.py`), and
   the yardstick before and after says how much of a second core the machine gave.
3. Every store's data tables (`cdc.store.TABLES` and `fetches`) checked against the plain
   ingest's, row for row: FAIL, the first differing rows of each table, and exit status 1
   if one differs, or if a peer fails (its error is printed; a crash is not run again). The
   reference is the plain ingest's first store, or if the plain ingest failed, the first of
   `--processes 1` (the same code in one process). Each peer's "older than stored" count
   (its summary line) shows the shards interleave: the plain path meets most versions after
   a later one of their page, a cluster groups a page's versions first and meets none.

Run from the repository root:

    python benchmarks/interleaved.py            # about 15 min on two cores (+ 30 s once for the crawl)
    python benchmarks/interleaved.py --runs 5
"""

from __future__ import annotations

import argparse
import gzip
import html
import io
import json
import re
import statistics
import sys
import tempfile
from collections import Counter
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import measured  # benchmarks/ is on sys.path when this file is run
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from cdc.store import TABLES

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
BOOKS = ("rustbook", "rustbook-zh", "rustbook-ja")
# Each book's host in the corpus, its mirror, the site's name and language.
SITES = {
    "doc.rust-lang.org": ("The Rust Programming Language", "en"),
    "doc.rust-lang.org.cn": ("Rust 程序设计语言 简体中文版", "zh-CN"),
    "doc.rust-jp.rs": ("The Rust Programming Language 日本語版", "ja"),
}
# The Japanese book's second host (its GitHub Pages site), served the same pages: the three
# books alone render to 199.9 MB of WARC.
MIRRORS = {"doc.rust-jp.rs": ("rust-lang-ja.github.io/book-ja",)}
CRAWL = ROOT / "data" / "bench" / "interleaved"
MANIFEST = CRAWL / "manifest.json"
SHARDS = 8
CRAWL_BYTES = 200_000_000  # uncompressed WARC, at least
OVERHEAD_TARGET = 1.3  # workers-2 wall time over plain, at most
SCALING_TARGET = 1.4  # workers-1 wall time over workers-2, at least
PEERS = {"plain (cdc ingest)": [], "--processes 1": ["--processes", "1"],
         "--workers 1": ["--workers", "1"], "--workers 2": ["--workers", "2"]}
ACTIVE = ' class="active"'
PLAIN, ONE_PROCESS = "plain (cdc ingest)", "--processes 1"
CHECKED = (*TABLES, "fetches")  # the data tables, compared row for row
SHOWN_ROWS = 3  # differing rows printed per table
OLDER = re.compile(r"^older than stored\s+([\d,]+)", re.M)

FENCE = re.compile(r"^\s*(```|~~~)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)")
QUOTE = re.compile(r"^\s*>\s?(.*)")
SITE_NAV = (("Learn", "/learn"), ("Install", "/tools/install"), ("Docs", "/"), ("Community", "/community"),
            ("Search", "/search"))


def _host(url: str) -> str:
    return url.split("/")[2]


def _fetch_time(record: dict) -> datetime:
    return datetime.fromisoformat(record["fetched_at"]).astimezone(UTC)


def sidebar(records: list[dict]) -> dict[str, str]:
    """A book's chapters as (path, latest title), in the order of their paths."""
    latest: dict[str, tuple[datetime, str]] = {}
    for record in records:
        path = "/" + record["url"].split("/", 3)[3]
        when = _fetch_time(record)
        if path not in latest or latest[path][0] <= when:
            latest[path] = when, title_of(record)
    return {path: title for path, (_, title) in sorted(latest.items())}


def title_of(record: dict) -> str:
    """The page's title: its level-1 heading, else its first heading, else its file name."""
    headings = [section["heading"] for section in record["sections"] if section["heading"]]
    return record["title"] or (headings[0] if headings else record["url"].rsplit("/", 1)[-1])


def _blocks(text: str) -> list[str]:
    """Markdown lines as HTML blocks: fenced code as `<pre>`, runs of list items as a list
    (an indented line continues the item), quotes, and paragraphs of consecutive lines."""
    out: list[str] = []
    code: list[str] | None = None
    items: list[str] = []
    paragraph: list[str] = []

    def close() -> None:
        if items:
            out.append("<ul>\n" + "\n".join(f"<li>{item}</li>" for item in items) + "\n</ul>")
            items.clear()
        if paragraph:
            out.append(f"<p>{html.escape(chr(10).join(paragraph))}</p>")
            paragraph.clear()

    for line in text.split("\n"):
        if FENCE.match(line):
            if code is None:
                close()
                code = []
            else:
                out.append("<pre><code>" + html.escape("\n".join(code)) + "</code></pre>")
                code = None
        elif code is not None:
            code.append(line)
        elif not line.strip():
            close()
        elif item := LIST_ITEM.match(line):
            if paragraph:
                close()
            items.append(html.escape(item.group(1)))
        elif items and line[:1].isspace():
            items[-1] += "\n" + html.escape(line.strip())
        elif quote := QUOTE.match(line):
            close()
            out.append(f"<blockquote><p>{html.escape(quote.group(1))}</p></blockquote>")
        else:
            if items:
                close()
            paragraph.append(line.strip())
    close()
    if code is not None:  # a fence left open at the section's end
        out.append("<pre><code>" + html.escape("\n".join(code)) + "</code></pre>")
    return out


def render(record: dict, host: str, chapters: dict[str, str]) -> bytes:
    """The HTML page the docs site at `host` serves for a corpus record."""
    site, language = SITES[_host(record["url"])]
    here = "/" + record["url"].split("/", 3)[3]
    title = title_of(record)
    nav = "\n".join(f'<li><a href="https://{host}{path}">{html.escape(name)}</a></li>'
                    for name, path in SITE_NAV)
    # mdBook's links between chapters are relative, so a mirror under a path serves them too.
    toc = "\n".join(f'<li class="chapter-item"><a href="{path.rsplit("/", 1)[-1]}"'
                    f'{ACTIVE if path == here else ""}>{html.escape(name)}</a></li>'
                    for path, name in chapters.items())
    body = [f"<h1>{html.escape(title)}</h1>"]
    for section in record["sections"]:
        if section["heading"] and section["heading"] != title:
            body.append(f"<h2>{html.escape(section['heading'])}</h2>")
        body += _blocks(section["text"])
    page = f"""<!DOCTYPE html>
<html lang="{language}">
<head>
<meta charset="utf-8">
<title>{html.escape(title)} - {html.escape(site)}</title>
<meta name="description" content="{html.escape(record['description'])}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/css/general.css">
<link rel="stylesheet" href="/css/chrome.css">
</head>
<body class="light">
<header id="menu-bar" class="menu-bar">
<a class="site-title" href="/">{html.escape(site)}</a>
<nav class="site-nav"><ul>
{nav}
</ul></nav>
</header>
<nav id="sidebar" class="sidebar" aria-label="Table of contents">
<div class="sidebar-scrollbox"><ol class="chapter">
{toc}
</ol></div>
</nav>
<div id="page-wrapper" class="page-wrapper">
<main>
{chr(10).join(body)}
</main>
<nav class="nav-wrapper" aria-label="Page navigation">
<a rel="prev" href="/" class="nav-chapters previous" title="Previous chapter">&larr;</a>
<a rel="next" href="/" class="nav-chapters next" title="Next chapter">&rarr;</a>
</nav>
</div>
<footer class="site-footer">
<p>{html.escape(site)}. Licensed under MIT or Apache-2.0. Built with mdBook.</p>
<p><a href="https://{host}/">Home</a> | <a href="https://github.com/rust-lang/book">Source</a></p>
</footer>
</body>
</html>
"""
    return page.encode("utf-8")


def make_crawl(directory: Path = CRAWL) -> dict:
    """The 8 shards, made once; the manifest: their names, records, URLs, uncompressed bytes."""
    if MANIFEST.exists():
        return json.loads(MANIFEST.read_text())
    lines = []  # (fetch time, url, book, host, line): parsed again one at a time as written
    chapters: dict[str, dict[str, str]] = {}
    for book in BOOKS:
        with gzip.open(CORPUS / f"{book}.jsonl.gz") as stream:
            raw = stream.read().splitlines()
        records = [json.loads(line) for line in raw]
        chapters[book] = sidebar(records)
        for line, record in zip(raw, records):
            origin = _host(record["url"])
            for host in (origin, *MIRRORS.get(origin, ())):
                lines.append((_fetch_time(record), record["url"].replace(origin, host, 1), book, host, line))
        del records
    lines.sort(key=lambda entry: entry[:2])
    directory.mkdir(parents=True, exist_ok=True)
    names = [f"rustbooks-{n:02d}-of-{SHARDS:02d}.warc.gz" for n in range(SHARDS)]
    size = 0
    with ExitStack() as files:
        writers = [WARCWriter(files.enter_context(open(directory / f"{name}.partial", "wb")), gzip=True)
                   for name in names]
        for n, (when, url, book, host, line) in enumerate(lines):
            body = render(json.loads(line), host, chapters[book])
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                                  ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            writer = writers[n % SHARDS]
            record = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), http_headers=headers,
                warc_headers_dict={"WARC-Date": when.strftime("%Y-%m-%dT%H:%M:%SZ")})
            writer.write_record(record)
    for name in names:
        with gzip.open(directory / f"{name}.partial") as stream:
            while chunk := stream.read(1 << 20):
                size += len(chunk)
    for name in names:
        (directory / f"{name}.partial").rename(directory / name)
    manifest = {"shards": names, "records": len(lines), "urls": len({entry[1] for entry in lines}),
                "bytes": size, "hosts": len({_host(entry[1]) for entry in lines})}
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def rows(path: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(path), read_only=True) as connection:
        return {table: sorted(connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                for table in CHECKED}


def differences(expected: dict[str, list[tuple]], got: dict[str, list[tuple]],
                names: dict[str, list[str]], reference: str) -> list[str]:
    """Per differing table: its row counts and the first rows only one of the stores holds."""
    lines = []
    for table in CHECKED:
        want, have = Counter(expected[table]), Counter(got[table])
        if want == have:
            continue
        missing, extra = list((want - have).elements()), list((have - want).elements())
        lines.append(f"  {table}: {len(expected[table]):,} rows in {reference}'s, {len(got[table]):,} here; "
                     f"{len(missing):,} only in {reference}'s, {len(extra):,} only here")
        if paired := _differing_columns(names[table], missing, extra):
            lines.append(f"    {paired}")
        for label, found in ((f"only in {reference}'s", missing), ("only here", extra)):
            for row in sorted(found, key=repr)[:SHOWN_ROWS]:
                lines.append(f"    {label}: {_shown(row)}")
    return lines


def columns(path: Path) -> dict[str, list[str]]:
    with duckdb.connect(str(path), read_only=True) as connection:
        return {table: [column[0] for column in connection.sql(f"SELECT * FROM {table} LIMIT 0").description]
                for table in CHECKED}


def _differing_columns(names: list[str], missing: list[tuple], extra: list[tuple]) -> str | None:
    """The columns in which rows of the same key (a table's first two or three columns)
    differ, with how many rows differ in each; None if the rows do not pair up by key."""
    for width in (2, 3):
        before, after = ({row[:width]: row for row in rows} for rows in (missing, extra))
        if len(before) == len(missing) and len(after) == len(extra) and before.keys() == after.keys():
            counts = Counter(names[n] for key in before
                             for n, (old, new) in enumerate(zip(before[key], after[key])) if old != new)
            return (f"rows of the same ({', '.join(names[:width])}) differ in "
                    + ", ".join(f"{name} ({count:,})" for name, count in counts.most_common()))
    return None


def _shown(row: tuple) -> str:
    text = repr(tuple(value[:40] + b"..." if isinstance(value, bytes) and len(value) > 40
                      else value[:60] + "..." if isinstance(value, str) and len(value) > 60 else value
                      for value in row))
    return text if len(text) <= 400 else text[:400] + "..."


def ingest(shards: list[Path], store: Path, flags: list[str]) -> measured.Measured:
    """`python -m cdc --db STORE ingest --quiet FLAGS SHARD...` in a new process: its wall time,
    the CPU time of it and the processes it waited for (its helpers, a cluster's workers), its
    peak resident memory (the largest of its processes), and its output (`measured.run`)."""
    return measured.run([sys.executable, "-m", "cdc", "--db", str(store), "ingest", "--quiet", *flags,
                         *map(str, shards)], ROOT)


def _failure(done: measured.Measured) -> str:
    """A failed ingest in a line: its exit status, the innermost frame and the error."""
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    frames = [line for line in lines if line.startswith('File "')]
    where = re.sub(r'^File ".*?([^/]+/[^/]+\.py)"', r"\1", frames[-1]) if frames else ""
    error = lines[-1] if lines else "no output"
    return f"exit {done.returncode}: {error}" + (f" (at {where})" if where else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    crawl = make_crawl()
    shards = [CRAWL / name for name in crawl["shards"]]
    size = crawl["bytes"]
    packed = sum(shard.stat().st_size for shard in shards)
    print(f"crawl: {crawl['records']:,} WARC records of {crawl['urls']} URLs on {crawl['hosts']} hosts, "
          f"{size / 1e6:.1f} MB of WARC ({packed / 1e6:.1f} MB gzip) dealt round-robin in fetch order into "
          f"{SHARDS} shards; {args.runs} rounds, no warm-up")
    if size < CRAWL_BYTES:
        sys.exit(f"FAIL: the crawl is {size / 1e6:.1f} MB, under {CRAWL_BYTES / 1e6:.0f} MB")

    before = measured.yardstick()
    print(f"yardstick before: 2 processes did {before:.2f}x the pure-Python work of 1 "
          "(2.00: a free second core)")
    times: dict[str, list[float]] = {name: [] for name in PEERS}
    cpus: dict[str, list[float]] = {name: [] for name in PEERS}
    peaks: dict[str, list[float]] = {name: [] for name in PEERS}
    failed: dict[str, str] = {}
    older: dict[str, int] = {}
    with tempfile.TemporaryDirectory(dir=ROOT / "data" / "bench") as work:
        stores: dict[str, list[Path]] = {name: [] for name in PEERS}
        for round_ in range(args.runs):
            for n, (name, flags) in enumerate(PEERS.items()):
                if name in failed:  # a crash is not noise: once is enough
                    continue
                store = Path(work) / f"{round_}-{n}.duckdb"
                done = ingest(shards, store, flags)
                if done.returncode:
                    failed[name] = _failure(done)
                    continue
                times[name].append(done.wall)
                cpus[name].append(done.cpu)
                peaks[name].append(done.peak_mb)
                stores[name].append(store)
                if count := OLDER.search(done.stdout):
                    older.setdefault(name, int(count.group(1).replace(",", "")))
        # The plain ingest's store is the reference; if it failed, the same path in one process.
        reference = next((name for name in (PLAIN, ONE_PROCESS) if stores[name]), None)
        mismatched: dict[str, list[str]] = {}
        if reference:
            expected, names = rows(stores[reference][0]), columns(stores[reference][0])
            for name, paths in stores.items():
                for path in paths[1:] if name == reference else paths:
                    if lines := differences(expected, rows(path), names, reference.split(" (")[0]):
                        mismatched.setdefault(name, lines)

    shown = reference if reference == PLAIN else f"{reference}'s (plain failed)"
    if reference:
        print(f"{reference} put {older.get(reference, 0):,} of {crawl['records']:,} records in place "
              "as older than stored (the shards interleave)")
    print(f"{'peer':<22}{'median s':>10}{'MB/s':>8}{'CPU s':>8}{'peak MB':>9}{'older':>8}   runs")
    medians = {}
    for name in PEERS:
        if name in failed:
            print(f"{name:<22}  FAILED, {failed[name]}")
            continue
        medians[name] = statistics.median(times[name])
        runs = " ".join(f"{t:.2f}" for t in times[name])
        print(f"{name:<22}{medians[name]:>10.2f}{size / 1e6 / medians[name]:>8.1f}"
              f"{statistics.median(cpus[name]):>8.1f}{max(peaks[name]):>9.0f}{older.get(name, 0):>8,}"
              f"   {runs}")
    after = measured.yardstick()
    print(f"yardstick after: {after:.2f}x")
    for label, slow, fast in (("--processes 2 over --processes 1", ONE_PROCESS, PLAIN),
                              ("--workers 2 over --workers 1", "--workers 1", "--workers 2")):
        if slow in medians and fast in medians:
            print(f"speed-up, {label}: {medians[slow] / medians[fast]:.2f}x (target >= 1.6 where the "
                  "yardstick shows a second core)")
    checked = ", ".join(CHECKED)
    if not reference:
        print("store check: no plain ingest finished: nothing to check against")
    elif mismatched:
        for name, lines in mismatched.items():
            print(f"FAIL: {name} wrote a different store than {shown}")
            print("\n".join(lines))
    else:
        print(f"store check: every run's {checked} identical to {shown}, row for row: PASS")
    two = medians.get("--workers 2")
    for label, numerator, denominator, target, passes in (
            ("overhead, --workers 2 over plain", two, medians.get(PLAIN), f"<= {OVERHEAD_TARGET}",
             lambda ratio: ratio <= OVERHEAD_TARGET),
            ("scaling, --workers 1 over --workers 2", medians.get("--workers 1"), two, f">= {SCALING_TARGET}",
             lambda ratio: ratio >= SCALING_TARGET)):
        if numerator is None or denominator is None:
            print(f"{label}: a peer failed (target {target}): FAIL")
            continue
        ratio = numerator / denominator
        print(f"{label}: {ratio:.2f}x wall time (target {target}): {'PASS' if passes(ratio) else 'FAIL'}")
    if two is not None and PLAIN in failed and ONE_PROCESS in medians:
        print(f"  for context, --workers 2 over --processes 1: {two / medians[ONE_PROCESS]:.2f}x wall time")
    if failed or mismatched or not reference:
        sys.exit(1)


if __name__ == "__main__":
    main()
