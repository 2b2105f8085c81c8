"""Reading crawl output: good records kept around bad ones, gzip by content, damage reported.

Fixtures are in tests/data (rebuilt by tests/data/make_fixtures.py); the property tests
split generated JSONL into blocks of random sizes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
import threading
import tracemalloc
import zlib
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.errors import CdcError
from cdc.sources import jsonl as sources
from cdc.sources.jsonl import BadRecord, InputError, SourceRecord, iter_jsonl, iter_records, open_input
from tests.data import make_fixtures

DATA = Path(__file__).resolve().parent / "data"
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "rustbook.jsonl.gz"


def fixture(name: str) -> str:
    return str(DATA / name)


def read_all(data: bytes, source: str = "-") -> list[SourceRecord | BadRecord]:
    return list(iter_jsonl(io.BytesIO(data), source))


def summary(items: list[SourceRecord | BadRecord]) -> list[tuple[int, str]]:
    """(line, url or reason) of each item: the shape most tests compare."""
    return [(item.line, item.record["url"] if isinstance(item, SourceRecord) else item.reason)
            for item in items]


def complete_lines_before_damage(damaged_gzip: bytes) -> tuple[int, bool]:
    """Lines a reader can finish in a damaged gzip file, and whether any data is readable."""
    readable = zlib.decompressobj(wbits=31).decompress(damaged_gzip)
    return readable.count(b"\n"), bool(readable)


class ChoppyStream(io.RawIOBase):
    """A stream that returns at most the next of `sizes` bytes per read, like a pipe."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self._data = memoryview(data)
        self._sizes = sizes or [1]
        self._reads = 0

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        step = self._sizes[self._reads % len(self._sizes)]
        self._reads += 1
        piece = bytes(self._data[:min(step, size)])
        self._data = self._data[len(piece):]
        return piece


# --- fixtures: real and broken, found by glob ------------------------------------------------

PAGE_URLS = [page["url"] for page in make_fixtures.PAGES]

# Every fixture file: (records, bad records) that reading it gives.
EXPECTED_COUNTS = {
    "pages.jsonl": (4, 0),
    "pages.jsonl.gz": (4, 0),
    "pages-no-gz-suffix": (4, 0),
    "mixed.jsonl": (5, 6),
    "truncated.jsonl.gz": (complete_lines_before_damage((DATA / "truncated.jsonl.gz").read_bytes())[0], 1),
    "garbage.gz": (0, 1),
}


def test_every_fixture_is_listed_and_rebuilt_by_the_script():
    on_disk = {path.name for path in DATA.iterdir() if path.is_file() and path.suffix != ".py"}
    assert on_disk == set(EXPECTED_COUNTS) == set(make_fixtures.fixtures())


@pytest.mark.parametrize("name", sorted(EXPECTED_COUNTS))
def test_every_fixture_reads_without_raising(name):
    items = list(iter_records(fixture(name)))
    good = [item for item in items if isinstance(item, SourceRecord)]
    bad = [item for item in items if isinstance(item, BadRecord)]
    assert (len(good), len(bad)) == EXPECTED_COUNTS[name]
    assert all(item.source == fixture(name) for item in items)
    assert all("\n" not in item.reason and item.reason for item in bad)
    assert [item.line for item in items] == sorted(item.line for item in items)


def test_fixtures_match_the_script_that_makes_them():
    for name, content in make_fixtures.fixtures().items():
        on_disk = (DATA / name).read_bytes()
        if content[:2] == sources.GZIP_MAGIC and name != "garbage.gz":
            # Compressed bytes may differ between zlib builds; what they decompress to may not.
            def readable(compressed: bytes) -> bytes:
                return zlib.decompressobj(wbits=31).decompress(compressed)

            assert readable(on_disk) == readable(content), name
        else:
            assert on_disk == content, name


# --- good records ----------------------------------------------------------------------------


def test_good_file_gives_every_record_with_its_line():
    items = list(iter_records(fixture("pages.jsonl")))
    assert all(isinstance(item, SourceRecord) for item in items)
    assert [item.line for item in items] == [1, 2, 3, 4]
    assert [item.record for item in items] == make_fixtures.PAGES


