"""The search commands of `cdc`: `cdc search` finds changes by the words they added or
removed, `cdc watch` saves a search under a name (evaluated at every run's end) and lists its
hits; and the watch lines that `cdc ingest` and `cdc fetch` print after their run, with the
exit code `--fail-on-watch` asks for. Registered by `cdc.cli.main`, which owns the other exit codes
and turns a `CdcError` into a message.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime

from cdc.analyst.search import (
    DEFAULT_LIMIT,
    SearchQuery,
    add_watch,
    remove_watch,
    run_watch_counts,
    search,
    watch_hits,
    watches,
)
from cdc.cli.common import EXIT_OK, EXIT_WATCH_HIT, time_option
from cdc.core.verdicts import STORED_VERDICTS
from cdc.errors import CdcError, SearchError
from cdc.store import LABELS, Store


def _add_query_options(parser: argparse.ArgumentParser, *, with_run: bool) -> None:
    parser.add_argument("--added", metavar="TEXT", help="words the change added (a phrase of whole words; "
                                                        "characters in Chinese, Japanese, Thai)")
    parser.add_argument("--removed", metavar="TEXT", help="words the change removed")
    parser.add_argument("--text", metavar="TEXT", help="words the change added or removed")
    parser.add_argument("--host", help="one host's pages only")
    if with_run:  # `cdc search` only: a watch reads each run's changes, judged by no analyst yet
        parser.add_argument("--run", dest="run_ref", metavar="RUN",
                            help="only changes measured in this run (an id or a label; `cdc runs`)")
        parser.add_argument("--label", action="append", metavar="LABEL",
                            help=f"only changes annotated so ({', '.join(LABELS)}; `cdc annotate`); "
                                 "repeatable")
    parser.add_argument("--since", type=time_option, help="changes fetched at or after (ISO 8601, UTC)")
    parser.add_argument("--until", type=time_option, help="changes fetched before (ISO 8601, UTC)")
    parser.add_argument("--verdict", action="append", choices=STORED_VERDICTS, help="repeatable")
    parser.add_argument("--include-template", action="store_true",
                        help="search template-only changes too (left out by default)")


def _query(args: argparse.Namespace, run: int | None = None) -> SearchQuery:
    return SearchQuery(added=args.added, removed=args.removed, text=args.text, host=args.host, run=run,
                       since=args.since, until=args.until, verdicts=tuple(args.verdict or ()),
                       include_template=args.include_template,
                       labels=tuple(getattr(args, "label", None) or ()))  # checked by SearchQuery


def add_commands(commands: argparse._SubParsersAction,
                 open_store: Callable[[argparse.Namespace], Store]) -> None:
    """`cdc search` and `cdc watch`, reading the store `open_store(args)` opens."""
    found = commands.add_parser("search", help="changes by the words they added or removed")
    _add_query_options(found, with_run=True)
    found.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                       help="hits listed, newest change first (default %(default)s)")
    found.add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N hits")
    found.add_argument("--json", action="store_true", help="the hits as a JSON list")
    found.set_defaults(run=lambda args: _search_command(open_store(args), args))

    watch = commands.add_parser("watch", help="saved searches, evaluated at every run's end")
    actions = watch.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="save a search as a watch: NAME and the options of `cdc search`")
    add.add_argument("name", metavar="NAME")
    _add_query_options(add, with_run=False)
    add.set_defaults(run=lambda args: _watch_add_command(open_store(args), args))
    listed = actions.add_parser("list", help="the watches and their searches")
    listed.add_argument("--json", action="store_true", help="the watches as a JSON list")
    listed.set_defaults(run=lambda args: _watch_list_command(open_store(args), args))
    remove = actions.add_parser("remove", help="remove a watch and its recorded hits")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(run=lambda args: _watch_remove_command(open_store(args), args))
    hits = actions.add_parser("hits", help="the hits recorded at the runs' ends")
    hits.add_argument("name", nargs="?", metavar="NAME", help="one watch's hits (default: every watch's)")
    hits.add_argument("--run", dest="run_ref", metavar="RUN", help="one run's hits (an id or a label)")
    hits.add_argument("--json", action="store_true", help="the hits as a JSON list")
    hits.set_defaults(run=lambda args: _watch_hits_command(open_store(args), args))


def _jsonable(row: dict) -> dict:
    return {name: value.isoformat() if isinstance(value, datetime) else value for name, value in row.items()}


def _search_command(store: Store, args: argparse.Namespace) -> int:
    query = _query(args)  # checked before the store is opened: a bad search changes nothing
    if args.run_ref is not None:
        query = _query(args, store.run(args.run_ref).run)
    result = search(store, query, limit=args.limit, offset=args.offset)
    if args.json:
        print(json.dumps([_jsonable(asdict(hit)) for hit in result.hits], ensure_ascii=False, indent=1))
        return EXIT_OK
    if not result.hits:
        print("no changes found" + (" (template-only changes left out: --include-template searches them)"
                                    if not args.include_template else ""))
        return EXIT_OK
    for hit in result.hits:
        print(f"{hit.fetched_at:%Y-%m-%d %H:%M:%S}  {hit.side:<7}  {hit.url}  generation {hit.generation}"
              f" (from {hit.previous_generation}, {hit.verdict})")
        print(f"    {hit.excerpt}")
    partial = len(result.hits) < result.total
    shown = f"{args.offset + 1:,}-{args.offset + len(result.hits):,} of " if partial else ""
    print(f"{shown}{result.total:,} hits")
    return EXIT_OK


def _watch_add_command(store: Store, args: argparse.Namespace) -> int:
    watch = add_watch(store, args.name, _query(args))
    print(f"watch {watch.name!r} added: {watch.query.describe()}")
    return EXIT_OK


def _watch_list_command(store: Store, args: argparse.Namespace) -> int:
    saved = watches(store)
    if args.json:
        rows = [{"name": w.name, "query": json.loads(w.query.to_json()),
                 "created_at": w.created_at.isoformat()} for w in saved]
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return EXIT_OK
    if not saved:
        print("no watches; add one with `cdc watch add NAME --added TEXT`")
    for watch in saved:
        print(f"{watch.name}  {watch.query.describe()}")
    return EXIT_OK


def _watch_remove_command(store: Store, args: argparse.Namespace) -> int:
    remove_watch(store, args.name)
    print(f"watch {args.name!r} removed, with its hits")
    return EXIT_OK


def _watch_hits_command(store: Store, args: argparse.Namespace) -> int:
    run = store.run(args.run_ref).run if args.run_ref is not None else None
    hits = watch_hits(store, args.name, run)
    if args.json:
        print(json.dumps([asdict(hit) for hit in hits], ensure_ascii=False, indent=1))
        return EXIT_OK
    if not hits:
        print("no watch hits")
    for hit in hits:
        print(f"run {hit.run}  {hit.name}  {hit.side:<7}  {hit.url}  generation {hit.generation}")
        if hit.excerpt:
            print(f"    {hit.excerpt}")
    return EXIT_OK


# --- the watch lines of `cdc ingest` and `cdc fetch` -----------------------------------------

def add_watch_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fail-on-watch", action="store_true",
                        help=f"exit with code {EXIT_WATCH_HIT} when a watch hit in this run (`cdc watch`)")


def _hits(count: int) -> str:
    return f"{count:,} hit{'s' if count != 1 else ''}"


def report_watches(store: Store, run: int, args: argparse.Namespace, code: int) -> int:
    """Print each watch's hits in `run`, and those its end recorded of earlier runs that did
    not finish (`cdc.store.search.watched_runs`), and return `code`, or `EXIT_WATCH_HIT`
    when `--fail-on-watch` was given and a watch hit in one of them (skipped records or
    failed URLs too: the summary above lists them)."""
    try:
        by_run = run_watch_counts(store, run)
    except CdcError as exc:  # the run is stored; its watch lines are not worth a failure
        raise SearchError(f"the run is stored, but its watch hits could not be read: {exc}") from exc
    for name, count in by_run[run].items():
        print(f"watch {name}: {_hits(count)}" + (f" (`cdc watch hits {name} --run {run}`)" if count else ""))
    for stopped, counts in by_run.items():
        for name, count in counts.items():
            if stopped != run and count:
                print(f"watch {name}: {_hits(count)} in run {stopped}, which had not finished: recorded by "
                      f"this run's end (`cdc watch hits {name} --run {stopped}`)")
    if getattr(args, "fail_on_watch", False) and any(any(counts.values()) for counts in by_run.values()):
        return EXIT_WATCH_HIT
    return code
