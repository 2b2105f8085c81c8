"""The benchmarks, which the suite does not run: each imports, and the Dask benchmark's copies
of real ingest batches under new keys (`benchmarks/dask_ingest.py`, `_version_of`) are batches
the writer takes, every table's rows under the new key, or the writer's rate it prints is
that of a failed append."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.dask_ingest import _version_of
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import RawLine
from cdc.store import Store
from tests.storerows import store_rows

URL = "https://example.org/prices"
TEXTS = ["Widgets cost $19.99 each.\n\nShipping is free over $50.",
         "Widgets cost $24.99 each.\n\nShipping is free over $50.\n\nReturns within 30 days."]


def _lines() -> list[RawLine]:
    return [RawLine("prices.jsonl", number, json.dumps({
        "url": URL, "fetched_at": f"2024-0{number}-01T00:00:00Z",
        "sections": [{"heading": "", "text": text}]}).encode())
        for number, text in enumerate(TEXTS, start=1)]


def test_a_renamed_copy_of_a_batch_is_appended_whole_under_its_new_key(tmp_path):
    batches = []
    Ingester(Store(tmp_path / "crawl.duckdb"), on_write=batches.append).run(_lines())
    (batch,) = batches
    assert batch.tokens.num_rows and batch.words.num_rows  # the change's words and index rows

    copy = _version_of(batch, "copy1", 0)
    for name in type(batch).__dataclass_fields__:
        table, renamed = getattr(batch, name), getattr(copy, name)
        assert renamed.schema == table.schema, name
        assert renamed.column("natural_key").to_pylist() == [
            f"{key}#copy1" for key in table.column("natural_key").to_pylist()], name
    assert copy.tokens.column("token").to_pylist() == batch.tokens.column("token").to_pylist()

    # A later version numbers its generations higher: its words and index rows go with them.
    later = _version_of(batch, "later", 1)
    changed = set(later.changes.column("generation").to_pylist())
    before = set(batch.words.column("generation").to_pylist())
    for table in (later.words, later.tokens):
        assert before != set(table.column("generation").to_pylist()) <= changed

    store = Store(tmp_path / "writer.duckdb")
    with store.writing() as connection:
        store.write(connection, copy)
    stored = store_rows(store.path, ("generations", "change_words", "change_tokens"))
    for table, rows in stored.items():
        assert rows and all(f"{URL}#copy1" in row for row in rows), table


def test_every_benchmark_imports():
    """A benchmark is run by hand, not by the suite: an import it lost (a helper renamed in
    cdc) shows here, not when a user runs it."""
    root = Path(__file__).resolve().parent.parent
    names = sorted(path.stem for path in (root / "benchmarks").glob("*.py"))
    imports = "".join(f"import {name}\n" for name in names)
    script = f"import sys; sys.path[:0] = ['benchmarks', '.']\n{imports}"
    result = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(names) >= 15
