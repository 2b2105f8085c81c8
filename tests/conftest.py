"""Shared fixtures: the real revision corpus (when ../shared is beside the project)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from cdc import content_for_chunking
from cdc.demo.build import build_demo

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "rustbook.jsonl.gz"


@pytest.fixture(scope="session")
def corpus_versions() -> dict[str, list[bytes]]:
    """Normalised text of every version of every page, oldest first, by URL."""
    if not CORPUS.exists():
        pytest.skip(f"the revision corpus is not at {CORPUS}")
    versions: dict[str, list[bytes]] = defaultdict(list)
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            versions[record["url"]].append(content_for_chunking(record))
    return dict(versions)


@pytest.fixture(scope="session")
def demo_path(tmp_path_factory) -> Path:
    """A small demo store (36 pages, 5 crawl runs), read by the dashboard's tests."""
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    build_demo(path, pages=36, generations=5)
    return path
