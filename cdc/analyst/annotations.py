"""Annotating changes: an analyst marks a change `significant`, `noise` or `unsure`, with a
note and a name, and moves the marks between two stores of the same crawls as CSV.

Shared by `cdc annotate`, `cdc annotations` and the dashboard's Compare view, so each checks
the same bounds and says the same thing. The rows live in the store
(`cdc.store.annotations`); this module checks what a person typed or a file holds before
anything is written: a call that is refused changes nothing.

The CSV is RFC 4180 (CRLF line ends, UTF-8), one line per annotation:
`url, generation, previous_generation, verdict, label, note, annotated_by, annotated_at`.
An import reads `url`, `generation`, `label`, `note`, `annotated_by` and `annotated_at`
(the change's verdict and previous generation are there for a reader). Notes are untrusted
text: a cell a spreadsheet would run as a formula is prefixed with `'`, and so is a cell that
begins with `'`, so that the import reads back exactly what was written.
"""

from __future__ import annotations

import csv
import getpass
import io
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TextIO

from cdc.analyst.queries import find_page, generation_at
from cdc.core.urls import canonical_url
from cdc.errors import AnnotationError, InvalidUrlError, PageNotFoundError
from cdc.present.export import csv_bytes, csv_cell, neutralise_reversibly, restored
from cdc.store import AnnotatedChange, Annotation, Store
from cdc.store.annotations import checked_label

NOTE_MAX_CHARS = 2_000  # a note is a remark on a change, not a report
NAME_MAX_CHARS = 100
CSV_COLUMNS = ("url", "generation", "previous_generation", "verdict", "label", "note", "annotated_by",
               "annotated_at")
IMPORTED_COLUMNS = ("url", "generation", "label", "note", "annotated_by", "annotated_at")
FALLBACK_ANNOTATOR = "analyst"


def default_annotator() -> str:
    """Who annotates when no name is given: the login name ($USER), else `analyst`."""
    for name in (os.environ.get("USER"), os.environ.get("LOGNAME")):
        if name and name.strip():
            return name.strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (a container, say)
        return FALLBACK_ANNOTATOR


def checked_note(note: str | None) -> str | None:
    """A note as stored (None when empty), or an `AnnotationError` when it is too long."""
    value = (note or "").strip()
    if len(value) > NOTE_MAX_CHARS:
        raise AnnotationError(f"the note is {len(value):,} characters long: at most {NOTE_MAX_CHARS:,}")
    return value or None


def checked_name(name: str | None) -> str:
    """Who annotated, as stored, or an `AnnotationError` when empty or too long."""
    value = " ".join((name or "").split())
    if not value:
        raise AnnotationError("give a name to annotate under (--by NAME)")
    if len(value) > NAME_MAX_CHARS:
        raise AnnotationError(f"the name is {len(value):,} characters long: at most {NAME_MAX_CHARS}")
    return value


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def annotate(store: Store, url: str, generation: int, label: str, note: str | None = None,
             by: str | None = None) -> Annotation:
    """Mark the change that made `generation` of the page at `url` (a number no generation
    starts at names the one current at that time, as `cdc compare` reads it), replacing the
    change's annotation. Everything is checked first: a refused call changes nothing."""
    label, note, by = checked_label(label), checked_note(note), checked_name(by or default_annotator())
    page = find_page(store, url)
    current = generation_at(store, page, generation)
    annotation = Annotation(page.natural_key, current, label, note, by, _now())
    result = store.put_annotations([annotation])
    if result.missing:  # erased, or backfilled away, since it was looked up
        raise PageNotFoundError(f"{page.natural_key} has no generation {generation} in {store.path} any more")
    return annotation


# --- the CSV --------------------------------------------------------------------------------


def write_annotations_csv(rows: Iterable[AnnotatedChange], out: TextIO) -> int:
    """Write the header and one line per annotation; returns the number of rows written."""
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    count = 0
    for row in rows:
        writer.writerow([
            neutralise_reversibly(row.natural_key), row.generation, csv_cell(row.previous_generation),
            csv_cell(row.verdict), row.label, neutralise_reversibly(row.note or ""),
            neutralise_reversibly(row.annotated_by), csv_cell(row.annotated_at),
        ])
        count += 1
    return count


def annotations_csv(rows: Iterable[AnnotatedChange]) -> bytes:
    """The CSV as UTF-8 bytes, for a download button."""
    return csv_bytes(write_annotations_csv, rows)


