"""What the `cdc` commands share: the exit codes, the store they open, and option types.

Exit codes: 0 all good; 1 failure (a one-line message says what to do); 2 bad usage;
3 done, but some input records were skipped (the summary lists them); 4 done, and a watch
hit in the run (`cdc ingest --fail-on-watch`, `cdc fetch --fail-on-watch`; `cdc.cli.search`).
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime

from cdc.errors import CdcError
from cdc.ingest.batches import parse_time
from cdc.present.launch import DEFAULT_DB
from cdc.store import RetentionPolicy, Store

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SKIPPED = 3
# `cdc ingest --fail-on-watch` and `cdc fetch --fail-on-watch`: the run is stored and ended
# as always, and a watch hit in it. Above cdc's other codes (1 failure, 2 usage, 3 skipped),
# so a pipeline can tell "act on it" from "something went wrong".
EXIT_WATCH_HIT = 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
EXIT_TERMINATED = 143  # 128 + SIGTERM


def db_path(args: argparse.Namespace) -> str:
    """--db, else $CDC_DB, else data/cdc.duckdb."""
    return args.db or os.environ.get("CDC_DB") or str(DEFAULT_DB)


def open_store(args: argparse.Namespace) -> Store:
    return Store(db_path(args))


def positive(value: str) -> int:
    """An option's whole number of at least 1."""
    number = int(value) if value.strip().isdigit() else 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, got {value!r}")
    return number


def time_option(value: str) -> datetime:
    """An option's time, ISO 8601, as UTC."""
    try:
        return parse_time(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_run_option(parser: argparse.ArgumentParser, default: str) -> None:
    # Not `dest="run"`: `run` is the command's function.
    parser.add_argument("--run", dest="run_label", metavar="LABEL",
                        help=f"the run's label in `cdc runs` and `cdc site-diff` (default: {default})")


def retention_policy(args: argparse.Namespace, current: RetentionPolicy) -> RetentionPolicy:
    """`current` with --keep and --class-keep applied (ingest and prune)."""
    classes = dict(current.classes)
    for item in args.class_keep or []:
        name, _, value = item.partition("=")
        if not name or not value.isdigit():
            raise CdcError(f"--class-keep takes CLASS=N, got {item!r}")
        classes[name] = int(value)
    keep = args.keep if args.keep is not None else current.keep
    return RetentionPolicy(keep, tuple(sorted(classes.items())))
