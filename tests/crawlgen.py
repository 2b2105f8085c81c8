"""Small synthetic crawls as JSONL records, for store and command-line tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests import textgen

START = datetime(2026, 1, 1, tzinfo=UTC)
# Long and not periodic, like a real mega-menu and footer. Each is one section whose lines
# are running text, so normalisation makes each one block of several KB (as a site's footer
# paragraph would be): a block of its own, cut inside by the Gear rule at the same places on
# every page, so whole chunks of them recur.
NAVIGATION = "Home | Products | Offers | " + textgen.text(900, 6_000).decode()
FOOTER = "Copyright Example Shops Ltd. " + textgen.text(901, 5_000).decode()


def record(url: str, version: int, body: str, *, with_boilerplate: bool = True, **extra) -> dict:
    sections = [{"heading": "nav", "text": NAVIGATION}] if with_boilerplate else []
    sections.append({"heading": "main", "text": body})
    if with_boilerplate:
        sections.append({"heading": "footer", "text": FOOTER})
    return {"url": url, "fetched_at": (START + timedelta(days=version)).isoformat(),
            "title": url.rsplit("/", 1)[-1], "sections": sections, **extra}


def page_versions(seed: int, versions: int, size: int = 6_000) -> list[str]:
    """Bodies of successive versions: each one edits a few words of the previous."""
    body = textgen.text(seed, size).decode()
    bodies = [body]
    for v in range(1, versions):
        words = body.split(" ")
        at = (seed * 7919 + v * 104729) % len(words)
        words[at] = f"EDIT{v}"
        body = " ".join(words)
        bodies.append(body)
    return bodies


def crawl(hosts: int = 2, pages: int = 6, versions: int = 4) -> list[dict]:
    """Records of `pages` pages on each of `hosts` hosts, `versions` versions each, in fetch order."""
    records = []
    for h in range(hosts):
        for p in range(pages):
            url = f"https://shop{h}.example/item/{p}"
            for v, body in enumerate(page_versions(h * 100 + p, versions)):
                records.append(record(url, v, body))
    records.sort(key=lambda r: r["fetched_at"])
    return records


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def generation(version: int) -> int:
    """The number of the generation first fetched as `record(url, version, ...)`: its
    capture time (cdc.core.captures.capture_id)."""
    from cdc.core.captures import capture_id

    return capture_id((START + timedelta(days=version)).replace(tzinfo=None))
