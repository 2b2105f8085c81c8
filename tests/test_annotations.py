"""Annotations: a change marked significant, noise or unsure, kept in the store through
re-ingest, backfills, `cdc migrate` and retention, carried by the export, and moved between
two analysts' stores as CSV (erased with its page: `tests/test_store.py`, byte for byte).
Real DuckDB files, `cdc` run through `cli.main` as the console script runs it."""

from __future__ import annotations

import csv
import io
import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from cdc import spec_for
from cdc.analyst.annotations import (
    CSV_COLUMNS,
    NOTE_MAX_CHARS,
    annotate,
    annotations_csv,
    import_annotations,
)
from cdc.cli.main import EXIT_FAILURE, EXIT_OK, EXIT_SKIPPED, main
from cdc.core.captures import capture_id
from cdc.errors import AnnotationError, PageNotFoundError
from cdc.ingest.ingester import Ingester
from cdc.present.export import changes_csv
from cdc.sources.jsonl import SourceRecord
from cdc.store import SCHEMA_VERSION, Store
from tests import crawlgen
from tests.test_history import URL, bodies, ingest, records_of
from tests.test_migrate import OLD_PARAMS

ROOT = Path(__file__).resolve().parents[1]
PAGE = "https://shop0.example/item/1"
# Notes are untrusted text: a formula, a leading quote, a line break, markup, other scripts.
NOTES = ["=HYPERLINK(\"http://evil\")", "'quoted already", "two\nlines", "<b>bold</b> & more",
         "价格 2,980円 changed"]


@pytest.fixture
def crawl():
    return crawlgen.crawl(hosts=2, pages=3, versions=3)


def _ingested(path, records) -> Store:
    store = Store(path)
    ingest(store, records)
    return store


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def marks(store: Store) -> list[tuple]:
    """What a reader sees of each annotation: the change and the judgement."""
    return [(row.natural_key, row.generation, row.label, row.note, row.annotated_by, row.annotated_at)
            for row in store.annotations()]


def test_an_annotation_is_read_with_its_change_and_replaced_by_the_next(tmp_path, crawl):
    store = _ingested(tmp_path / "cdc.duckdb", crawl)
    second = crawlgen.generation(1)
    made = annotate(store, PAGE.replace("shop0", "SHOP0"), second, "Noise", "  the date  ", "ann")
    assert (made.natural_key, made.generation, made.label, made.note) == (PAGE, second, "noise", "the date")
    # A number no generation starts at names the one current then, as `cdc compare` reads it.
    again = annotate(store, PAGE, second + 5, "significant", None, "bo")
    assert again.generation == second
    (row,) = store.annotations()
    assert (row.generation, row.previous_generation, row.verdict, row.label, row.note, row.annotated_by) == (
        second, crawlgen.generation(0), "minor", "significant", None, "bo")
    assert store.annotation(PAGE, second + 5) == again
    changes = {(c.natural_key, c.generation): c for c in store.changes()}
    assert changes[PAGE, second].label == "significant" and changes[PAGE, second].annotated_by == "bo"
    assert sum(c.label is not None for c in changes.values()) == 1
    assert [c.natural_key for c in store.changes(labels=["significant"])] == [PAGE]
    assert store.count_changes(labels=["noise", "unsure"]) == 0
    assert [c.label for c in store.history(PAGE)] == [None, "significant", None]


def test_annotations_survive_reingest_and_retention_and_the_export_carries_them(tmp_path, crawl, capsys):
    store = _ingested(tmp_path / "cdc.duckdb", crawl)
    for version, label in ((0, "unsure"), (1, "significant"), (2, "noise")):
        annotate(store, PAGE, crawlgen.generation(version), label, NOTES[version], "ann")
    before = marks(store)
    summary = ingest(store, crawl[::-1], batch_records=5)  # the same crawl again, in another order
    assert summary.new_generations == 0 and marks(store) == before
    # Retention drops the older texts (the changes' rows lose them); the annotations stay.
    assert main(["--db", str(store.path), "prune", "--keep", "1"]) == EXIT_OK
    capsys.readouterr()
    assert not store.generations(PAGE)[0].retained and marks(store) == before
    code, out, _ = run(capsys, "--db", str(store.path), "export", "--label", "significant",
                       "--label", "unsure")
    assert code == EXIT_OK
    rows = list(csv.DictReader(io.StringIO(out, newline="")))
    assert [(r["url"], r["generation"], r["label"], r["note"], r["annotated_by"]) for r in rows] == [
        (PAGE, str(crawlgen.generation(1)), "significant", NOTES[1], "ann"),
        (PAGE, str(crawlgen.generation(0)), "unsure", "'" + NOTES[0], "ann")]  # the formula neutralised
    assert out == changes_csv(store.changes(labels=["unsure", "significant"])).decode()


