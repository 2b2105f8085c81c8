"""Crawl output as records: JSON Lines, plain or gzip, from files or stdin, streamed.

`iter_jsonl` reads a binary stream in blocks and yields, line by line, a `SourceRecord`
or a `BadRecord`, in memory bounded by the block size and `MAX_LINE_BYTES`. A bad line is
reported with its position and reading goes on; a damaged gzip stream yields every complete
line before the damage, then one `BadRecord` saying where reading stopped. Only a caller's
mistake raises: a file that cannot be opened (`InputError`), or a text stream.

A record is a JSON object with a non-empty string `url`, and `fetched_at`, when present, a
string or a number. No other field is checked: normalisation tolerates odd fields.
"""

from __future__ import annotations

import gzip
import json
import queue
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import orjson

from cdc.core.excerpts import one_line
from cdc.errors import InputError

READ_SIZE = 1 << 20
"""Bytes asked of the stream per read."""

MAX_LINE_BYTES = 64 << 20
"""A longer line is reported as bad and skipped, never held whole."""

GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A line that is not a usable record, or the point where a damaged file stopped."""

    source: str
    """File name, or "-" for stdin."""
    line: int
    """1-based line number; 0 when the problem is the file as a whole."""
    reason: str
    """One line: what is wrong, and a hint where useful."""


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One parsed record and where it came from."""

    source: str
    line: int
    record: dict


_JSON_TYPE_NAMES = {dict: "object", list: "list", str: "string", int: "number", float: "number",
                    bool: "boolean", type(None): "null"}


def _json_type(value: object) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


# Where orjson's reading may differ from json's, json reads the line again (`_parse_line`):
# - an integer past 64 bits: orjson makes it the nearest float, json keeps the integer;
_ROUNDED_INTEGER = float(1 << 63)
# - a number of more than 768 significant digits: orjson's float parser rounds one that lies
#   halfway between two doubles up, json to even. A line with fewer digits in all holds none;
_LONG_NUMBER_DIGITS = 700
_DIGITS = b"0123456789"
# - nesting: json refuses a line nested past what Python's stack has left (about 990 levels
#   from a shallow stack, fewer from a deeper one), orjson only past 1,024. A record nests a
#   few levels; json decides from this depth on.
_DEEP = 100


def _read_otherwise(value: dict, line: bytes | bytearray) -> bool:
    """Whether json may read `line` otherwise than orjson read it as `value` (see above): it
    holds a float that may be a rounded integer, or floats beside a long number's digits, or
    nests deep (4 µs for a record of the corpus, a tenth of what orjson saves)."""
    floats = False
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth >= _DEEP:
            return True
        for child in item.values() if type(item) is dict else item:  # type: ignore[union-attr]
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is float:
                if abs(child) >= _ROUNDED_INTEGER:
                    return True
                floats = True
    return floats and len(line) - len(line.translate(None, _DIGITS)) >= _LONG_NUMBER_DIGITS


