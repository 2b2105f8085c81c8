"""Crawl runs: `cdc ingest --run` and `cdc fetch --run` record runs, `cdc runs` lists them,
`cdc site-diff` says what changed on a site between two, `cdc export --run` keeps one run's
new generations. Two real crawls of JSON Lines files into a real DuckDB file, through the
command line (`cli.main` in this process, and a real `cdc` process for exit codes)."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from datetime import timedelta

import pytest

from cdc.cli.main import EXIT_FAILURE, EXIT_OK, main
from cdc.errors import RunError, RunNotFoundError
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import SourceRecord
from cdc.store import Store
from cdc.store.sitediff import _template_groups
from tests import crawlgen
from tests.httpserver import TestServer

SHOP = "https://shop.example/item/{}"
NEWS = "https://news.example/story"
BANNER = ("Spring sale: every kettle, pan and knife is a fifth off until the end of the month, "
          "in the shop and online; ask at the counter for the printed catalogue.")


def body(seed: int) -> str:
    return crawlgen.page_versions(seed, 1)[0]


def page(url: str, day: int, text: str, *, banner: bool = False, **options) -> dict:
    record = crawlgen.record(url, day, text, **options)
    if banner:
        record["sections"].insert(0, {"heading": "banner", "text": BANNER})
    return record


def crawl_a() -> list[dict]:
    """Day 0: shop items 0-8 and one news story."""
    return [page(SHOP.format(n), 0, body(n)) for n in range(9)] + [page(NEWS, 0, body(50))]


def crawl_b() -> list[dict]:
    """Day 1: items 0 and 1 as they were; 2 a word changed (minor); 3 a new body (rewrite);
    4 another site's page (different_page); 5-7 a banner added to the template (template
    only); 8 gone; 9 new; the news story a word changed."""
    minor = body(2).split(" ")
    minor[10] = "EDITED"
    records = [page(SHOP.format(n), 1, body(n)) for n in (0, 1)]
    records += [page(SHOP.format(2), 1, " ".join(minor)), page(SHOP.format(3), 1, body(33)),
                page(SHOP.format(4), 1, body(44), with_boilerplate=False)]
    records += [page(SHOP.format(n), 1, body(n), banner=True) for n in (5, 6, 7)]
    records += [page(SHOP.format(9), 1, body(9))]
    news = body(50).split(" ")
    news[3] = "CORRECTED"
    return [*records, page(NEWS, 1, " ".join(news))]


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "cdc.duckdb")


@pytest.fixture
def two_crawls(tmp_path, db, capsys):
    """Both crawls ingested, each a run with a label: the store's path."""
    for label, records in (("crawl-a", crawl_a()), ("crawl-b", crawl_b())):
        path = crawlgen.write_jsonl(tmp_path / f"{label}.jsonl", records)
        code, out, _ = run(capsys, "--db", db, "ingest", "--processes", "1", "--run", label, str(path))
        assert code == EXIT_OK
        assert out.rstrip().splitlines()[-1] == f"run {1 if label == 'crawl-a' else 2} ({label})"
    return db


def test_each_ingest_is_a_run_with_its_label_inputs_and_counts(two_crawls, tmp_path):
    runs = Store(two_crawls).runs()
    assert [(r.run, r.label, r.status) for r in runs] == [(2, "crawl-b", "finished"),
                                                          (1, "crawl-a", "finished")]
    b, a = runs
    assert a.inputs == (str(tmp_path / "crawl-a.jsonl"),)
    assert (a.records, a.pages, a.new_pages, a.changed, a.unchanged) == (10, 10, 10, 0, 0)
    assert (b.records, b.pages, b.new_pages, b.changed, b.unchanged, b.skipped) == (10, 10, 1, 7, 2, 0)
    assert b.started_at >= a.ended_at >= a.started_at


def test_a_run_is_labelled_by_what_it_ingested_by_default(tmp_path, db, capsys):
    first = crawlgen.write_jsonl(tmp_path / "first.jsonl", crawl_a()[:3])
    second = crawlgen.write_jsonl(tmp_path / "second.jsonl", crawl_b()[:3])
    code, out, _ = run(capsys, "--db", db, "ingest", str(first), str(second))
    assert code == EXIT_OK and out.rstrip().endswith("run 1 (first.jsonl and 1 more)")
    assert Store(db).run(1).inputs == (str(first), str(second))


