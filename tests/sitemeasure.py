"""What a user relies on, measured on a store ingested from `tests.sitecrawl`'s two crawls.

Shared by `tests/test_sitecrawl.py` (which asserts the targets) and
`benchmarks/structure.py` (which prints them). Everything goes through the public API:
`Store` methods, `cdc.core.compare.compare` on the stored chunks and texts (what
`cdc compare [--ignore-boilerplate]` runs) and the boilerplate rule's defaults.

- `boilerplate_coverage`: on how many pages the banner's bytes, and the site's navigation
  lines and footer (`NAVIGATION`, found in the extracted text), lie inside chunks whose
  digest is the host's boilerplate.
- `template_only_unchanged`: banner-only pages that compare `unchanged` with boilerplate left out.
- `template_only_flagged`: banner-only pages whose stored change row is `template_only`
  (what `cdc history`, `cdc export` and the dashboard show).
- `edited_flagged`: pages with a real edit (a move included) beside the banner whose change
  row is `template_only` (none should be: the edit is the page's own change).
- `template_only_ranked_last`: template-only changes listed after every change of a page's
  own (the Overview's biggest changes).
- `moves_found`: moved paragraphs covered by an `Edit` of kind "move".
- `insert_ratios`: changed-region bytes over truly changed bytes (the inserted paragraph
  and the banner) on pages with one inserted paragraph.
- `edits_found`: edits that change the extracted text, and of those the ones that an edit
  of the comparison overlaps.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass

from cdc.analyst.queries import version_chunks
from cdc.core.compare import ChangeReport, compare
from cdc.core.urls import canonical_url
from cdc.core.verdicts import UNCHANGED
from cdc.store import BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE, Store, Version
from tests.sitecrawl import DELETE, INSERT, MOVE, NUMBER, Manifest, PageEdit, locate

MOVE_KIND = "move"
MOVE_COVER = 0.9  # of the moved paragraph's bytes a move edit must cover
# The template of every page of Python's docs as Resiliparse's whole-page text has it, the
# bar of related links (twice), its breadcrumb root, the sidebar's links and the footer, with
# any whitespace between the words (a space today; a line break, and the bullet Resiliparse's
# plain text gives a list item, once blocks are kept).
_GAP, _MAYBE_GAP = r"[\s•]+", r"[\s•]*"
NAVIGATION = tuple(re.compile(pattern.replace("_", _GAP).replace("~", _MAYBE_GAP).encode()) for pattern in (
    r"index_modules(?:~\|_next)?(?:~\|_previous)?~\|",
    r"(?:python_logo_)?Python_»_3\.11\S*_Documentation_»",
    r"Report_a_Bug_Show_Source",
    r"©_Copyright_2001-\d{4},_Python_Software_Foundation\.[\s\S]{0,800}?Created_using_Sphinx_[\d.]+\.",
))


Span = tuple[int, int]
Spans = tuple[Span | None, Span | None]  # in the old text, in the new


@dataclass(frozen=True)
class Share:
    hits: int
    total: int

    @property
    def ratio(self) -> float:
        return self.hits / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{self.hits}/{self.total} ({self.ratio:.0%})"


def navigation_spans(text: bytes) -> list[tuple[int, int]]:
    """(start, end) of every occurrence of the site's navigation lines and footer in `text`."""
    return sorted(match.span() for pattern in NAVIGATION for match in pattern.finditer(text))


def covered(span: tuple[int, int], regions: list[tuple[int, int]]) -> bool:
    """Whether the bytes of `span` lie inside the union of `regions` (sorted, non-overlapping)."""
    start, end = span
    for offset, stop in regions:
        if offset <= start < stop:
            start = stop
        if start >= end:
            return True
    return start >= end


def _overlaps(offset: int, length: int, span: tuple[int, int] | None) -> bool:
    return span is not None and offset < span[1] and span[0] < offset + max(length, 1)


@dataclass(frozen=True)
class Pair:
    """A page's two crawls as the store holds them, compared."""

    old: Version
    new: Version
    report: ChangeReport


