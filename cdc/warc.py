"""WARC and WARC.gz input with FastWARC, streamed one record at a time, and a small writer.

`iter_warc` yields, per WARC record:

- a `SourceRecord` for each `response` with HTTP status 200 and an HTML content type
  (`text/html`, `application/xhtml+xml`), its record built by `cdc.extract.html_to_record`
  with `WARC-Target-URI` as url and `WARC-Date` as fetched_at;
- a `Revisit` for each `revisit` record (an unchanged re-fetch of the URL);
- a `BadRecord` for a response that cannot be read (no target URI, unreadable HTTP
  headers, a payload that fails to decode), and reading goes on;
- at damage (a truncated or corrupt file), one `BadRecord` naming the byte offset, after
  every record before it, and iteration ends without raising.

Other responses (another status, another content type) are skipped and counted; `request`,
`warcinfo`, `metadata`, `resource` and other records are ignored (counted too). The counts
live in a `WarcSummary` that the caller may pass in and read during or after iteration:
the yielded types stay the ones an `Ingester` takes (plus `Revisit`).

`line` in what is yielded is the 1-based ordinal of the record in the file; reasons for
bad records give the record's byte offset (in the compressed file for WARC.gz, where each
record is its own gzip member: seekable with `warcio extract` or `ArchiveIterator`).
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from fastwarc.warc import ArchiveIterator, WarcRecord, WarcRecordType

from cdc.extract import MAIN_CONTENT, html_to_record
from cdc.sources import GZIP_MAGIC, BadRecord, SourceRecord, one_line

__all__ = ["HTML_TYPES", "RawPage", "Revisit", "WarcSummary", "is_warc", "iter_warc", "write_warc_response",
           "write_warc_revisit"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
"""HTTP content types extracted as pages; any other is skipped and counted."""
WARC_MAGICS = (b"WARC/1.0", b"WARC/1.1")
SKIP_READ_SIZE = 1 << 16
"""Bytes read at a time from a record that is skipped (to see whether it is complete)."""
MAX_HTML_BYTES = 64 << 20
"""A larger HTML payload is reported as bad and skipped, never held whole."""
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


@dataclass(frozen=True, slots=True)
class Revisit:
    """A `revisit` record: the URL was fetched again and its payload had not changed."""

    source: str
    line: int
    """1-based ordinal of the record in the file."""
    url: str
    fetched_at: str


@dataclass(frozen=True, slots=True)
class RawPage:
    """An HTML response not yet extracted: extraction, the costly part, can then run in
    another process, as a JSON line's parsing does (`cdc.sources.RawLine`)."""

    source: str
    line: int
    url: str
    fetched_at: str
    body: bytes
    charset: str | None
    mode: str

    def parse(self) -> SourceRecord:
        return SourceRecord(self.source, self.line,
                            html_to_record(self.body, self.url, self.fetched_at, self.charset, self.mode))


@dataclass
class WarcSummary:
    """What `iter_warc` saw; filled in as it reads."""

    records: int = 0
    """WARC records of any type."""
    pages: int = 0
    """HTML responses yielded as SourceRecord."""
    revisits: int = 0
    skipped_status: Counter = field(default_factory=Counter)
    """Responses not extracted for their HTTP status (status -> count)."""
    skipped_type: Counter = field(default_factory=Counter)
    """200 responses not extracted for their content type (type -> count)."""
    ignored: Counter = field(default_factory=Counter)
    """Records of other WARC types (request, warcinfo, metadata, ...) by type."""
    bad: int = 0
    damaged_at: int | None = None
    """Byte offset where a damaged file stopped being readable, if it did."""
    html_bytes: int = 0
    """Bytes of HTML payload extracted."""

    @property
    def skipped(self) -> int:
        return sum(self.skipped_status.values()) + sum(self.skipped_type.values())

    def add(self, other: WarcSummary) -> None:
        """Count another file's records too (the shards of a cluster ingest)."""
        self.records += other.records
        self.pages += other.pages
        self.revisits += other.revisits
        self.skipped_status.update(other.skipped_status)
        self.skipped_type.update(other.skipped_type)
        self.ignored.update(other.ignored)
        self.bad += other.bad
        self.html_bytes += other.html_bytes
        if other.damaged_at is not None:
            self.damaged_at = other.damaged_at


