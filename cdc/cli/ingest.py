"""The run commands that bring pages in: `cdc ingest` (crawl output, in this process with
forked helpers or on a Dask cluster) and `cdc fetch` (live pages), each with its summary.
Registered by `cdc.cli.main`, which owns the top-level parser and turns a `CdcError` into a message.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from cdc.cli import runs as cli_runs
from cdc.cli import search as cli_search
from cdc.cli.common import EXIT_OK, EXIT_SKIPPED, add_run_option, open_store, positive, retention_policy
from cdc.core.chunking import default_threads
from cdc.errors import CdcError
from cdc.ingest.ingester import BATCH_BYTES, WARC_BATCH_BYTES, Ingester, IngestSummary
from cdc.runtime.lifeline import is_stop
from cdc.runtime.nopandas import forgo_pandas
from cdc.sources.extract import EXTRACTION_MODES, GIVEN_TEXT, MAIN_CONTENT, TEXT_MODES
from cdc.sources.inputs import open_crawl_inputs, run_mode
from cdc.sources.jsonl import open_input
from cdc.sources.warc import WarcSummary
from cdc.store import RetentionPolicy, Store

SHOWN_PROBLEMS = 20  # bad records listed one by one in a summary


def add_commands(commands: argparse._SubParsersAction) -> None:
    """`cdc ingest` and `cdc fetch`."""
    ingest = commands.add_parser(
        "ingest", help="add crawl records (JSONL, WARC, gzip or not, - for stdin) to the store")
    ingest.add_argument("files", nargs="+", metavar="FILE")
    ingest.add_argument("--keep", type=int, help="generations per page that keep text and chunks (default 3)")
    ingest.add_argument("--class-keep", action="append", metavar="CLASS=N",
                        help="a retention class's own limit (repeatable)")
    ingest.add_argument("--processes", type=positive, default=default_threads(),
                        help="processes that parse, normalise and compare on this machine (default: the "
                             "cores, %(default)s; a batch under 4 MB is built in this one alone)")
    cluster = ingest.add_mutually_exclusive_group()
    cluster.add_argument("--workers", type=positive, metavar="N",
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
    add_run_option(ingest, "the files ingested")
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
    add_run_option(fetch, "fetch of N URLs")
    cli_search.add_watch_option(fetch)
    fetch.set_defaults(run=_fetch_command)


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


def _ingest_command(args: argparse.Namespace) -> int:
    store = open_store(args)
    if args.keep is not None or args.class_keep:
        current = store.retention() if store.path.exists() else RetentionPolicy()
        store.set_retention(retention_policy(args, current))
    lake = None
    if args.parquet_out:
        from cdc.ingest.lake import ParquetLake

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
        if archives:
            store.check_extraction_mode(mode)  # claimed with the first batch: a failed run claims nothing
        ingester = Ingester(store, on_batch=(lambda s: _progress(s, started, sys.stderr)) if show else None,
                            workers=args.processes, on_write=lake.write if lake else None,
                            batch_bytes=WARC_BATCH_BYTES if archives else BATCH_BYTES,
                            label=args.run_label, inputs=args.files,
                            extraction_mode=mode if archives else None)
        # One run over all the files, each record numbered by its file and its place in it: a
        # batch may span files, so a page's versions spread over small files meet in one batch
        # and are ordered by fetch time, as a cluster ingest orders them.
        ingester.run_inputs([item.records(mode) for item in inputs])
    finally:
        for item in inputs:
            item.close()
    if show:
        sys.stderr.write("\n")
    _print_summary(ingester.summary, time.monotonic() - started)
    if ingester.summary.warc is not None:
        _print_warc_summary(ingester.summary.warc)
    print(cli_runs.run_line(store, ingester.run_id))
    return cli_search.report_watches(store, ingester.run_id, args,
                                     EXIT_SKIPPED if ingester.summary.skipped else EXIT_OK)


def _cluster_ingest(args: argparse.Namespace, store: Store, lake, started: float, show: bool) -> int:
    """On a Dask cluster: the scheduler at --dask, or a local one of --workers processes."""
    from cdc.ingest.cluster import ClusterSummary, cluster_ingest, dask_client

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
        except BaseException as exc:
            if not is_stop(exc):
                raise
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
    from cdc.ingest.fetch import FetchOptions, fetch_all

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
    store = open_store(args)
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