@pytest.mark.parametrize("name", ["pages.jsonl.gz", "pages-no-gz-suffix"])
def test_gzip_is_detected_by_content_not_name(name):
    assert list(iter_records(fixture(name))) == [
        SourceRecord(fixture(name), item.line, item.record) for item in iter_records(fixture("pages.jsonl"))]


def test_a_plain_file_named_gz_is_read_as_plain(tmp_path):
    path = tmp_path / "plain.jsonl.gz"
    path.write_bytes((DATA / "pages.jsonl").read_bytes())
    assert [item.record["url"] for item in iter_records(str(path))] == PAGE_URLS


def test_stdin_is_any_binary_stream_and_named_dash():
    items = read_all((DATA / "pages.jsonl").read_bytes())
    assert [(item.source, item.line) for item in items] == [("-", 1), ("-", 2), ("-", 3), ("-", 4)]


class FakeStdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BufferedReader(io.BytesIO(data))


@pytest.mark.parametrize("name", ["pages.jsonl", "pages.jsonl.gz"])
def test_dash_reads_stdin_plain_or_gzip_and_leaves_it_open(monkeypatch, name):
    stdin = FakeStdin((DATA / name).read_bytes())
    monkeypatch.setattr(sys, "stdin", stdin)
    assert [(item.source, item.record["url"]) for item in iter_records("-")] == [("-", u) for u in PAGE_URLS]
    assert not stdin.buffer.closed


def test_last_line_without_newline_is_a_record():
    data = b'{"url": "a"}\n{"url": "b"}'
    assert summary(read_all(data)) == [(1, "a"), (2, "b")]


def test_blank_and_whitespace_lines_are_skipped_but_counted():
    data = b'\n{"url": "a"}\n\n  \t\n\r\n{"url": "b"}\n\n   '
    assert summary(read_all(data)) == [(2, "a"), (6, "b")]


def test_crlf_lines_are_records():
    data = b'{"url": "a"}\r\n{"url": "b"}\r\n{"url": "c"}'
    assert summary(read_all(data)) == [(1, "a"), (2, "b"), (3, "c")]


def test_a_byte_order_mark_before_a_line_is_ignored():
    data = b'\xef\xbb\xbf{"url": "a"}\n\xef\xbb\xbf{"url": "b"}\n'
    assert summary(read_all(data)) == [(1, "a"), (2, "b")]


def test_other_fields_are_not_validated():
    record = {"url": "https://example.com/", "title": 5, "description": None, "sections": "text",
              "fetched_at": 1_700_000_000.5, "extra": [1, {"a": None}]}
    [item] = read_all(json.dumps(record).encode())
    assert item == SourceRecord("-", 1, record)


@pytest.mark.parametrize("fetched_at", ["2024-03-01T12:00:00Z", "", "not a date", 1_700_000_000, 1.5, -3])
def test_fetched_at_may_be_any_string_or_number(fetched_at):
    [item] = read_all(json.dumps({"url": "u", "fetched_at": fetched_at}).encode())
    assert isinstance(item, SourceRecord)
    assert item.record["fetched_at"] == fetched_at


# --- bad records -----------------------------------------------------------------------------


