"""ARC and ARC.gz input (the Internet Archive's format before WARC), read with warcio.

FastWARC reads WARC only, so ARC files go through warcio's `ArchiveIterator`, which turns
each ARC record into a WARC `response` record (`arc2warc`): the URL, the archive date and
the HTTP response it holds. `iter_arc` then yields what `cdc.sources.warc.iter_warc` yields, made
the same way: a `RawPage` for each HTML page with status 200 (its payload decoded by
`cdc.sources.warc.decode_payload`), a `BadRecord` for a record that cannot be read, and at damage
one `BadRecord` naming the byte offset (in the compressed file for ARC.gz, where each
record is its own gzip member), after every record before it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeadersParserException

from cdc.core.excerpts import one_line
from cdc.sources.extract import EXTRACTION_MODES, MAIN_CONTENT
from cdc.sources.jsonl import BadRecord, SourceRecord
from cdc.sources.warc import (
    HTML_TYPES,
    MAX_HTML_BYTES,
    SKIP_READ_SIZE,
    RawPage,
    WarcSummary,
    damage,
    decode_payload,
    media_type,
)

__all__ = ["iter_arc"]

_READ_ERRORS = (OSError, EOFError, zlib.error, ValueError, ArchiveLoadFailed, StatusAndHeadersParserException)


def iter_arc(stream: BinaryIO, source: str = "-", mode: str = MAIN_CONTENT,
             summary: WarcSummary | None = None,
             defer: bool = False) -> Iterator[SourceRecord | RawPage | BadRecord]:
    """The HTML pages of an ARC or ARC.gz stream; see the module docstring. `mode`,
    `summary` and `defer` are `iter_warc`'s. Only a caller's mistake (an unknown mode) raises."""
    if mode not in EXTRACTION_MODES:
        raise ValueError(f"an ARC file holds HTML to extract: mode must be one of {EXTRACTION_MODES}, "
                         f"got {mode!r}")
    summary = summary if summary is not None else WarcSummary()
    summary.formats.add("ARC")
    records = ArchiveIterator(stream, arc2warc=True)
    number = 0
    while True:
        try:
            record = next(records)
        except StopIteration:
            # warcio ends quietly where a gzip member is cut short: bytes read past the end of
            # the last whole record are the damage.
            if records.fh.tell() > records.offset:
                summary.bad += 1
                summary.damaged_at = records.offset
                yield damage(source, number + 1, records.offset,
                             "truncated: the file ends inside the record")
            return
        except _READ_ERRORS as exc:
            offset = records.offset  # the start of the record that failed: the end of the last one
            summary.bad += 1
            summary.damaged_at = offset
            yield damage(source, number + 1, offset, "truncated: the file ends inside the record"
                         if _at_end(records) else f"unreadable ({one_line(exc)})")
            return
        number += 1
        summary.records += 1
        offset = records.offset  # where this record starts
        try:
            item = _read_record(record, source, number, offset, mode, summary)
        except _Truncated:
            summary.bad += 1
            summary.damaged_at = offset
            yield damage(source, number, offset, "truncated: the file ends inside the record")
            return
        except _READ_ERRORS as exc:
            summary.bad += 1
            summary.damaged_at = offset
            yield damage(source, number, offset, f"unreadable ({one_line(exc)})")
            return
        if isinstance(item, BadRecord):
            summary.bad += 1
        elif isinstance(item, RawPage):
            summary.pages += 1
            summary.html_bytes += len(item.body)
            if not defer:
                item = item.parse()
        if item is not None:
            yield item


def _at_end(records: ArchiveIterator) -> bool:
    """Whether warcio has read the whole file: a record header that failed there was cut."""
    reader = records.reader
    try:
        return reader is not None and not reader.rem_length() and not records.fh.read(1)
    except (OSError, ValueError):
        return False


class _Truncated(Exception):
    """The stream ended inside a record."""


def _drain(record) -> int:
    total = 0
    while block := record.raw_stream.read(SKIP_READ_SIZE):
        total += len(block)
    return total


def _skip(record) -> None:
    if _drain(record) < max(record.payload_length, 0):
        raise _Truncated


def _read_record(record, source: str, number: int, offset: int, mode: str,
                 summary: WarcSummary) -> RawPage | BadRecord | None:
    if record.rec_type != "response":  # the filedesc:// header, as warcinfo
        summary.ignored["warcinfo" if record.rec_type == "warcinfo" else str(record.rec_type)] += 1
        _drain(record)
        return None
    http = record.http_headers
    if http is None:  # not an http(s) URL (a dns: record), or no payload at all
        if record.length and not _drain(record):
            raise _Truncated
        summary.skipped_type["(not HTTP)"] += 1
        return None
    status_code = http.get_statuscode()
    status = int(status_code) if status_code and status_code.isdigit() else status_code
    content_type, charset = media_type(http.get_header("Content-Type"))
    if status != 200:
        _skip(record)
        summary.skipped_status[status] += 1
        return None
    if content_type not in HTML_TYPES:
        _skip(record)
        summary.skipped_type[content_type or "(none)"] += 1
        return None
    where = f"ARC record at byte {offset:,}"
    if record.payload_length > MAX_HTML_BYTES:
        _skip(record)
        return BadRecord(source, number, f"{where}: payload larger than {MAX_HTML_BYTES:,} bytes "
                                         "(MAX_HTML_BYTES); skipped")
    raw = record.raw_stream.read()
    if len(raw) < max(record.payload_length, 0):
        raise _Truncated
    url = (record.rec_headers.get_header("WARC-Target-URI") or "").strip()
    if not url:
        return BadRecord(source, number, f"{where} has no URL")
    try:
        body = decode_payload(raw, http.get_header("Transfer-Encoding"), http.get_header("Content-Encoding"))
    except ValueError as exc:
        return BadRecord(source, number, f"{where}: {exc}")
    return RawPage(source, number, url, record.rec_headers.get_header("WARC-Date") or "", body, charset, mode)