def _type_name(record: WarcRecord) -> str:
    name = getattr(record.record_type, "name", None)
    return name or str(record.record_type)


def _drain(record: WarcRecord) -> int:
    """Read and drop the rest of a record's payload in bounded blocks; bytes read."""
    total = 0
    while block := record.reader.read(SKIP_READ_SIZE):
        total += len(block)
    return total


def _skip(record: WarcRecord) -> None:
    """Read past the rest of a record not used; one that ends early means the file was cut."""
    if _drain(record) < record.content_length:
        raise _Truncated


def _damage(source: str, number: int, offset: int, what: str) -> BadRecord:
    return BadRecord(source, number, f"{what} at byte {offset:,} (record {number}); every record "
                                     "before it was read, nothing after it")


def iter_warc(stream: BinaryIO, source: str = "-", mode: str = MAIN_CONTENT,
              summary: WarcSummary | None = None,
              defer: bool = False) -> Iterator[SourceRecord | RawPage | BadRecord | Revisit]:
    """The HTML pages and revisits of a WARC or WARC.gz stream; see the module docstring.

    `mode` is the extraction mode (`cdc.extract.MAIN_CONTENT` or `WHOLE_PAGE`); `summary`,
    if given, is filled in with counts. With `defer`, pages come as `RawPage`, to extract
    later (`RawPage.parse`). Only a text stream (a caller's mistake) raises.
    """
    if isinstance(stream, io.TextIOBase):
        raise TypeError("iter_warc needs a binary stream: open the file in 'rb' mode")
    summary = summary if summary is not None else WarcSummary()
    # Every record type is read, not only responses, so damage inside a request record is
    # seen too; HTTP headers are parsed here, per record, so one bad header block is one bad
    # record rather than the end of the file.
    records = ArchiveIterator(stream, parse_http=False)
    number = 0
    last_end = 0  # where the last record read starts: corrupt data lies after it
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            summary.bad += 1
            summary.damaged_at = last_end
            yield BadRecord(source, number + 1, f"corrupt data after byte {last_end:,} (the start of record "
                                                f"{number}, the last one read: {one_line(exc)}); every "
                                                "record before it was read, nothing after it")
            return
        number += 1
        summary.records += 1
        offset = record.stream_pos
        try:
            item = _read_record(record, source, number, mode, summary, defer)
        except _Truncated:
            summary.bad += 1
            summary.damaged_at = offset
            yield _damage(source, number, offset, "truncated: the file ends inside the record")
            return
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            item = BadRecord(source, number, f"record at byte {offset:,} unreadable ({one_line(exc)})")
        last_end = offset
        if isinstance(item, BadRecord):
            summary.bad += 1
        if item is not None:
            yield item


class _Truncated(Exception):
    """The stream ended inside a record."""


def _read_record(record: WarcRecord, source: str, number: int, mode: str, summary: WarcSummary,
                 defer: bool) -> SourceRecord | RawPage | BadRecord | Revisit | None:
    """One WARC record as what `iter_warc` yields, or None when it is skipped or ignored."""
    headers = record.headers
    if headers.get("Content-Length") is None:  # the header block itself was cut short
        raise _Truncated
    kind = record.record_type
    if kind not in (WarcRecordType.response, WarcRecordType.revisit):
        summary.ignored[_type_name(record)] += 1
        _skip(record)
        return None
    url = (headers.get("WARC-Target-URI") or "").strip().strip("<>")
    fetched_at = headers.get("WARC-Date") or ""
    if kind == WarcRecordType.revisit:
        _skip(record)
        if not url:
            return BadRecord(source, number, f"revisit at byte {record.stream_pos:,} has no WARC-Target-URI")
        summary.revisits += 1
        return Revisit(source, number, url, fetched_at)
    try:
        record.parse_http(auto_decode="all")
    except (OSError, ValueError) as exc:
        _skip(record)
        return BadRecord(source, number, f"response at byte {record.stream_pos:,}: unreadable HTTP "
                                         f"headers ({one_line(exc)})")
    status = record.http_headers.status_code if record.http_headers is not None else None
    content_type = (record.http_content_type or "").strip().lower()
    if status != 200 or content_type not in HTML_TYPES:
        _skip(record)
        if status != 200:
            summary.skipped_status[status] += 1
        else:
            summary.skipped_type[content_type or "(none)"] += 1
        return None
    if record.content_length > MAX_HTML_BYTES:
        _drain(record)
        return BadRecord(source, number, f"response at byte {record.stream_pos:,}: HTML larger than "
                                         f"{MAX_HTML_BYTES:,} bytes (MAX_HTML_BYTES); skipped")
    body = record.reader.read()
    if len(body) < record.content_length:
        raise _Truncated
    if not url:
        return BadRecord(source, number, f"response at byte {record.stream_pos:,} has no WARC-Target-URI")
    summary.pages += 1
    summary.html_bytes += len(body)
    page = RawPage(source, number, url, fetched_at, body, record.http_charset, mode)
    return page if defer else page.parse()


