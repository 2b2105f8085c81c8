"""WARC input with FastWARC: WARC files written by the tests with cdc.sources.warc's writer helpers."""

from __future__ import annotations

import gzip
import io
import os

import pytest

from cdc.ingest.ingester import Ingester
from cdc.sources.extract import MAIN_CONTENT, WHOLE_PAGE
from cdc.sources.inputs import JSONL, WARC, CrawlRecords, sniff
from cdc.sources.jsonl import BadRecord, SourceRecord
from cdc.sources.warc import Revisit, WarcSummary, iter_warc, write_warc_response, write_warc_revisit
from cdc.store import Store

HTML = [("Content-Type", "text/html; charset=utf-8")]


def page(title: str, text: str) -> bytes:
    return (f"<!DOCTYPE html><html><head><title>{title}</title>"
            f'<meta name="description" content="About {title}"></head>'
            f"<body><main><h1>{title}</h1><p>{text}</p></main></body></html>").encode()


LATIN1 = ("<html><head><title>Caf\u00e9</title></head>"
          "<body><p>cr\u00e8me br\u00fbl\u00e9e \u00e0 la carte</p></body></html>")
KOI8 = ('<html><head><meta charset="koi8-r"><title>\u041f\u0440\u0438\u0432\u0435\u0442</title></head>'
        "<body><p>\u0414\u043e\u0431\u0440\u044b\u0439 \u0434\u0435\u043d\u044c</p></body></html>")


def write_sample(out: io.BytesIO, compress: bool) -> list[int]:
    """A small crawl of every kind of record; the offsets at which the records start."""
    offsets = []

    def mark():
        offsets.append(out.tell())

    mark()
    write_warc_response(out, "https://shop.example/", "2024-05-01T12:00:00Z", 200, HTML,
                        page("Home", "Welcome to the shop. " * 20), compress=compress)
    mark()
    write_warc_response(out, "https://shop.example/prices", "2024-05-01T12:00:01Z", 200, HTML,
                        page("Prices", "A pound of house blend costs $19.99. " * 20), compress=compress)
    mark()
    write_warc_response(out, "https://shop.example/about", "2024-05-01T12:00:02Z", 200, HTML,
                        page("About", "We roast coffee every week in town. " * 20), compress=compress)
    mark()
    write_warc_revisit(out, "https://shop.example/", "2024-05-08T12:00:00Z",
                       refers_to_date="2024-05-01T12:00:00Z", compress=compress)
    mark()
    write_warc_response(out, "https://shop.example/catalogue.pdf", "2024-05-01T12:00:03Z", 200,
                        [("Content-Type", "application/pdf")], b"%PDF-1.4\n" + os.urandom(2000),
                        compress=compress)
    mark()
    write_warc_response(out, "https://shop.example/gone", "2024-05-01T12:00:04Z", 404, HTML,
                        page("Not found", "No such page."), compress=compress)
    mark()
    write_warc_response(out, "https://shop.example/latin1", "2024-05-01T12:00:05Z", 200,
                        [("Content-Type", "text/html; charset=ISO-8859-1")], LATIN1.encode("iso-8859-1"),
                        compress=compress)
    mark()
    write_warc_response(out, "https://shop.example/koi8", "2024-05-01T12:00:06Z", 200,
                        [("Content-Type", "text/html")], KOI8.encode("koi8-r"), compress=compress)
    mark()
    write_warc_response(out, "https://shop.example/broken", "2024-05-01T12:00:07Z", 200, HTML,
                        b"<html><body><p>unclosed <b>bold <div><h2>Head</h3> text &amp; more <table><td>x",
                        compress=compress)
    mark()
    write_warc_response(out, "https://shop.example/garbage", "2024-05-01T12:00:08Z", 200, HTML,
                        os.urandom(5000), compress=compress)
    mark()
    write_warc_response(out, "https://shop.example/xhtml", "2024-05-01T12:00:09Z", 200,
                        [("Content-Type", "application/xhtml+xml")], page("XHTML", "Strict markup."),
                        compress=compress)
    return offsets


