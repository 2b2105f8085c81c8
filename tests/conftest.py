"""Shared fixtures: the real revision corpus (when ../shared is beside the project), the demo
store, the two Wget crawls of the docs, and the Hypothesis profile every property test runs under."""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from cdc import content_for_chunking
from cdc.demo.build import build_demo
from tests import sitecrawl

# No per-example deadline (Hypothesis's default is 200 ms): on a loaded machine, with the
# suite on both cores, a slow example is the machine's doing and not a failure of the code.
settings.register_profile("cdc", deadline=None)
settings.load_profile("cdc")

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


@contextlib.contextmanager
def _run_wide_folder(tmp_path_factory, name: str) -> Iterator[Path]:
    """A folder for this whole test run, held under an exclusive lock for the block: under
    xdist the workers' temporary folders share a parent, so what one worker builds there the
    others find built (and wait for while it is being built)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / name
    folder.mkdir(exist_ok=True)
    with (base / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder


@pytest.fixture(scope="session")
def docs_crawls(tmp_path_factory) -> sitecrawl.TwoCrawls:
    """The two Wget crawls of the docs (`tests.sitecrawl`), built once for the run: the files
    are only read (each test ingests them into stores of its own)."""
    reason = sitecrawl.available()
    if reason:
        pytest.skip(reason)
    with _run_wide_folder(tmp_path_factory, "docs-crawls") as folder:
        return sitecrawl.cached_two_crawls(folder, pages=sitecrawl.SUITE_PAGES, seed=sitecrawl.SUITE_SEED)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests first: the grouped slow ones (a group runs whole in one worker), then
    the other slow ones, then the rest. Each xdist worker takes the next test or group when it
    runs low, so the long ones started first leave the short ones to even the two workers out
    at the end; in collection order a 60 s test could start last and hold the run up alone.
    A stable sort, the same in every worker (xdist needs their collections equal), and
    `--no-loadscope-reorder` keeps it (xdist's own order counts tests, not their time)."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("slow") is None:
            return 2
        return 0 if item.get_closest_marker("xdist_group") else 1

    items.sort(key=rank)
