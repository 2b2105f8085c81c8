"""Archive files for the tests, written byte by byte: ARC v1 (the Internet Archive's format
before WARC, as its 1996 spec lays it out), WARC records of any type, WET files of
conversion records, HTTP bodies in chunked transfer encoding."""

from __future__ import annotations

import gzip
import uuid
from collections.abc import Iterable


def gzip_members(records: Iterable[bytes]) -> bytes:
    """Each record its own gzip member, the convention of ARC.gz and WARC.gz."""
    return b"".join(gzip.compress(record, mtime=0) for record in records)


# --- ARC v1 -------------------------------------------------------------------------------


def arc_record(url: str, ip: str, date: str, content_type: str, block: bytes) -> bytes:
    """One ARC v1 record: the URL-record line (URL, IP address, archive date as 14 digits,
    content type, length of what follows), the block, and the newline that ends a record."""
    return f"{url} {ip} {date} {content_type} {len(block)}\n".encode() + block + b"\n"


def arc_version_block(name: str) -> bytes:
    """The filedesc record's block: version line (1 = ARC v1, 0 = reserved, origin code) and
    the names of the URL-record fields."""
    return b"1 0 cdc-tests\nURL IP-address Archive-date Content-type Archive-length\n"


def http_response(body: bytes, content_type: str = "text/html; charset=utf-8", status: str = "200 OK",
                  headers: Iterable[tuple[str, str]] = (), version: str = "HTTP/1.0") -> bytes:
    lines = [f"{version} {status}", f"Content-Type: {content_type}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def arc_file(pages: Iterable[tuple[str, str, bytes]], compress: bool = False, name: str = "crawl.arc",
             ) -> tuple[bytes, list[int]]:
    """An ARC file of (url, 14-digit date, HTTP response) pages after its filedesc header;
    and where each record starts in the file (the header at 0)."""
    records = [arc_record(f"filedesc://{name}", "0.0.0.0", "20240101000000", "text/plain",
                          arc_version_block(name))]
    for url, date, response in pages:
        records.append(arc_record(url, "127.0.0.1", date, "text/html", response))
    parts = [gzip.compress(record, mtime=0) for record in records] if compress else records
    offsets, at = [], 0
    for part in parts:
        offsets.append(at)
        at += len(part)
    return b"".join(parts), offsets


# --- WARC ---------------------------------------------------------------------------------


def warc_record(kind: str, url: str | None, date: str, content_type: str, block: bytes,
                extra: Iterable[tuple[str, str]] = ()) -> bytes:
    """One WARC/1.0 record: its header block, the content block, and the two CRLFs after it."""
    headers = [("WARC-Type", kind), ("WARC-Date", date), ("WARC-Record-ID", f"<urn:uuid:{uuid.uuid4()}>")]
    if url is not None:
        headers.append(("WARC-Target-URI", url))
    headers += [*extra, ("Content-Type", content_type), ("Content-Length", str(len(block)))]
    head = "WARC/1.0\r\n" + "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n"
    return head.encode() + block + b"\r\n\r\n"


def warcinfo(filename: str) -> bytes:
    fields = b"software: cdc-tests\r\nformat: WARC File Format 1.0\r\n"
    return warc_record("warcinfo", None, "2024-01-01T00:00:00Z", "application/warc-fields", fields,
                       extra=[("WARC-Filename", filename)])


def chunked(body: bytes, size: int = 100) -> bytes:
    """`body` in HTTP/1.1 chunked transfer encoding, `size` bytes a chunk (hex lengths, a chunk
    extension on the first, the zero chunk and an empty trailer at the end)."""
    out = bytearray()
    for start in range(0, len(body), size):
        piece = body[start:start + size]
        out += f"{len(piece):x}{';ext=1' if start == 0 else ''}\r\n".encode() + piece + b"\r\n"
    return bytes(out + b"0\r\n\r\n")


def wet_file(pages: Iterable[tuple[str, str, str]], compress: bool = True,
             filename: str = "CC-MAIN-test-00000.warc.wet.gz") -> bytes:
    """A WET file as Common Crawl writes one: a warcinfo record, then one `conversion` record
    of extracted plain text (a block a line) per (url, date, text) page."""
    records = [warcinfo(filename)]
    for url, date, text in pages:
        records.append(warc_record("conversion", url, date, "text/plain", text.encode(),
                                   extra=[("WARC-Refers-To", f"<urn:uuid:{uuid.uuid4()}>"),
                                          ("WARC-Identified-Content-Language", "eng")]))
    return gzip_members(records) if compress else b"".join(records)
