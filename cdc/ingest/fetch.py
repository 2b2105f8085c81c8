"""Live fetching: URLs in, conditional HTTP requests out, new versions through the normal ingest.

`fetch_all(urls, store, options)` canonicalises each URL, asks the server with the page's
stored validators (ETag as `If-None-Match`, Last-Modified as `If-Modified-Since`), and:

- a 304 stores nothing new and moves the page's `last_checked` forward;
- a 200 HTML body (read with a size cap) becomes a record (`cdc.sources.extract.html_to_record`,
  with the charset of the Content-Type) and goes through `Ingester(store).run(...)`, after
  which the page's new ETag and Last-Modified are saved;
- a non-HTML answer is skipped and counted; every failure (DNS, refused connection,
  timeout, 4xx, 5xx after retries, a body over the cap, robots.txt) is listed with its URL
  and never stops the run.

**Concurrency.** One `httpx.AsyncClient` on an asyncio loop: `concurrency` worker tasks
take URLs from a queue (interleaved by host, so workers do not all queue behind one host).
Politeness is per host: with `politeness_delay` above 0, requests to one host go one at a
time and each starts at least that long after the previous one ended (robots.txt, retries
and redirect hops included), so the server sees them at least the delay apart; with 0,
requests to one host run concurrently. A 429 or 5xx defers the whole host by its
Retry-After (or the backoff). Extraction runs in threads; results are written to the store
in batches of `batch_size` (one ingest and one validator update per batch), in a thread,
while fetching goes on.

**Redirects** are followed hop by hop (each paced and checked against robots.txt), at most
`max_redirects`. A page's natural key is its *final* URL: the content belongs there.

**WARC.** With `warc_out`, every 200 HTML answer is written as a WARC `response` record and
every 304 as a `revisit` (`cdc.sources.warc.write_warc_response` / `write_warc_revisit`). The body is
stored as
decoded (httpx undoes gzip/brotli), so the recorded Content-Encoding, Transfer-Encoding
and Content-Length headers are renamed `X-Crawler-*` and a true Content-Length added: the
record then parses as the HTTP message it holds.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import BinaryIO

import httpx
from protego import Protego

from cdc import __version__
from cdc.core.excerpts import one_line
from cdc.core.urls import canonical_url, host_of_key
from cdc.errors import InvalidUrlError, StoreNotFoundError
from cdc.ingest.ingester import Ingester, IngestSummary
from cdc.sources.extract import MAIN_CONTENT, html_to_record
from cdc.sources.jsonl import SourceRecord
from cdc.sources.warc import HTML_TYPES, write_warc_response, write_warc_revisit
from cdc.store import Store, Validators

__all__ = ["FetchFailure", "FetchOptions", "FetchSummary", "fetch_all"]

PROJECT_URL = "https://github.com/cdc-crawl/cdc"  # placeholder until the project has a public home
DEFAULT_USER_AGENT = f"cdc/{__version__} (+{PROJECT_URL})"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})  # and every other 5xx
ROBOTS_MAX_BYTES = 512 << 10  # RFC 9309: parse at least the first 500 KiB
DRAIN_BYTES = 64 << 10  # an unwanted body up to this size is read, so the connection is reused
FETCH_SOURCE = "fetch"  # the `source` of SourceRecords made here; their `line` is the URL's index
NO_VALIDATORS = Validators(None, None)  # a page not stored, or stored without validators
# Headers that describe the bytes on the wire, not the decoded body a WARC record here holds.
WIRE_HEADERS = frozenset({"content-encoding", "transfer-encoding", "content-length"})


@dataclass(frozen=True)
class FetchOptions:
    """How to fetch; validated once, the error names the bad value."""

    timeout: float = 20.0
    """Seconds one exchange (connect, request, the whole answer) may take."""
    retries: int = 3
    """Retries after a 429 or 5xx answer (not after a network error or a timeout)."""
    backoff: float = 0.5
    """Seconds before the first retry when the server sends no Retry-After; doubled each retry."""
    max_retry_wait: float = 60.0
    """A longer Retry-After (or backoff) is cut to this."""
    concurrency: int = 8
    politeness_delay: float = 1.0
    """Seconds between the end of one request to a host and the start of the next."""
    max_body_bytes: int = 10 << 20
    user_agent: str = DEFAULT_USER_AGENT
    respect_robots: bool = True
    max_redirects: int = 10
    extract_mode: str = MAIN_CONTENT
    batch_size: int = 500
    """Results per store write."""

    def __post_init__(self) -> None:
        for name in ("timeout", "backoff", "max_retry_wait", "politeness_delay"):
            value = getattr(self, name)
            least = "above 0" if name == "timeout" else "at least 0"
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
                    or (name == "timeout" and value == 0):
                raise ValueError(f"FetchOptions.{name} must be a number of seconds {least}, got {value!r}")
        for name, least in (("retries", 0), ("concurrency", 1), ("max_body_bytes", 1),
                            ("max_redirects", 0), ("batch_size", 1)):
            value = getattr(self, name)
            if type(value) is not int or value < least:
                raise ValueError(f"FetchOptions.{name} must be a whole number of at least {least}, "
                                 f"got {value!r}")
        if not isinstance(self.user_agent, str) or not self.user_agent.strip():
            raise ValueError(f"FetchOptions.user_agent must be a non-empty string, got {self.user_agent!r}")


@dataclass(frozen=True)
class FetchFailure:
    """A URL that gave no version, and why, on one line."""

    url: str
    reason: str

    def __str__(self) -> str:
        return f"{self.url}: {self.reason}"


@dataclass
class FetchSummary:
    """What a fetch run did. Every URL is counted once: fetched, not modified, skipped or failed."""

    urls: int = 0
    fetched: int = 0
    """200 answers with an HTML body, sent to ingest."""
    not_modified: int = 0
    new_generations: int = 0
    unchanged: int = 0
    older: int = 0  # answers dated before the page's latest stored fetch, put in place
    skipped_non_html: int = 0
    failures: list[FetchFailure] = field(default_factory=list)
    redirects: dict[str, str] = field(default_factory=dict)
    """Requested URL -> final URL, for every URL that was redirected."""
    elapsed: float = 0.0
    run: int = 0  # the run's id (`cdc runs`), once it has finished

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def pages_per_second(self) -> float:
        done = self.fetched + self.not_modified + self.skipped_non_html + self.failed
        return done / self.elapsed if self.elapsed > 0 else 0.0

    def lines(self) -> list[str]:
        """The summary as text: counts, then one line per failure."""
        head = (f"{self.urls} URLs in {self.elapsed:.1f} s ({self.pages_per_second:.0f} pages/s): "
                f"{self.fetched} fetched, {self.not_modified} not modified, "
                f"{self.new_generations} new generations, {self.unchanged} unchanged, "
                f"{self.skipped_non_html} skipped (not HTML), {self.failed} failed")
        return [head, *(f"  {failure}" for failure in self.failures)]


# --- small pure helpers --------------------------------------------------------------------


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a Retry-After header asks for (delta-seconds or an HTTP date); None if unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def media_type(content_type: str | None) -> str:
    """`text/html; charset=x` -> `text/html`."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def interleave_by_host(urls: Iterable[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """(index, url, key) round-robin over hosts, each host's URLs in their given order."""
    by_host: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for entry in urls:
        by_host[host_of_key(entry[2])].append(entry)
    queues = list(by_host.values())
    out: list[tuple[int, str, str]] = []
    for position in range(max((len(q) for q in queues), default=0)):
        out.extend(q[position] for q in queues if position < len(q))
    return out


