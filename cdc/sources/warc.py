"""WARC and WARC.gz input with FastWARC, streamed one record at a time, and a small writer.

`iter_warc` yields, per WARC record:

- a page (`RawPage`, or with `defer=False` the `SourceRecord` it becomes) for each
  `response` with HTTP status 200 and an HTML content type (`text/html`,
  `application/xhtml+xml`), and each `resource` record of HTML (browser-based crawlers
  write the page they rendered as one), with `WARC-Target-URI` as url and `WARC-Date` as
  fetched_at; the HTTP payload is decoded first: chunked transfer encoding (with
  Resiliparse's `read_http_chunk`), then gzip, deflate, Brotli or Zstandard content encoding;
- in a WET file (`mode` `GIVEN_TEXT`), a page for each `conversion` record: the text
  Common Crawl extracted, taken as it is (`cdc.sources.extract.text_to_record`);
- a `Revisit` for each `revisit` record (an unchanged re-fetch of the URL);
- a `BadRecord` for a page that cannot be read (no target URI, unreadable HTTP headers, a
  payload that fails to decode), and reading goes on;
- at damage (a truncated or corrupt file), one `BadRecord` naming the byte offset, after
  every record before it, and iteration ends without raising.

Other responses (another status, another content type) are skipped and counted; `request`,
`warcinfo`, `metadata` and other records are ignored (counted too). The counts live in a
`WarcSummary` that the caller may pass in and read during or after iteration. ARC files
(`cdc.sources.arc`) come out the same way, through the same payload decoding.

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

from fastwarc.stream_io import BrotliReader, ZstdReader
from fastwarc.warc import ArchiveIterator, WarcRecord, WarcRecordType
from resiliparse.parse.http import iterate_http_chunks

from cdc.core.excerpts import one_line
from cdc.sources.extract import GIVEN_TEXT, MAIN_CONTENT, TEXT_MODES, html_to_record, text_to_record
from cdc.sources.jsonl import BadRecord, SourceRecord

__all__ = ["HTML_TYPES", "RawPage", "Revisit", "WarcSummary", "decode_payload", "iter_warc", "media_type",
           "write_warc_response", "write_warc_revisit"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
"""HTTP content types extracted as pages; any other is skipped and counted."""
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
    """A page of an archive (WARC, ARC or WET) not yet made a record: the one record type
    every archive reader yields. Extraction, the costly part, can then run in another
    process, as a JSON line's parsing does (`cdc.sources.jsonl.RawLine`)."""

    source: str
    line: int
    url: str
    fetched_at: str
    body: bytes
    """The decoded payload: HTML, or for `GIVEN_TEXT` the extracted text."""
    charset: str | None
    mode: str
    """How the body becomes text: `cdc.sources.extract.TEXT_MODES`."""

    def parse(self) -> SourceRecord:
        if self.mode == GIVEN_TEXT:
            record = text_to_record(self.body, self.url, self.fetched_at)
        else:
            record = html_to_record(self.body, self.url, self.fetched_at, self.charset, self.mode)
        return SourceRecord(self.source, self.line, record)


@dataclass
class WarcSummary:
    """What `iter_warc` saw; filled in as it reads."""

    records: int = 0
    """Archive records of any type."""
    pages: int = 0
    """Pages yielded: HTML responses and resources, and WET text."""
    texts: int = 0
    """Of those, WET text (conversion records)."""
    formats: set[str] = field(default_factory=set)
    """The formats read ("WARC", "ARC", "WET"), for the summary's wording."""
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
        self.texts += other.texts
        self.formats |= other.formats
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


def iter_warc(stream: BinaryIO, source: str = "-", mode: str = MAIN_CONTENT,
              summary: WarcSummary | None = None,
              defer: bool = False) -> Iterator[SourceRecord | RawPage | BadRecord | Revisit]:
    """The pages and revisits of a WARC or WARC.gz stream; see the module docstring.

    `mode` is how pages become text (`cdc.sources.extract.TEXT_MODES`): an HTML extraction mode, or
    `GIVEN_TEXT` for a WET file, whose conversion records are the pages; `summary`, if given,
    is filled in with counts. With `defer`, pages come as `RawPage`, to make records of later
    (`RawPage.parse`). Only a caller's mistake raises: a text stream, an unknown mode.
    """
    if isinstance(stream, io.TextIOBase):
        raise TypeError("iter_warc needs a binary stream: open the file in 'rb' mode")
    if mode not in TEXT_MODES:
        raise ValueError(f"mode must be one of {TEXT_MODES}, got {mode!r}")
    summary = summary if summary is not None else WarcSummary()
    summary.formats.add("WET" if mode == GIVEN_TEXT else "WARC")
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
            item = _read_record(record, source, number, mode, summary)
        except _Truncated:
            summary.bad += 1
            summary.damaged_at = offset
            yield damage(source, number, offset, "truncated: the file ends inside the record")
            return
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            item = BadRecord(source, number, f"record at byte {offset:,} unreadable ({one_line(exc)})")
        last_end = offset
        if isinstance(item, BadRecord):
            summary.bad += 1
        elif isinstance(item, RawPage):
            summary.pages += 1
            summary.texts += item.mode == GIVEN_TEXT
            summary.html_bytes += len(item.body) if item.mode != GIVEN_TEXT else 0
            if not defer:
                item = item.parse()
        if item is not None:
            yield item


class _Truncated(Exception):
    """The stream ended inside a record."""


def damage(source: str, number: int, offset: int, what: str) -> BadRecord:
    """The one BadRecord that ends a damaged archive: where, and that nothing after it was read."""
    return BadRecord(source, number, f"{what} at byte {offset:,} (record {number}); every record "
                                     "before it was read, nothing after it")


