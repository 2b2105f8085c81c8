"""A real HTTP server on a loopback port for the fetch tests, with pages that misbehave on purpose.

`TestServer` runs a `ThreadingHTTPServer` in a background thread; `server.log` holds
(path, monotonic time, request headers) of every request, and the counters and `version`
steer what the pages answer.
"""

from __future__ import annotations

import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROBOTS = b"User-agent: *\nDisallow: /private/\n"
LAST_MODIFIED_BASE = 1_700_000_000  # epoch seconds of version 0's Last-Modified
STALL_SECONDS = 3.0
HUGE_BYTES = 200_000


def html(title: str, text: str, head: str = "") -> str:
    return (f"<!doctype html><html><head>{head}<title>{title}</title></head><body><main>"
            f"<h1>{title}</h1><p>{text}</p></main></body></html>")


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hung up (a timeout, a body over the cap) is expected here, not news."""


class TestServer:
    """Pages: see `Handler.do_GET`. Thread-safe counters; `url(path)` gives a full URL."""

    __test__ = False  # not a pytest test class

    def __init__(self, flaky_failures: int = 2) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, float, dict[str, str]]] = []
        self.counts: dict[str, int] = {}
        self.version = 1  # of /page, bumped by tests
        self.robots = ROBOTS  # the robots.txt served, replaced by tests
        self.flaky_failures = flaky_failures
        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def hit(self, path: str, headers: dict[str, str]) -> int:
        """Log a request; the number of requests to `path` so far, this one included."""
        with self.lock:
            self.log.append((path, time.monotonic(), headers))
            self.counts[path] = self.counts.get(path, 0) + 1
            return self.counts[path]

    def requests_to(self, path: str) -> list[tuple[str, float, dict[str, str]]]:
        with self.lock:
            return [entry for entry in self.log if entry[0] == path]

    def start(self) -> TestServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def send(self, status: int, body: bytes = b"", content_type: str = "text/html; charset=utf-8",
             headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        if status != 304:
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if status != 304:
            self.wfile.write(body)

    def do_GET(self) -> None:
        server: TestServer = self.server.owner  # type: ignore[attr-defined]
        path = self.path.split("?", 1)[0]
        count = server.hit(path, dict(self.headers.items()))
        if path == "/robots.txt":
            self.send(200, server.robots, "text/plain")
        elif path == "/changing":  # new content on every request
            self.send(200, html("Changing", f"This page has been served {count} times so far.").encode())
        elif path == "/page" or path.startswith("/many/"):  # validators and 304
            version = server.version if path == "/page" else 1
            etag = f'"v{version}"'
            modified = formatdate(LAST_MODIFIED_BASE + version * 3600, usegmt=True)
            validators = {"ETag": etag, "Last-Modified": modified}
            if self.headers.get("If-None-Match") == etag or (
                    self.headers.get("If-None-Match") is None
                    and self.headers.get("If-Modified-Since") == modified):
                self.send(304, headers=validators)
            else:
                body = html(f"Prices {path}", f"Version {version} of the price list: widget "
                            f"${10 + version}.99, gadget $4.50.")
                self.send(200, body.encode(), headers=validators)
        elif path == "/redirect":
            self.send(301, b"", headers={"Location": "/redirect2"})
        elif path == "/redirect2":
            self.send(302, b"", headers={"Location": "/final"})
        elif path == "/final":
            self.send(200, html("Final", "The page at the end of the redirects.").encode())
        elif path == "/flaky":  # the first `flaky_failures` requests fail
            if count <= server.flaky_failures:
                self.send(500, b"oops", "text/plain")
            else:
                self.send(200, html("Flaky", "Recovered after a few failures.").encode())
        elif path == "/ratelimited":
            if count == 1:
                self.send(429, b"slow down", "text/plain", {"Retry-After": "1"})
            else:
                self.send(200, html("Rate limited", "Answered after waiting.").encode())
        elif path == "/broken":
            self.send(503, b"down", "text/plain")
        elif path == "/slow":
            time.sleep(STALL_SECONDS)
            self.send(200, html("Slow", "Too late.").encode())
        elif path == "/huge":
            self.send(200, html("Huge", "x " * (HUGE_BYTES // 2)).encode())
        elif path == "/huge-stream":  # no Content-Length: the cap must stop the streamed read
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for _ in range(HUGE_BYTES // 10_000):
                self.wfile.write(b"<p>" + b"y" * 9_993 + b"</p>")
        elif path == "/cp1252":
            body = html("Caf\u00e9 prices", "Espresso \u20ac2.50 \u2013 \u201cbest\u201d in town.")
            self.send(200, body.encode("windows-1252"), "text/html; charset=windows-1252")
        elif path == "/latin1-meta":
            body = html("Cr\u00e8me br\u00fbl\u00e9e", "D\u00e9licieux \u00e0 souhait.",
                        head='<meta charset="iso-8859-1">')
            self.send(200, body.encode("iso-8859-1"), "text/html")
        elif path == "/doc.pdf":
            self.send(200, b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj <<>> endobj\n%%EOF\n", "application/pdf")
        elif path.startswith("/private/"):
            self.send(200, html("Private", "Robots should not see this.").encode())
        else:
            self.send(404, b"not found", "text/plain")