def test_runs_lists_them_newest_first(two_crawls, capsys):
    code, out, _ = run(capsys, "--db", two_crawls, "runs")
    assert code == EXIT_OK
    header, newest, oldest = out.splitlines()
    assert header.split() == ["run", "started", "ended", "status", "pages", "new", "changed", "unchanged",
                              "older", "skipped", "failed", "label"]
    assert re.match(r"\s+2  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  finished\s+"
                    r"10\s+1\s+7\s+2\s+0\s+0\s+0  crawl-b$", newest), newest
    assert oldest.split()[0] == "1" and oldest.endswith("  crawl-a")
    code, out, _ = run(capsys, "--db", two_crawls, "runs", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["run"], r["label"], r["status"], r["new_pages"]) for r in rows] == [
        (2, "crawl-b", "finished", 1), (1, "crawl-a", "finished", 10)]
    assert rows[0]["ended_at"].endswith("Z")


def test_site_diff_counts_pages_new_gone_changed_by_verdict_and_unchanged(two_crawls):
    diff = Store(two_crawls).site_diff("crawl-a", "crawl-b", limit=100)
    assert (diff.run_a.run, diff.run_b.run) == (1, 2)
    assert (diff.new, diff.not_seen_again, diff.changed, diff.unchanged) == (1, 1, 7, 2)
    assert diff.verdicts == {"minor": 2, "different_page": 1, "rewrite": 1}
    assert diff.template_only == 3
    assert diff.changed == sum(diff.verdicts.values()) + diff.template_only
    by_key = {p.natural_key: p for p in diff.pages}
    assert set(by_key) == {SHOP.format(n) for n in (2, 3, 4, 5, 6, 7)} | {NEWS}
    assert [p.natural_key for p in diff.pages[:2]] == [SHOP.format(4), SHOP.format(3)]  # largest first
    # The pages' own changes largest first, then the template-only ones (labelled so), whatever
    # share of a page the template is.
    own = [p for p in diff.pages if not p.template_only]
    assert diff.pages == own + [p for p in diff.pages if p.template_only]
    for part in (diff.pages[:len(own)], diff.pages[len(own):]):
        shares = [p.share_changed for p in part]
        assert shares == sorted(shares, reverse=True)
    assert [p.shown_verdict for p in diff.pages] == [p.verdict for p in own] + ["template_only"] * 3
    assert {by_key[SHOP.format(n)].template_only for n in (5, 6, 7)} == {True}
    assert by_key[SHOP.format(2)].template_only is False and by_key[SHOP.format(2)].verdict == "minor"
    assert "EDITED" in by_key[SHOP.format(2)].excerpt
    store = Store(two_crawls)
    generations = [g.generation for g in store.generations(SHOP.format(3))]
    changed = by_key[SHOP.format(3)]
    assert (changed.generation_a, changed.generation_b) == tuple(generations)
    assert changed.previous_generation == generations[0]
    assert changed.compare_query == {"url": SHOP.format(3), "from": generations[0], "to": generations[1]}
    (group,) = diff.template_changes
    assert (group.host, group.pages, group.sample) == ("shop.example", 3, SHOP.format(5))
    assert "Spring sale" in group.excerpt
    # The same flag as a page's history gives its change row.
    assert all(p.template_only == store.history(p.natural_key)[-1].template_only for p in diff.pages)


def test_a_template_change_lists_its_pages_by_its_key(two_crawls):
    store = Store(two_crawls)
    (group,) = store.site_diff(1, 2).template_changes
    assert group.examples == (SHOP.format(5), SHOP.format(6), SHOP.format(7))
    assert group.key == store.site_diff("crawl-a", "crawl-b").template_changes[0].key  # stable
    listed = store.site_diff(1, 2, limit=2, template_change=group.key)
    assert [p.natural_key for p in listed.pages] == [SHOP.format(5), SHOP.format(6)]
    assert {p.template_only for p in listed.pages} == {True}
    rest = store.site_diff(1, 2, limit=2, offset=2, template_change=group.key).pages
    assert [p.natural_key for p in rest] == [SHOP.format(7)]
    assert listed.changed == 7  # the counts stay the whole diff's
    assert store.site_diff(1, 2, template_change="not-a-key").pages == []


def test_the_run_of_a_date_is_the_latest_crawl_begun_by_then(two_crawls):
    store = Store(two_crawls)
    one, two = sorted(store.runs(), key=lambda run: run.run)  # their first and last captures
    assert one.crawled <= one.last_captured < two.crawled <= two.last_captured
    first, second = one.crawled.date(), two.crawled.date()
    assert store.run_on(first).run == 1 and store.run_on(second).run == 2
    assert store.run_on(first - timedelta(days=1)) is None