class SiteStore:
    """A store holding both crawls: every page's versions read once (through one connection)
    and compared as `cdc compare` compares them, with and without the host's boilerplate."""

    def __init__(self, store: Store, manifest: Manifest) -> None:
        self.store = store
        self.manifest = manifest
        self.host = store.page(canonical_url(next(iter(manifest.pages)))).host
        self.boilerplate = frozenset(store.boilerplate_digests(self.host, BOILERPLATE_SHARE,
                                                               BOILERPLATE_MIN_PAGES))
        # What `cdc compare --ignore-boilerplate` leaves out: the rule over both crawls.
        self.template = frozenset(store.template_digests(self.host, BOILERPLATE_SHARE, BOILERPLATE_MIN_PAGES))
        self.versions: dict[str, dict[int, Version]] = {}  # by crawl, 1 and 2
        numbers = {url: [g.generation for g in store.generations(canonical_url(url))]
                   for url in manifest.pages}
        with store.reading() as connection:
            for url in manifest.pages:
                # Generation numbers are capture times (YYYYMMDDhhmmss): held here by crawl.
                found = store.versions(canonical_url(url), numbers[url], connection)
                self.versions[url] = {crawl: found[number] for crawl, number in enumerate(numbers[url], 1)
                                      if number in found}
        self._pairs: dict[tuple[str, bool], Pair | None] = {}

    def generations(self, url: str) -> int:
        return len(self.versions.get(url, {}))

    def latest(self, url: str) -> Version | None:
        versions = self.versions.get(url)
        return versions[max(versions)] if versions else None

    def comparison(self, url: str, ignore_boilerplate: bool = False) -> Pair | None:
        """The two crawls of a page compared; None when the second made no new generation."""
        if (url, ignore_boilerplate) not in self._pairs:
            versions = self.versions.get(url, {})
            pair = None
            if len(versions) >= 2:
                old, new = versions[1], versions[2]
                pair = Pair(old, new, compare(
                    version_chunks(old), version_chunks(new), old_text=old.text, new_text=new.text,
                    ignore=self.template if ignore_boilerplate else frozenset()))
            self._pairs[url, ignore_boilerplate] = pair
        return self._pairs[url, ignore_boilerplate]

    def boilerplate_regions(self, version: Version) -> list[tuple[int, int]]:
        """(start, end) of the version's chunks whose digest is boilerplate, in order."""
        regions, offset = [], 0
        for digest, length in version.chunks:
            if digest in self.boilerplate:
                regions.append((offset, offset + length))
            offset += length
        return regions


@dataclass(frozen=True)
class Coverage:
    banner: Share  # pages whose banner lies in boilerplate, of those whose text holds it
    navigation: Share  # pages whose navigation lines all do, of those whose text holds any
    both: Share  # pages whose banner and navigation all do, of the pages with the banner


def boilerplate_coverage(site: SiteStore) -> Coverage:
    banner = navigation = both = 0
    with_banner = with_navigation = pages = 0
    for page in site.manifest.pages.values():
        version = site.latest(page.url) if page.banner else None
        if version is None:
            continue
        pages += 1
        regions = site.boilerplate_regions(version)
        banner_span = locate(version.text, site.manifest.banner)
        spans = navigation_spans(version.text)
        banner_in = banner_span is not None and covered(banner_span, regions)
        navigation_in = all(covered(span, regions) for span in spans)
        with_banner += banner_span is not None
        with_navigation += bool(spans)
        banner += banner_in
        navigation += bool(spans) and navigation_in
        both += banner_in and navigation_in
    return Coverage(Share(banner, with_banner), Share(navigation, with_navigation), Share(both, pages))


def template_only_unchanged(site: SiteStore) -> Share:
    """Banner-only pages that compare `unchanged` with boilerplate left out (a page whose
    extracted text did not change at all counts as unchanged too)."""
    pages = site.manifest.template_only()
    unchanged = 0
    for page in pages:
        comparison = site.comparison(page.url, ignore_boilerplate=True)
        unchanged += comparison is None or comparison.report.verdict == UNCHANGED
    return Share(unchanged, len(pages))