def test_mixed_file_keeps_every_good_record_around_the_bad_ones():
    lines = {number: line for number, line, _ in make_fixtures.MIXED_LINES}
    utf8_error_at = lines[6].index(b"\xe9") + 1
    name = fixture("mixed.jsonl")
    assert summary(list(iter_records(name))) == [
        (1, "https://example.com/page/1"),
        (2, "not valid JSON: Expecting value at column 48"),
        (3, "https://example.com/page/3"),
        (4, 'no url: a record needs a non-empty "url" string'),
        (5, "a record is a JSON object, got list"),
        (6, f"invalid UTF-8 at byte {utf8_error_at} of the line; records must be UTF-8"),
        (7, "https://example.com/page/7"),
        (9, "https://example.com/page/9"),
        (10, 'no url: "url" must be a non-empty string, got number'),
        (11, '"fetched_at" must be a string or a number, got boolean'),
        (12, "https://example.com/page/12"),
    ]
    records = {item.line: item.record for item in iter_records(name) if isinstance(item, SourceRecord)}
    assert records == {n: make_fixtures.page(n) for n in (1, 3, 7, 9, 12)}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"[1, 2]", "a record is a JSON object, got list"),
        (b'"https://example.com/"', "a record is a JSON object, got string"),
        (b"42", "a record is a JSON object, got number"),
        (b"null", "a record is a JSON object, got null"),
        (b"true", "a record is a JSON object, got boolean"),
        (b'{"url": ""}', 'no url: "url" must be a non-empty string, got an empty string'),
        (b'{"url": null}', 'no url: "url" must be a non-empty string, got null'),
        (b'{"url": ["a"]}', 'no url: "url" must be a non-empty string, got list'),
        (b'{"URL": "a"}', 'no url: a record needs a non-empty "url" string'),
        (b'{"url": "a", "fetched_at": null}', '"fetched_at" must be a string or a number, got null'),
        (b'{"url": "a", "fetched_at": {"t": 1}}', '"fetched_at" must be a string or a number, got object'),
        (b'{"url": "a", "fetched_at": [2024]}', '"fetched_at" must be a string or a number, got list'),
        (b'{"url": "a",}', "not valid JSON: Expecting property name enclosed in double quotes at column 13"),
        (b'{"url": "a"} {"url": "b"}', "not valid JSON: Extra data at column 14"),
        (b'{"url": "caf\xc3', "invalid UTF-8 at byte 13 of the line; records must be UTF-8"),
        (b'{"url": "\xed\xa0\x80"}', "invalid UTF-8 at byte 10 of the line; records must be UTF-8"),
        (b"[" * 100_000, "not valid JSON: nested too deeply"),
    ],
)
def test_each_kind_of_bad_line_is_reported_between_good_ones(line, reason):
    data = b'{"url": "before"}\n' + line + b'\n{"url": "after"}\n'
    assert summary(read_all(data)) == [(1, "before"), (2, reason), (3, "after")]


def test_an_integer_beyond_the_digit_limit_is_a_bad_record():
    data = b'{"url": "before"}\n{"url": "a", "n": ' + b"9" * 5_000 + b'}\n{"url": "after"}'
    items = read_all(data)
    assert summary(items)[0::2] == [(1, "before"), (3, "after")]
    assert isinstance(items[1], BadRecord) and items[1].reason.startswith("not valid JSON: Exceeds the limit")


def test_a_text_stream_is_refused():
    with pytest.raises(TypeError, match="binary stream"):
        list(iter_jsonl(io.StringIO('{"url": "a"}\n')))


# --- damaged gzip ----------------------------------------------------------------------------


def test_truncated_gzip_yields_every_complete_record_then_one_bad_record():
    complete, _ = complete_lines_before_damage((DATA / "truncated.jsonl.gz").read_bytes())
    assert complete >= 5
    items = list(iter_records(fixture("truncated.jsonl.gz")))
    assert summary(items[:-1]) == [(n, f"https://example.com/page/{n}") for n in range(1, complete + 1)]
    assert items[-1] == BadRecord(
        fixture("truncated.jsonl.gz"), complete + 1,
        f"truncated gzip stream: the file ends mid-way; records before line {complete + 1} were read")


def test_garbage_after_the_gzip_magic_is_one_bad_record_for_the_whole_file():
    assert list(iter_records(fixture("garbage.gz"))) == [
        BadRecord(fixture("garbage.gz"), 0,
                  "corrupt gzip data (Unknown compression method); no data could be read")]


GOOD_GZIP = gzip.compress((DATA / "pages.jsonl").read_bytes(), mtime=0)


@pytest.mark.parametrize(
    ("damaged", "reason_starts"),
    [
        # a second member whose deflate data is an invalid block type
        (GOOD_GZIP + GOOD_GZIP[:10] + b"\xff" * 40, "corrupt gzip data (Error -3 while decompressing data"),
        # trailing bytes that are not another gzip member
        (GOOD_GZIP + b"trailing junk", "corrupt gzip data (Not a gzipped file"),
        # a wrong CRC in the trailer
        (GOOD_GZIP[:-8] + bytes(4) + GOOD_GZIP[-4:], "corrupt gzip data (CRC check failed"),
        # the trailer cut off: all data is there, the end-of-stream marker is not
        (GOOD_GZIP[:-3], "truncated gzip stream: the file ends mid-way; records before line 5 were read"),
    ],
)
def test_damaged_gzip_keeps_every_record_before_the_damage(tmp_path, damaged, reason_starts):
    path = tmp_path / "damaged.jsonl.gz"
    path.write_bytes(damaged)
    items = list(iter_records(str(path)))
    assert summary(items[:-1]) == list(enumerate(PAGE_URLS, start=1))
    assert items[-1].line == 5
    assert isinstance(items[-1], BadRecord) and items[-1].reason.startswith(reason_starts)


