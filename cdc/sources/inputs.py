"""The one way in for crawl input files: opened once, told apart by their first bytes.

`open_crawl_input(name)` opens a file (or stdin), reads its first bytes once (through gzip
when they are gzip), and says what it holds: JSON Lines records, a WARC file, a WET file
(Common Crawl's WARC of `conversion` records: extracted text) or an ARC file, each plain or
gzip. Anything else is refused there and then, with one `InputError` naming what the file
looks like (a gzip of a tar archive, a PNG image, an HTML page, ...), never a flood of
per-line errors. `CrawlInput.items` then hands the same stream, from its first byte, to the
reader of its format: FastWARC for WARC and WET (`cdc.sources.warc`), warcio for ARC (`cdc.sources.arc`),
`cdc.sources.jsonl` for JSON Lines. Every archive page comes out as one record type,
`cdc.sources.warc.RawPage`; a JSON line as `cdc.sources.jsonl.RawLine`, parsed where it is built.

The single-process ingest (`cdc ingest`) and a cluster's map stage (`cdc.ingest.observations`) read
their inputs through here, so both see the same records in the same order.

How a page becomes text is one mode per run and per store (`Store.claim_extraction_mode`):
an HTML extraction mode (`--extract main` or `whole`) for WARC and ARC, or `wet` for WET
files, whose text is taken as Common Crawl extracted it. `run_mode` picks it from the inputs
and refuses WET and HTML archives in one run: the same page made into text two ways would
compare as changed when only the extraction differs.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import sys
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, NamedTuple

from cdc.core.excerpts import one_line
from cdc.errors import InputError
from cdc.sources.extract import EXTRACTION_MODES, GIVEN_TEXT, MAIN_CONTENT
from cdc.sources.jsonl import GZIP_MAGIC, BadRecord, RawLine, display_name, open_file, raw_lines
from cdc.sources.warc import RawPage, Revisit, WarcSummary, iter_warc

__all__ = ["ARC", "JSONL", "WARC", "WET", "CrawlInput", "CrawlRecords", "InputKind", "Sniffed",
           "open_crawl_input", "open_crawl_inputs", "run_mode", "sniff"]

JSONL, WARC, WET, ARC = "jsonl", "warc", "wet", "arc"
HEAD_BYTES = 32 << 10
"""Bytes read ahead of the reader to tell the format: a WARC.gz's first few records."""
_NAMES = {JSONL: "JSON Lines", WARC: "WARC", WET: "WET", ARC: "ARC"}
FORMATS_READ = "JSON Lines records, WARC, WET and ARC files, gzip-compressed or not"