@dataclass(frozen=True)
class BadRow:
    """A line of an import file that was not imported, and why."""

    line: int  # where its record begins (a quoted note may span lines)
    reason: str


@dataclass(frozen=True)
class ParsedRow:
    line: int
    annotation: Annotation


@dataclass(frozen=True)
class ParsedFile:
    """An import file read: its good rows and its bad ones."""

    rows: list[ParsedRow]
    bad: list[BadRow]


@dataclass
class ImportSummary:
    """What `import_annotations` did: rows added, rows that replaced an older annotation of
    their change, rows left out because the store's annotation is newer, and the bad rows."""

    added: int = 0
    replaced: int = 0
    kept: int = 0
    bad: list[BadRow] = field(default_factory=list)


def _time(text: str) -> datetime:
    value = text.strip()
    if not value:
        raise ValueError("no annotated_at (an ISO 8601 time)")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"annotated_at is not an ISO 8601 time: {value[:40]!r}") from None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def _row(cells: dict[str, str]) -> Annotation:
    """One CSV record as an annotation, or a ValueError / CdcError saying what is wrong."""
    url = restored(cells["url"]).strip()
    try:
        key = canonical_url(url)
    except InvalidUrlError as exc:
        raise ValueError(f"url {url[:80]!r} is not a page's URL ({exc})") from None
    number = cells["generation"].strip()
    if not number.isdigit():
        raise ValueError(f"generation {number[:30]!r} is not a generation number (YYYYMMDDhhmmss)")
    return Annotation(key, int(number), checked_label(cells["label"]), checked_note(restored(cells["note"])),
                      checked_name(restored(cells["annotated_by"])), _time(cells["annotated_at"]))


def read_annotations_csv(text: str) -> ParsedFile:
    """The good and the bad rows of an import file's text. A file without the columns an
    import reads is refused whole (an `AnnotationError`)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise AnnotationError("the file is empty: expected the CSV that `cdc annotations --csv` "
                              "writes") from None
    except csv.Error as exc:
        raise AnnotationError(f"line 1 is not a CSV header ({exc})") from None
    names = [name.strip() for name in header]
    absent = [name for name in IMPORTED_COLUMNS if name not in names]
    if absent:
        raise AnnotationError(f"the file has no column {', '.join(absent)}: expected the CSV that "
                              f"`cdc annotations --csv` writes ({','.join(CSV_COLUMNS)})")
    good, bad = [], []
    while True:
        line = reader.line_num + 1
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            bad.append(BadRow(line, f"not a CSV record ({exc})"))
            continue
        if not any(cell.strip() for cell in record):
            continue  # a blank line, as a spreadsheet leaves at the end
        if len(record) != len(names):
            bad.append(BadRow(line, f"{len(record)} cells, the header has {len(names)}"))
            continue
        try:
            good.append(ParsedRow(line, _row(dict(zip(names, record)))))
        except (ValueError, AnnotationError) as exc:
            bad.append(BadRow(line, str(exc)))
    return ParsedFile(good, bad)


def read_import_file(path: str) -> str:
    """An import file's text (UTF-8, a spreadsheet's byte-order mark allowed), or an
    `AnnotationError` saying why it cannot be read."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as stream:
            return stream.read()
    except FileNotFoundError:
        raise AnnotationError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AnnotationError(f"{path}: is a directory; give the CSV file") from None
    except PermissionError:
        raise AnnotationError(f"{path}: permission denied") from None
    except UnicodeDecodeError as exc:
        raise AnnotationError(f"{path} is not UTF-8 text (byte {exc.start:,}): expected the CSV that "
                              "`cdc annotations --csv` writes") from None


def import_annotations(store: Store, text: str) -> ImportSummary:
    """Import the CSV `cdc annotations --csv` wrote from another store of the same crawls:
    every good row in one transaction, each replacing its change's annotation only where
    it is newer; each bad row (unreadable, or naming a page or generation this store does
    not hold) reported with its line, the good rows around it kept."""
    parsed = read_annotations_csv(text)
    good, bad = parsed.rows, list(parsed.bad)
    result = store.put_annotations([row.annotation for row in good], newer_only=True)
    for index in result.missing:
        row = good[index]
        key = row.annotation.natural_key
        where = (f"no page {key} in {store.path}" if store.page(key) is None else
                 f"{key} has no generation {row.annotation.generation} in {store.path} (its first is later)")
        bad.append(BadRow(row.line, where))
    bad.sort(key=lambda bad_row: bad_row.line)
    return ImportSummary(result.added, result.replaced, result.kept, bad)