def test_concatenated_gzip_members_are_one_stream(tmp_path):
    path = tmp_path / "two.jsonl.gz"
    path.write_bytes(GOOD_GZIP + GOOD_GZIP)
    assert summary(list(iter_records(str(path)))) == list(enumerate(PAGE_URLS * 2, start=1))


def test_a_partial_last_line_of_a_truncated_stream_is_damage_not_a_record():
    data = b'{"url": "a"}\n{"url": "b"}'  # the second line would be a record in a plain file
    compressed = gzip.compress(data, mtime=0)
    items = list(iter_jsonl(gzip.GzipFile(fileobj=io.BytesIO(compressed[:-4]))))
    assert summary(items) == [
        (1, "a"), (2, "truncated gzip stream: the file ends mid-way; records before line 2 were read")]


# --- opening files ---------------------------------------------------------------------------


def test_missing_file_is_an_input_error_with_one_line():
    with pytest.raises(InputError) as raised:
        open_input(fixture("no-such-file.jsonl"))
    assert str(raised.value) == f"{fixture('no-such-file.jsonl')}: no such file"
    assert isinstance(raised.value, CdcError)


def test_directory_is_an_input_error_with_one_line():
    with pytest.raises(InputError, match=r"is a directory; give a file$"):
        open_input(str(DATA))


def test_permission_problem_is_an_input_error_with_one_line(monkeypatch):
    # Root may read any file, so the refusal is simulated where the module opens files.
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(sources, "open", refuse, raising=False)
    with pytest.raises(InputError, match=r"^secret\.jsonl: permission denied; check the file's permissions$"):
        open_input("secret.jsonl")


def test_a_name_with_a_newline_stays_on_one_line(tmp_path):
    with pytest.raises(InputError) as raised:
        open_input(str(tmp_path / "two\nlines"))
    assert "\n" not in str(raised.value)


def test_iter_records_raises_input_error_at_the_first_next():
    records = iter_records(fixture("no-such-file.jsonl"))
    with pytest.raises(InputError):
        next(records)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to count open files")
@pytest.mark.parametrize("name", ["pages.jsonl", "pages.jsonl.gz", "truncated.jsonl.gz"])
def test_iter_records_closes_the_file_when_done_or_abandoned(name):
    before = open_descriptors()
    list(iter_records(fixture(name)))
    assert open_descriptors() == before
    records = iter_records(fixture(name))
    next(records)
    assert open_descriptors() == before + 1
    records.close()
    assert open_descriptors() == before


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to count open files")
def test_closing_an_opened_gzip_input_closes_its_file():
    before = open_descriptors()
    stream = open_input(fixture("pages.jsonl.gz"))
    assert stream.read(1) == b"{"
    stream.close()
    assert open_descriptors() == before


# --- long lines and memory -------------------------------------------------------------------


@pytest.mark.parametrize("read_size", [1, 7, 64, 1 << 20])
def test_a_line_over_the_limit_is_skipped_to_the_next_newline(monkeypatch, read_size):
    monkeypatch.setattr(sources, "MAX_LINE_BYTES", 100)
    monkeypatch.setattr(sources, "READ_SIZE", read_size)
    start, end = b'{"url": "c", "pad": "', b'"}'
    exactly = start + b"x" * (100 - len(start) - len(end)) + end  # a record of exactly the limit
    too_long = "line longer than 100 bytes (MAX_LINE_BYTES); skipped to the next line"
    data = b"\n".join([b'{"url": "a"}', b'{"url": "b", "pad": "' + b"x" * 500 + b'"}', exactly,
                       b'{"url": "d"}', b"y" * 101])
    assert summary(read_all(data)) == [(1, "a"), (2, too_long), (3, "c"), (4, "d"), (5, too_long)]


class EndlessLine(io.RawIOBase):
    """`size` bytes of one line, generated as read, then a newline and a record."""

    def __init__(self, size: int) -> None:
        self._left = size
        self._end = io.BytesIO(b'\n{"url": "after"}\n')

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return self._end.read(size)
        piece = min(size, self._left)
        self._left -= piece
        return b"x" * piece


