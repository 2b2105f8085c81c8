"""Change summaries as CSV: one function for the command line and the dashboard.

RFC 4180 (comma separated, CRLF line ends, fields quoted when they need it), UTF-8.
`surt`, beside the page's canonical URL, is its SURT: the key a crawl's CDX index sorts
captures by, to join an export to the index.
`template_only` is `true` when every changed chunk is the host's boilerplate (a template
change), `false` when content changed, empty when not known (a first sighting, or a
generation whose chunks are no longer retained). `label`, `note` and `annotated_by` are the
change's annotation (`cdc annotate`), empty where nobody judged it. Page text and notes are
untrusted: a cell that a spreadsheet would read as a formula (one that begins with `=`, `+`,
`-`, `@`, a tab or a carriage return) is prefixed with `'`, as OWASP advises, so opening an
export never runs what a crawled page or an analyst wrote.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TextIO

from cdc.store import ChangeRow

COLUMNS = (
    "url", "surt", "host", "generation", "previous_generation", "fetched_at", "verdict", "template_only",
    "similarity", "unchanged_ratio", "retained_ratio", "bytes_added", "bytes_removed", "regions", "excerpt",
    "label", "note", "annotated_by",
)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(cell: str) -> str:
    """A cell a spreadsheet will show as text, never evaluate."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def neutralise_reversibly(cell: str) -> str:
    """A cell neutralised so that `restored` gives it back exactly, for a file that is read
    again (`cdc annotate --import`): a cell that begins with `'` is prefixed too."""
    return "'" + cell if cell.startswith((*FORMULA_STARTS, "'")) else cell


def restored(cell: str) -> str:
    """A cell as it was before `neutralise_reversibly`."""
    return cell[1:] if cell.startswith("'") else cell


def csv_cell(value: object) -> str:
    """A value as a CSV cell: empty for None, booleans as true/false, times as UTC, text neutralised."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ") + "Z"  # stored as UTC
    if isinstance(value, float):
        return f"{value:.6f}"
    return neutralise(str(value))


def write_changes_csv(rows: Iterable[ChangeRow], out: TextIO) -> int:
    """Write the header and one line per change; returns the number of rows written."""
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    count = 0
    for row in rows:
        writer.writerow([csv_cell(value) for value in (
            row.natural_key, row.surt, row.host, row.generation, row.previous_generation, row.fetched_at,
            row.verdict, row.template_only, row.similarity, row.unchanged_ratio, row.retained_ratio,
            row.bytes_added, row.bytes_removed, row.regions, row.excerpt,
            row.label, row.note, row.annotated_by,
        )])
        count += 1
    return count


def csv_bytes(write: Callable[[Iterable, TextIO], int], rows: Iterable) -> bytes:
    """What `write(rows, out)` writes, as UTF-8 bytes: for a download button."""
    buffer = io.StringIO(newline="")
    write(rows, buffer)
    return buffer.getvalue().encode("utf-8")


def changes_csv(rows: Iterable[ChangeRow]) -> bytes:
    """The CSV as UTF-8 bytes, for a download button."""
    return csv_bytes(write_changes_csv, rows)
