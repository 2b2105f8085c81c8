"""The natural key of a page: its canonical URL.

Two crawls record the same page under different spellings of its URL: `HTTP://Example.COM:80/a`
and `http://example.com/a`, with or without a `utm_source`, `%7e` or `~`, parameters in another
order. `canonical_url` maps every spelling to one string, so versions of a page line up; it is
idempotent, and its output is plain ASCII.

Only what cannot change which page a server returns is normalised: the scheme and host are
lower-cased, the host IDNA-encoded, default ports, user names and fragments dropped, dot segments
removed (as browsers do), percent-escapes of unreserved characters decoded and the rest written
in one form, tracking parameters removed and the remaining parameters sorted. Trailing slashes,
the case of the path and query, and `+` are kept: servers may tell those apart.

`surt_key` gives a page's SURT, the key CDX indexes and pywb sort captures by
(`com,example)/a?b=1`), from its canonical URL: stored beside it, it joins a store's pages to
a crawl's CDX index.
"""

from __future__ import annotations

import importlib
import ipaddress
import re
import sys
import types
from urllib.parse import quote, urlsplit

from cdc.errors import InvalidUrlError

DEFAULT_PORTS = {"http": "80", "https": "443"}
MAX_PORT = 65535
MAX_URL_IN_MESSAGE = 200  # characters of the offending URL quoted in an error message

# Query keys that only say where a visitor came from (compared case-insensitively); any key
# starting with one of TRACKING_PREFIXES is one too.
TRACKING_PARAMETERS = frozenset(
    {"gclid", "fbclid", "dclid", "gbraid", "wbraid", "msclkid", "mc_cid", "mc_eid", "_ga", "_gl"}
    | {"yclid", "igshid", "ref_src"}
)
TRACKING_PREFIXES = ("utm_",)

UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# What may need rewriting in a path or query: a percent-escape, a "%" that starts none, or a run
# of characters RFC 3986 does not allow there unencoded (space, controls, `"<>\^`{|}[]`, non-ASCII).
NEEDS_NORMALISING = re.compile(r"%[0-9A-Fa-f]{2}|%|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]+")

# A host name once lower-cased and IDNA-encoded: dot-separated labels of letters, digits,
# hyphens and underscores (underscores occur in real subdomains).
HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")


def _invalid(problem: str, url: str) -> InvalidUrlError:
    """The error for `url`, on one line, quoting at most MAX_URL_IN_MESSAGE characters of it."""
    shown = url if len(url) <= MAX_URL_IN_MESSAGE else url[:MAX_URL_IN_MESSAGE] + "…"
    return InvalidUrlError(f"{problem}: {shown!r}")


def _normalise_token(match: re.Match[str]) -> str:
    """One escape in its single form: decoded if unreserved, else upper-case hex; or encoded."""
    token = match.group()
    if token == "%":
        return "%25"  # a stray "%" is a literal percent sign; encoding it makes the URL valid
    if token[0] == "%":
        char = chr(int(token[1:], 16))
        return char if char in UNRESERVED else token.upper()
    return quote(token, safe="")  # UTF-8, upper-case hex


def normalise_escapes(text: str) -> str:
    """Write percent-encoding one way, so `%7e`, `%7E` and `~` (or `%2f` and `%2F`) agree.

    Escapes of unreserved characters mean the same as the characters (RFC 3986 section 6.2.2.2);
    other escapes are kept, since `%2F` and `/` differ, but with upper-case hex.
    """
    return NEEDS_NORMALISING.sub(_normalise_token, text)


def remove_dot_segments(path: str) -> str:
    """Resolve `.` and `..` segments of an absolute path (RFC 3986 section 5.2.4), as browsers do.

    `..` above the root is dropped; a path ending in a dot segment keeps its trailing slash.
    """
    if "/." not in path:  # every dot segment of an absolute path follows a slash
        return path
    segments = path.split("/")
    kept: list[str] = []
    for segment in segments[1:]:
        if segment == "..":
            if kept:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    if segments[-1] in (".", ".."):
        kept.append("")
    return "/" + "/".join(kept)


def is_tracking_parameter(key: str) -> bool:
    """Whether a query key only tracks a visit, so dropping it leaves the same page."""
    key = key.lower()
    return key in TRACKING_PARAMETERS or key.startswith(TRACKING_PREFIXES)


def normalise_query(query: str) -> str:
    """Tracking parameters dropped and the rest sorted by key, then value; "" when none are left.

    Parameter order rarely selects a different page, while crawlers and link builders reorder
    freely. Empty parameters (`a=1&&b=2`) are dropped; `key=` and a bare `key` are kept as given.
    """
    if not query:
        return ""
    pairs = []
    for parameter in normalise_escapes(query).split("&"):
        if not parameter:
            continue
        key, equals, value = parameter.partition("=")
        if not is_tracking_parameter(key):
            pairs.append((key, value, equals))
    pairs.sort()
    return "&".join(key + equals + value for key, value, equals in pairs)


