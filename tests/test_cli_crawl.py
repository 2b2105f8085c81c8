"""`cdc ingest` of WARC files (found by content) and `cdc fetch` against a loopback server."""

from __future__ import annotations

import pytest

from cdc.cli.main import EXIT_FAILURE, EXIT_OK, EXIT_SKIPPED, main
from cdc.sources.warc import write_warc_response, write_warc_revisit
from cdc.store import Store
from tests.httpserver import TestServer

PAGE = ("<html><head><title>Lamp</title><meta name=description content='Our lamps'></head><body><main>"
        "<h1>Lamp</h1><p>The lamp costs {price} today.</p><p>" + "Warm light for long evenings. " * 150
        + "</p></main></body></html>")


def write_crawl(path, compress: bool) -> None:
    html = "text/html; charset=utf-8"
    with open(path, "wb") as out:
        for day, price in ((1, "$19.99"), (2, "$24.99")):
            body = PAGE.format(price=price).encode()
            write_warc_response(out, "https://shop.example/lamp", f"2026-11-0{day}T10:00:00Z", 200,
                                [("Content-Type", html)], body, compress=compress)
        write_warc_revisit(out, "https://shop.example/lamp", "2026-11-03T10:00:00Z", compress=compress)
        write_warc_response(out, "https://shop.example/manual.pdf", "2026-11-02T10:00:00Z", 200,
                            [("Content-Type", "application/pdf")], b"%PDF-1.4 not html", compress=compress)
        write_warc_response(out, "https://shop.example/gone", "2026-11-02T10:00:00Z", 404,
                            [("Content-Type", html)], b"<html>gone</html>", compress=compress)


@pytest.mark.parametrize("compress", [True, False])
def test_ingest_reads_warc_found_by_content(tmp_path, capsys, compress):
    path = tmp_path / "crawl.bin"  # no telling name: the content says WARC
    write_crawl(path, compress)
    db = str(tmp_path / "s.duckdb")
    assert main(["--db", db, "ingest", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    expected = ("WARC records 5: 2 HTML pages, 1 revisits; "
                "not pages: 1 with status 404, 1 of type application/pdf")
    assert expected in out
    store = Store(db)
    page = store.page("https://shop.example/lamp")
    assert page.latest_generation == 20261102100000 and page.last_checked.day == 3  # its capture time
    assert len(store.generations(page.natural_key)) == 2
    assert store.history("https://shop.example/lamp")[-1].excerpt == "$19.99 → $24.99"
    assert store.meta()["extraction"] == "main"


def test_a_store_refuses_a_second_extraction_mode(tmp_path, capsys):
    path = tmp_path / "crawl.warc.gz"
    write_crawl(path, True)
    db = str(tmp_path / "s.duckdb")
    assert main(["--db", db, "ingest", str(path)]) == EXIT_OK
    assert main(["--db", db, "ingest", "--extract", "whole", str(path)]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--extract main" in err


@pytest.fixture
def server():
    running = TestServer().start()
    yield running
    running.stop()


def test_fetch_stores_pages_and_reports_failures(tmp_path, capsys, server):
    db = str(tmp_path / "s.duckdb")
    urls = [server.url("/changing"), server.url("/missing-page-404")]
    code = main(["--db", db, "fetch", "--delay", "0", "--timeout", "5", *urls,
                 "--warc-out", str(tmp_path / "run.warc")])
    out = capsys.readouterr().out
    assert code == EXIT_SKIPPED
    assert "1 fetched" in out and "1 failed" in out and "404" in out
    assert (tmp_path / "run.warc").stat().st_size > 0
    assert Store(db).stats()["pages"] == 1