def test_site_diff_of_one_host_and_pages_of_changed_pages(two_crawls):
    store = Store(two_crawls)
    diff = store.site_diff(1, 2, host="shop.example", limit=2)
    assert (diff.new, diff.not_seen_again, diff.changed, diff.unchanged) == (1, 1, 6, 2)
    assert diff.verdicts == {"minor": 1, "different_page": 1, "rewrite": 1}
    everything = store.site_diff(1, 2, host="shop.example", limit=100).pages
    pages = [p for offset in range(0, 6, 2) for p in store.site_diff(1, 2, "shop.example", limit=2,
                                                                      offset=offset).pages]
    assert pages == everything and len(pages) == 6
    assert store.site_diff(1, 2, host="nowhere.example").changed == 0


def test_site_diff_prints_a_summary(two_crawls, capsys):
    code, out, _ = run(capsys, "--db", two_crawls, "site-diff", "--limit", "3")  # the latest two runs
    assert code == EXIT_OK
    lines = out.splitlines()
    assert re.match(r"run 1 \(crawl-a, [\d\- :]+\) -> run 2 \(crawl-b, [\d\- :]+\), all hosts$", lines[0])
    figures = {name.strip(): int(count.replace(",", "")) for name, count in
               (re.match(r"(.+?)\s+([\d,]+)$", line).groups() for line in lines[1:10])}
    assert figures == {"pages seen by both": 9, "unchanged": 2, "changed": 7, "minor": 2,
                       "different_page": 1, "rewrite": 1, "template only": 3, "new pages": 1,
                       "not seen again": 1}
    assert lines[10] == "template changes (one edit on many pages):"
    assert lines[11].startswith("  shop.example  3 pages  + Spring sale")
    assert lines[12] == "changed pages 1-3 of 7, largest change first, template-only ones last:"
    assert lines[14].split()[0] == "different_page" and SHOP.format(4) in lines[14]
    assert lines[-1] == "  ... and 4 more (--offset 3 --limit N)"


def test_site_diff_json(two_crawls, capsys):
    code, out, _ = run(capsys, "--db", two_crawls, "site-diff", "crawl-a", "2", "--json",
                       "--host", "news.example")
    assert code == EXIT_OK
    result = json.loads(out)
    assert (result["run_a"]["label"], result["run_b"]["run"]) == ("crawl-a", 2)
    assert result["host"] == "news.example"
    assert (result["new"], result["not_seen_again"], result["changed"], result["unchanged"]) == (0, 0, 1, 0)
    assert result["verdicts"] == {"minor": 1} and result["template_only"] == 0
    (changed,) = result["pages"]
    assert (changed["natural_key"], changed["verdict"], changed["template_only"]) == (NEWS, "minor", False)
    assert changed["shown_verdict"] == "minor"
    assert "CORRECTED" in changed["excerpt"] and 0 < changed["share_changed"] < 0.2
    assert result["run_a"]["started_at"].endswith("Z") and result["run_a"]["status"] == "finished"


def test_export_of_one_run(two_crawls, capsys):
    code, out, _ = run(capsys, "--db", two_crawls, "export", "--run", "crawl-b")
    assert code == EXIT_OK
    rows = list(csv.DictReader(io.StringIO(out)))
    assert sorted(r["url"] for r in rows) == sorted([SHOP.format(n) for n in (2, 3, 4, 5, 6, 7, 9)] + [NEWS])
    assert {r["verdict"] for r in rows if r["url"] == SHOP.format(9)} == {"new"}
    code, out, _ = run(capsys, "--db", two_crawls, "export", "--run", "1", "--verdict", "new")
    assert len(list(csv.DictReader(io.StringIO(out)))) == 10


def test_a_killed_run_did_not_finish_and_its_latest_fetch_counts(two_crawls, capsys):
    store = Store(two_crawls)
    killed = store.start_run("killed", ["crawl-c.jsonl"])
    text = crawl_b()[0]["sections"][1]["text"]
    records = [page(SHOP.format(0), 2, text), page(SHOP.format(0), 3, text.replace("the", "a", 1))]
    # Batches of one record, and no end: a row per batch in page_runs, as a killed run leaves them.
    Ingester(store, run_id=killed, batch_records=1).run(
        [SourceRecord("crawl-c.jsonl", line, record) for line, record in enumerate(records, 1)])
    assert store.run(killed).status == "did not finish" and store.run("killed").counts()["pages"] is None
    code, out, _ = run(capsys, "--db", two_crawls, "runs")
    assert re.search(r"^\s+3  \S+ \S+  -\s+did not finish\s+-\s+-.*  killed$", out, re.MULTILINE), out
    diff = store.site_diff("crawl-b", "killed")
    assert (diff.new, diff.not_seen_again, diff.changed, diff.unchanged) == (0, 9, 1, 0)
    assert diff.pages[0].generation_b == store.page(SHOP.format(0)).latest_generation
    out = run(capsys, "--db", two_crawls, "site-diff", "2", "3")[1]
    assert "  note: run 3 did not finish: it saw only part of its crawl" in out.splitlines()
    code, out, _ = run(capsys, "--db", two_crawls, "site-diff")  # the latest two finished runs
    assert code == EXIT_OK and out.startswith("run 1 (crawl-a")


