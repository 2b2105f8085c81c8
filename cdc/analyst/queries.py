"""Questions an analyst asks of a store, answered with the library's types.

Shared by the command line and the dashboard, so both say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.core.captures import current_generation
from cdc.core.chunking import Chunk
from cdc.core.chunks import chunks_from_lengths
from cdc.core.compare import ChangeReport, compare
from cdc.core.urls import canonical_url
from cdc.errors import InvalidUrlError, PageNotFoundError
from cdc.store import BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE, PageInfo, Store, Version


def find_page(store: Store, url: str) -> PageInfo:
    """The page for a URL as typed: canonicalised, with suggestions when it is unknown."""
    try:
        key = canonical_url(url)
    except InvalidUrlError:
        key = url.strip()
    page = store.page(key)
    if page is not None:
        return page
    close = store.find_pages(url.strip().rstrip("/").split("://")[-1], limit=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `cdc stats` shows what the store holds"
    raise PageNotFoundError(f"no page {key} in {store.path}{hint}")


def _current_at(page: PageInfo, numbers: list[int], number: int) -> int:
    """The generation a number names: the one it is, else the one current at that time."""
    current = current_generation(numbers, number)
    if current is None:
        raise PageNotFoundError(
            f"{page.natural_key} has no generation {number}: its generations are {_listed(numbers)} "
            "(`cdc history` lists them)")
    return current


def generation_at(store: Store, page: PageInfo, number: int) -> int:
    """The generation of a page a number names, as `cdc compare --to` resolves it: the one it
    is, else the one current at that time; a `PageNotFoundError` listing them when the number
    is before the first."""
    return _current_at(page, [g.generation for g in store.generations(page.natural_key)], number)


def _listed(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers)) if len(numbers) <= 4 else f"{numbers[0]} to {numbers[-1]}"


def version_chunks(version: Version) -> list[Chunk]:
    return chunks_from_lengths([digest for digest, _ in version.chunks],
                               [length for _, length in version.chunks])


@dataclass(frozen=True)
class Comparison:
    page: PageInfo
    old: Version
    new: Version
    report: ChangeReport
    ignored: frozenset[bytes]  # boilerplate digests left out, if asked


def compare_generations(store: Store, url: str, old: int | None = None, new: int | None = None,
                        ignore_boilerplate: bool = False) -> Comparison:
    """Compare two retained generations of a page; by default the latest two, or `new` and
    the one before it. A number is a generation's capture time (YYYYMMDDhhmmss): one that
    no generation starts at names the generation current at that time."""
    page = find_page(store, url)
    numbers = [g.generation for g in store.generations(page.natural_key)]
    new = page.latest_generation if new is None else _current_at(page, numbers, new)
    if old is None:
        before = [number for number in numbers if number < new]
        if not before:
            raise PageNotFoundError(f"{page.natural_key} has no generation before {new} to compare it with")
        old = before[-1]
    old = _current_at(page, numbers, old)
    held = store.versions(page.natural_key, [old, new])  # both through one connection
    for generation in (old, new):
        if generation not in held:
            raise PageNotFoundError(
                f"generation {generation} of {page.natural_key} is past the retention limit: its "
                "text and chunks were dropped (`cdc history` lists the generations kept)")
    versions = [held[old], held[new]]
    # The host's template over its retained generations: across a site-wide change, both the
    # navigation it replaced and the new one are left out.
    ignored = frozenset(store.template_digests(page.host, BOILERPLATE_SHARE, BOILERPLATE_MIN_PAGES)) \
        if ignore_boilerplate else frozenset()
    report = compare(version_chunks(versions[0]), version_chunks(versions[1]),
                     old_text=versions[0].text, new_text=versions[1].text, ignore=ignored)
    return Comparison(page, versions[0], versions[1], report, ignored)
