"""Live fetching against a real HTTP server on loopback (tests/httpserver.py)."""

from __future__ import annotations

import io
import itertools
import socket

import pytest
from fastwarc.warc import ArchiveIterator

from cdc.core.urls import canonical_url
from cdc.ingest.fetch import FetchOptions, fetch_all, retry_after_seconds
from cdc.ingest.ingester import Ingester
from cdc.sources.warc import Revisit, iter_warc
from cdc.store import Store
from tests.httpserver import TestServer

FAST = FetchOptions(politeness_delay=0, timeout=1.0, retries=3, backoff=0.01)


@pytest.fixture
def server():
    running = TestServer().start()
    yield running
    running.stop()


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "fetch.duckdb")


def validators(store: Store, url: str):
    with store.reading() as connection:
        return store.page_validators(connection, [canonical_url(url)]).get(canonical_url(url))


def test_fetch_not_modified_change_refetch(server, store):
    page, changing = server.url("/page"), server.url("/changing")
    key = canonical_url(page)

    first = fetch_all([page, changing], store, FAST)
    assert (first.fetched, first.new_generations, first.not_modified, first.failures) == (2, 2, 0, [])
    assert validators(store, page) == ('"v1"', "Tue, 14 Nov 2023 23:13:20 GMT")
    checked = store.page(key).last_checked

    second = fetch_all([page, changing], store, FAST)
    assert (second.fetched, second.not_modified, second.new_generations) == (1, 1, 1)
    assert server.requests_to("/page")[-1][2]["If-None-Match"] == '"v1"'
    assert server.requests_to("/page")[-1][2]["If-Modified-Since"] == "Tue, 14 Nov 2023 23:13:20 GMT"
    assert len(store.generations(key)) == 1
    assert store.page(key).last_checked > checked
    assert len(store.generations(canonical_url(changing))) == 2

    server.version = 2
    third = fetch_all([page], store, FAST)
    assert (third.fetched, third.new_generations, third.not_modified) == (1, 1, 0)
    generations = store.generations(key)
    assert len(generations) == 2 and generations[0].generation < generations[1].generation
    assert generations[0].verdict == "new" and generations[1].verdict not in (None, "new", "unchanged")
    assert validators(store, page)[0] == '"v2"'

    fourth = fetch_all([page], store, FAST)
    assert (fourth.not_modified, fourth.new_generations) == (1, 0)
    assert len(store.generations(key)) == 2


def test_every_failure_is_listed_and_the_run_goes_on(server, store):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{probe.getsockname()[1]}/"
    urls = [server.url(p) for p in ("/missing", "/broken", "/slow", "/huge", "/huge-stream", "/doc.pdf",
                                       "/private/x")]
    urls += [refused, "http://no-such-host.invalid/", "not a url", server.url("/final")]
    options = FetchOptions(politeness_delay=0, timeout=1.0, retries=1, backoff=0.01,
                           max_body_bytes=100_000)
    summary = fetch_all(urls, store, options)
    reasons = {failure.url: failure.reason for failure in summary.failures}
    print("\n".join(summary.lines()))
    assert reasons[canonical_url(server.url("/missing"))] == "HTTP 404 Not Found"
    assert reasons[canonical_url(server.url("/broken"))].startswith("HTTP 503")
    assert "after 1 retries" in reasons[canonical_url(server.url("/broken"))]
    assert reasons[canonical_url(server.url("/slow"))] == "timed out after 1 s"
    assert "over the limit of 100000 bytes" in reasons[canonical_url(server.url("/huge"))]
    assert reasons[canonical_url(server.url("/huge-stream"))] == "body is over the limit of 100000 bytes"
    assert reasons[canonical_url(server.url("/private/x"))] == "disallowed by robots.txt"
    assert reasons[canonical_url(refused)].startswith("cannot connect")
    assert reasons["http://no-such-host.invalid/"].startswith(("cannot connect", "timed out"))
    assert "not a url" in reasons
    assert summary.failed == 9 and summary.skipped_non_html == 1 and summary.fetched == 1
    assert len(server.requests_to("/broken")) == 2  # one try and one retry
    assert all("\n" not in line for line in summary.lines())
    assert store.page(canonical_url(server.url("/final"))) is not None


def test_retries_after_500_and_429_with_retry_after(server, store):
    summary = fetch_all([server.url("/flaky"), server.url("/ratelimited")], store, FAST)
    assert (summary.fetched, summary.failures) == (2, [])
    assert len(server.requests_to("/flaky")) == 3
    first, second = (t for _, t, _ in server.requests_to("/ratelimited"))
    assert second - first >= 1.0


