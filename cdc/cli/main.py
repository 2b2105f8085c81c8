"""The `cdc` command line.

Exit codes: 0 all good; 1 failure (a one-line message says what to do); 2 bad usage;
3 done, but some input records were skipped (the summary lists them); 4 done, and a watch
hit in the run (`cdc ingest --fail-on-watch`, `cdc fetch --fail-on-watch`; `cdc.cli.search`).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from cdc import __version__
from cdc.analyst.boilerplate import host_boilerplate, shared_across_hosts
from cdc.analyst.queries import compare_generations, find_page
from cdc.cli import annotate as cli_annotate
from cdc.cli import ingest as cli_ingest
from cdc.cli import runs as cli_runs
from cdc.cli import search as cli_search
from cdc.cli.common import (  # noqa: F401 (the exit codes are the CLI's API, as `cdc.cli.main.EXIT_OK`)
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SKIPPED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_WATCH_HIT,
    db_path,
    open_store,
    retention_policy,
    time_option,
)
from cdc.core.chunking import Chunk, Chunker, chunk_content, default_threads
from cdc.core.compare import ChangeReport, compare
from cdc.core.compiled import AHEAD_OF_TIME
from cdc.core.excerpts import region_line
from cdc.core.gear import DEFAULT_PARAMS, ChunkParams
from cdc.core.verdicts import STORED_VERDICTS
from cdc.errors import CdcError, PageNotFoundError
from cdc.present.export import write_changes_csv
from cdc.present.launch import DEFAULT_DB, DEMO_DB
from cdc.runtime.lifeline import Terminated, is_stop, stop_on_sigterm, stopped_by
from cdc.sources.jsonl import READ_SIZE, open_file
from cdc.store import BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE


def _params(args: argparse.Namespace) -> ChunkParams:
    try:
        return ChunkParams(avg_size=args.avg_size, min_size=args.min_size, max_size=args.max_size)
    except ValueError as exc:
        raise CdcError(f"bad chunk sizes: {exc}") from exc


def _open_input(name: str) -> BinaryIO:
    """The file `name` ("-": stdin) as it is, or a one-line InputError (the sources' opener)."""
    return sys.stdin.buffer if name == "-" else open_file(name)


def _read_all(name: str) -> bytes:
    stream = _open_input(name)
    try:
        return stream.read()
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _stream_chunks(stream: BinaryIO, params: ChunkParams) -> Iterator[Chunk]:
    """Chunks of a stream of any size, in memory bounded by the chunk size."""
    chunker = Chunker(params)
    while block := stream.read(READ_SIZE):
        yield from chunker.feed(block)
    yield from chunker.finish()


def _chunk_command(args: argparse.Namespace) -> int:
    params = _params(args)
    streams = [_open_input(name) for name in args.files]  # a missing file fails before output
    out = sys.stdout
    if not args.json:
        out.write("index\toffset\tlength\tdigest\n")
    for name, stream in zip(args.files, streams):
        try:
            for chunk in _stream_chunks(stream, params):
                if args.json:
                    out.write(json.dumps({"file": name, "index": chunk.index, "offset": chunk.offset,
                                          "length": chunk.length, "digest": chunk.hex}) + "\n")
                else:
                    out.write(f"{chunk.index}\t{chunk.offset}\t{chunk.length}\t{chunk.hex}\n")
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
    return EXIT_OK


def _report_dict(report: ChangeReport) -> dict:
    return {
        "changed": report.changed,
        "verdict": report.verdict,
        "similarity": round(report.similarity, 6),
        "unchanged_ratio": round(report.unchanged_ratio, 6),
        "retained_ratio": round(report.retained_ratio, 6),
        "bytes_added": report.bytes_added,
        "bytes_removed": report.bytes_removed,
        "changed_regions": report.changed_regions,
        "removed_regions": report.removed_regions,
        "moved": [chunk.index for chunk in report.moved],
        "edits": [edit._asdict() for edit in report.edits],
    }


def _print_report(report: ChangeReport, old: bytes, new: bytes) -> None:
    print(f"verdict: {report.verdict}")
    print(f"similarity (shared chunks): {report.similarity:.3f}")
    print(f"unchanged share of the new text: {report.unchanged_ratio:.3f}")
    print(f"retained share of the old text: {report.retained_ratio:.3f}")
    print(f"bytes added {report.bytes_added}, removed {report.bytes_removed}, "
          f"chunks moved {len(report.moved)}")
    for edit in report.edits:
        before = region_line(old, edit.old_offset, edit.old_length, cut_mark=" …")
        after = region_line(new, edit.new_offset, edit.new_length, cut_mark=" …")
        if edit.kind == "insert":
            print(f"  + at {edit.new_offset}: {after}")
        elif edit.kind == "delete":
            print(f"  - at {edit.old_offset}: {before}")
        elif edit.kind == "move":
            print(f"  > moved from {edit.old_offset} to {edit.new_offset}: {after}")
        else:
            print(f"  ~ at {edit.new_offset}: {before} -> {after}")


def _diff_command(args: argparse.Namespace) -> int:
    params = _params(args)
    old, new = _read_all(args.old), _read_all(args.new)
    report = compare(chunk_content(old, params), chunk_content(new, params), old_text=old, new_text=new)
    if args.json:
        print(json.dumps(_report_dict(report)))
    else:
        _print_report(report, old, new)
    return EXIT_OK


def _compare_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    page = find_page(store, args.url)
    if len(store.generations(page.natural_key)) == 1 and args.old is None:
        raise PageNotFoundError(
            f"{page.natural_key} has one generation (fetched {page.last_fetched:%Y-%m-%d %H:%M}): nothing to "
            "compare yet; a later crawl of the page that changed it makes the second")
    result = compare_generations(store, args.url, args.old, args.new, args.ignore_boilerplate)
    if args.json:
        print(json.dumps({"url": result.page.natural_key, "from": result.old.generation,
                          "to": result.new.generation, **_report_dict(result.report)}))
    else:
        print(f"{result.page.natural_key}: generation {result.old.generation} -> {result.new.generation}"
              + (f" ({len(result.ignored)} boilerplate chunks left out)" if result.ignored else ""))
        _print_report(result.report, result.old.text, result.new.text)
    return EXIT_OK


def _history_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    page = find_page(store, args.url)
    print(f"{page.natural_key}  host {page.host}  first seen {page.first_seen:%Y-%m-%d %H:%M}  "
          f"last checked {page.last_checked:%Y-%m-%d %H:%M}")
    template = {row.generation: row.template_only for row in store.history(page.natural_key)}
    print("generation      fetched_at        verdict         unchanged   +bytes   -bytes  kept  template  "
          "what changed")
    for g in store.generations(page.natural_key):
        unchanged = f"{g.unchanged_ratio:.3f}" if g.unchanged_ratio is not None else "-"
        flag = {True: "yes", False: "no"}.get(template.get(g.generation), "-")
        print(f"{g.generation:>14}  {g.fetched_at:%Y-%m-%d %H:%M}  {g.verdict or '-':<14} {unchanged:>9} "
              f"{g.bytes_added or 0:>8,} {g.bytes_removed or 0:>8,}  {'yes' if g.retained else 'no':>4}  "
              f"{flag:>8}  {(g.excerpt or '')[:60]}")
    return EXIT_OK


def _export_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    run = store.run(args.run_ref).run if args.run_ref is not None else None
    rows = store.changes(host=args.host, since=args.since, until=args.until, verdicts=args.verdict or (),
                         min_change=args.min_change, run=run, labels=cli_annotate.labels_given(args.label))
    if args.output in (None, "-"):
        sys.stdout.reconfigure(newline="")
        count = write_changes_csv(rows, sys.stdout)
    else:
        with open(args.output, "w", encoding="utf-8", newline="") as out:
            count = write_changes_csv(rows, out)
        print(f"{count:,} changes written to {args.output}", file=sys.stderr)
    return EXIT_OK


def _boilerplate_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    hosts = [args.host] if args.host else [row.host for row in store.hosts()]
    for host in hosts:
        chunks = host_boilerplate(store, host, args.share, args.min_pages)
        print(f"{host}: {len(chunks)} boilerplate chunks")
        for chunk in chunks:
            print(f"  {chunk.hex[:16]}  {chunk.pages:>6,} pages  {chunk.share:6.1%}  {chunk.sample[:70]}")
    if not args.host:
        shared = shared_across_hosts(store)
        print(f"shared across hosts: {len(shared)} chunks")
        for chunk in shared:
            print(f"  {chunk.hex[:16]}  {len(chunk.hosts)} hosts ({', '.join(chunk.hosts[:4])})  "
                  f"{chunk.sample[:50]}")
    return EXIT_OK


def _erase_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    page = find_page(store, args.url)
    removed = store.erase(page.natural_key)
    print(f"erased {page.natural_key}: {removed:,} rows removed and the file rewritten without them")
    return EXIT_OK


def _compact_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    before = store.path.stat().st_size if store.path.exists() else 0
    store.compact()
    print(f"{store.path}: {before / 1e6:,.1f} MB -> {store.path.stat().st_size / 1e6:,.1f} MB")
    return EXIT_OK


def _prune_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    policy = retention_policy(args, store.retention())
    before = store.stats()
    store.prune(policy)
    after = store.stats()
    print(f"kept {policy.keep} generations per page"
          + "".join(f", {keep} for class {name}" for name, keep in policy.classes)
          + f"; chunk rows {before['content_chunks']:,} -> {after['content_chunks']:,}, "
          f"texts {before['retained_generations']:,} -> {after['retained_generations']:,}")
    return EXIT_OK


def _demo_command(args: argparse.Namespace) -> int:
    from cdc.demo import build as demo

    path = args.db or str(DEMO_DB)
    started = time.monotonic()
    summary = demo.build_demo(
        path, pages=args.pages or demo.DEFAULT_PAGES,
        generations=args.generations or demo.DEFAULT_GENERATIONS,
        seed=demo.DEFAULT_SEED if args.seed is None else args.seed, workers=args.workers,
        progress=(lambda done: sys.stderr.write(f"\r{done:6.1%} ")) if sys.stderr.isatty() else None)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    print(f"demo store {path}: {len(summary.pages):,} pages, {summary.new_generations:,} generations, "
          f"{summary.unchanged:,} unchanged recrawls, in {time.monotonic() - started:.1f} s")
    print(f"open it with: streamlit run app.py -- --db {path}")
    return EXIT_OK


def _migrate_command(args: argparse.Namespace) -> int:
    from cdc.ingest.migrate import migrate

    path = db_path(args)
    started = time.monotonic()
    show = sys.stderr.isatty()
    summary = migrate(path, progress=(lambda done, total: sys.stderr.write(
        f"\r{done.pages:,}/{total:,} pages re-chunked ")) if show else None)
    if show:
        sys.stderr.write("\n")
    if not summary.needed:
        print(f"{path} is already at chunker spec {summary.new_spec}: nothing to do")
        return EXIT_OK
    print(f"{path}: chunker spec {summary.old_spec} -> {summary.new_spec}\n"
          f"re-chunked {summary.generations:,} retained generations of {summary.pages:,} pages; "
          f"{summary.changes:,} change rows measured again from two retained texts; the rest kept "
          f"as measured before, in {time.monotonic() - started:.1f} s")
    return EXIT_OK


def _stats_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    stats = store.stats()
    meta = store.meta()
    for name in ("hosts", "pages", "generations", "retained_generations", "content_chunks", "changes"):
        print(f"{name:<22}{stats[name]:>12,}")
    print(f"{'file bytes':<22}{stats['file_bytes']:>12,}")
    trimmed = stats["trimmed_text_bytes"]
    print(f"{'trimmed text bytes':<22}{trimmed:>12,}" + ("  (still in the file: `cdc compact` frees them)"
                                                          if trimmed else ""))
    print(f"{'spec':<22}{meta.get('spec')}")
    if "extraction" in meta:
        print(f"{'html extraction':<22}{meta['extraction']}")
    print(f"{'retention':<22}{meta.get('retention')}")
    return EXIT_OK


def _add_size_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--avg-size", type=int, default=DEFAULT_PARAMS.avg_size,
                        help="average distance between boundaries, a power of two (default %(default)s)")
    parser.add_argument("--min-size", type=int, default=DEFAULT_PARAMS.min_size,
                        help="smallest chunk but the last (default %(default)s)")
    parser.add_argument("--max-size", type=int, default=DEFAULT_PARAMS.max_size,
                        help="largest chunk (default %(default)s)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc", description="Which part of a page changed between two crawls, and how much.")
    kernels = ("kernels compiled ahead of time" if AHEAD_OF_TIME is not None
               else "kernels from Numba's JIT; see python -m cdc.core.aot")
    parser.add_argument("--version", action="version", version=f"cdc {__version__} ({kernels})")
    parser.add_argument("--db", metavar="PATH", help=f"the store (default: $CDC_DB, else {DEFAULT_DB})")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chunk = commands.add_parser("chunk", help="print the chunks of files (streamed; - is stdin)")
    chunk.add_argument("files", nargs="+", metavar="FILE")
    chunk.add_argument("--json", action="store_true", help="one JSON object per chunk")
    _add_size_options(chunk)
    chunk.set_defaults(run=_chunk_command)

    diff = commands.add_parser("diff", help="compare two text files: verdict, measures, word edits")
    diff.add_argument("old", metavar="OLD")
    diff.add_argument("new", metavar="NEW")
    diff.add_argument("--json", action="store_true", help="the report as JSON")
    _add_size_options(diff)
    diff.set_defaults(run=_diff_command)

    compare_ = commands.add_parser("compare", help="what changed between two generations of a URL")
    compare_.add_argument("url", metavar="URL")
    compare_.add_argument("--from", dest="old", type=int, metavar="G",
                          help="older generation (default: the one before --to)")
    compare_.add_argument("--to", dest="new", type=int, metavar="G",
                          help="newer generation (default: the latest)")
    compare_.add_argument("--ignore-boilerplate", action="store_true",
                          help="leave the host's boilerplate out")
    compare_.add_argument("--json", action="store_true", help="the report as JSON")
    compare_.set_defaults(run=_compare_command)

    history = commands.add_parser("history", help="the generations of a URL and how each changed")
    history.add_argument("url", metavar="URL")
    history.set_defaults(run=_history_command)

    export = commands.add_parser("export", help="change summaries as CSV")
    export.add_argument("--host")
    export.add_argument("--since", type=time_option, help="fetched at or after (ISO 8601, UTC)")
    export.add_argument("--until", type=time_option, help="fetched before (ISO 8601, UTC)")
    export.add_argument("--verdict", action="append", choices=STORED_VERDICTS,
                        help="repeatable; `changed`: a change not measured (its previous text was gone)")
    export.add_argument("--min-change", type=float, default=0.0, metavar="X",
                        help="at least this share changed, 0 to 1 (1 - the smaller kept share; a change "
                             "not measured, or a new page, counts as wholly changed)")
    export.add_argument("--run", dest="run_ref", metavar="RUN",
                        help="only the generations first seen in this run (an id or a label; `cdc runs`)")
    export.add_argument("--label", action="append", help="only changes annotated so (`cdc annotate`)")
    export.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    export.set_defaults(run=_export_command)

    boilerplate = commands.add_parser("boilerplate", help="chunks shared by a host's pages, and across hosts")
    boilerplate.add_argument("--host")
    boilerplate.add_argument("--share", type=float, default=BOILERPLATE_SHARE,
                             help="of the host's pages (default %(default)s)")
    boilerplate.add_argument("--min-pages", type=int, default=BOILERPLATE_MIN_PAGES,
                             help="default %(default)s")
    boilerplate.set_defaults(run=_boilerplate_command)

    erase = commands.add_parser("erase", help="remove a page from every table and from the file")
    erase.add_argument("url", metavar="URL")
    erase.set_defaults(run=_erase_command)

    prune = commands.add_parser("prune", help="apply a new retention limit to the whole store")
    prune.add_argument("--keep", type=int, help="generations per page that keep text and chunks")
    prune.add_argument("--class-keep", action="append", metavar="CLASS=N", help="a class's own limit")
    prune.set_defaults(run=_prune_command)

    compact = commands.add_parser(
        "compact", help="rewrite the store file in full row groups (ingest appends a small one per batch)")
    compact.set_defaults(run=_compact_command)

    stats = commands.add_parser("stats", help="what the store holds")
    stats.set_defaults(run=_stats_command)

    migrate = commands.add_parser(
        "migrate", help="re-chunk a store made by an earlier cdc under this cdc's chunker spec")
    migrate.set_defaults(run=_migrate_command)

    demo = commands.add_parser("demo", help=f"build a synthetic demo crawl store (default {DEMO_DB})")
    demo.add_argument("--pages", type=int, default=None, help="pages in the crawl")
    demo.add_argument("--generations", type=int, default=None, help="crawls of each page")
    demo.add_argument("--seed", type=int, default=None, help="another seed, another crawl")
    demo.add_argument("--workers", type=int, default=default_threads(), help="default: the cores")
    demo.set_defaults(run=_demo_command)

    cli_ingest.add_commands(commands)
    cli_runs.add_commands(commands, open_store)
    cli_annotate.add_commands(commands, open_store)
    cli_search.add_commands(commands, open_store)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    stop_on_sigterm()  # SIGTERM unwinds like Ctrl-C: the open batch rolls back, workers end
    try:
        return args.run(args)
    except BaseException as exc:
        # First, a stop: the signal's own exception, or any error raised once it came
        # (DuckDB's "Query interrupted", a transaction left aborted, a library's error from
        # a call the signal cut short, even a CdcError made of one).
        if is_stop(exc):
            terminated = isinstance(exc, Terminated) or stopped_by() == signal.SIGTERM
            print("cdc: stopped (SIGTERM)" if terminated else "cdc: interrupted", file=sys.stderr)
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        if isinstance(exc, CdcError):
            print(f"cdc: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        if isinstance(exc, BrokenPipeError):  # `cdc chunk big.txt | head`: the reader has all it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):  # not the store's
            written = exc.filename or "an output file (--parquet-out, --warc-out)"
            print(f"cdc: the disk is full, writing {written}: free space there, then run the same "
                  "command again", file=sys.stderr)
            return EXIT_FAILURE
        raise

if __name__ == "__main__":
    raise SystemExit(main())
