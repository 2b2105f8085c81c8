"""The archive formats crawls really have, through `cdc ingest` as a user runs it: ARC and
ARC.gz (written byte by byte per the ARC v1 spec), WARC with chunked transfer encoding,
WARC `resource` records, Common Crawl's WET files; and files that are not crawl output,
each refused with one line that says what it looks like. Every file is made by the test."""

from __future__ import annotations

import gzip
import io
import tarfile
import zlib

import pytest

from cdc.cli.main import EXIT_FAILURE, EXIT_OK, EXIT_SKIPPED, main
from cdc.ingest.observations import observe_shard
from cdc.sources.inputs import ARC, JSONL, WARC, WET, sniff
from cdc.sources.warc import decode_payload
from cdc.store import Store
from tests import archives

LAMP = ("<html><head><title>Lamp</title><meta name=description content='Our lamps'></head><body><main>"
        "<h1>Lamp</h1><p>The lamp costs {price} today.</p><p>" + "Warm light for long evenings. " * 40
        + "</p></main></body></html>")


def lamp(price: str) -> bytes:
    return LAMP.format(price=price).encode()


def page_html(title: str, text: str) -> bytes:
    return (f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{text}</p>"
            "</main></body></html>").encode()


def ingest(capsys, db, *args) -> tuple[int, str, str]:
    code = main(["--db", str(db), "ingest", "--quiet", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def text_of(db, url: str) -> str:
    """The text of the page's first generation."""
    store = Store(str(db))
    return store.version(url, store.generations(url)[0].generation).text.decode()


# --- ARC -----------------------------------------------------------------------------------

ARC_PAGES = [
    ("http://arc.example:80/", "19961104142103",
     archives.http_response(page_html("Home", "Welcome to the archive."))),
    ("http://arc.example/lamp", "19961104142104", archives.http_response(lamp("$19.99"))),
    ("http://arc.example/logo.gif", "19961104142105",
     archives.http_response(b"GIF89a" + bytes(40), content_type="image/gif")),
    ("http://arc.example/gone", "19961104142106",
     archives.http_response(page_html("Gone", "No such page."), status="404 Not Found")),
]


@pytest.mark.parametrize("compress", [False, True], ids=["arc", "arc.gz"])
def test_arc_pages_are_ingested(tmp_path, capsys, compress):
    data, _ = archives.arc_file(ARC_PAGES, compress=compress)
    path = tmp_path / ("crawl.arc.gz" if compress else "crawl.arc")
    path.write_bytes(data)
    db = tmp_path / "s.duckdb"
    code, out, err = ingest(capsys, db, path)
    assert (code, err) == (EXIT_OK, "")
    assert "ARC records 5: 2 HTML pages, 0 revisits; not pages: 1 with status 404, 1 of type image/gif" in out
    store = Store(str(db))
    assert sorted(store.page_keys()) == ["http://arc.example/", "http://arc.example/lamp"]
    lamp_page = store.page("http://arc.example/lamp")
    assert f"{lamp_page.last_fetched:%Y-%m-%d %H:%M:%S}" == "1996-11-04 14:21:04"  # the ARC's archive date
    assert "The lamp costs $19.99 today." in text_of(db, "http://arc.example/lamp")
    assert store.meta()["extraction"] == "main"


def test_two_arc_crawls_compare_to_the_word(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    for day, price in (("04", "$19.99"), ("11", "$24.99")):
        data, _ = archives.arc_file([("http://arc.example/lamp", f"199611{day}120000",
                                      archives.http_response(lamp(price)))], compress=True)
        (tmp_path / f"{day}.arc.gz").write_bytes(data)
    code, _, _ = ingest(capsys, db, tmp_path / "04.arc.gz", tmp_path / "11.arc.gz")
    assert code == EXIT_OK
    assert Store(str(db)).history("http://arc.example/lamp")[-1].excerpt == "$19.99 → $24.99"


@pytest.mark.parametrize("compress", [True, False], ids=["arc.gz", "arc"])
def test_a_truncated_arc_keeps_every_record_before_the_damage(tmp_path, capsys, compress):
    data, offsets = archives.arc_file(ARC_PAGES, compress=compress)
    path = tmp_path / "cut.arc.gz"
    path.write_bytes(data[:offsets[2] + 40])  # cut 40 bytes into the lamp's record, the third
    db = tmp_path / "s.duckdb"
    code, out, err = ingest(capsys, db, path)
    assert (code, err) == (EXIT_SKIPPED, "")
    assert (f"skipped {path}:3: truncated: the file ends inside the record at byte {offsets[2]:,} "
            "(record 3); every record before it was read, nothing after it") in out
    assert out.count("skipped ") == 1
    assert Store(str(db)).page_keys() == ["http://arc.example/"]


def test_an_arc_shard_reads_the_same_on_a_cluster_worker(tmp_path):
    data, _ = archives.arc_file(ARC_PAGES, compress=True)
    path = tmp_path / "crawl.arc.gz"
    path.write_bytes(data)
    report, observed = observe_shard(0, str(path), buckets=4)
    assert report.failure is None and report.records == 2 and report.warc.pages == 2
    assert sorted(observed.table.column("natural_key").to_pylist()) == ["http://arc.example/",
                                                                       "http://arc.example/lamp"]


# --- WARC: chunked payloads and resource records -------------------------------------------

def http_record(url: str, date: str, http: bytes) -> bytes:
    return archives.warc_record("response", url, date, "application/http; msgtype=response", http)


def test_chunked_responses_are_decoded(tmp_path, capsys):
    body = lamp("$19.99")
    chunked = [("Transfer-Encoding", "chunked")]
    records = [
        archives.warcinfo("crawl.warc"),
        http_record("https://shop.example/plain", "2024-05-01T12:00:00Z", archives.http_response(body)),
        http_record("https://shop.example/chunked", "2024-05-01T12:00:01Z",
                    archives.http_response(archives.chunked(body), headers=chunked, version="HTTP/1.1")),
        http_record("https://shop.example/chunked-gzip", "2024-05-01T12:00:02Z",
                    archives.http_response(archives.chunked(gzip.compress(body, mtime=0), 64),
                                           headers=[*chunked, ("Content-Encoding", "gzip")],
                                           version="HTTP/1.1")),
        # A crawler that stored the body decoded and kept the header: taken as it is.
        http_record("https://shop.example/dechunked", "2024-05-01T12:00:03Z",
                    archives.http_response(body, headers=chunked, version="HTTP/1.1")),
    ]
    path = tmp_path / "crawl.warc.gz"
    path.write_bytes(archives.gzip_members(records))
    db = tmp_path / "s.duckdb"
    code, out, err = ingest(capsys, db, path)
    assert (code, err) == (EXIT_OK, "")
    assert "WARC records 5: 4 HTML pages, 0 revisits" in out and "  skipped " not in out
    plain = text_of(db, "https://shop.example/plain")
    assert "The lamp costs $19.99 today." in plain
    for name in ("chunked", "chunked-gzip", "dechunked"):
        assert text_of(db, f"https://shop.example/{name}") == plain, name


def test_payload_decoding():
    body = b"<p>hello</p>" * 50
    assert decode_payload(archives.chunked(body, 7), "chunked", None) == body
    assert decode_payload(archives.chunked(zlib.compress(body)), "Chunked", "deflate") == body
    assert decode_payload(gzip.compress(body), None, "x-gzip") == body
    assert decode_payload(body, None, "identity") == body
    with pytest.raises(ValueError, match="Content-Encoding gzip data that does not decode"):
        decode_payload(b"not gzip", None, "gzip")
    with pytest.raises(ValueError, match="not one cdc decodes"):
        decode_payload(body, None, "compress")


def test_resource_records_of_html_are_pages(tmp_path, capsys):
    records = [
        archives.warcinfo("browser.warc"),
        archives.warc_record("resource", "https://app.example/dashboard", "2024-05-01T12:00:00Z",
                             "text/html; charset=utf-8", lamp("$19.99")),
        archives.warc_record("resource", "https://app.example/shot.png", "2024-05-01T12:00:01Z",
                             "image/png", b"\x89PNG\r\n\x1a\n" + bytes(50)),
        archives.warc_record("resource", "https://app.example/latin", "2024-05-01T12:00:02Z",
                             "text/html; charset=iso-8859-1", page_html("Caf\u00e9", "cr\u00e8me").decode()
                             .encode("iso-8859-1")),
    ]
    path = tmp_path / "browser.warc"
    path.write_bytes(b"".join(records))
    db = tmp_path / "s.duckdb"
    code, out, _ = ingest(capsys, db, path)
    assert code == EXIT_OK
    assert "WARC records 4: 2 HTML pages, 0 revisits; not pages: 1 of type image/png" in out
    assert "The lamp costs $19.99 today." in text_of(db, "https://app.example/dashboard")
    assert "Caf\u00e9" in text_of(db, "https://app.example/latin")  # the record's charset


# --- WET ---------------------------------------------------------------------------------

WET_PAGES = [
    ("https://cc.example/lamp", "2024-03-01T10:00:00Z",
     "Lamp\nThe lamp costs $19.99 today.\n" + "Warm light for long evenings. " * 20 + "\nContact us"),
    ("https://cc.example/about", "2024-03-01T10:00:01Z", "About\nWe make lamps.\n\n   \nSince 1996."),
]


def write_wet(tmp_path, name="crawl.warc.wet.gz", pages=WET_PAGES):
    path = tmp_path / name
    path.write_bytes(archives.wet_file(pages))
    return path


def test_wet_text_is_taken_as_it_is(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    code, out, err = ingest(capsys, db, write_wet(tmp_path))
    assert (code, err) == (EXIT_OK, "")
    assert "WET records 3: 2 text pages (WET conversion records), 0 revisits" in out
    store = Store(str(db))
    assert store.meta()["extraction"] == "wet"
    assert text_of(db, "https://cc.example/about") == "About\nWe make lamps.\nSince 1996."  # a line a block
    assert text_of(db, "https://cc.example/lamp").endswith("\nContact us")  # nothing left out
    later = [("https://cc.example/lamp", "2024-04-01T10:00:00Z", WET_PAGES[0][2].replace("$19.99", "$24.99"))]
    code, _, _ = ingest(capsys, db, write_wet(tmp_path, "later.wet.gz", later))
    assert code == EXIT_OK
    assert store.history("https://cc.example/lamp")[-1].excerpt == "$19.99 → $24.99"


def test_wet_and_extracted_html_never_share_a_store(tmp_path, capsys):
    warc = tmp_path / "crawl.warc"
    warc.write_bytes(http_record("https://cc.example/lamp", "2024-03-02T10:00:00Z",
                                 archives.http_response(lamp("$19.99"))))
    wet = write_wet(tmp_path)
    html_store, wet_store = tmp_path / "html.duckdb", tmp_path / "wet.duckdb"
    assert ingest(capsys, html_store, warc)[0] == EXIT_OK
    assert ingest(capsys, wet_store, wet)[0] == EXIT_OK

    code, out, err = ingest(capsys, html_store, wet)
    assert (code, out) == (EXIT_FAILURE, "")
    assert err == (f"cdc: {html_store} holds HTML extracted with --extract main, not WET text (Common "
                   "Crawl's own extraction): the same page made text two ways would compare as changed; "
                   "ingest these files into another store (--db PATH)\n")
    code, _, err = ingest(capsys, wet_store, warc)
    assert code == EXIT_FAILURE and err.startswith(f"cdc: {wet_store} holds WET text")
    code, _, err = ingest(capsys, tmp_path / "both.duckdb", warc, wet)
    assert code == EXIT_FAILURE and err.count("\n") == 1
    assert "is a WET file (text Common Crawl extracted) and" in err and "into two stores" in err
    code, _, err = ingest(capsys, tmp_path / "whole.duckdb", "--extract", "whole", wet)
    assert code == EXIT_FAILURE and "give --extract wet" in err
    code, _, err = ingest(capsys, tmp_path / "wet-html.duckdb", "--extract", "wet", warc)
    assert code == EXIT_FAILURE and "holds HTML to extract, not WET text" in err
    assert not (tmp_path / "both.duckdb").exists() and not (tmp_path / "whole.duckdb").exists()
    assert Store(str(html_store)).meta()["extraction"] == "main"


def test_a_wet_shard_on_a_cluster_chooses_its_mode_as_a_plain_ingest_does(tmp_path):
    for mode in (None, "wet"):
        report, observed = observe_shard(0, str(write_wet(tmp_path)), buckets=4, mode=mode)
        assert report.failure is None and report.records == 2 and observed.table.num_rows == 2
        assert report.kind.format == WET
    report, _ = observe_shard(0, str(write_wet(tmp_path)), buckets=4, mode="whole")
    assert report.records == 0 and "give --extract wet" in report.failure


# --- anything else: one clear error ----------------------------------------------------------

def tar_gz() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = b'{"url": "https://example.com/", "fetched_at": "2024-01-01T00:00:00Z"}\n' * 20
        info = tarfile.TarInfo("crawl.jsonl")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


NOT_CRAWLS = {
    "crawl.tar.gz": (tar_gz(), "gzip-compressed data holding a tar archive, not crawl output"),
    "logo.png": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200), "a PNG image, not crawl output"),
    "index.html": (b"<!DOCTYPE html>\n<html><head><title>x</title></head><body>\n" + b"<p>text</p>\n" * 46,
                   "an HTML page, not crawl output"),
    "report.pdf": (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n" * 5,
                   "a PDF document, not crawl output"),
    "notes.txt": (b"These are notes, one a line.\n" * 46,
                  "text that is not JSON Lines (it starts 'These are"),
}


@pytest.mark.parametrize("name", sorted(NOT_CRAWLS))
def test_a_file_that_is_not_crawl_output_is_one_clear_error(tmp_path, capsys, name):
    data, looks_like = NOT_CRAWLS[name]
    good = tmp_path / "good.jsonl"
    good.write_text('{"url": "https://example.com/", "fetched_at": "2024-01-01T00:00:00Z"}\n')
    path = tmp_path / name
    path.write_bytes(data)
    db = tmp_path / "s.duckdb"
    code, out, err = ingest(capsys, db, good, path)  # refused before anything is read
    assert (code, out) == (EXIT_FAILURE, "")
    assert err.startswith(f"cdc: {path}: {looks_like}") and err.count("\n") == 1
    assert "cdc ingest reads JSON Lines records, WARC, WET and ARC files, gzip-compressed or not" in err
    assert not db.exists()


def test_sniffing_names_what_it_sees():
    arc, _ = archives.arc_file(ARC_PAGES)
    assert sniff(arc).format == ARC and sniff(gzip.compress(arc)).format == ARC
    assert sniff(archives.wet_file(WET_PAGES)).format == WET
    assert sniff(archives.wet_file(WET_PAGES, compress=False)).format == WET
    assert sniff(archives.warcinfo("x.warc.wet.gz")).format == WET  # the file's name, when no record says
    assert sniff(archives.warcinfo("x.warc")).format == WARC
    assert sniff(b"\xef\xbb\xbf\n  {\"url\": 1}").format == JSONL
    assert sniff(b"\x1f\x8bnot gzip at all").looks_like.startswith("gzip data that does not decompress")
    assert sniff(gzip.compress(b"<html><body>x</body></html>")).looks_like.startswith(
        "gzip-compressed data holding an HTML page")
    assert sniff(bytes(range(256))).looks_like.startswith("binary data of a format cdc does not know")
    assert sniff(b'[{"url": "x"}]').looks_like.startswith("a JSON array, not JSON Lines")


# --- compare with nothing to compare --------------------------------------------------------

def test_compare_on_a_page_of_one_generation_says_there_is_nothing_yet(tmp_path, capsys):
    data, _ = archives.arc_file(ARC_PAGES[1:2])
    path = tmp_path / "crawl.arc"
    path.write_bytes(data)
    db = tmp_path / "s.duckdb"
    assert ingest(capsys, db, path)[0] == EXIT_OK
    assert main(["--db", str(db), "compare", "http://arc.example/lamp"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert err == ("cdc: http://arc.example/lamp has one generation (fetched 1996-11-04 14:21): nothing to "
                   "compare yet; a later crawl of the page that changed it makes the second\n")
