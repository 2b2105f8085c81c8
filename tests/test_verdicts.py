"""Every verdict the store writes can be chosen: by `cdc export --verdict` and in the Export
view, whose lists are one list (`cdc.core.verdicts`); `changed` picks the changes that could
not be measured. The share changed that lists order by is one measure in SQL and in Python."""

from __future__ import annotations

import contextlib
import csv
import io
import sys
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from cdc.cli.main import EXIT_OK, main
from cdc.core.verdicts import NEW, STORED_VERDICTS, UNMEASURED, changed_share
from cdc.store import Store
from cdc.store.rows import changed_share_sql
from tests import crawlgen, textgen
from tests.test_dashboard import open_page

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    """A store whose change rows hold every verdict ingest writes: first sightings, one-word
    edits, a half rewritten page, a page replaced by another, a paragraph break moved (the
    same words: `unchanged`), and a backfill past the retained texts (two changes whose
    previous text was trimmed before it came: `changed`, not measured)."""
    directory = tmp_path_factory.mktemp("verdicts")
    records = crawlgen.crawl(hosts=1, pages=2, versions=6)
    words = textgen.text(31, 4_000).decode().split(" ")
    fresh = [f"fresh{n}" for n in range(len(words))]
    half = len(words) // 2
    pairs = {"same-words": [" ".join(words[:200]) + "\n\n" + " ".join(words[200:]),
                            " ".join(words[:260]) + "\n\n" + " ".join(words[260:])],
             "rewritten": [" ".join(words), " ".join(words[:half] + fresh[half:])],
             "replaced": [" ".join(words), " ".join(fresh)]}
    for name, bodies in pairs.items():
        records += [crawlgen.record(f"https://shop1.example/{name}", 2 + version, body,
                                    with_boilerplate=False) for version, body in enumerate(bodies)]
    # Versions 2 to 5 first (the default retention keeps the newest 3 texts), then 0 and 1.
    boundary = crawlgen.START.replace(day=3).isoformat()
    path = str(directory / "cdc.duckdb")
    for name, part in (("newer", [r for r in records if r["fetched_at"] >= boundary]),
                       ("older", [r for r in records if r["fetched_at"] < boundary])):
        crawl = crawlgen.write_jsonl(directory / f"{name}.jsonl", part)
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["--db", path, "ingest", str(crawl)]) == EXIT_OK
    return path


def written_verdicts(path: str) -> set[str]:
    with duckdb.connect(path, read_only=True) as connection:
        return {verdict for verdict, in connection.execute("SELECT DISTINCT verdict FROM changes").fetchall()}


def exported(capsys, db: str, *verdicts: str) -> list[dict]:
    code = main(["--db", db, "export", *(arg for verdict in verdicts for arg in ("--verdict", verdict))])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    return list(csv.DictReader(io.StringIO(out, newline="")))


def test_the_store_writes_every_verdict_there_is(db):
    assert written_verdicts(db) == set(STORED_VERDICTS)


def test_cdc_export_selects_each_verdict_the_store_writes(capsys, db):
    store = Store(db)
    for verdict in written_verdicts(db):
        rows = exported(capsys, db, verdict)
        assert rows and {row["verdict"] for row in rows} == {verdict}
        assert len(rows) == store.count_changes(verdicts=[verdict]), verdict


def test_cdc_export_verdict_changed_gives_the_changes_that_were_not_measured(capsys, db):
    unmeasured = {(row.natural_key, row.generation) for row in Store(db).changes()
                  if row.measure == "digests"}
    rows = exported(capsys, db, "changed")
    assert len(unmeasured) == 2 and {(row["url"], int(row["generation"])) for row in rows} == unmeasured
    assert all(row["similarity"] == row["unchanged_ratio"] == "" for row in rows)


def test_the_export_view_selects_each_verdict_the_store_writes(db, monkeypatch):
    monkeypatch.setenv("CDC_DB", db)
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    app = open_page(AppTest.from_file(str(ROOT / "app.py"), default_timeout=60), "views/export.py")
    store = Store(db)
    for verdict in sorted(written_verdicts(db)):
        app.multiselect(key="export-verdicts").set_value([verdict])
        app.run()
        assert not app.exception, verdict
        count = store.count_changes(verdicts=[verdict])
        assert count and f"{count:,} changes match" in [caption.value for caption in app.caption], verdict
        assert set(app.dataframe[0].value["verdict"]) == {verdict}


def test_the_share_changed_is_one_measure_in_sql_and_in_python(db):
    """Lists order by the share changed in SQL (`changed_share_sql`), views and exports show it
    from Python (`changed_share`): the two agree on every change row the store writes, and a
    change that was not measured, or a first sighting, has none (not 100%)."""
    with duckdb.connect(db, read_only=True) as connection:
        rows = connection.execute(f"""SELECT verdict, unchanged_ratio, retained_ratio, {changed_share_sql()}
                                      FROM changes""").fetchall()
    assert {verdict for verdict, *_ in rows} == set(STORED_VERDICTS)
    for verdict, unchanged, retained, in_sql in rows:
        in_python = changed_share(unchanged, retained)
        if verdict in (NEW, UNMEASURED):
            assert in_python is None and in_sql is None
        else:
            assert in_python == pytest.approx(float(in_sql)) == pytest.approx(1 - min(unchanged, retained))
            assert 0.0 <= in_python <= 1.0
