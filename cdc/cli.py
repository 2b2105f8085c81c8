"""The `cdc` command line.

Exit codes: 0 all good; 1 failure (a one-line message says what to do); 2 bad usage;
3 done, but some input records were skipped (the summary lists them); 4 done, and a watch
hit in the run (`cdc ingest --fail-on-watch`, `cdc fetch --fail-on-watch`; `cdc.cli_search`).
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
from datetime import datetime
from typing import BinaryIO, TextIO

from cdc import __version__, cli_annotate, cli_runs, cli_search
from cdc.boilerplate import DEFAULT_MIN_PAGES, DEFAULT_SHARE, host_boilerplate, shared_across_hosts
from cdc.chunking import DEFAULT_PARAMS, Chunk, Chunker, ChunkParams, chunk_content, default_threads
from cdc.compare import VERDICTS, ChangeReport, compare
from cdc.compiled import AHEAD_OF_TIME
from cdc.errors import CdcError, PageNotFoundError
from cdc.export import write_changes_csv
from cdc.extract import EXTRACTION_MODES, GIVEN_TEXT, MAIN_CONTENT, TEXT_MODES
from cdc.ingest import BATCH_BYTES, NEW, WARC_BATCH_BYTES, Ingester, IngestSummary, parse_time
from cdc.inputs import open_crawl_inputs, run_mode
from cdc.launch import DEFAULT_DB, DEMO_DB
from cdc.lifeline import Terminated, stop_on_sigterm, stopped_by
from cdc.nopandas import forgo_pandas
from cdc.queries import compare_generations, find_page
from cdc.sources import open_input
from cdc.store import RetentionPolicy, Store
from cdc.versions import shown
from cdc.warc import Revisit, WarcSummary

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SKIPPED = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
EXIT_TERMINATED = 143  # 128 + SIGTERM

SHOWN_PROBLEMS = 20  # bad records listed one by one in a summary

READ_SIZE = 1 << 20


def _params(args: argparse.Namespace) -> ChunkParams:
    try:
        return ChunkParams(avg_size=args.avg_size, min_size=args.min_size, max_size=args.max_size)
    except ValueError as exc:
        raise CdcError(f"bad chunk sizes: {exc}") from exc


def _open_input(name: str) -> BinaryIO:
    if name == "-":
        return sys.stdin.buffer
    try:
        return open(name, "rb")
    except FileNotFoundError as exc:
        raise CdcError(f"{name}: no such file") from exc
    except IsADirectoryError as exc:
        raise CdcError(f"{name}: is a directory; give a file") from exc
    except PermissionError as exc:
        raise CdcError(f"{name}: permission denied") from exc


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


def _excerpt(text: bytes, offset: int, length: int, limit: int = 120) -> str:
    return shown(text, offset, length, limit) + (" …" if length > limit else "")


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
        before = _excerpt(old, edit.old_offset, edit.old_length)
        after = _excerpt(new, edit.new_offset, edit.new_length)
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


def _db_path(args: argparse.Namespace) -> str:
    """--db, else $CDC_DB, else data/cdc.duckdb."""
    return args.db or os.environ.get("CDC_DB") or str(DEFAULT_DB)


def _store(args: argparse.Namespace) -> Store:
    return Store(_db_path(args))


def _progress(summary: IngestSummary, started: float, stream: TextIO) -> None:
    elapsed = max(time.monotonic() - started, 1e-9)
    stream.write(f"\r{summary.records:,} records, {summary.new_generations:,} new generations, "
                 f"{len(summary.bad):,} bad, {summary.records / elapsed:,.0f} records/s ")
    stream.flush()


def _print_summary(summary: IngestSummary, elapsed: float) -> None:
    out = sys.stdout
    out.write(f"records read      {summary.records:>10,}\n"
              f"pages             {len(summary.pages):>10,}  ({summary.new_pages:,} new)\n"
              f"new generations   {summary.new_generations:>10,}\n"
              f"unchanged         {summary.unchanged:>10,}\n"
              f"older than stored {summary.older:>10,}  (put in their place in fetch order)\n"
              f"bad records       {len(summary.bad):>10,}\n"
              f"time              {elapsed:>10.2f} s\n")
    problems = [f"{bad.source}:{bad.line}: {bad.reason}" for bad in summary.bad]
    for problem in problems[:SHOWN_PROBLEMS]:
        out.write(f"  skipped {problem}\n")
    if len(problems) > SHOWN_PROBLEMS:
        out.write(f"  ... and {len(problems) - SHOWN_PROBLEMS:,} more\n")
    for source, line, url in summary.same_time[:SHOWN_PROBLEMS]:
        out.write(f"  kept both: {source}:{line}: {url} has other content fetched at the same time\n")
    if len(summary.same_time) > SHOWN_PROBLEMS:
        out.write(f"  ... and {len(summary.same_time) - SHOWN_PROBLEMS:,} more fetched at the same time\n")


def _retention_policy(args: argparse.Namespace, current: RetentionPolicy) -> RetentionPolicy:
    classes = dict(current.classes)
    for item in args.class_keep or []:
        name, _, value = item.partition("=")
        if not name or not value.isdigit():
            raise CdcError(f"--class-keep takes CLASS=N, got {item!r}")
        classes[name] = int(value)
    keep = args.keep if args.keep is not None else current.keep
    return RetentionPolicy(keep, tuple(sorted(classes.items())))


def _ingest_command(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.keep is not None or args.class_keep:
        current = store.retention() if store.path.exists() else RetentionPolicy()
        store.set_retention(_retention_policy(args, current))
    lake = None
    if args.parquet_out:
        from cdc.lake import ParquetLake

        lake = ParquetLake(args.parquet_out)
    started = time.monotonic()
    show = sys.stderr.isatty() and not args.quiet
    if args.dask or args.workers:
        code = _cluster_ingest(args, store, lake, started, show)
    else:
        code = _local_ingest(args, store, lake, started, show)
    if lake is not None:
        print(f"Parquet lake: {lake.rows:,} rows in {lake.batches:,} batches under {lake.directory}")
    return code


def _local_ingest(args: argparse.Namespace, store: Store, lake, started: float, show: bool) -> int:
    """In this process, with `--processes` forked helpers for the per-page work."""
    forgo_pandas()  # the batch tables need none, and importing it took 0.33 s
    inputs = open_crawl_inputs(args.files)  # each opened once; one that is not crawl input stops here
    try:
        mode = run_mode(inputs, args.extract)
        archives = any(item.is_archive for item in inputs)
        revisits: list[Revisit] = []
        if archives:
            store.check_extraction_mode(mode)  # claimed with the first batch: a failed run claims nothing
        ingester = Ingester(store, on_batch=(lambda s: _progress(s, started, sys.stderr)) if show else None,
                            workers=args.processes, on_write=lake.write if lake else None,
                            batch_bytes=WARC_BATCH_BYTES if archives else BATCH_BYTES,
                            label=args.run_label, inputs=args.files, revisits=revisits,
                            extraction_mode=mode if archives else None)
        warc = WarcSummary()
        # One run over all the files, each record numbered by its file and its place in it: a
        # batch may span files, so a page's versions spread over small files meet in one batch
        # and are ordered by fetch time, as a cluster ingest orders them.
        ingester.run_inputs([item.items(mode, revisits, warc) for item in inputs])
    finally:
        for item in inputs:
            item.close()
    if show:
        sys.stderr.write("\n")
    _print_summary(ingester.summary, time.monotonic() - started)
    if archives:
        _print_warc_summary(warc)
    print(cli_runs.run_line(store, ingester.run_id))
    return cli_search.report_watches(store, ingester.run_id, args,
                                     EXIT_SKIPPED if ingester.summary.skipped else EXIT_OK)


def _cluster_ingest(args: argparse.Namespace, store: Store, lake, started: float, show: bool) -> int:
    """On a Dask cluster: the scheduler at --dask, or a local one of --workers processes."""
    from cdc.cluster import ClusterSummary, cluster_ingest, dask_client

    if "-" in args.files:
        raise CdcError("a cluster ingest reads files on its workers, not standard input: give file names")

    with dask_client(args.dask, args.workers) as client:
        sys.stderr.write(f"Dask dashboard: {client.dashboard_link}\n")

        latest: list[ClusterSummary] = []

        def progress(summary: ClusterSummary) -> None:
            latest[:] = [summary]
            if not show:
                return
            elapsed = max(time.monotonic() - started, 1e-9)
            sys.stderr.write(f"\rshards {summary.shards_read:,}/{summary.shards:,} read, "
                             f"{summary.ingest.records:,} records; partitions {summary.written:,}/"
                             f"{summary.partitions:,} written, {summary.ingest.new_generations:,} "
                             f"new generations; {summary.ingest.records / elapsed:,.0f} records/s ")
            sys.stderr.flush()

        try:
            summary = cluster_ingest(client, args.files, store, mode=args.extract,
                                     on_progress=progress,
                                     on_write=lake.write if lake else None, label=args.run_label)
        except KeyboardInterrupt:
            written = f"{latest[0].written:,} of {latest[0].partitions:,}" if latest else "no"
            sys.stderr.write(f"\n{written} partitions were committed; run the same command again "
                             "to complete the ingest\n")
            raise
    if show:
        sys.stderr.write("\n")
    _print_summary(summary.ingest, time.monotonic() - started)
    if summary.warc is not None:
        _print_warc_summary(summary.warc)
    for name, reason in summary.failed:
        print(f"  shard failed {name}: {reason}")
    print(cli_runs.run_line(store, summary.run))
    code = cli_search.report_watches(store, summary.run, args,
                                     EXIT_SKIPPED if summary.ingest.skipped or summary.failed else EXIT_OK)
    rate = summary.rows / summary.write_seconds if summary.write_seconds else 0.0
    print(f"cluster: {summary.shards:,} shards, {summary.partitions:,} partitions; the writer appended "
          f"{summary.rows:,} rows in {summary.write_seconds:.2f} s ({rate:,.0f} rows/s)")
    return code


def _print_warc_summary(warc: WarcSummary) -> None:
    skipped = [f"{count:,} with status {status}" for status, count in sorted(warc.skipped_status.items(),
                                                                             key=lambda item: str(item[0]))]
    skipped += [f"{count:,} of type {kind}" for kind, count in sorted(warc.skipped_type.items())]
    kinds = " and ".join(sorted(warc.formats, key=("WARC", "WET", "ARC").index)) or "WARC"
    pages = [f"{warc.pages - warc.texts:,} HTML pages"] if warc.pages > warc.texts or not warc.texts else []
    pages += [f"{warc.texts:,} text pages (WET conversion records)"] if warc.texts else []
    print(f"{kinds} records {warc.records:,}: {', '.join(pages)}, {warc.revisits:,} revisits"
          + (f"; not pages: {', '.join(skipped)}" if skipped else ""))


def _fetch_command(args: argparse.Namespace) -> int:
    from cdc.fetch import FetchOptions, fetch_all

    urls = list(args.urls)
    if args.urls_file:
        stream = open_input(args.urls_file)
        try:
            urls += [line.strip() for line in stream.read().decode("utf-8", "replace").splitlines()
                     if line.strip() and not line.lstrip().startswith("#")]
        finally:
            stream.close()
    if not urls:
        raise CdcError("no URLs: give them as arguments or with --urls FILE")
    try:
        options = FetchOptions(timeout=args.timeout, concurrency=args.concurrency,
                               politeness_delay=args.delay, respect_robots=not args.ignore_robots,
                               extract_mode=args.extract)
    except ValueError as exc:
        raise CdcError(str(exc)) from exc
    store = _store(args)
    store.check_extraction_mode(args.extract)  # claimed with the first pages stored
    if args.warc_out:
        with open(args.warc_out, "ab") as warc:
            summary = fetch_all(urls, store, options, warc_out=warc, label=args.run_label)
    else:
        summary = fetch_all(urls, store, options, label=args.run_label)
    for line in summary.lines():
        print(line)
    print(cli_runs.run_line(store, summary.run))
    return cli_search.report_watches(store, summary.run, args, EXIT_SKIPPED if summary.failed else EXIT_OK)


def _compare_command(args: argparse.Namespace) -> int:
    store = _store(args)
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
    store = _store(args)
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


def _positive(value: str) -> int:
    number = int(value) if value.strip().isdigit() else 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, got {value!r}")
    return number


def _time_option(value: str) -> datetime:
    try:
        return parse_time(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _export_command(args: argparse.Namespace) -> int:
    store = _store(args)
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
    store = _store(args)
    hosts = [args.host] if args.host else [host for host, _ in store.hosts()]
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
    store = _store(args)
    page = find_page(store, args.url)
    removed = store.erase(page.natural_key)
    print(f"erased {page.natural_key}: {removed:,} rows removed and the file rewritten without them")
    return EXIT_OK


def _compact_command(args: argparse.Namespace) -> int:
    store = _store(args)
    before = store.path.stat().st_size if store.path.exists() else 0
    store.compact()
    print(f"{store.path}: {before / 1e6:,.1f} MB -> {store.path.stat().st_size / 1e6:,.1f} MB")
    return EXIT_OK


def _prune_command(args: argparse.Namespace) -> int:
    store = _store(args)
    policy = _retention_policy(args, store.retention())
    before = store.stats()
    store.prune(policy)
    after = store.stats()
    print(f"kept {policy.keep} generations per page"
          + "".join(f", {keep} for class {name}" for name, keep in policy.classes)
          + f"; chunk rows {before['content_chunks']:,} -> {after['content_chunks']:,}, "
          f"texts {before['retained_generations']:,} -> {after['retained_generations']:,}")
    return EXIT_OK


def _demo_command(args: argparse.Namespace) -> int:
    from cdc import demo

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
    from cdc.migrate import migrate

    path = _db_path(args)
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
    store = _store(args)
    stats = store.stats()
    meta = store.meta()
    for name in ("hosts", "pages", "generations", "retained_generations", "content_chunks", "changes"):
        print(f"{name:<22}{stats[name]:>12,}")
    print(f"{'file bytes':<22}{stats['file_bytes']:>12,}")
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


def _add_run_option(parser: argparse.ArgumentParser, default: str) -> None:
    # Not `dest="run"`: `run` is the command's function.
    parser.add_argument("--run", dest="run_label", metavar="LABEL",
                        help=f"the run's label in `cdc runs` and `cdc site-diff` (default: {default})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc", description="Which part of a page changed between two crawls, and how much.")
    kernels = ("kernels compiled ahead of time" if AHEAD_OF_TIME is not None
               else "kernels from Numba's JIT; see python -m cdc.aot")
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

    ingest = commands.add_parser(
        "ingest", help="add crawl records (JSONL, WARC, gzip or not, - for stdin) to the store")
    ingest.add_argument("files", nargs="+", metavar="FILE")
    ingest.add_argument("--keep", type=int, help="generations per page that keep text and chunks (default 3)")
    ingest.add_argument("--class-keep", action="append", metavar="CLASS=N",
                        help="a retention class's own limit (repeatable)")
    ingest.add_argument("--processes", type=_positive, default=default_threads(),
                        help="processes that parse, normalise and compare on this machine (default: the "
                             "cores, %(default)s; a batch under 4 MB is built in this one alone)")
    cluster = ingest.add_mutually_exclusive_group()
    cluster.add_argument("--workers", type=_positive, metavar="N",
                         help="run on a local Dask cluster of N worker processes started for the run")
    cluster.add_argument("--dask", metavar="ADDRESS",
                         help="run on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786); "
                              "its workers must be able to read the files")
    ingest.add_argument("--parquet-out", metavar="DIR",
                        help="also write generations, chunk rows and change rows as Parquet under DIR, "
                             "partitioned by host")
    ingest.add_argument("--extract", choices=TEXT_MODES, default=None,
                        help="how archive pages become text: for WARC and ARC files, the page's main "
                             f"content ({MAIN_CONTENT}, the default) or its whole text; for WET files, "
                             f"{GIVEN_TEXT}: Common Crawl's text as it is (chosen by itself for WET files)")
    ingest.add_argument("--quiet", action="store_true", help="no progress line")
    _add_run_option(ingest, "the files ingested")
    cli_search.add_watch_option(ingest)
    ingest.set_defaults(run=_ingest_command)

    fetch = commands.add_parser("fetch", help="fetch live pages (conditional requests) into the store")
    fetch.add_argument("urls", nargs="*", metavar="URL")
    fetch.add_argument("--urls", dest="urls_file", metavar="FILE", help="one URL a line (- is stdin)")
    fetch.add_argument("--warc-out", metavar="FILE", help="append every response to this WARC file")
    fetch.add_argument("--extract", choices=EXTRACTION_MODES, default=MAIN_CONTENT,
                       help="the page's main content (default) or its whole text")
    fetch.add_argument("--timeout", type=float, default=20.0, help="seconds per request (default 20)")
    fetch.add_argument("--concurrency", type=int, default=8, help="requests at once (default 8)")
    fetch.add_argument("--delay", type=float, default=1.0,
                       help="seconds between requests to one host (default 1)")
    fetch.add_argument("--ignore-robots", action="store_true", help="do not honour robots.txt")
    _add_run_option(fetch, "fetch of N URLs")
    cli_search.add_watch_option(fetch)
    fetch.set_defaults(run=_fetch_command)

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
    export.add_argument("--since", type=_time_option, help="fetched at or after (ISO 8601, UTC)")
    export.add_argument("--until", type=_time_option, help="fetched before (ISO 8601, UTC)")
    export.add_argument("--verdict", action="append", choices=(*VERDICTS, NEW), help="repeatable")
    export.add_argument("--min-change", type=float, default=0.0, metavar="X",
                        help="at least this share changed, 0 to 1 (1 - the smaller kept share)")
    export.add_argument("--run", dest="run_ref", metavar="RUN",
                        help="only the generations first seen in this run (an id or a label; `cdc runs`)")
    export.add_argument("--label", action="append", help="only changes annotated so (`cdc annotate`)")
    export.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    export.set_defaults(run=_export_command)

    boilerplate = commands.add_parser("boilerplate", help="chunks shared by a host's pages, and across hosts")
    boilerplate.add_argument("--host")
    boilerplate.add_argument("--share", type=float, default=DEFAULT_SHARE,
                             help="of the host's pages (default %(default)s)")
    boilerplate.add_argument("--min-pages", type=int, default=DEFAULT_MIN_PAGES, help="default %(default)s")
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

    cli_runs.add_commands(commands, _store)
    cli_annotate.add_commands(commands, _store)
    cli_search.add_commands(commands, _store)
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
    except CdcError as exc:
        print(f"cdc: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:  # `cdc chunk big.txt | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Terminated:
        print("cdc: stopped (SIGTERM)", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("cdc: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if stopped_by() == signal.SIGTERM:  # the signal's exception became DuckDB's error
            print("cdc: stopped (SIGTERM)", file=sys.stderr)
            return EXIT_TERMINATED
        if stopped_by() == signal.SIGINT:
            print("cdc: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):  # not the store's
            written = exc.filename or "an output file (--parquet-out, --warc-out)"
            print(f"cdc: the disk is full, writing {written}: free space there, then run the same "
                  "command again", file=sys.stderr)
            return EXIT_FAILURE
        raise


if __name__ == "__main__":
    raise SystemExit(main())