def test_a_huge_line_is_never_held_whole(monkeypatch):
    monkeypatch.setattr(sources, "MAX_LINE_BYTES", 1 << 20)
    monkeypatch.setattr(sources, "READ_SIZE", 64 << 10)
    tracemalloc.start()
    try:
        items = list(iter_jsonl(EndlessLine(40 << 20)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [type(item) for item in items] == [BadRecord, SourceRecord]
    assert (items[0].line, items[1].line) == (1, 2)
    assert peak < 3 << 20  # the limit, a block and its copies; not the 40 MB line


def test_memory_stays_flat_over_many_records(monkeypatch):
    monkeypatch.setattr(sources, "READ_SIZE", 256 << 10)
    record = json.dumps(make_fixtures.page(1, words=200)).encode() + b"\n"
    data = record * (20_000_000 // len(record))
    stream = io.BytesIO(data)
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_jsonl(stream))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == data.count(b"\n")
    assert peak < 2 << 20  # a block, its lines and one record; not the 20 MB read


# --- properties ------------------------------------------------------------------------------

JSON_SCALARS = (st.none() | st.booleans() | st.integers()
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ABSENT = object()  # a record without fetched_at


def record_of(extra: dict, url: str, fetched_at: object) -> dict:
    record = {**extra, "url": url}
    if fetched_at is not ABSENT:
        record["fetched_at"] = fetched_at
    return record


RECORDS = st.builds(
    record_of,
    extra=st.dictionaries(st.text(max_size=8).filter(lambda key: key not in ("url", "fetched_at")),
                          JSON_VALUES, max_size=5),
    url=st.text(min_size=1, max_size=40),
    fetched_at=st.just(ABSENT) | st.text(max_size=25) | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False),
)
BLANKS = st.lists(st.sampled_from([b"", b" ", b"\t ", b"\r"]), max_size=2)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(st.tuples(BLANKS, RECORDS, st.sampled_from([b"\n", b"\r\n"]), st.booleans()),
                     max_size=12),
    final_newline=st.booleans(),
    read_size=st.integers(1, 80),
    sizes=st.lists(st.integers(1, 100), max_size=8),
)
def test_any_jsonl_round_trips_with_its_line_numbers_whatever_the_blocks(records, final_newline,
                                                                       read_size, sizes):
    data = bytearray()
    expected = []
    line = 0
    for blanks, record, ending, ascii_only in records:
        for blank in blanks:
            data += blank + b"\n"
            line += 1
        data += json.dumps(record, ensure_ascii=ascii_only).encode() + ending
        line += 1
        expected.append(SourceRecord("-", line, record))
    if records and not final_newline:
        data = data.removesuffix(b"\r\n").removesuffix(b"\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources, "READ_SIZE", read_size)
        assert list(iter_jsonl(ChoppyStream(bytes(data), sizes))) == expected


@settings(max_examples=150, deadline=None)
@given(
    pads=st.lists(st.integers(0, 150), max_size=10),
    limit=st.integers(30, 120),
    read_size=st.integers(1, 200),
    final_newline=st.booleans(),
)
def test_lines_over_the_limit_are_bad_and_the_rest_kept(pads, limit, read_size, final_newline):
    lines = [json.dumps({"url": f"u{number}", "pad": "x" * pad}).encode() for number, pad in enumerate(pads)]
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")
    expected = [(number, f"u{number - 1}" if len(line) <= limit else
                 f"line longer than {limit:,} bytes (MAX_LINE_BYTES); skipped to the next line")
                for number, line in enumerate(lines, start=1)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources, "READ_SIZE", read_size)
        patch.setattr(sources, "MAX_LINE_BYTES", limit)
        assert summary(read_all(data)) == expected


@settings(max_examples=150, deadline=None)
@given(records=st.lists(RECORDS, min_size=1, max_size=12), final_newline=st.booleans(),
       cut_fraction=st.floats(0, 1, exclude_max=True), read_size=st.integers(1, 300))
def test_a_gzip_stream_cut_anywhere_gives_the_complete_lines_then_one_bad_record(
        records, final_newline, cut_fraction, read_size):
    data = b"\n".join(json.dumps(record).encode() for record in records) + (b"\n" if final_newline else b"")
    compressed = gzip.compress(data, mtime=0)
    cut = compressed[:int(len(compressed) * cut_fraction)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources, "READ_SIZE", read_size)
        items = list(iter_jsonl(gzip.GzipFile(fileobj=io.BytesIO(cut))))
    if not cut:
        assert items == []
        return
    complete, readable = complete_lines_before_damage(cut)
    stopped_at = complete + 1 if readable else 0
    assert items[:-1] == [SourceRecord("-", n, rec) for n, rec in enumerate(records[:complete], start=1)]
    assert isinstance(items[-1], BadRecord) and items[-1].line == stopped_at
    if len(cut) < len(sources.GZIP_MAGIC):  # not even the magic number: gzip calls it no gzip
        assert items[-1].reason.startswith("corrupt gzip data")
    else:
        assert items[-1].reason.startswith("truncated gzip stream: the file ends mid-way; ")


# --- the real corpus -------------------------------------------------------------------------


def _refuse(line: bytes) -> object:
    raise orjson.JSONDecodeError("refused", "", 0)


def read_by_json(data: bytes) -> SourceRecord | BadRecord:
    """`_parse_line` as it read a line before orjson: with orjson refusing every line, json
    reads each, as the code before did."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources.orjson, "loads", _refuse)
        return sources._parse_line(data, "f.jsonl", 7)


# What a fast parser may read otherwise than json: integers past 64 bits, at any depth;
# floats past a double; any code point (lone surrogates too); a byte-order mark (and, below,
# deep nesting and numbers of many digits).
EDGE_NUMBERS = (st.integers(min_value=2**62, max_value=2**80)
                | st.integers(min_value=-2**80, max_value=-2**62) | st.floats())
EDGE_VALUES = st.recursive(
    EDGE_NUMBERS | JSON_SCALARS | st.text(st.characters(codec=None, categories=None), max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["text", "heading", "x"]),
                                                                inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(fields=st.dictionaries(st.sampled_from(["url", "fetched_at", "title", "description", "sections", "n"]),
                              EDGE_VALUES, max_size=6),
       ensure_ascii=st.booleans(), byte_order_mark=st.booleans())
def test_a_line_is_read_as_json_reads_it_whatever_it_holds(fields, ensure_ascii, byte_order_mark):
    line = json.dumps({"url": "https://example.com/", **fields}, ensure_ascii=ensure_ascii)
    data = (b"\xef\xbb\xbf" if byte_order_mark else b"") + line.encode("utf-8", "surrogatepass")
    # repr: 1 == 1.0, and a rounded integer must show as a difference
    assert repr(sources._parse_line(data, "f.jsonl", 7)) == repr(read_by_json(data))


@pytest.mark.parametrize(
    "value",
    [
        b"[" * 1010 + b"]" * 1010,  # deeper than json reads, not than orjson does
        # Halfway between two doubles, past 768 significant digits: orjson rounds up, json to even.
        b"1.00000000000000011102230246251565404236316680908203125" + b"0" * 715,
        b"-0.500000000000000055511151231257827021181583404541015625" + b"0" * 720,
        b"123456789012345678901234567890",  # past 64 bits: orjson makes a float of it
        b"-9223372036854775809",
    ],
)
def test_a_line_orjson_reads_otherwise_is_read_as_json_reads_it(value):
    data = b'{"url": "https://example.com/", "x": ' + value + b"}"
    assert repr(sources._parse_line(data, "f.jsonl", 7)) == repr(read_by_json(data))


@pytest.mark.skipif(not CORPUS.exists(), reason=f"the revision corpus is not at {CORPUS}")
def test_the_real_corpus_reads_exactly_as_json_loads_reads_it():
    items = list(iter_records(str(CORPUS)))
    with gzip.open(CORPUS, "rb") as lines:
        expected = [SourceRecord(str(CORPUS), number, json.loads(line))
                    for number, line in enumerate(lines, start=1)]
    assert len(items) == 3_328
    assert items == expected


def test_a_gzip_file_left_part_read_leaves_no_reading_thread():
    records = iter_records(fixture("pages.jsonl.gz"))
    assert isinstance(next(records), SourceRecord)
    records.close()
    assert not [thread for thread in threading.enumerate() if thread.name == "cdc-read-ahead"]
