"""The store commands of `cdc`: ingest, compare, history, export, boilerplate, erase, prune,
stats. Most run `cli.main` in this process (the same code as the console script); a few run
a real `cdc` process for exit codes and messages as a shell sees them."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import subprocess
import sys

import pytest

from cdc.cli.main import EXIT_FAILURE, EXIT_OK, EXIT_SKIPPED, main
from cdc.present.export import changes_csv, neutralise
from cdc.store import Store
from tests import crawlgen


@pytest.fixture
def crawl_file(tmp_path):
    return crawlgen.write_jsonl(tmp_path / "crawl.jsonl", crawlgen.crawl(hosts=2, pages=3, versions=3))


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "store" / "cdc.duckdb")


def figure(out: str, name: str) -> int:
    """The number on the summary line that starts with `name`."""
    match = re.search(rf"^{name}\s+([\d,]+)", out, re.MULTILINE)
    assert match, f"no line {name!r} in:\n{out}"
    return int(match.group(1).replace(",", ""))


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_ingest_prints_a_summary_and_exit_code_0(capsys, crawl_file, db):
    code, out, _ = run(capsys, "--db", db, "ingest", "--processes", "1", str(crawl_file))
    assert code == EXIT_OK
    assert figure(out, "records read") == 18
    assert figure(out, "new generations") == 18
    assert figure(out, "bad records") == 0


def test_ingest_of_gzip_and_stdin(capsys, tmp_path, db, monkeypatch):
    records = crawlgen.crawl(hosts=1, pages=2, versions=2)
    path = tmp_path / "crawl.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    assert run(capsys, "--db", db, "ingest", str(path))[0] == EXIT_OK
    more = [crawlgen.record("https://shop0.example/item/9", 0, "stdin page " * 50)]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(more[0]).encode())))
    code, out, _ = run(capsys, "--db", db, "ingest", "-")
    assert code == EXIT_OK and figure(out, "new generations") == 1


def test_skipped_records_are_listed_with_lines_and_exit_code_3(capsys, tmp_path, db):
    good = crawlgen.crawl(hosts=1, pages=1, versions=2)
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(good[0]) + "\n{broken\n" + json.dumps({"title": "x"}) + "\n"
                    + json.dumps(good[1]) + "\n")
    code, out, _ = run(capsys, "--db", db, "ingest", str(path))
    assert code == EXIT_SKIPPED
    assert figure(out, "new generations") == 2
    assert f"skipped {path}:2: not valid JSON" in out
    assert f"skipped {path}:3: no url" in out


def test_a_missing_input_file_fails_before_any_work(capsys, tmp_path, db):
    code, out, err = run(capsys, "--db", db, "ingest", str(tmp_path / "absent.jsonl"))
    assert code == EXIT_FAILURE and out == ""
    assert err.count("\n") == 1 and "absent.jsonl" in err
    assert not (tmp_path / "store").exists()


def test_compare_history_and_json(capsys, crawl_file, db):
    run(capsys, "--db", db, "ingest", str(crawl_file))
    code, out, _ = run(capsys, "--db", db, "compare", "https://shop1.example/item/2")
    assert code == EXIT_OK
    assert f"generation {crawlgen.generation(1)} -> {crawlgen.generation(2)}" in out
    assert "verdict: minor" in out and "EDIT2" in out
    code, out, _ = run(capsys, "--db", db, "compare", "https://shop1.example/item/2", "--from",
                       str(crawlgen.generation(0)), "--to", str(crawlgen.generation(2)), "--json")
    report = json.loads(out)
    assert (report["from"], report["to"], report["verdict"]) == (
        crawlgen.generation(0), crawlgen.generation(2), "minor")
    assert {edit["kind"] for edit in report["edits"]} == {"replace"}
    code, out, _ = run(capsys, "--db", db, "history", "https://SHOP1.example/item/2")
    assert code == EXIT_OK
    numbers = [line.split()[0] for line in out.splitlines()[2:]]
    assert numbers == [str(crawlgen.generation(v)) for v in range(3)]


def test_compare_of_an_unknown_url_is_one_line(capsys, crawl_file, db):
    run(capsys, "--db", db, "ingest", str(crawl_file))
    code, _, err = run(capsys, "--db", db, "compare", "https://shop1.example/item")
    assert code == EXIT_FAILURE and err.count("\n") == 1 and "did you mean" in err


def test_export_writes_rfc4180_csv_equal_to_the_library_function(capsys, crawl_file, db, tmp_path):
    run(capsys, "--db", db, "ingest", str(crawl_file))
    out_path = tmp_path / "changes.csv"
    code, _, err = run(capsys, "--db", db, "export", "--host", "shop0.example", "--verdict", "minor",
                       "-o", str(out_path))
    assert code == EXIT_OK and "6 changes written" in err
    data = out_path.read_bytes()
    expected = changes_csv(Store(db).changes(host="shop0.example", verdicts=["minor"]))
    assert data == expected
    assert data.count(b"\r\n") == 7 and b"\n" not in data.replace(b"\r\n", b"")
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    assert len(rows) == 6 and {r["host"] for r in rows} == {"shop0.example"}
    assert {r["verdict"] for r in rows} == {"minor"}
    # Each page's SURT beside its URL, as a CDX index keys it: a join to a crawl's index.
    surts = {r["url"]: r["surt"] for r in rows}
    assert surts["https://shop0.example/item/0"] == "example,shop0)/item/0"
    assert list(rows[0])[:3] == ["url", "surt", "host"]


def test_export_filters_by_time_and_minimum_change(capsys, crawl_file, db):
    run(capsys, "--db", db, "ingest", str(crawl_file))
    rows = Store(db).changes(since=crawlgen.START.replace(tzinfo=None).replace(day=2))
    assert rows and all(r.fetched_at.day >= 2 for r in rows)
    assert {r.verdict for r in Store(db).changes(min_change=0.5)} == {"new"}
    code, out, _ = run(capsys, "--db", db, "export", "--since", "2026-01-03", "--until", "2026-01-04")
    assert code == EXIT_OK
    lines = out.strip().split("\r\n")
    assert len(lines) == 1 + 6  # header and the third version of six pages


@pytest.mark.parametrize("cell", ["=1+1", "+SUM(A1)", "-2", "@cmd", "\tx", "\rx"])
def test_csv_cells_that_look_like_formulas_are_neutralised(cell):
    assert neutralise(cell) == "'" + cell
    assert neutralise("plain " + cell) == "plain " + cell


def test_a_formula_in_page_text_is_neutralised_in_the_export(capsys, tmp_path, db):
    body = crawlgen.page_versions(9, 1)[0]
    records = [crawlgen.record("https://a.example/p", 0, body),
               crawlgen.record("https://a.example/p", 1, "=HYPERLINK(\"http://evil\") " + body)]
    path = crawlgen.write_jsonl(tmp_path / "evil.jsonl", records)
    run(capsys, "--db", db, "ingest", str(path))
    code, out, _ = run(capsys, "--db", db, "export")
    assert code == EXIT_OK
    rows = list(csv.reader(io.StringIO(out, newline="")))
    excerpts = [row[rows[0].index("excerpt")] for row in rows[1:]]
    assert any(e.startswith("'+ =HYPERLINK") or e.startswith("'=HYPERLINK") for e in excerpts), excerpts
    assert not any(cell.startswith(("=", "+", "-", "@")) for row in rows[1:] for cell in row)


def test_boilerplate_erase_prune_and_stats(capsys, tmp_path, db):
    path = crawlgen.write_jsonl(tmp_path / "crawl.jsonl", crawlgen.crawl(hosts=2, pages=4, versions=4))
    run(capsys, "--db", db, "ingest", str(path))
    code, out, _ = run(capsys, "--db", db, "boilerplate", "--host", "shop0.example")
    assert code == EXIT_OK and "shop0.example:" in out and "100.0%" in out
    code, out, _ = run(capsys, "--db", db, "boilerplate")
    assert "shared across hosts:" in out and "2 hosts (shop0.example, shop1.example)" in out
    code, out, _ = run(capsys, "--db", db, "erase", "https://shop1.example/item/3")
    assert code == EXIT_OK and "erased https://shop1.example/item/3" in out
    code, out, _ = run(capsys, "--db", db, "prune", "--keep", "1")
    assert code == EXIT_OK and "kept 1 generations per page" in out
    code, out, _ = run(capsys, "--db", db, "stats")
    assert figure(out, "pages") == 7
    assert figure(out, "retained_generations") == 7


def test_the_db_option_and_the_environment(capsys, crawl_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run(capsys, "ingest", str(crawl_file))
    assert (tmp_path / "data" / "cdc.duckdb").exists()
    monkeypatch.setenv("CDC_DB", str(tmp_path / "other.duckdb"))
    code = subprocess.run([sys.executable, "-m", "cdc", "ingest", str(crawl_file)], cwd=tmp_path,
                          capture_output=True, timeout=120).returncode
    assert code == EXIT_OK and (tmp_path / "other.duckdb").exists()


def test_a_real_process_reports_a_missing_store_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "cdc", "--db", str(tmp_path / "none.duckdb"), "stats"],
                            capture_output=True, timeout=120)
    assert result.returncode == EXIT_FAILURE
    err = result.stderr.decode()
    assert err.count("\n") == 1 and "cdc ingest" in err and "Traceback" not in err


def test_compact_rewrites_the_file_and_keeps_every_row(capsys, tmp_path, db):
    records = crawlgen.crawl(hosts=2, pages=4, versions=4)
    url = records[0]["url"]
    for day in range(4):  # one run per crawl day: a row group per table each
        source = crawlgen.write_jsonl(tmp_path / f"day{day}.jsonl", records[day * 8:(day + 1) * 8])
        assert run(capsys, "--db", db, "ingest", "--processes", "1", str(source))[0] == EXIT_OK
    history, stats = run(capsys, "--db", db, "history", url)[1], run(capsys, "--db", db, "stats")[1]
    code, compacted, _ = run(capsys, "--db", db, "compact")
    assert code == EXIT_OK and " MB -> " in compacted
    assert run(capsys, "--db", db, "history", url)[1] == history
    after = run(capsys, "--db", db, "stats")[1]
    assert after.splitlines()[:6] == stats.splitlines()[:6]
    assert figure(stats, "generations") == 32
    # The texts retention trimmed stay in the file until it is rewritten (`cdc compact`).
    assert figure(stats, "trimmed text bytes") > 0 and "cdc compact" in stats
    assert figure(after, "trimmed text bytes") == 0