@pytest.fixture(params=[False, True], ids=["plain", "gzip"])
def sample(request) -> bytes:
    out = io.BytesIO()
    write_sample(out, request.param)
    data = out.getvalue()
    assert (data[:2] == b"\x1f\x8b") is request.param
    return data


def by_url(items) -> dict[str, SourceRecord]:
    return {item.record["url"]: item for item in items if isinstance(item, SourceRecord)}


def test_pages_revisits_and_counts(sample):
    summary = WarcSummary()
    items = list(iter_warc(io.BytesIO(sample), "crawl.warc", summary=summary))
    pages = by_url(items)
    assert list(pages) == [
        "https://shop.example/", "https://shop.example/prices", "https://shop.example/about",
        "https://shop.example/latin1", "https://shop.example/koi8", "https://shop.example/broken",
        "https://shop.example/garbage", "https://shop.example/xhtml"]
    revisits = [item for item in items if isinstance(item, Revisit)]
    assert revisits == [Revisit("crawl.warc", 4, "https://shop.example/", "2024-05-08T12:00:00Z")]
    assert not [item for item in items if isinstance(item, BadRecord)]
    home = pages["https://shop.example/"]
    assert (home.source, home.line) == ("crawl.warc", 1)
    assert home.record["fetched_at"] == "2024-05-01T12:00:00Z"
    assert home.record["title"] == "Home"
    assert home.record["description"] == "About Home"
    assert home.record["extraction"] == "main"
    assert summary.records == 11
    assert summary.pages == 8
    assert summary.revisits == 1
    assert summary.skipped_status == {404: 1}
    assert summary.skipped_type == {"application/pdf": 1}
    assert summary.skipped == 2
    assert summary.bad == 0 and summary.damaged_at is None


def test_charsets_broken_markup_and_garbage(sample):
    pages = by_url(iter_warc(io.BytesIO(sample), "crawl.warc"))
    latin1 = pages["https://shop.example/latin1"].record
    assert latin1["title"] == "Caf\u00e9"
    assert "cr\u00e8me br\u00fbl\u00e9e \u00e0 la carte" in latin1["sections"][0]["text"]
    assert pages["https://shop.example/koi8"].record["title"] == "\u041f\u0440\u0438\u0432\u0435\u0442"
    broken = pages["https://shop.example/broken"].record
    assert "text & more" in " ".join(s["text"] for s in broken["sections"])
    garbage = pages["https://shop.example/garbage"].record
    assert garbage["title"] == "" and garbage["sections"] == []
    assert pages["https://shop.example/xhtml"].record["title"] == "XHTML"


def test_whole_page_mode(sample):
    pages = by_url(iter_warc(io.BytesIO(sample), "crawl.warc", mode=WHOLE_PAGE))
    assert pages["https://shop.example/"].record["extraction"] == WHOLE_PAGE