def media_type(value: str | None) -> tuple[str, str | None]:
    """A Content-Type header as its media type (lower case) and its charset, if it names one."""
    kind, _, parameters = (value or "").partition(";")
    charset = None
    for parameter in parameters.split(";"):
        name, _, given = parameter.partition("=")
        if name.strip().lower() == "charset" and given.strip():
            charset = given.strip().strip("\"'")
    return kind.strip().lower(), charset


def _read_record(record: WarcRecord, source: str, number: int, mode: str,
                 summary: WarcSummary) -> RawPage | BadRecord | Revisit | None:
    """One WARC record as what `iter_warc` yields, or None when it is skipped or ignored."""
    headers = record.headers
    if headers.get("Content-Length") is None:  # the header block itself was cut short
        raise _Truncated
    kind = record.record_type
    url = (headers.get("WARC-Target-URI") or "").strip().strip("<>")
    fetched_at = headers.get("WARC-Date") or ""
    where = f"{_type_name(record)} at byte {record.stream_pos:,}"
    if kind == WarcRecordType.revisit:
        _skip(record)
        if not url:
            return BadRecord(source, number, f"{where} has no WARC-Target-URI")
        summary.revisits += 1
        return Revisit(source, number, url, fetched_at)
    if kind == WarcRecordType.response and mode != GIVEN_TEXT:
        try:
            record.parse_http(auto_decode="none")  # decoded below, once the payload is known whole
        except (OSError, ValueError) as exc:
            _skip(record)
            return BadRecord(source, number, f"{where}: unreadable HTTP headers ({one_line(exc)})")
        http = record.http_headers
        status = http.status_code if http is not None else None
        content_type, charset = media_type(http.get("Content-Type") if http is not None else None)
        if status != 200:
            _skip(record)
            summary.skipped_status[status] += 1
            return None
        encodings = (http.get("Transfer-Encoding"), http.get("Content-Encoding"))
    elif kind == WarcRecordType.resource and mode != GIVEN_TEXT:
        content_type, charset = media_type(headers.get("Content-Type"))
        encodings = (None, None)
    elif kind == WarcRecordType.conversion and mode == GIVEN_TEXT:
        content_type, charset = "text/plain", "utf-8"
        encodings = (None, None)
    else:
        summary.ignored[_type_name(record)] += 1
        _skip(record)
        return None
    if mode != GIVEN_TEXT and content_type not in HTML_TYPES:
        _skip(record)
        summary.skipped_type[content_type or "(none)"] += 1
        return None
    if record.content_length > MAX_HTML_BYTES:
        _skip(record)
        return BadRecord(source, number, f"{where}: payload larger than {MAX_HTML_BYTES:,} bytes "
                                         "(MAX_HTML_BYTES); skipped")
    raw = record.reader.read()
    if len(raw) < record.content_length:
        raise _Truncated
    if not url:
        return BadRecord(source, number, f"{where} has no WARC-Target-URI")
    try:
        body = decode_payload(raw, *encodings)
    except ValueError as exc:
        return BadRecord(source, number, f"{where}: {exc}")
    return RawPage(source, number, url, fetched_at, body, charset, mode)


def _dechunk(raw: bytes) -> bytes:
    """A chunked HTTP body decoded, with Resiliparse's helper. A body that does not start
    with a chunk header is taken as it is: some crawlers store the body decoded and keep the
    Transfer-Encoding header."""
    decoded = b"".join(iterate_http_chunks(io.BytesIO(raw)))
    if not decoded and raw.lstrip()[:1] not in (b"0", b""):
        return raw
    return decoded


def _inflate(data: bytes, wbits: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(data, MAX_HTML_BYTES + 1)
    if len(out) > MAX_HTML_BYTES:
        raise ValueError(f"decoded payload larger than {MAX_HTML_BYTES:,} bytes (MAX_HTML_BYTES)")
    return out


def _read_all(reader) -> bytes:
    blocks, total = [], 0
    while block := reader.read(SKIP_READ_SIZE):
        blocks.append(block)
        total += len(block)
        if total > MAX_HTML_BYTES:
            raise ValueError(f"decoded payload larger than {MAX_HTML_BYTES:,} bytes (MAX_HTML_BYTES)")
    return b"".join(blocks)


def _decode_content(data: bytes, coding: str) -> bytes:
    if coding in ("gzip", "x-gzip"):
        return _inflate(data, 16 + zlib.MAX_WBITS)
    if coding == "deflate":  # zlib-wrapped as the RFC says, or raw deflate as some servers send
        try:
            return _inflate(data, zlib.MAX_WBITS)
        except zlib.error:
            return _inflate(data, -zlib.MAX_WBITS)
    if coding == "br":
        return _read_all(BrotliReader(io.BytesIO(data)))
    if coding == "zstd":
        return _read_all(ZstdReader(io.BytesIO(data)))
    raise ValueError(f"Content-Encoding {coding!r} is not one cdc decodes (gzip, deflate, br, zstd)")


def decode_payload(raw: bytes, transfer_encoding: str | None, content_encoding: str | None) -> bytes:
    """An HTTP payload as the server meant it: chunked transfer encoding undone, then each
    content encoding, last applied first. Raises ValueError, saying what failed, for a
    payload that does not decode."""
    body = raw
    if transfer_encoding and "chunked" in transfer_encoding.lower():
        try:
            body = _dechunk(body)
        except (OSError, ValueError) as exc:
            raise ValueError(f"chunked transfer encoding that does not decode ({one_line(exc)})") from exc
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    for coding in reversed([c for c in codings if c and c != "identity"]):
        try:
            body = _decode_content(body, coding)
        except (OSError, zlib.error) as exc:
            raise ValueError(f"Content-Encoding {coding} data that does not decode "
                             f"({one_line(exc)})") from exc
    return body


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