def test_retry_after_forms():
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_redirects_record_the_final_url(server, store):
    summary = fetch_all([server.url("/redirect")], store, FAST)
    final = server.url("/final")
    assert summary.redirects == {canonical_url(server.url("/redirect")): final}
    assert store.page(canonical_url(final)).url == final
    assert store.page(canonical_url(server.url("/redirect"))) is None


def test_charsets_from_header_and_meta(server, store):
    fetch_all([server.url("/cp1252"), server.url("/latin1-meta")], store, FAST)
    cp1252, latin1 = (store.version(key, store.page(key).latest_generation).text.decode()
                      for key in (canonical_url(server.url(path)) for path in ("/cp1252", "/latin1-meta")))
    assert "Espresso \u20ac2.50 \u2013 \u201cbest\u201d" in cp1252
    assert "Cr\u00e8me br\u00fbl\u00e9e" in latin1 and "D\u00e9licieux" in latin1


def test_robots_txt_is_honoured_and_can_be_ignored(server, store):
    private = server.url("/private/page")
    summary = fetch_all([private, server.url("/final")], store, FAST)
    assert [f.reason for f in summary.failures] == ["disallowed by robots.txt"]
    assert server.requests_to("/private/page") == [] and len(server.requests_to("/robots.txt")) == 1
    ignoring = FetchOptions(politeness_delay=0, respect_robots=False)
    assert fetch_all([private], store, ignoring).fetched == 1


def test_robots_txt_wildcards_and_longest_match_allow(server, store):
    """`*` and `$` wildcards and an `Allow` longer than the `Disallow` it overrides, as Google
    reads them: `urllib.robotparser` fetched the PDF and refused /private/public."""
    server.robots = (b"User-agent: *\nDisallow: /*.pdf$\nDisallow: /private/\n"
                     b"Allow: /private/public\n")
    paths = ["/doc.pdf", "/doc.pdf?inline=1", "/private/x", "/private/public", "/private/public/page"]
    summary = fetch_all([server.url(path) for path in paths], store, FAST)
    refused = {failure.url for failure in summary.failures if "robots.txt" in failure.reason}
    assert refused == {canonical_url(server.url(path)) for path in ("/doc.pdf", "/private/x")}
    assert server.requests_to("/private/x") == []
    assert len(server.requests_to("/doc.pdf")) == 1  # the one with a query: `$` ends the path
    assert len(server.requests_to("/private/public")) == len(server.requests_to("/private/public/page")) == 1
    assert summary.fetched == 2 and summary.skipped_non_html == 1


def test_politeness_delay_between_requests_to_one_host(server, store):
    delay = 0.3
    urls = [server.url(f"/many/{n}") for n in range(4)] + [server.url("/final", host="localhost")]
    fetch_all(urls, store, FetchOptions(politeness_delay=delay, concurrency=8))
    times = sorted(t for path, t, headers in server.log if headers.get("Host", "").startswith("127."))
    assert len(times) == 5  # robots.txt and four pages
    assert all(later - earlier >= delay for earlier, later in itertools.pairwise(times))


def test_warc_out_holds_one_record_per_fetch_and_reingests(server, store, tmp_path):
    page, final = server.url("/page"), server.url("/final")
    urls = [page, final, server.url("/missing"), server.url("/doc.pdf")]
    out = io.BytesIO()
    fetch_all(urls, store, FAST, warc_out=out)
    fetch_all(urls, store, FAST, warc_out=out)
    out.seek(0)
    records = sorted((r.headers["WARC-Target-URI"], r.headers["WARC-Type"], r.http_headers.status_code)
                     for r in ArchiveIterator(out, parse_http=True))
    assert records == [(final, "response", 200), (final, "response", 200),
                       (page, "response", 200), (page, "revisit", 304)]

    out.seek(0)
    again = Store(tmp_path / "again.duckdb")
    items = [item for item in iter_warc(out, "run.warc") if not isinstance(item, Revisit)]
    Ingester(again).run(items)
    for url in (page, final):
        assert len(again.generations(canonical_url(url))) == len(store.generations(canonical_url(url)))


def test_throughput_when_most_answers_are_304(server, store):
    urls = [server.url(f"/many/{n}") for n in range(500)]
    options = FetchOptions(politeness_delay=0, concurrency=16)
    assert fetch_all(urls, store, options).fetched == 500
    summary = fetch_all(urls, store, options)
    assert summary.not_modified == 500
    print(f"\nfetch throughput, all 304: {summary.pages_per_second:.0f} pages/s "
          f"({summary.urls} URLs in {summary.elapsed:.2f} s)")
