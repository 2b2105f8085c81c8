"""`cdc migrate`: a store made under another chunker spec, re-chunked under this cdc's."""

from __future__ import annotations

import pytest

from cdc import spec_for
from cdc.cli.main import main
from cdc.core.gear import DEFAULT_PARAMS, ChunkParams
from cdc.errors import SpecMismatchError
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import SourceRecord
from cdc.store import RetentionPolicy, Store
from tests import crawlgen
from tests.storerows import store_rows

OLD_PARAMS = ChunkParams(avg_size=4096, min_size=1024, max_size=16384)  # another spec


def _ingest(path, params: ChunkParams) -> Store:
    store = Store(path, spec=spec_for(params))
    store.set_retention(RetentionPolicy(keep=2))  # some generations lose their text
    records = crawlgen.crawl(hosts=2, pages=4, versions=4)
    Ingester(store, params).run(SourceRecord("crawl", n, r) for n, r in enumerate(records, start=1))
    return store


def test_migrate_rechunks_retained_texts_and_remeasures_their_changes(tmp_path, capsys):
    old = _ingest(tmp_path / "old.duckdb", OLD_PARAMS)
    fresh = _ingest(tmp_path / "fresh.duckdb", DEFAULT_PARAMS)
    assert spec_for(OLD_PARAMS) != spec_for(DEFAULT_PARAMS)
    before = store_rows(old.path, ("generations", "changes"))
    with pytest.raises(SpecMismatchError):
        Store(old.path).stats()

    assert main(["--db", str(old.path), "migrate"]) == 0
    out = capsys.readouterr().out
    assert f"{spec_for(OLD_PARAMS)} -> {spec_for(DEFAULT_PARAMS)}" in out
    assert "re-chunked 16 retained generations of 8 pages" in out  # 8 pages x 2 kept

    migrated, expected = (store_rows(path, ("generations", "content_chunks", "changes"))
                          for path in (old.path, fresh.path))
    assert Store(old.path).stats()["pages"] == 8  # opens under this cdc's spec now
    assert migrated["content_chunks"] == expected["content_chunks"]
    # Retained generations have their new chunk counts; the others keep what they had.
    retained = {(row[0], row[1]) for row in expected["generations"] if row[6] is not None}
    assert [row for row in migrated["generations"] if row[:2] in retained] == \
        [row for row in expected["generations"] if row[:2] in retained]
    assert [row for row in migrated["generations"] if row[:2] not in retained] == \
        [row for row in before["generations"] if row[:2] not in retained]
    # Changes between two retained generations are measured again; the others are kept.
    remeasured = [row for row in expected["changes"] if (row[0], row[2]) in retained]
    assert remeasured and all(row in migrated["changes"] for row in remeasured)
    kept = [row for row in before["changes"] if (row[0], row[2]) not in retained]
    assert kept and all(row in migrated["changes"] for row in kept)

    assert main(["--db", str(old.path), "migrate"]) == 0
    assert "nothing to do" in capsys.readouterr().out
