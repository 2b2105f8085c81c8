"""Canonical URLs: one spelling per page, every rule pinned, idempotent, bad URLs refused."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.core.urls import TRACKING_PARAMETERS, InvalidUrlError, canonical_url, host_of
from cdc.errors import CdcError


def test_the_worked_example():
    assert canonical_url("HTTP://Example.COM:80/a?b=2&a=1&utm_source=x#frag") == "http://example.com/a?a=1&b=2"


# --- scheme, host, port ---------------------------------------------------------------------


def test_an_empty_path_becomes_a_slash():
    assert canonical_url("https://example.com") == "https://example.com/"
    assert canonical_url("https://example.com?a=1") == "https://example.com/?a=1"


def test_surrounding_whitespace_is_stripped():
    assert canonical_url("  \thttps://example.com/a \n") == "https://example.com/a"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com:80/", "http://example.com/"),
        ("https://example.com:443/", "https://example.com/"),
        ("http://example.com:0080/", "http://example.com/"),
        ("http://example.com:/", "http://example.com/"),
        ("https://example.com:8443/", "https://example.com:8443/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://example.com:443/", "http://example.com:443/"),
    ],
)
def test_default_ports_are_dropped_and_others_kept(url, expected):
    assert canonical_url(url) == expected


def test_scheme_and_host_are_lower_cased_but_not_the_path_or_query():
    assert canonical_url("HtTpS://WWW.Example.COM/Path/To?Key=Value") == "https://www.example.com/Path/To?Key=Value"


def test_userinfo_is_dropped():
    assert canonical_url("http://user:pw@host/") == "http://host/"
    assert canonical_url("http://user@host:8080/a") == "http://host:8080/a"
    assert canonical_url("http://a@b:c@host/") == "http://host/"


def test_internationalised_hosts_are_idna_encoded():
    assert canonical_url("https://bücher.example/") == "https://xn--bcher-kva.example/"
    assert canonical_url("https://BÜCHER.Example/") == "https://xn--bcher-kva.example/"
    assert canonical_url("https://xn--bcher-kva.example/") == "https://xn--bcher-kva.example/"
    assert canonical_url("https://bücher。example/") == "https://xn--bcher-kva.example/"  # ideographic dot


def test_a_trailing_dot_on_the_host_is_removed():
    assert canonical_url("http://example.com./a") == "http://example.com/a"
    assert canonical_url("http://bücher.example./") == "http://xn--bcher-kva.example/"


def test_ipv6_literals_keep_their_brackets_in_lower_case():
    assert canonical_url("http://[2001:DB8::1]/") == "http://[2001:db8::1]/"
    assert canonical_url("http://[2001:DB8::1]:80/") == "http://[2001:db8::1]/"
    assert canonical_url("https://[::1]:8443/x") == "https://[::1]:8443/x"


def test_ipv4_hosts_are_kept():
    assert canonical_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000/"


def test_host_of():
    assert host_of("https://example.com/a?b=1") == "example.com"
    assert host_of("https://example.com:8443/") == "example.com:8443"
    assert host_of("https://xn--bcher-kva.example/") == "xn--bcher-kva.example"
    assert host_of("http://[::1]:8080/") == "[::1]:8080"


def test_host_of_canonicalises_what_it_is_given():
    assert host_of("HTTP://User@Bücher.Example.:80/x") == "xn--bcher-kva.example"
    with pytest.raises(InvalidUrlError):
        host_of("mailto:someone@example.com")


# --- path -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/%7e", "/~"),
        ("/%7Euser/%41%62%2D%2e%5F", "/~user/Ab-._"),
        ("/a%2fb", "/a%2Fb"),  # an encoded slash is not a slash
        ("/%c3%bc", "/%C3%BC"),
        ("/ü", "/%C3%BC"),
        ("/a b", "/a%20b"),
        ("/a%20b", "/a%20b"),
        ('/<"{|}>^`\\[]', "/%3C%22%7B%7C%7D%3E%5E%60%5C%5B%5D"),
        ("/100%", "/100%25"),  # a stray percent sign is a literal one
        ("/%zz", "/%25zz"),
        ("/a:b@c!$&'()*+,;=", "/a:b@c!$&'()*+,;="),  # allowed as they are
        ("/%3a", "/%3A"),  # reserved: the escape is kept, not decoded
    ],
)
def test_percent_encoding_is_normalised(path, expected):
    assert canonical_url("http://example.com" + path) == "http://example.com" + expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a/./b", "/a/b"),
        ("/a/b/../c", "/a/c"),
        ("/a/b/c/./../../g", "/a/g"),
        ("/..", "/"),
        ("/../../a", "/a"),
        ("/a/..", "/"),
        ("/a/b/.", "/a/b/"),
        ("/a/b/..", "/a/"),
        ("/a/%2e%2E/b", "/b"),  # escaped dots are dots
        ("/a/.b/..c/...", "/a/.b/..c/..."),  # not dot segments
        ("/a//../b", "/a/b"),
    ],
)
def test_dot_segments_are_removed(path, expected):
    assert canonical_url("http://example.com" + path) == "http://example.com" + expected


def test_trailing_slashes_are_kept():
    assert canonical_url("http://example.com/a") == "http://example.com/a"
    assert canonical_url("http://example.com/a/") == "http://example.com/a/"


def test_the_fragment_is_dropped():
    assert canonical_url("http://example.com/a#top") == "http://example.com/a"
    assert canonical_url("http://example.com/a?b=1#x?c=2") == "http://example.com/a?b=1"
    assert canonical_url("http://example.com#x") == "http://example.com/"


# --- query ----------------------------------------------------------------------------------


def test_parameters_are_sorted_by_key_then_value():
    assert canonical_url("http://h/?b=2&a=1&c=0") == "http://h/?a=1&b=2&c=0"
    assert canonical_url("http://h/?a=2&b=1&a=1&a=10") == "http://h/?a=1&a=10&a=2&b=1"


def test_repeated_keys_give_the_same_url_in_any_order():
    one = canonical_url("http://h/?tag=x&tag=y&tag=x&id=1")
    other = canonical_url("http://h/?tag=x&id=1&tag=y&tag=x")
    assert one == other == "http://h/?id=1&tag=x&tag=x&tag=y"


def test_blank_values_and_bare_keys_are_kept_as_written():
    assert canonical_url("http://h/?b=&a") == "http://h/?a&b="
    assert canonical_url("http://h/?a=&a") == "http://h/?a&a="
    assert canonical_url("http://h/?a=b=c") == "http://h/?a=b=c"


def test_empty_parameters_are_dropped():
    assert canonical_url("http://h/?&a=1&&b=2&") == "http://h/?a=1&b=2"


def test_plus_is_kept_and_query_escapes_are_normalised_like_the_path():
    assert canonical_url("http://h/?q=a+b") == "http://h/?q=a+b"
    assert canonical_url("http://h/?q=a%20b") == "http://h/?q=a%20b"
    assert canonical_url("http://h/?q=a b") == "http://h/?q=a%20b"
    assert canonical_url("http://h/?q=%7e%2f%c3%a4") == "http://h/?q=~%2F%C3%A4"
    assert canonical_url("http://h/?q=ä") == "http://h/?q=%C3%A4"
    assert canonical_url("http://h/?q=%26&r=%3d") == "http://h/?q=%26&r=%3D"  # encoded & and = stay


@pytest.mark.parametrize("key", [*sorted(TRACKING_PARAMETERS), "utm_source", "utm_medium", "utm_whatever"])
def test_tracking_parameters_are_removed(key):
    assert canonical_url(f"http://h/p?id=7&{key}=abc") == "http://h/p?id=7"
    assert canonical_url(f"http://h/p?{key.upper()}=abc&id=7") == "http://h/p?id=7"
    assert canonical_url(f"http://h/p?{key}") == "http://h/p"


def test_fbclid_and_gclid_are_removed_and_lookalikes_kept():
    url = "https://shop.example/item?fbclid=IwAR0&id=42&gclid=Cj0K&utm=1&my_utm_source=2&utm_source"
    assert canonical_url(url) == "https://shop.example/item?id=42&my_utm_source=2&utm=1"


def test_an_escaped_tracking_key_is_still_a_tracking_key():
    assert canonical_url("http://h/?utm%5Fsource=x&a=1") == "http://h/?a=1"


def test_a_query_left_empty_leaves_no_question_mark():
    assert canonical_url("http://h/a?utm_source=x&fbclid=y") == "http://h/a"
    assert canonical_url("http://h/a?") == "http://h/a"


# --- refused --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "mailto:someone@example.com",
        "ftp://example.com/file",
        "javascript:alert(1)",
        "data:text/plain,hello",
        "file:///etc/passwd",
        "/relative",
        "relative/path",
        "//example.com/scheme-relative",
        "",
        "   ",
        "http://",
        "http:///path",
        "http:example.com",
        "http://user@/",
        "http://:80/",
        "http://./",
        "http://host:99999/",
        "http://host:65536/",
        "http://host:8o/",
        "http://host:-1/",
        "http://host:８０/",  # full-width digits are not a port
        "http://exa mple.com/",
        "http://a..b/",
        "http://[::1/",
        "http://[not-ipv6]/",
        "http://[::1]x/",
        "http://" + "ü" * 80 + ".example/",  # label too long for IDNA
        "http://example.com/\ud800",
    ],
)
def test_invalid_urls_are_refused(url):
    with pytest.raises(InvalidUrlError):
        canonical_url(url)


@pytest.mark.parametrize("value", [None, b"http://example.com/", 42, ["http://example.com/"]])
def test_non_strings_are_refused(value):
    with pytest.raises(InvalidUrlError, match="a URL is a str"):
        canonical_url(value)


def test_the_error_is_a_cdc_error_with_a_one_line_message_naming_url_and_problem():
    with pytest.raises(CdcError) as caught:
        canonical_url("http://host:99999/x")
    message = str(caught.value)
    assert "99999" in message and "port" in message and "http://host:99999/x" in message
    with pytest.raises(InvalidUrlError, match="http or https") as caught:
        canonical_url("ftp://a/\nb")
    assert "\n" not in str(caught.value)


def test_a_long_url_is_truncated_in_the_message():
    url = "gopher://example.com/" + "x" * 5000
    with pytest.raises(InvalidUrlError) as caught:
        canonical_url(url)
    assert len(str(caught.value)) < 300


# --- properties -----------------------------------------------------------------------------

LABEL = st.text(alphabet="abcXYZ019-_üéßж", min_size=1, max_size=8)
HOST = st.lists(LABEL, min_size=1, max_size=4).map(".".join) | st.sampled_from(["[::1]", "[2001:DB8::A]"])
PORT = st.sampled_from(["", ":", ":80", ":443", ":8080", ":0443"])
PATH = st.text(alphabet="/./..%2eEfF7aZ09-_~ :@!$&'()*+,;=üé\"<>[]{}|\\^`", max_size=30)
QUERY = st.text(alphabet="=&+%2eEfF7aZ09-_~ :@/?;,üé\"<>", max_size=30)
TRACKING = st.sampled_from(["", "&utm_source=x", "&fbclid=1", "&GCLID=2&_ga=3"])


def build(
    scheme: str, userinfo: str, host: str, port: str, path: str, query: str | None, fragment: str | None
) -> str:
    """An URL from its parts; `None` leaves out the query or fragment, "" leaves it empty."""
    url = f"{scheme}://{userinfo}{host}{port}"
    if path:
        url += "/" + path
    if query is not None:
        url += "?" + query
    if fragment is not None:
        url += "#" + fragment
    return url


URL_PARTS = st.tuples(
    st.sampled_from(["http", "https", "HTTP", "Https"]),
    st.sampled_from(["", "user@", "user:pw@"]),
    HOST,
    PORT,
    PATH,
    st.none() | st.builds(str.__add__, QUERY, TRACKING),
    st.none() | st.text(max_size=10),
)


@given(URL_PARTS.map(lambda parts: build(*parts)))
def test_canonicalising_is_idempotent(url):
    canonical = canonical_url(url)
    assert canonical_url(canonical) == canonical
    assert canonical.startswith(("http://", "https://"))
    assert canonical.isascii()
    assert "#" not in canonical


@given(URL_PARTS)
def test_spellings_differing_only_in_case_of_scheme_and_host_agree(parts):
    scheme, userinfo, host, *rest = parts
    upper = build(scheme.upper(), userinfo, host.upper(), *rest)
    lower = build(scheme.lower(), userinfo, host.lower(), *rest)
    assert canonical_url(upper) == canonical_url(lower) == canonical_url(build(*parts))


@given(st.text(max_size=60) | st.text(max_size=60).map(lambda tail: "http://" + tail))
def test_any_string_gives_a_canonical_url_or_an_invalid_url_error(text):
    try:
        canonical = canonical_url(text)
    except InvalidUrlError:
        return  # refusing is a right answer; any other exception is not
    assert canonical.startswith(("http://", "https://"))
    assert canonical_url(canonical) == canonical


# --- SURT keys ------------------------------------------------------------------------------


def test_a_surt_key_loads_neither_tldextract_nor_requests_until_tldextract_is_used():
    """`surt` imports tldextract (and requests) for helpers the default SURT never calls: a
    fresh process makes SURTs without loading them, and the helpers still find the real module."""
    code = "; ".join([
        "import sys", "from cdc.core.urls import surt_key",
        "print(surt_key('https://Docs.Python.org/3.11/A.html?b=1&a=2'))",
        "print(sorted(set(sys.modules) & {'requests', 'urllib3', 'tldextract.tldextract'}))",
        "print(sys.modules['surt.handyurl'].tldextract.TLDExtract.__module__)",
        "print('requests' in sys.modules)"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["org,python,docs)/3.11/a.html?a=2&b=1", "[]", "tldextract.tldextract", "True"]
