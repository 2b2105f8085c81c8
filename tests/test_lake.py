"""`--parquet-out DIR`: the rows each batch writes, also as Parquet partitioned by host."""

from __future__ import annotations

import duckdb

from cdc.cli.main import EXIT_OK, main
from tests import crawlgen
from tests.storerows import store_rows


def read(lake, table: str) -> list[tuple]:
    with duckdb.connect() as connection:
        return sorted(connection.execute(
            "SELECT * EXCLUDE (host) FROM read_parquet(?, hive_partitioning = true)",
            [str(lake / table / "*" / "*.parquet")]).fetchall(), key=repr)


def stored(db, table: str) -> list[tuple]:
    return store_rows(db, [table])[table]


def test_the_lake_holds_what_each_run_wrote_and_runs_add_up(tmp_path):
    records = crawlgen.crawl(hosts=2, pages=4, versions=4)
    early = [record for record in records if record["fetched_at"] < "2026-01-03"]
    first = crawlgen.write_jsonl(tmp_path / "first.jsonl", early)
    second = crawlgen.write_jsonl(tmp_path / "second.jsonl", records)
    db, lake = tmp_path / "s.duckdb", tmp_path / "lake"
    for source in (first, second):
        assert main(["--db", str(db), "ingest", "--processes", "1", "--quiet",
                     "--parquet-out", str(lake), str(source)]) == EXIT_OK
    # Changes are kept for good; their template-only flag and edit are set at a run's end, not
    # by a batch.
    assert read(lake, "changes") == [row[:-2] for row in stored(db, "changes")]
    assert len(read(lake, "generations")) == len(stored(db, "generations")) == 2 * 4 * 4
    assert sorted(path.name for path in (lake / "generations").iterdir()) == ["host=shop0.example",
                                                                               "host=shop1.example"]
