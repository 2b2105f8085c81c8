"""The annotation commands of `cdc`: `cdc annotate` marks a change significant, noise or
unsure (or imports another analyst's marks), `cdc annotations` lists them, as a table, JSON
or the CSV an import reads. Registered by `cdc.cli.main`, which owns the exit codes and turns a
`CdcError` into a one-line message.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime

from cdc.analyst.annotations import (
    annotate,
    checked_label,
    default_annotator,
    import_annotations,
    read_import_file,
    write_annotations_csv,
)
from cdc.analyst.queries import find_page
from cdc.cli.common import EXIT_OK, EXIT_SKIPPED
from cdc.core.excerpts import one_line, shortened
from cdc.errors import AnnotationError
from cdc.store import LABELS, AnnotatedChange, Store

SHOWN_BAD_ROWS = 20  # bad rows of an import listed one by one
NOTE_SHOWN = 60  # characters of a note in the table


def add_commands(commands: argparse._SubParsersAction,
                 open_store: Callable[[argparse.Namespace], Store]) -> None:
    """`cdc annotate` and `cdc annotations`, on the store `open_store(args)` opens."""
    annotate_ = commands.add_parser(
        "annotate", help="mark a change (a generation against the one before) significant, noise or unsure; "
                         "or --import another store's annotations")
    annotate_.add_argument("url", metavar="URL", nargs="?", help="the page")
    annotate_.add_argument("--generation", type=int, metavar="G",
                           help="the change's generation (as `cdc history` lists them)")
    annotate_.add_argument("--label", metavar="LABEL", help=" or ".join(LABELS))
    annotate_.add_argument("--note", metavar="TEXT", help="why, in a sentence or two")
    annotate_.add_argument("--by", metavar="NAME", help="who judged it (default: $USER)")
    annotate_.add_argument("--import", dest="import_file", metavar="FILE",
                           help="the CSV `cdc annotations --csv` wrote from another store of the same crawls")
    annotate_.set_defaults(run=lambda args: _annotate_command(open_store(args), args))

    listing = commands.add_parser("annotations", help="the annotated changes, as a table, JSON or CSV")
    listing.add_argument("--label", action="append", metavar="LABEL",
                         help=f"only these labels ({', '.join(LABELS)}); repeatable")
    listing.add_argument("--url", metavar="URL", help="one page's annotations")
    shape = listing.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="one JSON object per annotation")
    shape.add_argument("--csv", action="store_true", help="the CSV that `cdc annotate --import` reads")
    listing.add_argument("-o", "--output", metavar="FILE", help="write the CSV here instead of stdout")
    listing.set_defaults(run=lambda args: _annotations_command(open_store(args), args))


def labels_given(given: list[str] | None) -> tuple[str, ...]:
    """The labels of repeated `--label` options, checked (an unknown one: one line, nothing done)."""
    return tuple(checked_label(label) for label in given or ())


def _annotate_command(store: Store, args: argparse.Namespace) -> int:
    if args.import_file is not None:
        if any(value is not None for value in (args.url, args.generation, args.label, args.note, args.by)):
            raise AnnotationError("--import FILE takes no URL, --generation, --label, --note or --by: "
                                  "the file gives them")
        return _import_command(store, args.import_file)
    if args.url is None or args.generation is None or args.label is None:
        missing = [name for name, value in (("URL", args.url), ("--generation G", args.generation),
                                            ("--label LABEL", args.label)) if value is None]
        raise AnnotationError(f"annotate needs {', '.join(missing)}: `cdc annotate URL --generation G "
                              f"--label {'|'.join(LABELS)}`, or `cdc annotate --import FILE`")
    made = annotate(store, args.url, args.generation, args.label, args.note, args.by or default_annotator())
    current = "" if made.generation == args.generation else f" (the generation current at {args.generation})"
    print(f"{made.natural_key} generation {made.generation}{current}: {made.label}, by {made.annotated_by}")
    return EXIT_OK


def _import_command(store: Store, path: str) -> int:
    text = read_import_file(path)
    summary = import_annotations(store, text)
    print(f"{path}: {summary.added:,} annotations added, {summary.replaced:,} replaced an older one, "
          f"{summary.kept:,} left out (the store's or a later row's is newer), {len(summary.bad):,} bad rows")
    for bad in summary.bad[:SHOWN_BAD_ROWS]:
        print(f"  skipped {path}:{bad.line}: {bad.reason}")
    if len(summary.bad) > SHOWN_BAD_ROWS:
        print(f"  ... and {len(summary.bad) - SHOWN_BAD_ROWS:,} more")
    return EXIT_SKIPPED if summary.bad else EXIT_OK


def _jsonable(value: object) -> object:
    return value.isoformat() + "Z" if isinstance(value, datetime) else value  # stored as UTC


def _annotation_dict(row: AnnotatedChange) -> dict:
    values = {name: _jsonable(value) for name, value in asdict(row).items()}
    return {"url": values.pop("natural_key"), **values}


def _annotations_command(store: Store, args: argparse.Namespace) -> int:
    labels = labels_given(args.label)
    key = find_page(store, args.url).natural_key if args.url else None
    rows = store.annotations(labels, key)
    if args.csv or args.output:
        if args.json:
            raise AnnotationError("-o FILE writes the CSV: give --csv, or leave -o out")
        if args.output in (None, "-"):
            sys.stdout.reconfigure(newline="")
            write_annotations_csv(rows, sys.stdout)
        else:
            with open(args.output, "w", encoding="utf-8", newline="") as out:
                count = write_annotations_csv(rows, out)
            print(f"{count:,} annotations written to {args.output}", file=sys.stderr)
        return EXIT_OK
    if args.json:
        for row in rows:
            print(json.dumps(_annotation_dict(row), ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print(f"{store.path} has no annotations{' of those labels' if labels else ''} yet; "
              "`cdc annotate URL --generation G --label LABEL` makes one")
        return EXIT_OK
    print(f"{'label':<11}  {'generation':>14}  {'previous':>14}  {'verdict':<14}  {'by':<12}  "
          f"{'annotated_at':<16}  url  note")
    for row in rows:
        # One line, no control characters: a note is untrusted text, and this is a terminal.
        note = "".join(char if char.isprintable() else " " for char in one_line(row.note or ""))
        note = shortened(note, NOTE_SHOWN)
        print(f"{row.label:<11}  {row.generation:>14}  {row.previous_generation or '-':>14}  "
              f"{row.verdict or '-':<14}  {row.annotated_by:<12}  {row.annotated_at:%Y-%m-%d %H:%M}  "
              f"{row.natural_key}  {note}")
    return EXIT_OK