def test_annotations_survive_backfills_and_follow_a_generation_whose_start_moved(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    one, two, three = bodies(5, 3)
    ingest(store, records_of([(URL, 20, two), (URL, 40, three)]))
    second, third = (g.generation for g in store.generations(URL))
    annotate(store, URL, second, "noise", "first seen", "ann")
    annotate(store, URL, third, "significant", "the price", "ann")
    # A late fetch of other content before both: the first's change row is measured again.
    ingest(store, records_of([(URL, 10, one)]))
    assert [g.generation for g in store.generations(URL)][1:] == [second, third]
    assert [(c.generation, c.verdict, c.label) for c in store.history(URL)] == [
        (capture_id(datetime(2026, 1, 1, 10)), "new", None), (second, "minor", "noise"),
        (third, "minor", "significant")]
    # A late fetch of the third's content, earlier: its generation starts then, a new number;
    # the annotation moves with it, and the old number still names it.
    ingest(store, records_of([(URL, 30, three)]))
    moved = store.generations(URL)[-1].generation
    assert moved == capture_id(datetime(2026, 1, 2, 6)) != third
    with duckdb.connect(str(store.path), read_only=True) as connection:
        assert connection.execute("SELECT generation, label FROM annotations ORDER BY 1").fetchall() == [
            (second, "noise"), (moved, "significant")]
    assert [(row.generation, row.label, row.note) for row in store.annotations()] == [
        (second, "noise", "first seen"), (moved, "significant", "the price")]
    assert store.history(URL)[-1].label == "significant"
    assert store.annotation(URL, third).label == "significant"
    # Annotated again under its old number, the change has one annotation: the new one.
    annotate(store, URL, third, "unsure", None, "bo")
    assert [(row.generation, row.label) for row in store.annotations()] == [
        (second, "noise"), (moved, "unsure")]
    with duckdb.connect(str(store.path), read_only=True) as connection:
        assert connection.execute("SELECT count(*) FROM annotations").fetchone() == (2,)


def test_annotations_survive_migrate(tmp_path, capsys):
    path = tmp_path / "old.duckdb"
    old = Store(path, spec=spec_for(OLD_PARAMS))
    records = crawlgen.crawl(hosts=1, pages=2, versions=3)
    Ingester(old, OLD_PARAMS).run(SourceRecord("crawl", n, r) for n, r in enumerate(records, start=1))
    annotate(old, PAGE, crawlgen.generation(2), "significant", NOTES[4], "ann")
    before = marks(old)
    assert main(["--db", str(path), "migrate"]) == EXIT_OK
    assert "re-chunked" in capsys.readouterr().out
    assert marks(Store(path)) == before


def test_a_store_of_schema_4_gets_the_annotations_table(tmp_path, crawl):
    store = _ingested(tmp_path / "cdc.duckdb", crawl)
    with duckdb.connect(str(store.path)) as connection:  # as this cdc's round 2 left stores
        connection.execute("DROP TABLE annotations")
        connection.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    assert Store(store.path).needs_upgrade()
    assert Store(store.path).annotations() == []
    assert Store(store.path).meta()["schema_version"] == str(SCHEMA_VERSION) == "5"
    annotate(Store(store.path), PAGE, crawlgen.generation(1), "noise", None, "ann")
    assert len(Store(store.path).annotations()) == 1


def test_annotations_move_between_two_stores_as_csv_and_bad_rows_are_reported(tmp_path, crawl, capsys):
    mine, theirs = (_ingested(tmp_path / f"{name}.duckdb", crawl) for name in ("mine", "theirs"))
    pages = [f"https://shop{h}.example/item/{p}" for h in range(2) for p in range(3)]
    for page, note in zip(pages, NOTES):
        annotate(mine, page, crawlgen.generation(1), "significant", note, "ann")
    exported = tmp_path / "annotations.csv"
    code, _, err = run(capsys, "--db", str(mine.path), "annotations", "--csv", "-o", str(exported))
    assert code == EXIT_OK and "5 annotations written" in err
    data = exported.read_bytes()
    assert data == annotations_csv(mine.annotations())
    assert data.startswith(",".join(CSV_COLUMNS).encode() + b"\r\n")
    cells = [cell for row in csv.reader(io.StringIO(data.decode(), newline="")) for cell in row]
    assert "'" + NOTES[0] in cells and "''quoted already" in cells  # neutralised, and so undone exactly
    assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells)
    # Bad rows among good ones: each reported with its line; the good ones all imported.
    late = f"{datetime(2026, 12, 1):%Y-%m-%d %H:%M:%S}Z"
    bad = [f"{pages[5]},{crawlgen.generation(1)},,,nois,,ann,{late}",  # an unknown label
           f"https://nowhere.example/x,{crawlgen.generation(1)},,,noise,,ann,{late}",  # no such page
           f"{pages[5]},20200101000000,,,noise,,ann,{late}",  # before the page's first generation
           f"{pages[5]},soon,,,noise,,ann,{late}",  # not a number
           f"{pages[5]},{crawlgen.generation(2)},,,noise,,ann,yesterday",  # not a time
           f"{pages[5]},{crawlgen.generation(2)},,,noise",  # cells missing
           f"{pages[5]},{crawlgen.generation(2)},,,noise,,,{late}"]  # nobody
    good = f"{pages[5]},{crawlgen.generation(2)},,,unsure,\"a note\nover two lines\",bo,{late}"
    lines = data.decode().split("\r\n")
    text = "\r\n".join([lines[0], bad[0], *lines[1:3], *bad[1:], good, *lines[3:]])
    exported.write_text(text, encoding="utf-8", newline="")
    code, out, _ = run(capsys, "--db", str(theirs.path), "annotate", "--import", str(exported))
    assert code == EXIT_SKIPPED
    assert "6 annotations added, 0 replaced an older one, 0 left out" in out and "7 bad rows" in out
    reported = [line.split(": ", 1)[0].rsplit(":", 1)[1] for line in out.splitlines() if "skipped" in line]
    assert reported == ["2", "5", "6", "7", "8", "9", "10"]
    assert f"{exported}:2: unknown label 'nois'" in out
    assert "no page https://nowhere.example/x in" in out and "has no generation 20200101000000" in out
    assert marks(theirs)[:5] == marks(mine)  # every note back exactly, formula and quote included
    assert marks(theirs)[5][2:5] == ("unsure", "a note\nover two lines", "bo")
    # Imported again, nothing is newer: every row left out, nothing changed.
    before = marks(theirs)
    exported.write_bytes(data)
    code, out, _ = run(capsys, "--db", str(theirs.path), "annotate", "--import", str(exported))
    assert code == EXIT_OK and "0 annotations added, 0 replaced an older one, 5 left out" in out
    assert marks(theirs) == before
    # A later judgement in the other store replaces the older one; an older one does not.
    annotate(mine, pages[0], crawlgen.generation(1), "noise", "on second thought", "ann")
    summary = import_annotations(theirs, annotations_csv(mine.annotations()).decode())
    assert (summary.added, summary.replaced, summary.kept, summary.bad) == (0, 1, 4, [])
    assert theirs.annotation(pages[0], crawlgen.generation(1)).note == "on second thought"