def template_only_flagged(site: SiteStore) -> Share:
    """Banner-only pages whose change rows, as `Store.changes` reads them, are template-only
    (a page whose extracted text did not change at all made no change row and counts)."""
    flags: dict[str, list[bool]] = {}
    for row in site.store.changes(host=site.host):
        if row.previous_generation:
            flags.setdefault(row.natural_key, []).append(bool(row.template_only))
    pages = site.manifest.template_only()
    flagged = sum(all(flags.get(canonical_url(page.url), [])) for page in pages)
    return Share(flagged, len(pages))


def edited_flagged(site: SiteStore, kind: str | None = None) -> Share:
    """Pages with a real edit (of `kind`, if given) whose latest change row is template-only."""
    flags = {row.natural_key: bool(row.template_only) for row in site.store.changes(host=site.host)
             if row.previous_generation}
    pages = site.manifest.edits(kind)
    return Share(sum(flags.get(canonical_url(page.url), False) for page in pages), len(pages))


def template_only_ranked_last(site: SiteStore) -> Share:
    """Template-only changes among the host's biggest changes (each page's latest, as the
    Overview lists them) that come after the last change of a page's own."""
    order = [bool(row.template_only) for row in site.store.biggest_changes(limit=100_000)
             if row.host == site.host]
    last_own = max((at for at, template in enumerate(order) if not template), default=-1)
    return Share(sum(order[last_own + 1:]), sum(order))


def visible(page: PageEdit, old: bytes, new: bytes) -> Spans:
    """Where the edit is in the old and the new extracted text ((start, end) or None each),
    when the texts show it as made; (None, None) when they do not."""
    old_span, new_span = locate(old, page.paragraph), locate(new, page.paragraph)
    if page.kind == INSERT and new_span and not old_span:
        return None, new_span
    if page.kind == DELETE and old_span and not new_span:
        return old_span, None
    if page.kind == MOVE and old_span and new_span and old_span[0] / len(old) < new_span[0] / len(new):
        return old_span, new_span
    if page.kind == NUMBER and old_span and not new_span:
        new_span = locate(new, page.new_paragraph)
        if new_span and not locate(old, page.new_paragraph):
            return old_span, new_span
    return None, None


def shown_edits(site: SiteStore, kind: str | None = None) -> Iterator[tuple[PageEdit, Pair, Spans]]:
    """The manifest's edits (of `kind`) that the extracted texts show as made: each page's
    edit, its two crawls compared, and where the edit is in the old and the new text."""
    for page in site.manifest.edits(kind):
        pair = site.comparison(page.url)
        if pair is None:
            continue
        spans = visible(page, pair.old.text, pair.new.text)
        if spans != (None, None):
            yield page, pair, spans


def moves_found(site: SiteStore) -> Share:
    """Moved paragraphs (that the texts show moved) covered by one edit of kind "move"."""
    found = total = 0
    for _, pair, (_, span) in shown_edits(site, MOVE):
        total += 1
        need = MOVE_COVER * (span[1] - span[0])
        found += any(edit.kind == MOVE_KIND and min(span[1], edit.new_offset + edit.new_length)
                     - max(span[0], edit.new_offset) >= need for edit in pair.report.edits)
    return Share(found, total)


def insert_ratios(site: SiteStore) -> list[float]:
    """Per page with one inserted paragraph: bytes of `changed_regions` over the bytes truly
    inserted (the paragraph, and the banner when the text holds it)."""
    ratios = []
    for _, pair, (_, span) in shown_edits(site, INSERT):
        truly = span[1] - span[0]
        banner = locate(pair.new.text, site.manifest.banner)
        if banner and not locate(pair.old.text, site.manifest.banner):
            truly += banner[1] - banner[0]
        ratios.append(sum(length for _, length in pair.report.changed_regions) / truly)
    return ratios


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def edits_found(site: SiteStore) -> Share:
    """Of the manifest's edits that change the extracted text, those an edit of the
    comparison overlaps (in the old text for a deletion, the new one otherwise)."""
    found = total = 0
    for _, pair, (old_span, new_span) in shown_edits(site):
        total += 1
        found += any(_overlaps(edit.old_offset, edit.old_length, old_span)
                     or _overlaps(edit.new_offset, edit.new_length, new_span)
                     for edit in pair.report.edits)
    return Share(found, total)