def test_truncated_warc_gz_yields_records_before_the_damage():
    out = io.BytesIO()
    offsets = write_sample(out, compress=True)
    data = out.getvalue()
    cut = data[:offsets[2] + (offsets[3] - offsets[2]) // 2]  # the middle of the third record
    summary = WarcSummary()
    items = list(iter_warc(io.BytesIO(cut), "cut.warc.gz", summary=summary))
    assert [type(item) for item in items] == [SourceRecord, SourceRecord, BadRecord]
    assert [item.record["url"] for item in items[:2]] == ["https://shop.example/",
                                                          "https://shop.example/prices"]
    bad = items[2]
    assert bad.source == "cut.warc.gz" and bad.line == 3
    assert f"at byte {offsets[2]:,}" in bad.reason
    assert "truncated" in bad.reason
    assert summary.damaged_at == offsets[2]


def test_truncated_plain_warc():
    out = io.BytesIO()
    offsets = write_sample(out, compress=False)
    cut = out.getvalue()[:offsets[1] + 300]
    items = list(iter_warc(io.BytesIO(cut), "cut.warc"))
    assert [type(item) for item in items] == [SourceRecord, BadRecord]
    assert f"at byte {offsets[1]:,}" in items[1].reason


@pytest.mark.parametrize("keep", [20, 100, 400])
def test_truncated_inside_the_header_block(keep):
    out = io.BytesIO()
    offsets = write_sample(out, compress=False)
    items = list(iter_warc(io.BytesIO(out.getvalue()[:offsets[1] + keep]), "cut.warc"))
    assert [type(item) for item in items] == [SourceRecord, BadRecord]


def test_corrupt_gzip_member_stops_with_one_bad_record():
    out = io.BytesIO()
    offsets = write_sample(out, compress=True)
    data = out.getvalue()
    damaged = data[:offsets[2]] + b"\x1f\x8b\x08\x00" + b"not deflate data" * 20 + data[offsets[3]:]
    items = list(iter_warc(io.BytesIO(damaged), "bad.warc.gz"))
    assert [type(item) for item in items] == [SourceRecord, SourceRecord, BadRecord]
    assert "corrupt data" in items[2].reason


def test_empty_and_non_warc_input():
    assert list(iter_warc(io.BytesIO(b""), "empty")) == []
    items = list(iter_warc(io.BytesIO(b"this is not a WARC file\n" * 10), "text"))
    assert all(isinstance(item, BadRecord) for item in items)


def test_text_stream_is_a_callers_mistake():
    with pytest.raises(TypeError, match="binary"):
        next(iter_warc(io.StringIO("WARC/1.1"), "x"))


def test_a_warc_is_told_by_its_first_bytes(sample):
    assert sniff(sample).format == WARC
    assert sniff(sample[:512]).format == WARC  # the first bytes are enough, gzip or not
    assert sniff(b'{"url": "https://e.com/"}\n').format == JSONL
    assert sniff(gzip.compress(b'{"url": "https://e.com/"}\n')).format == JSONL
    assert sniff(b"").format == JSONL  # nothing to read
    assert sniff(gzip.compress(b"WARC/1.0\r\nWARC-Type: warcinfo\r\n")).format == WARC


def test_ingest_pages_from_warc(tmp_path, sample):
    store = Store(tmp_path / "s.duckdb")
    summary = Ingester(store).run(
        r for r in iter_warc(io.BytesIO(sample), "crawl.warc") if isinstance(r, (SourceRecord, BadRecord)))
    assert not summary.bad
    assert summary.new_pages == 8  # the garbage page has no text, which is still a page
    keys = store.page_keys()
    assert any(key.endswith("/prices") for key in keys)
    prices = next(k for k in keys if k.endswith("/prices"))
    version = store.version(prices, store.page(prices).latest_generation)
    assert version is not None


def test_ingest_twice_changes_nothing(tmp_path, sample):
    store = Store(tmp_path / "s.duckdb")

    def run():
        return Ingester(store).run(r for r in iter_warc(io.BytesIO(sample), "crawl.warc")
                                   if isinstance(r, (SourceRecord, BadRecord)))

    first = run()
    second = run()
    assert first.new_generations > 0
    assert second.new_generations == 0


@pytest.mark.parametrize("compress", [False, True])
def test_one_iterator_yields_the_pages_and_holds_the_revisits_and_the_counts(tmp_path, compress):
    """The records, the revisits and the summary come from one reader (`CrawlRecords`), as
    warcio's iterator holds what it read: no list or summary handed in from outside; and an
    ingest of it marks the revisit and counts the archive's records."""
    out = io.BytesIO()
    write_sample(out, compress)
    path = tmp_path / ("sample.warc.gz" if compress else "sample.warc")
    path.write_bytes(out.getvalue())
    records = CrawlRecords(str(path), MAIN_CONTENT)
    assert records.summary is None  # opened at the first next(), where a shard runs
    pages = list(records)
    assert [revisit.url for revisit in records.revisits] == ["https://shop.example/"]
    assert records.summary.revisits == 1
    assert records.summary.pages == len(pages)

    summary = Ingester(Store(tmp_path / "cdc.duckdb")).run(CrawlRecords(str(path), MAIN_CONTENT))
    assert summary.warc.revisits == 1 and summary.warc.pages == len(pages)
    assert summary.unchanged == 1  # the revisit: fetched again, unchanged