def _short(content_length: str | None) -> bool:
    """Whether a declared body length is small enough to read and drop."""
    return content_length is not None and content_length.strip().isdigit() \
        and int(content_length) <= DRAIN_BYTES


def _one_line(text: object) -> str:
    return one_line(text) or type(text).__name__


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


# --- WARC ----------------------------------------------------------------------------------


def warc_headers(raw_headers: Sequence[tuple[bytes, bytes]], body: bytes | None) -> list[tuple[str, str]]:
    """HTTP headers for a WARC record of a decoded body: wire headers renamed, a true length added."""
    headers = []
    for raw_name, raw_value in raw_headers:
        name = raw_name.decode("latin-1")
        headers.append((("X-Crawler-" + name) if name.lower() in WIRE_HEADERS else name,
                        raw_value.decode("latin-1")))
    if body is not None:
        headers.append(("Content-Length", str(len(body))))
    return headers


# --- the fetcher ---------------------------------------------------------------------------


class _Failed(Exception):
    """One URL's failure; the message is its one-line reason."""


@dataclass
class _Answer:
    """One HTTP exchange, read and closed."""

    status: int
    reason: str
    http_version: str
    headers: httpx.Headers
    raw_headers: list[tuple[bytes, bytes]]
    body: bytes | None  # None when not read (redirect, error, not HTML, 304)
    next_request: httpx.Request | None
    received: datetime