def _parse_line(line: bytes | bytearray, source: str = "-", number: int = 1) -> SourceRecord | BadRecord:
    """One non-blank line (without its newline) as a record, or the reason it is not one.

    orjson parses it, at twice json's speed: the parse was the largest part of reading a
    JSONL line in the process that feeds the workers. json reads, as before, a line orjson
    refuses (not JSON, not UTF-8, a byte-order mark, NaN, a lone surrogate) and one it may
    read otherwise (`_read_otherwise`): so every line gives json's record, and a bad one is
    reported in json's words (the tests read lines with orjson refusing each: json's reading)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        value = None
    if type(value) is dict and not _read_otherwise(value, line):
        return _record(value, source, number)
    # json, here and not in a function of its own: the depth of nesting json accepts is what
    # is left of Python's stack, which a call more would shorten by one.
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadRecord(source, number, f"invalid UTF-8 at byte {exc.start + 1} of the line; "
                                         "records must be UTF-8")
    if text[:1] == "\ufeff":  # a byte-order mark: Windows tools write one, `cat` carries it mid-file
        text = text[1:]
    try:
        value = json.loads(text)
    except RecursionError:
        return BadRecord(source, number, "not valid JSON: nested too deeply")
    except json.JSONDecodeError as exc:
        return BadRecord(source, number, f"not valid JSON: {exc.msg} at column {exc.colno}")
    except ValueError as exc:  # an integer beyond Python's digit limit
        return BadRecord(source, number, f"not valid JSON: {one_line(exc)}")
    if type(value) is not dict:
        return BadRecord(source, number, f"a record is a JSON object, got {_json_type(value)}")
    return _record(value, source, number)


def _record(value: dict, source: str, number: int) -> SourceRecord | BadRecord:
    """A parsed JSON object as a record, or why it is not one."""
    url = value.get("url")
    if not isinstance(url, str) or not url:
        if "url" not in value:
            return BadRecord(source, number, 'no url: a record needs a non-empty "url" string')
        got = "an empty string" if url == "" else _json_type(url)
        return BadRecord(source, number, f'no url: "url" must be a non-empty string, got {got}')
    if "fetched_at" in value:
        fetched_at = value["fetched_at"]
        if type(fetched_at) not in (str, int, float):
            return BadRecord(source, number, '"fetched_at" must be a string or a number, '
                                             f"got {_json_type(fetched_at)}")
    return SourceRecord(source, number, value)


def _damage(source: str, number: int, exc: BaseException) -> BadRecord:
    """The one BadRecord for a stream that failed at line `number` (0: before any data)."""
    where = f"records before line {number} were read" if number else "no data could be read"
    if isinstance(exc, EOFError):
        return BadRecord(source, number, f"truncated gzip stream: the file ends mid-way; {where}")
    if isinstance(exc, (zlib.error, gzip.BadGzipFile)):
        return BadRecord(source, number, f"corrupt gzip data ({one_line(exc)}); {where}")
    detail = getattr(exc, "strerror", None) or one_line(exc)
    return BadRecord(source, number, f"read failed ({detail}); {where}")


def _too_long(source: str, number: int) -> BadRecord:
    return BadRecord(source, number, f"line longer than {MAX_LINE_BYTES:,} bytes (MAX_LINE_BYTES); "
                                     "skipped to the next line")


@dataclass(frozen=True, slots=True)
class RawLine:
    """One line not yet parsed: parsing can then happen in another process."""

    source: str
    line: int
    data: bytes

    def parse(self) -> SourceRecord | BadRecord:
        return _parse_line(self.data, self.source, self.line)


def _raw_line(line: bytes | bytearray, source: str, number: int) -> RawLine:
    return RawLine(source, number, bytes(line))


def iter_jsonl(stream: BinaryIO, source: str = "-", parse: Callable = _parse_line,
               ) -> Iterator[SourceRecord | BadRecord]:
    """Each line of a binary JSONL stream as a SourceRecord or a BadRecord; blank lines skipped.

    `parse` turns a line into what is yielded; `iter_lines` passes one that defers parsing.

    Lines end at b"\\n" (a "\\r" before it is JSON whitespace). The last line needs no
    newline, unless the stream fails: then the unfinished line is part of the damage.
    """
    # read1 returns what one underlying read produced: GzipFile.read would discard the
    # data it decompressed in a call that then hits the end of a truncated stream.
    read = getattr(stream, "read1", None) or stream.read
    ahead = _ReadAhead(read) if isinstance(stream, gzip.GzipFile) else None
    try:
        yield from _split_lines(ahead.read if ahead else read, source, parse)
    finally:
        if ahead:
            ahead.stop()


class _ReadAhead:
    """Blocks read by a thread, one or two ahead of the reader: zlib releases the GIL while it
    inflates, so a gzip file decompresses while the lines before are being parsed. An error
    is raised where reading met it, after every block before it."""

    def __init__(self, read: Callable[[int], bytes], depth: int = 2):
        self._blocks: queue.Queue = queue.Queue(depth)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._fill, args=(read,), name="cdc-read-ahead", daemon=True)
        self._thread.start()

    def _fill(self, read: Callable[[int], bytes]) -> None:
        while not self._stopped.is_set():
            try:
                item: tuple = (read(READ_SIZE), None)
            except BaseException as exc:  # handed to the reader, which decides what it means
                item = (b"", exc)
            while not self._stopped.is_set():
                try:
                    self._blocks.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if not item[0]:
                return

    def read(self, _size: int) -> bytes:
        block, error = self._blocks.get()
        if error is not None:
            raise error
        return block

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


def _split_lines(read: Callable[[int], bytes], source: str, parse: Callable) -> Iterator:
    number = 0                 # lines ended so far
    pending = bytearray()      # the start of a line that has not ended yet
    skipping = False           # inside a line over MAX_LINE_BYTES: drop bytes up to its newline
    started = False
    while True:
        try:
            block = read(READ_SIZE)
        except (EOFError, OSError, zlib.error) as exc:
            yield _damage(source, number + 1 if started else 0, exc)
            return
        if not block:
            break
        if not started:
            if isinstance(block, str):
                raise TypeError("iter_jsonl needs a binary stream: open the file in 'rb' mode")
            started = True
        lines = block.split(b"\n")
        tail = lines.pop()
        if lines:
            first = lines[0]
            if skipping:
                skipping = False
                number += 1
                del lines[0]
            elif pending:
                if len(pending) + len(first) > MAX_LINE_BYTES:
                    number += 1
                    yield _too_long(source, number)
                    del lines[0]
                else:
                    pending += first
                    lines[0] = pending
                pending = bytearray()
            for line in lines:
                number += 1
                if not line or line.isspace():
                    continue
                if len(line) > MAX_LINE_BYTES:  # only when READ_SIZE is above the limit
                    yield _too_long(source, number)
                    continue
                yield parse(line, source, number)
        if tail and not skipping:
            if len(pending) + len(tail) > MAX_LINE_BYTES:
                yield _too_long(source, number + 1)
                pending = bytearray()
                skipping = True
            else:
                pending += tail
    if pending and not pending.isspace():
        yield parse(pending, source, number + 1)


def display_name(name: str) -> str:
    """A file name for a one-line message."""
    return name if name.isprintable() else repr(name)


class _GzipInput(gzip.GzipFile):
    """A GzipFile that also closes the file it decompresses (GzipFile leaves a given file open)."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def _starts_with_gzip_magic(stream: BinaryIO) -> bool:
    peek = getattr(stream, "peek", None)
    return peek is not None and peek(2)[:2] == GZIP_MAGIC