def test_bad_input_is_one_line_and_changes_nothing(tmp_path, crawl, capsys):
    store = _ingested(tmp_path / "cdc.duckdb", crawl)
    annotate(store, PAGE, crawlgen.generation(1), "noise", None, "ann")
    before = marks(store)
    db = ["--db", str(store.path)]
    second = str(crawlgen.generation(1))
    empty, headless = tmp_path / "empty.csv", tmp_path / "headless.csv"
    empty.write_text("")
    headless.write_text(f"{PAGE},{second},noise\r\n")
    latin = tmp_path / "latin.csv"
    latin.write_bytes(",".join(CSV_COLUMNS).encode()
                      + f"\r\n{PAGE},{second},,,noise,caf\xe9,ann,".encode("latin-1"))
    cases = {
        "no page https://shop0.example/item/9": ["annotate", "https://shop0.example/item/9",
                                                 "--generation", second, "--label", "noise"],
        "has no generation 20200101000000": ["annotate", PAGE, "--generation", "20200101000000",
                                             "--label", "noise"],
        "unknown label 'nois'": ["annotate", PAGE, "--generation", second, "--label", "nois"],
        "annotate needs --generation G, --label LABEL": ["annotate", PAGE],
        f"at most {NOTE_MAX_CHARS:,}": ["annotate", PAGE, "--generation", second, "--label", "noise",
                                        "--note", "x" * (NOTE_MAX_CHARS + 1)],
        "give a name": ["annotate", PAGE, "--generation", second, "--label", "noise", "--by", " "],
        "takes no URL": ["annotate", PAGE, "--import", str(empty)],
        "no such file": ["annotate", "--import", str(tmp_path / "absent.csv")],
        "the file is empty": ["annotate", "--import", str(empty)],
        "has no column": ["annotate", "--import", str(headless)],
        "is not UTF-8": ["annotate", "--import", str(latin)],
        "unknown label 'maybe'": ["annotations", "--label", "maybe"],
    }
    for message, args in cases.items():
        code, out, err = run(capsys, *db, *args)
        assert (code, out, err.count("\n")) == (EXIT_FAILURE, "", 1), (args, out, err)
        assert message in err, (message, err)
    assert marks(store) == before
    with pytest.raises(PageNotFoundError):
        annotate(store, PAGE, 20200101000000, "noise")
    with pytest.raises(AnnotationError):
        annotate(store, PAGE, crawlgen.generation(1), "fine")