@dataclass
class _Result:
    index: int
    url: str
    kind: str  # "ok", "not_modified", "non_html", "failed"
    final_url: str = ""
    reason: str = ""
    answer: _Answer | None = None


class _Host:
    """Politeness state of one host: one request at a time when there is a delay."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.not_before = 0.0  # time.monotonic() of the earliest next request


class _Fetcher:
    def __init__(self, options: FetchOptions, client: httpx.AsyncClient):
        self.options = options
        self.client = client
        self.hosts: dict[str, _Host] = defaultdict(_Host)
        self.robots: dict[str, Protego | None] = {}
        self.robots_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def _paced(self, request: httpx.Request, robots: bool, limit: int) -> _Answer:
        """One exchange, inside the host's politeness slot, with a whole-exchange deadline."""
        host = self.hosts[request.url.netloc.decode("ascii")]
        polite = self.options.politeness_delay > 0
        if polite:
            await host.lock.acquire()
        try:
            wait = host.not_before - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                async with asyncio.timeout(self.options.timeout):
                    return await self._exchange(request, robots, limit)
            except (TimeoutError, httpx.TimeoutException):
                raise _Failed(f"timed out after {self.options.timeout:g} s") from None
            except httpx.ConnectError as exc:
                raise _Failed(f"cannot connect: {_one_line(exc)}") from None
            except httpx.TooManyRedirects as exc:  # pragma: no cover - redirects are followed here
                raise _Failed(_one_line(exc)) from None
            except httpx.HTTPError as exc:
                raise _Failed(f"{type(exc).__name__}: {_one_line(exc)}") from None
        finally:
            host.not_before = max(host.not_before, time.monotonic() + self.options.politeness_delay)
            if polite:
                host.lock.release()

    async def _exchange(self, request: httpx.Request, robots: bool, limit: int) -> _Answer:
        """One request and its body: a page's when it is HTML, refused over `limit`; a
        robots.txt's (`robots`) whatever its type, cut at `limit`."""
        response = await self.client.send(request, stream=True, follow_redirects=False)
        try:
            body = None
            wanted = response.status_code == 200 and (
                robots or media_type(response.headers.get("content-type")) in HTML_TYPES
                or "content-type" not in response.headers)
            if wanted:
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit and not robots:
                    raise _Failed(f"body of {declared} bytes is over the limit of {limit} bytes")
                parts = bytearray()
                async for part in response.aiter_bytes():
                    parts += part
                    if len(parts) > limit:
                        if robots:
                            del parts[limit:]
                            break
                        raise _Failed(f"body is over the limit of {limit} bytes")
                body = bytes(parts)
            elif response.status_code in (204, 304) or _short(response.headers.get("content-length")):
                # Read a short unwanted body to its end: httpcore reuses only a finished connection.
                await response.aread()
            return _Answer(response.status_code, response.reason_phrase, response.http_version,
                           response.headers, list(response.headers.raw), body,
                           response.next_request if response.is_redirect else None, _utc_now())
        finally:
            await response.aclose()

    async def _with_retries(self, request: httpx.Request, robots: bool, limit: int,
                            retries: int) -> _Answer:
        """An exchange, retried after 429 and 5xx with backoff or the server's Retry-After."""
        for attempt in range(retries + 1):
            answer = await self._paced(request, robots, limit)
            if (answer.status not in RETRY_STATUSES and answer.status < 500) or attempt == retries:
                return answer
            wait = retry_after_seconds(answer.headers.get("retry-after"))
            if wait is None:
                wait = self.options.backoff * 2 ** attempt
            host = self.hosts[request.url.netloc.decode("ascii")]
            host.not_before = max(host.not_before, time.monotonic() + min(wait, self.options.max_retry_wait))
        raise AssertionError("unreachable")  # pragma: no cover

    async def allowed(self, url: httpx.URL) -> bool:
        """Whether robots.txt lets us fetch `url`; fetched once per origin and cached.

        No robots.txt (4xx) allows everything; so, as asked of cdc, does one that cannot be
        fetched (network error, timeout, 5xx), which RFC 9309 would read as "disallow all".
        The rules are read by protego (Scrapy's parser) as Google and Bing read them: `*` and
        `$` wildcards, and the longest matching rule wins, an `Allow` over a shorter
        `Disallow` (`urllib.robotparser` knows neither).
        """
        origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
        if origin not in self.robots:
            async with self.robots_locks[origin]:
                if origin not in self.robots:
                    self.robots[origin] = await self._robots(origin)
        parser = self.robots[origin]
        return parser is None or parser.can_fetch(str(url), self.options.user_agent)

    async def _robots(self, origin: str) -> Protego | None:
        request = self.client.build_request("GET", origin + "/robots.txt")
        try:
            for _ in range(5):  # RFC 9309: follow at least five redirects
                answer = await self._with_retries(request, True, ROBOTS_MAX_BYTES, 0)
                if answer.next_request is None:
                    break
                request = answer.next_request
        except _Failed:
            return None
        if answer.status != 200 or answer.body is None:
            return None
        return Protego.parse(answer.body.decode("utf-8", "replace"))

    async def fetch(self, index: int, url: str, validators: Validators) -> _Result:
        options = self.options
        headers = {}
        if validators.etag:
            headers["If-None-Match"] = validators.etag
        if validators.last_modified:
            headers["If-Modified-Since"] = validators.last_modified
        try:
            request = self.client.build_request("GET", url, headers=headers)
            for hop in range(options.max_redirects + 1):
                if options.respect_robots and not await self.allowed(request.url):
                    raise _Failed(f"disallowed by robots.txt ({request.url})" if hop else
                                  "disallowed by robots.txt")
                answer = await self._with_retries(request, False, options.max_body_bytes, options.retries)
                if answer.next_request is None:
                    break
                request = answer.next_request
            else:
                raise _Failed(f"more than {options.max_redirects} redirects")
        except _Failed as exc:
            return _Result(index, url, "failed", reason=str(exc))
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            return _Result(index, url, "failed", reason=f"cannot request: {_one_line(exc)}")
        final = str(request.url)
        if answer.status == 304:
            return _Result(index, url, "not_modified", final, answer=answer)
        if answer.status != 200:
            reason = f"HTTP {answer.status} {answer.reason}".rstrip()
            if answer.status >= 500 or answer.status == 429:
                reason += f" after {options.retries} retries"
            return _Result(index, url, "failed", final, reason, answer)
        if answer.body is None:
            kind = media_type(answer.headers.get("content-type"))
            return _Result(index, url, "non_html", final, f"not HTML ({kind})", answer)
        return _Result(index, url, "ok", final, answer=answer)