def open_file(name: str, buffering: int = -1) -> BinaryIO:
    """The file `name` opened to read bytes, as it is (no decompression).

    Raises InputError, with a one-line message, when the file cannot be opened.
    """
    shown = display_name(name)
    try:
        return open(name, "rb", buffering=buffering)  # the caller closes it
    except FileNotFoundError as exc:
        raise InputError(f"{shown}: no such file") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{shown}: is a directory; give a file") from exc
    except PermissionError as exc:
        raise InputError(f"{shown}: permission denied; check the file's permissions") from exc
    except OSError as exc:
        raise InputError(f"{shown}: cannot open ({exc.strerror or one_line(exc)})") from exc


def open_input(name: str) -> BinaryIO:
    """A binary stream of the file `name` ("-": stdin), decompressed when its content is gzip.

    Raises InputError, with a one-line message, when the file cannot be opened. (Crawl input
    files go through `cdc.sources.inputs.open_crawl_input`, which also tells their format.)
    """
    if name == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None:
            raise InputError("-: there is no standard input to read; give a file name")
        if _starts_with_gzip_magic(stdin):
            return gzip.GzipFile(fileobj=stdin, mode="rb")  # closing it leaves stdin open
        return stdin
    raw = open_file(name)
    try:
        is_gzip = _starts_with_gzip_magic(raw)
    except OSError as exc:
        raw.close()
        raise InputError(f"{display_name(name)}: cannot read ({exc.strerror or one_line(exc)})") from exc
    return _GzipInput(raw) if is_gzip else raw


def iter_records(name: str) -> Iterator[SourceRecord | BadRecord]:
    """The records of the file `name` ("-": stdin), closing the file at the end (not stdin).

    The file is opened at the first `next()`, which is where an InputError is raised; call
    `open_input` first to fail before any output.
    """
    stream = open_input(name)
    try:
        yield from iter_jsonl(stream, name)
    finally:
        if stream is not getattr(sys.stdin, "buffer", None):
            stream.close()


def raw_lines(stream: BinaryIO, source: str = "-") -> Iterator[RawLine | BadRecord]:
    """`iter_jsonl` of a stream with parsing left to the consumer (`RawLine.parse`)."""
    return iter_jsonl(stream, source, parse=_raw_line)


def iter_lines(name: str) -> Iterator[RawLine | BadRecord]:
    """`iter_records` with parsing left to the consumer (`RawLine.parse`), for parallel ingest."""
    stream = open_input(name)
    try:
        yield from raw_lines(stream, name)
    finally:
        if stream is not getattr(sys.stdin, "buffer", None):
            stream.close()