def test_an_unknown_run_is_a_clear_error(two_crawls, capsys):
    known = r"no run with id or label 'crawl-z'.*2 \(crawl-b\), 1 \(crawl-a\)"
    with pytest.raises(RunNotFoundError, match=known):
        Store(two_crawls).run("crawl-z")
    with pytest.raises(RunError, match="give the earlier crawl first"):
        Store(two_crawls).site_diff(2, 1)
    done = subprocess.run([sys.executable, "-m", "cdc", "--db", two_crawls, "site-diff", "crawl-a", "9"],
                          capture_output=True, text=True)
    assert done.returncode == EXIT_FAILURE and done.stdout == ""
    assert done.stderr.startswith("cdc: no run with id or label '9'") and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    code, _, err = run(capsys, "--db", two_crawls, "export", "--run", "nope")
    assert code == EXIT_FAILURE and "no run with id or label 'nope'" in err


def test_site_diff_needs_two_runs(tmp_path, db, capsys):
    path = crawlgen.write_jsonl(tmp_path / "only.jsonl", crawl_a())
    assert run(capsys, "--db", db, "ingest", str(path))[0] == EXIT_OK
    code, out, err = run(capsys, "--db", db, "site-diff")
    assert code == EXIT_FAILURE and out == ""
    assert err == (f"cdc: {db} has 1 finished run: site-diff compares two; ingest or fetch another crawl "
                   "first (`cdc runs` lists them)\n")


def test_a_fetch_is_a_run_and_a_304_is_a_page_it_saw_unchanged(db, capsys):
    server = TestServer().start()
    try:
        urls = [server.url("/page"), server.url("/changing")]
        for label in ("first", "second"):
            code, out, _ = run(capsys, "--db", db, "fetch", "--delay", "0", "--run", label, *urls)
            assert code == EXIT_OK and out.rstrip().endswith(f"({label})")
    finally:
        server.stop()
    store = Store(db)
    second = store.run("second")
    assert (second.pages, second.unchanged, second.changed) == (2, 1, 1)
    diff = store.site_diff("first", "second")
    assert (diff.new, diff.not_seen_again, diff.changed, diff.unchanged) == (0, 0, 1, 1)


def test_a_revisit_record_is_a_page_the_run_saw(tmp_path, db):
    store = Store(db)
    records = [page(SHOP.format(0), 0, body(0))]
    Ingester(store, label="first").run([SourceRecord("a.jsonl", 1, records[0])])
    from cdc.sources.extract import MAIN_CONTENT
    from cdc.sources.inputs import CrawlRecords
    from cdc.sources.warc import write_warc_revisit

    warc = tmp_path / "b.warc"
    with warc.open("wb") as out:  # a WARC of one revisit record: the page fetched again, unchanged
        fetched_again = crawlgen.START + timedelta(days=1)
        write_warc_revisit(out, SHOP.format(0), fetched_again.strftime("%Y-%m-%dT%H:%M:%SZ"))
    summary = Ingester(store, label="again").run(CrawlRecords(str(warc), MAIN_CONTENT))
    assert summary.unchanged == 1
    diff = store.site_diff("first", "again")
    assert (diff.new, diff.not_seen_again, diff.changed, diff.unchanged) == (0, 0, 0, 1)
    assert store.run("again").pages == 1


def test_template_changes_join_pages_by_their_edit_and_by_what_they_say():
    rows = [  # host, edit, excerpt, pages, first keys
        ("a.example", "e1", "+ banner", 60, ["a/1", "a/2", "a/3"]),
        ("a.example", "e1", "+ banner | word", 3, ["a/7"]),  # the same edit, its excerpt took a word
        ("a.example", "e2", "+ banner", 5, ["a/0"]),  # said the same, another edit (a title's line end)
        ("a.example", "e3", "- footer", 2, ["a/4", "a/5"]),
        ("b.example", "e1", "+ banner", 4, ["b/1"]),  # another host: its own change
    ]
    banner, host_b, footer = _template_groups(rows)
    assert (banner.host, banner.pages, banner.excerpt) == ("a.example", 68, "+ banner")
    assert banner.edits == ("e1", "e2")
    assert banner.examples == ("a/0", "a/1", "a/2") and banner.sample == "a/0"
    assert (host_b.host, host_b.pages, footer.pages, footer.excerpt) == ("b.example", 4, 2, "- footer")
    assert len({banner.key, host_b.key, footer.key}) == 3