_WARC_TYPE = re.compile(rb"^WARC-Type:[ \t]*([A-Za-z]+)", re.M | re.I)
_WARC_FILENAME = re.compile(rb"^WARC-Filename:[ \t]*(\S+)", re.M | re.I)
# An ARC v1 record line without the filedesc:// header: URL IP date(14 digits) type length.
_ARC_LINE = re.compile(rb"^\S+ \d{1,3}(?:\.\d{1,3}){3} \d{14} \S+ \d+\r?\n")
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]")
_MAGICS = (  # (offset, bytes, what a file that starts so is)
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF8", "a GIF image"),
    (0, b"%PDF-", "a PDF document"),
    (0, b"PK\x03\x04", "a ZIP archive (or a file in a ZIP-based format: docx, xlsx, jar, ...)"),
    (0, b"BZh", "bzip2-compressed data (decompress it first: bunzip2)"),
    (0, b"\xfd7zXZ\x00", "xz-compressed data (decompress it first: unxz)"),
    (0, b"\x28\xb5\x2f\xfd", "Zstandard-compressed data (decompress it first: zstd -d)"),
    (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (257, b"ustar", "a tar archive"),
    (0, b"SQLite format 3\x00", "an SQLite database"),
    (8, b"DUCK", "a DuckDB database (a cdc store? open it with --db)"),
    (0, b"PAR1", "a Parquet file"),
    (0, b"\x7fELF", "an executable (ELF)"),
    (0, b"%!PS", "a PostScript document"),
)
_HINTS = {
    "a tar archive": "unpack it and give the crawl files inside",
    "an HTML page": "to store a page, fetch it (cdc fetch URL), or give the WARC file a crawler wrote "
                    "(wget --warc-file, for one)",
}


@dataclass(frozen=True)
class Sniffed:
    """What the first bytes of a file say it is."""

    format: str | None
    """JSONL, WARC, WET or ARC; None for anything else."""
    compressed: bool
    looks_like: str
    """What the file holds, in words: "a gzip-compressed WARC file", "a PNG image"."""
    hint: str = ""
    """For a file refused: what to do instead, if there is something to say."""


class InputKind(NamedTuple):
    """What one input file holds, all `run_mode` needs: a cluster's shard reports it from
    the worker that read it, so the run's mode is chosen from every shard as from local files."""

    name: str
    format: str
    looks_like: str


def _gunzip_head(data: bytes, limit: int) -> bytes:
    """What the first gzip members of `data` decompress to, up to `limit` bytes (a WARC.gz
    has a member a record). Raises zlib.error for data that is not gzip after all."""
    out = bytearray()
    while data[:2] == GZIP_MAGIC and len(out) < limit:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += inflater.decompress(data, limit - len(out))
        if not inflater.eof:
            break
        data = inflater.unused_data
    return bytes(out)


def _warc_kind(head: bytes) -> str:
    """WET when the records seen after the warcinfo are conversion records only (or, when
    there are none yet, when the warcinfo names a .wet file); else WARC."""
    types = {kind.lower() for kind in _WARC_TYPE.findall(head)} - {b"warcinfo", b"metadata"}
    if types:
        return WET if types == {b"conversion"} else WARC
    filename = _WARC_FILENAME.search(head)
    return WET if filename and b".wet" in filename.group(1).lower() else WARC


def _describe(data: bytes) -> str:
    """What data that is not crawl input looks like, in words, for the one-line refusal."""
    for offset, magic, what in _MAGICS:
        if data[offset:offset + len(magic)] == magic:
            return what
    sample = data[:4096]
    if _CONTROL.search(sample[:512]) or sample.count(b"\x00"):
        return f"binary data of a format cdc does not know (it starts with bytes {sample[:8].hex(' ')})"
    text = sample.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    start = text[:200].lower()
    if start.startswith(("<!doctype html", "<html", "<head", "<body", "<meta", "<title")) or "<html" in start:
        return "an HTML page"
    if start.startswith("<?xml") or start.startswith("<"):
        return "an XML or markup document"
    if start.startswith("["):
        return "a JSON array, not JSON Lines (one JSON object a line)"
    first = one_line(text.split("\n", 1)[0])[:60]
    return f"text that is not JSON Lines (it starts {first!r}; a record is a JSON object a line)"


def sniff(head: bytes) -> Sniffed:
    """A file's format from its first bytes (`HEAD_BYTES` of them, or the whole file if
    shorter): pure, no I/O. An empty file is JSON Lines with no records."""
    compressed = head[:2] == GZIP_MAGIC
    data = head
    if compressed:
        try:
            data = _gunzip_head(head, HEAD_BYTES)
        except zlib.error as exc:
            return Sniffed(None, True, f"gzip data that does not decompress, corrupt from the start ({exc})")
    if data.startswith(b"WARC/"):
        kind = _warc_kind(data)
    elif data.startswith(b"filedesc://") or _ARC_LINE.match(data):
        kind = ARC
    elif not data.lstrip(b"\xef\xbb\xbf \t\r\n") or data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{":
        kind = JSONL
    else:
        what = _describe(data)
        return Sniffed(None, compressed, f"gzip-compressed data holding {what}" if compressed else what,
                       _HINTS.get(what, ""))
    name = "JSON Lines records" if kind == JSONL else f"{_NAMES[kind]} file"
    article = "" if kind == JSONL else "an " if kind == ARC and not compressed else "a "
    return Sniffed(kind, compressed, f"{article}gzip-compressed {name}" if compressed else f"{article}{name}")


class CrawlInput:
    """One input file, opened once, its format known from its first bytes (not yet read:
    the reader gets the stream from its first byte)."""

    def __init__(self, name: str, stream: BinaryIO, sniffed: Sniffed):
        self.name = name
        self.format = sniffed.format
        self.compressed = sniffed.compressed
        self.looks_like = sniffed.looks_like
        self._stream: BinaryIO | None = stream

    def __repr__(self) -> str:
        return f"CrawlInput({self.name!r}, {self.looks_like})"

    @property
    def is_archive(self) -> bool:
        return self.format != JSONL

    @property
    def kind(self) -> InputKind:
        return InputKind(self.name, self.format, self.looks_like)

    def records(self, mode: str) -> CrawlRecords:
        """The file's records, read once (`CrawlRecords`), the pages made text with `mode`."""
        return CrawlRecords(self, mode)

    def _read(self, mode: str, revisits: list[Revisit],
              summary: WarcSummary) -> Iterator[RawPage | RawLine | BadRecord]:
        """The file's records, closing the file at the end (not stdin): archive pages
        (`RawPage`, made text with `mode`) or JSON lines (`RawLine`, to parse); an archive's
        revisit records go to `revisits` and its counts to `summary`.

        Raises InputError (at the first `next()`) when the file's pages cannot be made text
        with `mode`: a WET file's text is `GIVEN_TEXT`, a WARC's or an ARC's HTML is extracted
        with an HTML mode; `run_mode` picks the one that fits.
        """
        stream, self._stream = self._stream, None
        if stream is None:
            raise InputError(f"{display_name(self.name)}: already read")
        try:
            if self.format == JSONL:
                yield from raw_lines(gzip.GzipFile(fileobj=stream, mode="rb") if self.compressed else stream,
                                     self.name)
                return
            _check_mode(self.kind, mode)
            if self.format == ARC:
                from cdc.sources.arc import iter_arc  # warcio loads only for ARC input

                yield from iter_arc(stream, self.name, mode, summary, defer=True)
                return
            for item in iter_warc(stream, self.name, mode, summary, defer=True):
                if isinstance(item, Revisit):
                    revisits.append(item)
                else:
                    yield item
        finally:
            self._close(stream)

    def close(self) -> None:
        """Close the file without reading it (a run that stops before its turn)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            self._close(stream)

    @staticmethod
    def _close(stream: BinaryIO) -> None:
        if stream is not getattr(sys.stdin, "buffer", None):
            stream.close()


class CrawlRecords:
    """The records of one input file, read once, as an iterator, and what reading them found
    beside the pages, filled in as it reads (warcio's way: the iterator holds it): `revisits`,
    a WARC's revisit records (pages fetched again, unchanged), and `summary`, an archive's
    counts (`WarcSummary`; None for JSON Lines). Given a file name, the file is opened at the
    first `next()` (a cluster's shard, read where it runs)."""

    def __init__(self, source: CrawlInput | str, mode: str):
        self._source = source
        self._mode = mode
        self._items: Iterator[RawPage | RawLine | BadRecord] | None = None
        self.revisits: list[Revisit] = []
        self.summary: WarcSummary | None = None
        if isinstance(source, CrawlInput):
            self._start(source)

    def _start(self, source: CrawlInput) -> None:
        self.summary = WarcSummary() if source.is_archive else None
        self._items = source._read(self._mode, self.revisits, self.summary or WarcSummary())

    def __iter__(self) -> CrawlRecords:
        return self

    def __next__(self) -> RawPage | RawLine | BadRecord:
        if self._items is None:
            self._start(open_crawl_input(self._source))
        return next(self._items)

    def close(self) -> None:
        """Stop reading: the file is closed (a run that stops before the end)."""
        if self._items is not None:
            self._items.close()  # a generator not started closes nothing: the input does
        if isinstance(self._source, CrawlInput):
            self._source.close()


def open_crawl_input(name: str) -> CrawlInput:
    """The file `name` ("-": stdin) opened, its first bytes read once and its format told.

    Raises InputError, with a one-line message, when the file cannot be opened or read, or
    is not crawl input: the message says what it looks like.
    """
    shown = display_name(name)
    if name == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise InputError("-: there is no standard input to read; give a file name")
    else:
        stream = open_file(name, buffering=HEAD_BYTES)
    try:
        peek = getattr(stream, "peek", None)
        head = peek(HEAD_BYTES)[:HEAD_BYTES] if peek is not None else b""
    except OSError as exc:
        CrawlInput._close(stream)
        raise InputError(f"{shown}: cannot read ({exc.strerror or one_line(exc)})") from exc
    sniffed = sniff(head)
    if sniffed.format is None:
        CrawlInput._close(stream)
        hint = f"; {sniffed.hint}" if sniffed.hint else ""
        raise InputError(f"{shown}: {sniffed.looks_like}, not crawl output: cdc ingest reads "
                         f"{FORMATS_READ}{hint}")
    return CrawlInput(name, stream, sniffed)


def open_crawl_inputs(names: Sequence[str]) -> list[CrawlInput]:
    """Every file opened and told apart before any is read, so that a file that is not crawl
    input stops the run before it starts; on an error, those opened are closed again."""
    _allow_open_files(len(names))
    opened: list[CrawlInput] = []
    try:
        for name in names:
            opened.append(open_crawl_input(name))
    except BaseException:
        for crawl_input in opened:
            crawl_input.close()
        raise
    return opened


def _allow_open_files(count: int) -> None:
    """Raise this process's soft limit on open files to fit `count` inputs held open at once,
    as far as the hard limit allows (a crawl of thousands of shards in one run)."""
    try:
        import resource
    except ImportError:  # not on this platform: opening says so if it fails
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + 256  # DuckDB, worker pipes, and the rest of the process
    if soft != resource.RLIM_INFINITY and soft < wanted:
        limit = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(OSError, ValueError):  # else opening says so if it fails
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))


def _check_mode(kind: InputKind, mode: str | None) -> None:
    shown = display_name(kind.name)
    if kind.format == WET and mode != GIVEN_TEXT:
        raise InputError(f"{shown}: a WET file holds text Common Crawl extracted, taken as it is, "
                         f"not HTML to extract with --extract {mode}: give --extract {GIVEN_TEXT} "
                         "(without --extract, a run of WET files alone chooses it)")
    if kind.format != WET and mode not in EXTRACTION_MODES:
        raise InputError(f"{shown}: {kind.looks_like} holds HTML to extract, not WET text: give "
                         f"--extract {' or '.join(EXTRACTION_MODES)}")


def run_mode(inputs: Sequence[CrawlInput | InputKind], requested: str | None) -> str | None:
    """How the run's archive pages become text (None when there are only JSON Lines):
    `requested` (`--extract`), else `GIVEN_TEXT` for WET files and `MAIN_CONTENT` for WARC
    and ARC. Raises InputError for WET files and HTML archives in one run, or a mode that
    does not fit them.

    The one place the mode is chosen: for a plain ingest from its opened files, for a
    cluster's shard from its own file where it is read, and for the cluster's run from
    every shard's `InputKind`, before anything is written."""
    wet = [item for item in inputs if item.format == WET]
    html = [item for item in inputs if item.format in (WARC, ARC)]
    if wet and html:
        raise InputError(
            f"{display_name(wet[0].name)} is a WET file (text Common Crawl extracted) and "
            f"{display_name(html[0].name)} {html[0].looks_like} (HTML cdc extracts): a store holds text "
            "made one way, or every page would compare as changed; ingest them into two stores (--db PATH)")
    if wet:
        if requested not in (None, GIVEN_TEXT):
            _check_mode(wet[0], requested)
        return GIVEN_TEXT
    if html:
        if requested == GIVEN_TEXT:
            _check_mode(html[0], requested)
        return requested or MAIN_CONTENT
    return requested