def test_the_listing_as_a_table_and_as_json(tmp_path, crawl, capsys):
    store = _ingested(tmp_path / "cdc.duckdb", crawl)
    annotate(store, PAGE, crawlgen.generation(2), "significant", NOTES[2], "ann")
    annotate(store, "https://shop1.example/item/0", crawlgen.generation(1), "noise", None, "bo")
    code, out, _ = run(capsys, "--db", str(store.path), "annotations")
    assert code == EXIT_OK
    assert [line.split()[0] for line in out.splitlines()] == ["label", "significant", "noise"]
    assert "two lines" in out.splitlines()[1]  # a note's line break shown as a space
    code, out, _ = run(capsys, "--db", str(store.path), "annotations", "--json", "--label", "noise")
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row["url"] == "https://shop1.example/item/0" and row["label"] == "noise"
    assert (row["generation"], row["previous_generation"]) == (crawlgen.generation(1), crawlgen.generation(0))
    assert row["annotated_at"].endswith("Z")
    assert datetime.fromisoformat(row["annotated_at"][:-1]) > datetime.now() - timedelta(days=1)
    code, out, _ = run(capsys, "--db", str(store.path), "annotations", "--url", PAGE, "--json")
    assert [json.loads(line)["url"] for line in out.splitlines()] == [PAGE]


HOLD_LOCK = """
import sys, time
from cdc.store import Store
with Store(sys.argv[1]).writing() as connection:  # as an ingest's batch holds it
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_the_dashboard_s_write_waits_for_a_writer_and_its_process_keeps_reading(tmp_path, crawl):
    """The dashboard annotates through `cdc annotate` in a child process: while another
    process writes, the child waits for cdc's write lock, and this process (the app's) keeps
    reading meanwhile, which a write connection of its own would have made fail."""
    import subprocess
    import sys
    import threading

    import ui_annotate

    store = _ingested(tmp_path / "cdc.duckdb", crawl)
    with subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(store.path), "2"], stdout=subprocess.PIPE,
                          text=True, cwd=ROOT) as holder:
        assert holder.stdout.readline().strip() == "holding"
        outcome: list[str | None] = []
        saving = threading.Thread(target=lambda: outcome.append(ui_annotate.save_annotation(
            store, PAGE, crawlgen.generation(1), "significant", "-starts like an option", "ann")))
        started = time.monotonic()
        saving.start()
        reads = 0
        while saving.is_alive():
            assert len(store.changes(limit=5)) == 5  # never a failed read
            reads += 1
        assert outcome == [None] and time.monotonic() - started > 1.0 and reads > 0
    saved = store.annotation(PAGE, crawlgen.generation(1))
    assert (saved.label, saved.note, saved.annotated_by) == ("significant", "-starts like an option", "ann")
    assert ui_annotate.save_annotation(store, PAGE, 20200101000000, "noise", "", "ann").startswith(
        f"{PAGE} has no generation 20200101000000")
