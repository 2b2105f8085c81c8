"""Any crawl input file as records: JSONL or WARC, gzip or not, told apart by content.

The single-process ingest (`cdc ingest`) and a cluster's map stage (`cdc.observations`) read
their inputs through here, so both see the same records in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator

from cdc.sources import BadRecord, RawLine, iter_lines, open_input
from cdc.warc import RawPage, Revisit, WarcSummary, is_warc, iter_warc


def is_warc_file(name: str) -> bool:
    """Whether the file holds WARC records (after gzip); by content, not by name.

    Raises InputError, with a one-line message, when the file cannot be opened.
    """
    if name == "-":
        return False
    stream = open_input(name)
    try:
        return is_warc(stream)
    finally:
        stream.close()


def warc_items(name: str, mode: str, revisits: list[Revisit],
               summary: WarcSummary) -> Iterator[RawPage | BadRecord]:
    """The pages of a WARC file, to extract with `mode` where they are built; revisit records
    go to `revisits`. FastWARC reads the file itself, gzip included (faster than Python's gzip)."""
    try:
        stream = open(name, "rb")  # noqa: SIM115 - closed below
    except OSError:
        stream = open_input(name)  # its message says what is wrong
    try:
        for item in iter_warc(stream, name, mode, summary, defer=True):
            if isinstance(item, Revisit):
                revisits.append(item)
            else:
                yield item
    finally:
        stream.close()


def input_items(name: str, warc: bool, mode: str, revisits: list[Revisit],
                summary: WarcSummary) -> Iterator[RawPage | RawLine | BadRecord]:
    """The records of one input file: WARC pages (to extract) or JSONL lines (to parse)."""
    if warc:
        return warc_items(name, mode, revisits, summary)
    return iter_lines(name)
