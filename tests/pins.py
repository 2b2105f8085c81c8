"""Results pinned before the round-3 speed work: every measure, verdict and edit of every change.

Two kinds of pin, each a list of short digests in a fixed order, so a test can name the
first change whose result moved:

- `corpus_pins(path)`: every consecutive pair of versions of every page of one history of
  the shared corpus, compared by `cdc.compare` with both texts (the exact edits), one digest
  per pair of everything the report holds: chunks added, removed and moved, the alignment,
  the three measures, the verdict and the edits.
- `store_pins(db)`: every `changes` row of a store, keyed by page and the rank of its
  generation (crawl times differ from one crawl to the next, the rank does not), with every
  measure, verdict, excerpt and template flag; and every generation's digests and lengths.

Run as a script to write them (only when a change of results is intended, and listed in
CHANGELOG.md):

    python -m tests.pins --corpus ../shared/corpus --out tests/data/pins
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import duckdb

import cdc
from tests import sitecrawl

HISTORIES = {"en": "rustbook.jsonl.gz", "zh": "rustbook-zh.jsonl.gz", "ja": "rustbook-ja.jsonl.gz"}


def _digest(value: object) -> str:
    return hashlib.blake2b(repr(value).encode(), digest_size=8).hexdigest()


def report_fields(report: cdc.ChangeReport) -> tuple:
    """Everything a report says, as plain values (floats by repr: bit for bit)."""
    return (report.changed, repr(report.similarity), repr(report.unchanged_ratio),
            repr(report.retained_ratio), report.verdict,
            [c.index for c in report.added], [c.index for c in report.removed],
            [c.index for c in report.moved], list(report.alignment),
            report.changed_regions, report.removed_regions,
            [tuple(edit) for edit in report.edits], report.bytes_added, report.bytes_removed)


def history_pairs(path: Path) -> Iterator[tuple[str, int, bytes, bytes]]:
    """(url, index of the newer version, old text, new text) of each consecutive pair."""
    versions: dict[str, list[bytes]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            versions.setdefault(record["url"], []).append(cdc.content_for_chunking(record))
    for url, texts in versions.items():
        for index, (old, new) in enumerate(itertools.pairwise(texts), start=1):
            yield url, index, old, new


def corpus_pins(path: Path, every: int = 1) -> list[str]:
    """A digest per compared pair (every `every`-th pair), in corpus order."""
    pins = []
    for number, (_url, _index, old, new) in enumerate(history_pairs(path)):
        if number % every:
            continue
        report = cdc.compare(cdc.chunk_content(old), cdc.chunk_content(new), old_text=old, new_text=new)
        pins.append(_digest(report_fields(report)))
    return pins


ORIGIN = re.compile(r"^[a-z]+://[^/]+")  # a crawl's loopback port differs from build to build
CHANGE_COLUMNS = ("similarity, unchanged_ratio, retained_ratio, bytes_added, bytes_removed, regions, "
                  "verdict, excerpt, measure, template_only, template_edit")


def store_pins(db: Path) -> dict[str, str]:
    """A digest per page of its changes and generations, keyed by natural key."""
    connection = duckdb.connect(str(db), read_only=True)
    try:
        changes = connection.execute(
            f"SELECT natural_key, {CHANGE_COLUMNS}, previous_generation IS NULL FROM changes "
            "ORDER BY natural_key, generation").fetchall()
        generations = connection.execute(
            "SELECT g.natural_key, g.content_digest, g.length, g.chunk_count, c.digests, c.lengths "
            "FROM generations g LEFT JOIN chunk_lists c USING (natural_key, generation) "
            "ORDER BY g.natural_key, g.generation").fetchall()
    finally:
        connection.close()
    by_page: dict[str, list] = {}
    for row in changes:
        by_page.setdefault(row[0], []).append(("change", *(repr(v) if isinstance(v, float) else v
                                                           for v in row[1:])))
    for row in generations:
        by_page.setdefault(row[0], []).append(("generation", *row[1:]))
    return {ORIGIN.sub("", key): _digest(rows) for key, rows in sorted(by_page.items())}


# The docs crawls pinned are the test suite's (conftest.py's `docs_crawls`): 80 pages, seed 0.
CRAWL_PAGES, CRAWL_SEED = sitecrawl.SUITE_PAGES, sitecrawl.SUITE_SEED
CRAWL_INPUTS = "crawl-inputs.json"  # the digest of the docs' HTML the crawls' pins were made from


def docs_digest() -> str:
    """A digest of the docs' HTML pages the pinned crawls copy: Debian's python3.11-doc
    changes them from one security update to the next (3.11.2-6+deb12u9 added a paragraph to
    `library/asyncio-stream.html`), and the crawls' pins hold for the pages they were made of."""
    digest = hashlib.blake2b(digest_size=8)
    for path in sitecrawl.select_pages(CRAWL_PAGES):
        digest.update(path.encode() + b"\0" + (sitecrawl.DOCS / path).read_bytes())
    return digest.hexdigest()


def ingested_pins(db: Path, inputs: list[Path], *options: str) -> dict[str, str]:
    """`store_pins` of a new store that `cdc ingest` made from the inputs."""
    from cdc.cli.main import EXIT_OK
    from cdc.cli.main import main as cdc_main

    if cdc_main(["--db", str(db), "ingest", "--quiet", *options, *map(str, inputs)]) != EXIT_OK:
        raise RuntimeError(f"cdc ingest of {inputs} failed")
    return store_pins(db)


def store_pin_sets(corpus: Path, crawls: Path, workdir: Path) -> dict[str, dict[str, str]]:
    """The pinned stores: each corpus history, and the two docs crawls in each extraction mode."""
    from cdc.sources.extract import EXTRACTION_MODES

    built = sitecrawl.cached_two_crawls(crawls, pages=CRAWL_PAGES, seed=CRAWL_SEED)
    sets = {f"store-{name}": ingested_pins(workdir / f"{name}.duckdb", [corpus / filename])
            for name, filename in HISTORIES.items()}
    for mode in EXTRACTION_MODES:
        sets[f"store-crawl-{mode}"] = ingested_pins(workdir / f"crawl-{mode}.duckdb",
                                                    [built.crawl1, built.crawl2], "--extract", mode)
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--crawls", type=Path, help="a folder that keeps the two docs crawls between runs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, filename in HISTORIES.items():
        pins = corpus_pins(args.corpus / filename)
        (args.out / f"corpus-{name}.json").write_text(json.dumps(pins, indent=0) + "\n")
        print(name, len(pins), "pairs")
    with tempfile.TemporaryDirectory() as workdir:
        crawls = args.crawls or Path(workdir) / "crawls"
        for name, pins in store_pin_sets(args.corpus, crawls, Path(workdir)).items():
            (args.out / f"{name}.json").write_text(json.dumps(pins, indent=0, sort_keys=True) + "\n")
            print(name, len(pins), "pages")
    (args.out / CRAWL_INPUTS).write_text(json.dumps({"docs": docs_digest()}) + "\n")


if __name__ == "__main__":
    main()