def normalise_host(host: str, url: str) -> str:
    """Lower-case ASCII host: IDNA-encoded, no trailing dot, IPv6 literals in brackets."""
    if host.startswith("["):
        literal = host[1:-1].lower()
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            raise _invalid("the host is not a valid IPv6 address", url) from None
        return f"[{literal}]"
    if not host.isascii():
        try:
            host = host.rstrip(".").encode("idna").decode("ascii")
        except UnicodeError:
            raise _invalid("the host cannot be IDNA-encoded", url) from None
    host = host.lower().rstrip(".")
    if not host:
        raise _invalid("the URL has no host", url)
    if HOST_NAME.fullmatch(host) is None:
        raise _invalid("the host is not a valid host name", url)
    return host


def split_netloc(netloc: str, url: str) -> tuple[str, str]:
    """The host and port of a network location, without user name and password."""
    host_port = netloc.rpartition("@")[2]
    if host_port.startswith("["):
        end = host_port.find("]") + 1
        if end == 0:
            raise _invalid("the IPv6 host has no closing bracket", url)
        host, rest = host_port[:end], host_port[end:]
        if rest and rest[0] != ":":
            raise _invalid("unexpected text after the IPv6 host", url)
        return host, rest[1:]
    host, _, port = host_port.partition(":")
    return host, port


def normalise_port(port: str, scheme: str, url: str) -> str:
    """The ":port" suffix, or "" for the scheme's default port or an empty one."""
    if not port:
        return ""
    if not (port.isascii() and port.isdigit()) or int(port) > MAX_PORT:
        raise _invalid(f"the port {port[:20]!r} is not a number from 0 to {MAX_PORT}", url)
    port = str(int(port))  # "0080" is port 80
    return "" if port == DEFAULT_PORTS[scheme] else ":" + port


def canonical_url(url: str) -> str:
    """The one spelling of an http or https URL that all its equivalent spellings map to.

    Raises InvalidUrlError for anything else: other schemes, relative URLs, no host, a bad port.
    """
    if not isinstance(url, str):
        raise InvalidUrlError(f"a URL is a str, got {type(url).__name__}")
    url = url.strip()
    if not url:
        raise InvalidUrlError("the URL is empty")
    try:
        scheme, netloc, path, query, _ = urlsplit(url)
    except ValueError as error:
        raise _invalid(f"the URL cannot be parsed ({error})", url) from None
    if scheme not in DEFAULT_PORTS:  # urlsplit lower-cases the scheme
        raise _invalid("not an absolute http or https URL", url)
    host, port = split_netloc(netloc, url)
    host = normalise_host(host, url)
    port = normalise_port(port, scheme, url)
    try:
        path = remove_dot_segments(normalise_escapes(path)) if path else "/"
        query = normalise_query(query)
    except UnicodeError:  # lone surrogates have no UTF-8 encoding
        raise _invalid("the URL contains characters that cannot be encoded", url) from None
    if query:
        return f"{scheme}://{host}{port}{path}?{query}"
    return f"{scheme}://{host}{port}{path}"


def host_of(canonical: str) -> str:
    """The host of a URL as its canonical form writes it, with the port when not the default.

    The URL is canonicalised first (a no-op for a canonical URL), so that every spelling of a
    URL gives the same host and a wrong argument raises instead of giving a wrong key.
    """
    return host_of_key(canonical_url(canonical))


def host_of_key(key: str) -> str:
    """The host of a natural key (a URL already canonical, as the store holds it), without
    canonicalising it again: for keys read back from the store or made by `canonical_url`."""
    return key.split("/", 3)[2]


def surt_key(canonical: str) -> str:
    """The SURT of a canonical URL, as CDX indexes and pywb write it: the `surt` package's
    default (Internet Archive) canonicalisation, host reversed (`org,python,docs)/3/`).

    Not a natural key: SURT canonicalisation folds what `canonical_url` keeps apart (the
    case of the path, a `www.` prefix), so two pages may share one. About 25 us of CPU a
    URL (`benchmarks/surt_keys.py`), so it is made once per page, when the page is first
    stored. The package loads at the first call, not with cdc, and without the tldextract it
    imports (`_import_surt`).
    """
    return _import_surt()(canonical)


def _import_surt():
    """`surt.surt`, with its module's `import tldextract` put off until tldextract is used.

    `surt` imports tldextract (and through it requests, urllib3 and charset_normalizer: a
    quarter of a second, the dearest import of `cdc ingest`) for two public-suffix helpers of
    `handyurl` that the default SURT never calls. A stand-in module (`_DeferredModule`) takes
    its place until one of its attributes is read."""
    if "surt" not in sys.modules and "tldextract" not in sys.modules:
        sys.modules["tldextract"] = _DeferredModule("tldextract")
    from surt import surt

    return surt


class _DeferredModule(types.ModuleType):
    """A module not imported yet: reading an attribute it lacks imports the real one in its
    place (in `sys.modules` too) and reads it there."""

    def __getattr__(self, name: str):
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)