# --- the run -------------------------------------------------------------------------------


class _Run:
    """Collects results, writes them to the store in batches and to the WARC stream."""

    def __init__(self, store: Store, options: FetchOptions, urls: list[str],
                 validators: dict[str, Validators], warc_out: BinaryIO | None,
                 run_id: int = 0):
        self.store = store
        self.run_id = run_id
        self.ingested = IngestSummary()  # every batch's, for the run's counts
        self.options = options
        self.urls = urls
        self.validators = validators
        self.warc_out = warc_out
        self.summary = FetchSummary()
        self.pending: list[tuple[_Result, dict | None]] = []
        self.checked: set[str] = set()  # pages that answered 304: seen by the run, unchanged

    def record(self, result: _Result, record: dict | None) -> None:
        summary = self.summary
        if result.final_url:
            try:
                moved = canonical_url(result.final_url) != result.url
            except InvalidUrlError as exc:
                result.kind, result.reason = "failed", f"redirected to a URL cdc cannot key: {exc}"
                moved = False
            if moved:
                summary.redirects[result.url] = result.final_url
        if result.kind == "failed":
            summary.failures.append(FetchFailure(result.url, result.reason))
        elif result.kind == "non_html":
            summary.skipped_non_html += 1
        elif result.kind == "not_modified":
            summary.not_modified += 1
            self.pending.append((result, None))
            self._warc(result)
        elif record is None:
            summary.failures.append(FetchFailure(result.url, result.reason or "extraction failed"))
        else:
            summary.fetched += 1
            self.pending.append((result, record))
            self._warc(result)

    def _warc(self, result: _Result) -> None:
        if self.warc_out is None or result.answer is None:
            return
        answer = result.answer
        date = _iso(answer.received)
        if result.kind == "not_modified":
            write_warc_revisit(self.warc_out, result.final_url, date, status=answer.status,
                               headers=warc_headers(answer.raw_headers, None))
        else:
            write_warc_response(self.warc_out, result.final_url, date, answer.status,
                                warc_headers(answer.raw_headers, answer.body), answer.body or b"")

    def flush(self) -> None:
        """Ingest the pending 200s, then save validators and mark 304s checked, in one batch."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        records = [SourceRecord(FETCH_SOURCE, result.index, record)
                   for result, record in pending if record is not None]
        if records:
            self._count(Ingester(self.store, run_id=self.run_id,
                                 extraction_mode=self.options.extract_mode).run(records))
        checked, validators = [], []
        for result, _ in pending:
            key = canonical_url(result.final_url)
            headers = result.answer.headers
            etag, last_modified = headers.get("etag"), headers.get("last-modified")
            if result.kind == "not_modified":
                checked.append((key, result.answer.received.replace(tzinfo=None)))
                self.checked.add(key)
                old = self.validators.get(canonical_url(result.url), NO_VALIDATORS)
                etag, last_modified = etag or old.etag, last_modified or old.last_modified
            validators.append((key, etag, last_modified))
        with self.store.writing() as connection:
            self.store.mark_checked(connection, checked, self.run_id)
            self.store.save_validators(connection, validators)

    def _count(self, ingest: IngestSummary) -> None:
        summary = self.summary
        summary.new_generations += ingest.new_generations
        summary.unchanged += ingest.unchanged
        summary.older += ingest.older
        self.ingested.merge(ingest)
        for bad in ingest.bad:
            known = bad.source == FETCH_SOURCE and 0 <= bad.line < len(self.urls)
            url = self.urls[bad.line] if known else "?"
            summary.failures.append(FetchFailure(url, f"record not stored: {bad.reason}"))


def _extract(result: _Result, mode: str) -> dict | None:
    answer = result.answer
    charset = answer.headers.get("content-type")
    declared = None
    if charset:
        for parameter in charset.split(";")[1:]:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "charset" and value.strip():
                declared = value.strip().strip("\"'")
    try:
        record = html_to_record(answer.body, result.final_url, _iso(answer.received), declared, mode)
    except Exception as exc:  # extraction of hostile HTML must not stop the run
        result.reason = f"cannot extract the page: {_one_line(exc)}"
        return None
    return record


async def _run(run: _Run, entries: list[tuple[int, str, str]], client: httpx.AsyncClient) -> None:
    fetcher = _Fetcher(run.options, client)
    queue: asyncio.Queue[tuple[int, str, str]] = asyncio.Queue()
    for entry in interleave_by_host(entries):
        queue.put_nowait(entry)
    flushing = asyncio.Lock()

    async def worker() -> None:
        while True:
            try:
                index, url, key = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            result = await fetcher.fetch(index, url, run.validators.get(key, NO_VALIDATORS))
            record = await asyncio.to_thread(_extract, result, run.options.extract_mode) \
                if result.kind == "ok" else None
            run.record(result, record)
            if len(run.pending) >= run.options.batch_size and not flushing.locked():
                async with flushing:
                    await asyncio.to_thread(run.flush)

    await asyncio.gather(*(worker() for _ in range(run.options.concurrency)))
    async with flushing:
        await asyncio.to_thread(run.flush)


def fetch_all(urls: list[str], store: Store, options: FetchOptions | None = None,
              warc_out: BinaryIO | None = None, label: str | None = None) -> FetchSummary:
    """Fetch `urls` into `store` as one run labelled `label` (`cdc runs`; see the module
    docstring); never raises for one URL's failure.

    Raises a StoreError when the store cannot be written, as ingest does.
    """
    options = options or FetchOptions()
    started = time.perf_counter()
    entries: list[tuple[int, str, str]] = []
    failures: list[FetchFailure] = []
    seen: set[str] = set()
    for index, url in enumerate(urls):
        try:
            key = canonical_url(url)
        except InvalidUrlError as exc:
            failures.append(FetchFailure(str(url), str(exc)))
            continue
        if key not in seen:
            seen.add(key)
            entries.append((index, key, key))
    try:
        with store.reading() as connection:
            validators = store.page_validators(connection, [key for _, _, key in entries])
    except StoreNotFoundError:
        validators = {}
    run = _Run(store, options, list(urls), validators, warc_out,
               store.start_run(label or f"fetch of {len(urls):,} URLs", []))
    run.summary.urls = len(urls)
    run.summary.failures.extend(failures)

    async def main() -> None:
        limits = httpx.Limits(max_connections=options.concurrency,
                              max_keepalive_connections=options.concurrency)
        async with httpx.AsyncClient(
                headers={"User-Agent": options.user_agent}, timeout=httpx.Timeout(options.timeout),
                limits=limits, trust_env=False) as client:
            await _run(run, entries, client)

    asyncio.run(main())
    run.summary.elapsed = time.perf_counter() - started
    counts = run.ingested.counts()
    seen = run.ingested.pages | run.checked
    counts.update(pages=len(seen), unchanged=counts["unchanged"] + run.summary.not_modified,
                  failed=run.summary.failed)
    store.finish_run(run.run_id, counts, seen)
    run.summary.run = run.run_id
    return run.summary
