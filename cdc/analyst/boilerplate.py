"""Boilerplate: chunks that recur across a host's pages, and across hosts.

The seed's rule: a digest on more than a few percent of a host's pages is boilerplate by
definition (navigation, disclaimers, footers). Here: in the pages' latest generations, on
more than `share` of the host's pages (default 5%) and on at least `min_pages` of them
(default 3, so two pages that quote each other are not a template). Digests found on
several hosts are shared templates or syndicated passages. Excluding boilerplate before
comparing makes change detection see the content, not the frame around it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.core.excerpts import one_line, shortened
from cdc.store import BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE, Store

SAMPLE_CHARS = 160


@dataclass(frozen=True)
class BoilerplateChunk:
    digest: bytes
    pages: int
    share: float  # of the host's pages
    sample: str  # text of one occurrence, shortened

    @property
    def hex(self) -> str:
        return self.digest.hex()


@dataclass(frozen=True)
class SharedChunk:
    digest: bytes
    hosts: list[str]
    pages: int
    sample: str

    @property
    def hex(self) -> str:
        return self.digest.hex()


def _shortened(data: bytes | None) -> str:
    return shortened(one_line((data or b"").decode("utf-8", "ignore")), SAMPLE_CHARS)


def host_boilerplate(store: Store, host: str, share: float = BOILERPLATE_SHARE,
                     min_pages: int = BOILERPLATE_MIN_PAGES) -> list[BoilerplateChunk]:
    """The host's boilerplate chunks, most widespread first, each with a sample of its text."""
    return [BoilerplateChunk(row.digest, row.pages, row.share, _shortened(row.sample))
            for row in store.host_boilerplate(host, share, min_pages, True)]


def shared_across_hosts(store: Store, min_hosts: int = 2, limit: int = 200) -> list[SharedChunk]:
    """Chunks present on `min_hosts` or more hosts, with the hosts."""
    return [SharedChunk(row.digest, row.hosts, row.pages, _shortened(row.sample))
            for row in store.shared_across_hosts(min_hosts, limit, True)]