def is_warc(stream_or_first_bytes: BinaryIO | bytes) -> bool:
    """Whether the data is a WARC file (after gzip decompression if gzip): it starts with
    `WARC/1.0` or `WARC/1.1`. Give at least the first 512 bytes (a compressed block may need
    that many to give its first 8). A stream is peeked, not consumed, when it has `peek`; otherwise
    its position is restored when it is seekable."""
    data = stream_or_first_bytes
    if not isinstance(data, (bytes, bytearray, memoryview)):
        stream = data
        peek = getattr(stream, "peek", None)
        if peek is not None:
            data = peek(512)[:512]
        elif getattr(stream, "seekable", lambda: False)():
            position = stream.tell()
            data = stream.read(512)
            stream.seek(position)
        else:
            raise TypeError("is_warc needs bytes, or a stream that can peek or seek")
    data = bytes(data)
    if data[:2] == GZIP_MAGIC:
        try:
            data = zlib.decompressobj(wbits=31).decompress(data, 16)
        except zlib.error:
            return False
    return data.startswith(WARC_MAGICS)


def _write(writer_stream: BinaryIO, record: WarcRecord, compress: bool) -> int:
    if not compress:
        return record.write(writer_stream)
    buffer = io.BytesIO()
    record.write(buffer)
    # One gzip member per record, the WARC.gz convention: a reader can seek to any record.
    data = gzip.compress(buffer.getvalue(), mtime=0)
    writer_stream.write(data)
    return len(data)


def _new_record(kind: WarcRecordType, url: str, fetched_at: str) -> WarcRecord:
    record = WarcRecord()
    record.init_headers(kind)  # a fresh WARC-Record-ID
    record.headers.set("WARC-Target-URI", url)
    record.headers.set("WARC-Date", fetched_at)
    record.headers.set("Content-Type", "application/http; msgtype=response")
    return record


def _http_block(status: int, headers: list[tuple[str, str]], reason: str = "") -> bytes:
    lines = [f"HTTP/1.1 {status} {reason or _REASONS.get(status, 'Status')}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


_REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 304: "Not Modified",
            404: "Not Found", 500: "Internal Server Error"}


def write_warc_response(writer_stream: BinaryIO, url: str, fetched_at: str, status: int,
                        headers: list[tuple[str, str]], body: bytes, *, compress: bool = False) -> int:
    """Write one `response` record (HTTP status line, `headers`, `body`); bytes written.
    `fetched_at` is the WARC-Date (ISO 8601, e.g. 2024-05-01T12:00:00Z); `compress` writes
    the record as its own gzip member."""
    record = _new_record(WarcRecordType.response, url, fetched_at)
    record.set_bytes_content(_http_block(status, headers) + body)
    return _write(writer_stream, record, compress)


def write_warc_revisit(writer_stream: BinaryIO, url: str, fetched_at: str, *,
                       refers_to_date: str | None = None, status: int = 200,
                       headers: list[tuple[str, str]] | None = None, compress: bool = False) -> int:
    """Write one `revisit` record (identical-payload-digest profile, HTTP headers only);
    bytes written."""
    record = _new_record(WarcRecordType.revisit, url, fetched_at)
    record.headers.set("WARC-Profile", REVISIT_PROFILE)
    if refers_to_date:
        record.headers.set("WARC-Refers-To-Date", refers_to_date)
    record.set_bytes_content(_http_block(status, headers or []))
    return _write(writer_stream, record, compress)
