"""Search changes by their words (`cdc search`, `cdc.analyst.search`) and watches (`cdc watch`):
on made-up histories where the answer is known, on real Wget crawls of Python's docs, and
on the Chinese and Japanese revision histories of the shared corpus."""

from __future__ import annotations

import io
import itertools
import json
import random
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

import cdc.store.search
from cdc.analyst.annotations import annotate
from cdc.analyst.queries import compare_generations
from cdc.analyst.search import SearchQuery, add_watch, search, watch_hits, watches
from cdc.cli.main import EXIT_FAILURE, EXIT_OK, main
from cdc.cli.search import EXIT_WATCH_HIT
from cdc.core.editwords import search_words
from cdc.core.refine import DELETE as DELETE_EDIT
from cdc.core.refine import INSERT, REPLACE
from cdc.errors import SearchError
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import iter_jsonl, iter_records
from cdc.store import RetentionPolicy, Store
from cdc.store.indexwriter import matches
from cdc.store.schema import SEARCH_TABLES
from cdc.store.search import WatchMatching
from cdc.store.wordindex import index_rows, matching_query, registered_tables, wanted_tables
from tests import crawlgen, sitecrawl, storerows, textgen
from tests.httpserver import TestServer
from tests.sitecrawl import BANNER, DELETE
from tests.test_site_view import app_on

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
# One xdist worker runs the module, so that its stores of the docs crawls and of the corpus
# (`docs`, `cjk`) are each built once (docs/testing.md).
pytestmark = pytest.mark.xdist_group("search")


def ingest(store: Store, records: list[dict]) -> None:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    Ingester(store).run(iter_jsonl(io.BytesIO(data), "test.jsonl"))


def history(url: str, *bodies: str) -> list[dict]:
    return [crawlgen.record(url, version, body) for version, body in enumerate(bodies)]


def jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


PARAGRAPH = textgen.text(5, 1_500).decode()
CLOSING = textgen.text(6, 1_500).decode()


def _places(words: str) -> dict[str, list[int]]:
    """The index's rule, read plainly: each token's places in the words split at each space,
    from 1, the ends and the line between two edits counted but not indexed."""
    places: dict[str, list[int]] = {}
    for place, token in enumerate(words.split(" "), 1):
        if token not in ("", "\n"):
            places.setdefault(token, []).append(place)
    return places


_WORDS = st.lists(st.sampled_from(["a", "b", "价", "格", "2", ",", "\n", "climate"]), max_size=12).map(
    lambda tokens: f" {' '.join(tokens)} " if tokens else "")


@given(st.lists(st.tuples(_WORDS, _WORDS), max_size=6))
@settings(max_examples=60, deadline=None)
def test_the_index_rows_hold_each_tokens_places_on_each_side(sides):
    """`index_rows` (built in the ingest's workers) against the rule read plainly: a row per
    distinct token of each side, its places in order, the rows sorted by token."""
    keys = [f"https://x.example/{n}" for n in range(len(sides))]
    words = pa.table({"natural_key": pa.array(keys, pa.string()),
                      "generation": pa.array(range(len(sides)), pa.int64()),
                      "run": pa.array([7] * len(sides), pa.int32()),
                      "added_words": pa.array([added for added, _ in sides], pa.string()),
                      "removed_words": pa.array([removed for _, removed in sides], pa.string())})
    rows = index_rows(words).to_pylist()
    expected = sorted((token, f"https://x.example/{n}", n, 7, added, places)
                      for n, pair in enumerate(sides) for added, side in zip((True, False), pair)
                      for token, places in _places(side).items())
    assert sorted(tuple(row.values()) for row in rows) == expected
    assert [row["token"] for row in rows] == sorted(row["token"] for row in rows)

# "\x1c": a token of ASCII punctuation that Python's `str.split` takes for whitespace
_PHRASE = st.lists(st.sampled_from(["a", "b", "价", "格", "2", ",", "climate", "\x1c"]),
                   min_size=1, max_size=3).map(" ".join)


@given(st.lists(st.tuples(_WORDS, _WORDS), max_size=8),
       st.lists(st.tuples(_PHRASE, st.booleans()), max_size=4))
@settings(max_examples=80, deadline=None)
def test_a_batch_s_matches_are_those_the_index_query_finds(sides, phrases):
    """What a batch matches in memory (`cdc.store.indexwriter.matches`: the substring test on
    the sides that hold a phrase's rarest token) against the query a run's end and a search
    run on the stored index rows (`matching_query`), on the same rows: the same sides."""
    keys = [f"https://x.example/{n % 3}" for n in range(len(sides))]
    words = pa.table({"natural_key": pa.array(keys, pa.string()),
                      "generation": pa.array(range(len(sides)), pa.int64()),
                      "run": pa.array([7] * len(sides), pa.int32()),
                      "added_words": pa.array([added for added, _ in sides], pa.string()),
                      "removed_words": pa.array([removed for _, removed in sides], pa.string())})
    tokens = index_rows(words)
    watched = {f"w{n}": SearchQuery(**{"text" if either else "added": phrase}).words_filter()
               for n, (phrase, either) in enumerate(phrases) if search_words(phrase)}
    found = matches(words, tokens, 7, watched).to_pylist()
    expected = []
    if watched:
        connection = duckdb.connect()
        connection.execute(SEARCH_TABLES[1])  # change_tokens
        connection.execute("INSERT INTO change_tokens SELECT * FROM tokens")
        wanted = wanted_tables(watched)
        query, values = matching_query(wanted, 7)
        with registered_tables(connection, wanted):
            expected = connection.execute(f"""SELECT s.query, m.run, m.natural_key, m.generation, s.added
                                              FROM ({query}) m JOIN search_phrases s USING (search)""",
                                          values).fetchall()
    assert sorted(tuple(row.values()) for row in found) == sorted(expected)


def test_phrases_are_whole_words_case_insensitive_and_characters_in_cjk(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    ingest(store, [
        *history("https://news.example/a", f"{PARAGRAPH}\n{CLOSING}",
                 f"{PARAGRAPH}\nClimate, said the minister, is what matters.\n{CLOSING}"),
        *history("https://news.example/b", f"{PARAGRAPH}\nThe climates of Europe differ.\n{CLOSING}",
                 f"{PARAGRAPH}\n{CLOSING}"),
        *history("https://shop.example.cn/p", f"{PARAGRAPH}\n{CLOSING}",
                 f"{PARAGRAPH}\n本店商品的价格今天下调了。\n{CLOSING}"),
        *history("https://shop.example.jp/p", f"{PARAGRAPH}\n{CLOSING}",
                 f"{PARAGRAPH}\n新しいモデルの価格は2,980円です。\n{CLOSING}"),
    ])

    def found(**given) -> list[tuple[str, str]]:
        return [(hit.url, hit.side) for hit in search(store, SearchQuery(**given)).hits]

    assert found(added="CLIMATE") == [("https://news.example/a", "added")]
    assert found(text="climate") == [("https://news.example/a", "added")]  # not "climates"
    assert found(removed="climates of europe") == [("https://news.example/b", "removed")]
    assert found(added="climates") == []
    assert found(added="said the minister") == [("https://news.example/a", "added")]
    assert found(added="the minister said") == []
    assert found(added="价格") == [("https://shop.example.cn/p", "added")]
    assert found(text="价格今天") == [("https://shop.example.cn/p", "added")]
    assert found(added="2,980円") == [("https://shop.example.jp/p", "added")]
    assert found(added="価格は2,980円") == [("https://shop.example.jp/p", "added")]
    assert found(added="1,980円") == []
    [hit] = search(store, SearchQuery(added="2,980円")).hits
    assert "2,980円" in hit.excerpt and hit.previous_generation == crawlgen.generation(0)
    assert hit.generation == crawlgen.generation(1)


@pytest.mark.parametrize(("newest", "pages_found_there"), [(3, set()), (30, {0, 5})])
def test_each_page_of_hits_is_that_part_of_all_of_them_newest_first(tmp_path, monkeypatch, newest,
                                                                    pages_found_there):
    """A page of hits is looked for among the newest changes first (`cdc.store.search`), at
    least `newest` of them: with that set cut to a few changes, fetched at times many changes
    share, every page is still the part of the whole list it stands for, in its order. The
    newest changes then hold no hit (each page is looked for again among all), or (30 of
    them, cut inside a tie of 14 changes) 12 of the 36: the first two pages of five."""
    store = Store(tmp_path / "cdc.duckdb")
    sentences = ["The climate talks opened in {}.", "Climate money was pledged to {}.",
                 "Nothing on climate in {}."]
    # Each page's own sentences (no template), and newer changes without the word.
    climate = [record for page in range(6) for record in history(
        f"https://news.example/{page}",
        *(f"{PARAGRAPH}\n{sentences[(page + version) % 3].format(page)}\n{CLOSING}" for version in range(4)))]
    others = [record for page in range(8) for record in history(
        f"https://other.example/{page}", *(f"{PARAGRAPH}\nPage {page}, issue {version}.\n{CLOSING}"
                                           for version in range(7)))]
    ingest(store, climate + others)
    query = SearchQuery(text="climate")
    every = [(hit.url, hit.generation, hit.side) for hit in search(store, query, limit=None).hits]
    assert len(every) == 6 * 3 * 2  # each change removed one sentence and added another
    monkeypatch.setattr(cdc.store.search, "NEWEST_CHANGES", newest)
    monkeypatch.setattr(cdc.store.search, "NEWEST_PER_HIT", 1)
    looked_among_all = set()
    page_of_hits = cdc.store.search.Search._page_of_hits

    def noted(connection, limit, offset, newest):
        if newest is None:
            looked_among_all.add(offset)
        return page_of_hits(connection, limit, offset, newest)

    monkeypatch.setattr(cdc.store.search.Search, "_page_of_hits", staticmethod(noted))
    offsets = range(0, len(every) + 6, 5)
    for offset in offsets:
        page = search(store, query, limit=5, offset=offset)
        assert [(hit.url, hit.generation, hit.side) for hit in page.hits] == every[offset:offset + 5]
        assert page.total == len(every)
    assert looked_among_all == {offset for offset in offsets if offset < len(every)} - pages_found_there


def test_words_are_those_of_the_exact_edits_and_erased_with_the_page(tmp_path):
    store = Store(tmp_path / "cdc.duckdb")
    ingest(store, [*crawlgen.crawl(hosts=2, pages=4, versions=3),
                   *history("https://news.example/a", f"{PARAGRAPH}\n{CLOSING}",
                            f"{PARAGRAPH}\nA new sentence.\n{CLOSING}")])
    problems = storerows.consistency_problems(store.path)
    assert problems == dict.fromkeys(problems, 0)
    with store.reading() as connection:
        rows = connection.execute("SELECT natural_key, generation, added_text, removed_text FROM change_words"
                                  ).fetchall()
    assert rows
    for key, generation, added, removed in rows:
        report = compare_generations(store, key, new=generation).report
        new = compare_generations(store, key, new=generation).new.text
        expected = [" ".join(new[e.new_offset:e.new_offset + e.new_length].decode().split())
                    for e in report.edits if e.kind in (INSERT, REPLACE)]
        assert added == "\n".join(piece for piece in expected if piece)
        assert (removed != "") == any(e.kind in (DELETE_EDIT, REPLACE) for e in report.edits)
    store.erase("https://news.example/a")
    assert not search(store, SearchQuery(added="a new sentence")).hits


def test_an_older_store_is_upgraded_with_the_words_of_its_retained_changes(tmp_path, capsys):
    store = Store(tmp_path / "cdc.duckdb")
    ingest(store, [*crawlgen.crawl(hosts=2, pages=4, versions=3),
                   *history("https://news.example/a", f"{PARAGRAPH}\n{CLOSING}",
                            f"{PARAGRAPH}\nA new sentence.\n{CLOSING}")])
    written = storerows.store_rows(store.path, SEARCH_TABLE_NAMES)
    storerows.as_schema_4(store.path)
    assert main(["--db", str(store.path), "search", "--added", "a new sentence", "--json"]) == EXIT_OK
    [hit] = json.loads(capsys.readouterr().out)
    assert hit["url"] == "https://news.example/a" and hit["side"] == "added"
    # Filled as ingest writes them (the run: the generation's first, here the one ingest run).
    assert storerows.store_rows(store.path, SEARCH_TABLE_NAMES) == written
    assert Store(store.path).meta()["schema_version"] == "5"


SEARCH_TABLE_NAMES = [statement.split()[5] for statement in SEARCH_TABLES]


def test_bad_searches_get_one_line_and_change_nothing(tmp_path, capsys):
    db = str(tmp_path / "cdc.duckdb")
    records = history("https://news.example/a", f"{PARAGRAPH}\n{CLOSING}",
                      f"{PARAGRAPH}\nNew words.\n{CLOSING}")
    assert main(["--db", db, "ingest", "--quiet", str(jsonl(tmp_path / "a.jsonl", records))]) == EXIT_OK
    capsys.readouterr()
    before = Path(db).read_bytes()
    for argv, message in (
            (["search"], "say what to search for"),
            (["search", "--added", "   "], "is empty"),
            (["search", "--text", "x" * 201], "201 characters"),
            (["search", "--text", "a", "--added", "b"], "give it alone"),
            (["search", "--added", "new", "--limit", "0"], "--limit"),
            (["watch", "remove", "nothing"], "no watch named 'nothing'"),
            (["watch", "hits", "nothing"], "no watch named 'nothing'"),
            (["watch", "add", "w", "--run", "1", "--added", "x"], "unrecognized arguments"),
    ):
        code = main(["--db", db, *argv]) if argv[-1] != "x" else None
        if code is None:
            with pytest.raises(SystemExit):
                main(["--db", db, *argv])
            continue
        err = capsys.readouterr().err
        assert code == EXIT_FAILURE and message in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert Path(db).read_bytes() == before
    assert main(["--db", db, "watch", "add", "prices", "--added", "price"]) == EXIT_OK
    capsys.readouterr()
    assert main(["--db", db, "watch", "add", "prices", "--added", "cost"]) == EXIT_FAILURE
    assert "a watch named 'prices' exists" in capsys.readouterr().err
    assert [(w.name, w.query.added) for w in watches(Store(db))] == [
        ("prices", "price")]
    with pytest.raises(SearchError):
        add_watch(Store(db), " ", SearchQuery(added="x"))


def test_watches_hit_in_the_run_that_brings_the_change_and_not_the_next(tmp_path, capsys, monkeypatch):
    db = str(tmp_path / "cdc.duckdb")
    url = "https://news.example/prices"
    versions = [f"{PARAGRAPH}\n{CLOSING}", f"{PARAGRAPH}\nA price freeze was announced today.\n{CLOSING}",
                f"{PARAGRAPH}\nA price freeze was announced today.\n{CLOSING}\nWeather: sunny."]
    files = [jsonl(tmp_path / f"v{n}.jsonl", [crawlgen.record(url, n, body)])
             for n, body in enumerate(versions)]
    assert main(["--db", db, "watch", "add", "freeze", "--added", "Price Freeze"]) == EXIT_OK
    assert main(["--db", db, "watch", "add", "weather", "--text", "weather",
                 "--host", "other.example"]) == EXIT_OK
    capsys.readouterr()
    codes, outputs = [], []
    for file in files:
        codes.append(main(["--db", db, "ingest", "--quiet", "--fail-on-watch", str(file)]))
        outputs.append(capsys.readouterr().out)
    assert codes == [EXIT_OK, EXIT_WATCH_HIT, EXIT_OK]
    assert "watch freeze: 0 hits" in outputs[0] and "watch freeze: 0 hits" in outputs[2]
    assert "watch freeze: 1 hit (`cdc watch hits freeze --run 2`)" in outputs[1]
    assert "watch weather: 0 hits" in outputs[2]  # another host's
    hits = watch_hits(Store(db))
    assert [(h.name, h.run, h.url, h.side, h.generation) for h in hits] == [
        ("freeze", 2, url, "added", crawlgen.generation(1))]
    assert "price freeze" in hits[0].excerpt.lower()
    searched = search(Store(db), SearchQuery(added="Price Freeze", run=2)).hits  # what a run's end found
    assert [(h.url, h.side, h.generation) for h in searched] == [(h.url, h.side, h.generation) for h in hits]
    assert main(["--db", db, "watch", "hits", "freeze", "--run", "3", "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == []
    assert main(["--db", db, "watch", "hits", "--json"]) == EXIT_OK
    assert [hit["run"] for hit in json.loads(capsys.readouterr().out)] == [2]
    # The Site view of runs 2 and 3 shows the hit, of runs 1 and 2 too, and the words escaped.
    app = app_on(Path(db), monkeypatch, a="1", b="2")
    assert [h.value for h in app.subheader if h.value.startswith("Watch hits")] == ["Watch hits: 1"]
    [table] = [frame.value for frame in app.dataframe if "watch" in frame.value.columns]
    assert table.to_dict("records")[0]["watch"] == "freeze" and table.to_dict("records")[0]["run"] == 2
    assert main(["--db", db, "watch", "remove", "freeze"]) == EXIT_OK
    assert watch_hits(Store(db)) == []


def test_a_fetch_run_prints_its_watch_hits_and_fails_on_them_when_asked(tmp_path, capsys):
    """`cdc fetch` of a live page over loopback: the price it changes to is watched."""
    server = TestServer().start()
    try:
        db, page = str(tmp_path / "cdc.duckdb"), server.url("/page")
        assert main(["--db", db, "watch", "add", "price", "--added", "$12.99"]) == EXIT_OK
        fetch = ["--db", db, "fetch", page, "--delay", "0", "--fail-on-watch"]
        assert main(fetch) == EXIT_OK
        assert "watch price: 0 hits" in capsys.readouterr().out
        server.version = 2  # "widget $11.99" becomes "$12.99"
        assert main(fetch) == EXIT_WATCH_HIT
        assert "watch price: 1 hit (`cdc watch hits price --run 2`)" in capsys.readouterr().out
        assert main([*fetch[:-1]]) == EXIT_OK  # not asked: the hit is printed, the run is a success
        assert [(hit.run, hit.side) for hit in watch_hits(Store(db), "price")] == [(2, "added")]
    finally:
        server.stop()


def test_the_label_filter_keeps_the_changes_annotated_so_on_the_cli_and_the_search_page(
        tmp_path, capsys, monkeypatch):
    """`cdc search --label` and the Search page's *Annotated as* keep the changes an analyst
    marked with one of the labels, as `cdc export --label` does; a watch takes no label."""
    db = tmp_path / "cdc.duckdb"
    store = Store(db)
    urls = [f"https://news.example/{name}" for name in ("judged", "other", "unjudged")]
    ingest(store, [record for number, url in enumerate(urls) for record in history(  # each its own words
        url, f"{PARAGRAPH}\n{CLOSING}",
        f"{PARAGRAPH}\nA price freeze was announced in region {number}.\n{CLOSING}")])
    annotate(store, urls[0], crawlgen.generation(1), "noise", "a routine notice", "ann")
    annotate(store, urls[1], crawlgen.generation(1), "significant", None, "ann")

    def found(*labels: str) -> list[str]:
        return sorted(hit.url for hit in search(store, SearchQuery(added="price freeze", labels=labels)).hits)

    assert found() == sorted(urls)
    assert found("noise") == [urls[0]]
    assert found("significant") == [urls[1]]
    assert found("noise", "significant") == urls[:2]
    assert found("unsure") == []
    search_cli = ["--db", str(db), "search", "--added", "price freeze"]
    assert main([*search_cli, "--label", "Noise", "--json"]) == EXIT_OK
    assert [hit["url"] for hit in json.loads(capsys.readouterr().out)] == [urls[0]]
    assert main([*search_cli, "--label", "spam"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert "unknown label 'spam'" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SearchError, match="give it no --label"):
        add_watch(store, "judged", SearchQuery(added="price freeze", labels=("noise",)))
    with pytest.raises(SystemExit):
        main(["--db", str(db), "watch", "add", "judged", "--added", "price", "--label", "noise"])
    capsys.readouterr()
    # The Search page, opened from a link that carries the labels.
    monkeypatch.setenv("CDC_DB", str(db))
    monkeypatch.setattr(sys, "argv", ["streamlit"])
    app = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120)
    app.run()
    app.switch_page("views/search.py")
    for name, value in {"q": "price freeze", "label": "noise,significant"}.items():
        app.query_params[name] = value
    app.run()
    assert not app.exception, app.exception
    assert app.multiselect(key="search-labels").value == ["significant", "noise"]
    [table] = [frame.value for frame in app.dataframe if "words" in frame.value.columns]
    assert sorted(table["page"]) == urls[:2]


# --- real crawls: Python's docs crawled twice by Wget -----------------------------------------


@pytest.fixture(scope="module")
def docs(docs_crawls, tmp_path_factory) -> tuple[Store, sitecrawl.Manifest]:
    """The two docs crawls (conftest.py's), ingested one after the other."""
    crawls = docs_crawls
    db = str(tmp_path_factory.mktemp("search-docs") / "docs.duckdb")
    for warc in (crawls.crawl1, crawls.crawl2):
        assert main(["--db", db, "ingest", "--quiet", str(warc)]) == EXIT_OK
    return Store(db), crawls.manifest


def _middle(paragraph: str, words: int = 8) -> str:
    split = paragraph.split()
    start = max(0, len(split) // 2 - words // 2)
    return " ".join(split[start:start + words])


@pytest.mark.slow
def test_an_inserted_paragraph_is_found_on_exactly_the_pages_it_was_inserted_into(docs):
    store, manifest = docs
    inserted = manifest.edits(sitecrawl.INSERT)
    assert inserted
    for page in inserted:
        phrase = _middle(page.paragraph)
        expected = {p.url for p in inserted if phrase in " ".join(p.paragraph.split())}
        hits = search(store, SearchQuery(added=phrase), limit=None).hits
        assert {hit.url for hit in hits} == expected, phrase
        assert {hit.side for hit in hits} == {"added"}
        assert not search(store, SearchQuery(removed=phrase), limit=None).hits


@pytest.mark.slow
def test_a_deleted_sentence_is_found_as_removed(docs):
    store, manifest = docs
    deleted = manifest.edits(DELETE)
    assert deleted
    for page in deleted:
        phrase = _middle(page.paragraph, 6)
        hits = search(store, SearchQuery(text=phrase), limit=None).hits
        assert (page.url, "removed") in {(hit.url, hit.side) for hit in hits}, phrase
        assert all(hit.side == "removed" for hit in hits if hit.url == page.url)


@pytest.mark.slow
def test_template_only_changes_are_left_out_unless_asked_for(docs):
    store, manifest = docs
    template_only = {page.url for page in manifest.template_only()}
    phrase = "this documentation site is moving to a new address"
    assert phrase in BANNER
    hits = search(store, SearchQuery(added=phrase), limit=None).hits
    default = {hit.url for hit in hits}
    assert all(hit.template_only is not True for hit in hits)
    # The pages the banner alone changed are left out, but for those whose change the store
    # does not flag template-only (the detection finds at least 95%: tests/test_sitecrawl.py).
    assert len(default & template_only) <= 0.05 * len(template_only)
    included = search(store, SearchQuery(added=phrase, include_template=True), limit=None)
    assert template_only <= {hit.url for hit in included.hits}
    assert included.total == len(included.hits) > len(default)
    page = search(store, SearchQuery(added=phrase, include_template=True), limit=5, offset=5)
    assert [hit.url for hit in page.hits] == [hit.url for hit in included.hits[5:10]]
    assert page.total == included.total



@pytest.mark.slow
@pytest.mark.parametrize("beside", [False, True], ids=["in-the-query", "beside-the-run-end"])
def test_a_watch_leaves_template_only_changes_out_as_a_search_does(docs, beside):
    """The watches' query at a run's end filters template-only changes and verdicts as a
    search does: the same pages, with and without `include_template`, and of one verdict;
    matched in the query that records the hits, and beside the run's end, in a connection of
    its own (`WatchMatching`), as `finish_run` does (evaluated again for the second crawl's
    run, then taken back, so the module's store is left as it was)."""
    store, _ = docs
    phrase = "this documentation site is moving to a new address"
    queries = {"banner": SearchQuery(added=phrase),
               "banner-all": SearchQuery(added=phrase, include_template=True),
               "banner-rewrites": SearchQuery(text=phrase, verdicts=("rewrite",), include_template=True)}
    for name, query in queries.items():
        add_watch(store, name, query)
    try:
        with store.writing() as connection:
            (run,) = connection.execute("SELECT max(run) FROM runs").fetchone()
            with WatchMatching(connection, run, beside=beside) as matching:
                store._record_watch_hits(connection, run, matching)
        recorded = {name: {hit.url for hit in watch_hits(store, name, run)} for name in queries}
    finally:
        for name in queries:
            store.remove_watch(name)
    expected = {name: {hit.url for hit in search(store, query, limit=None).hits}
                for name, query in queries.items()}
    assert recorded == expected
    assert expected["banner"] < expected["banner-all"]
    assert expected["banner-rewrites"] and expected["banner-rewrites"] < expected["banner-all"]


def test_a_run_that_did_not_finish_has_its_hits_recorded_by_the_next_run_s_end(tmp_path, monkeypatch, capsys):
    """A run's end that fails while the watches are matched beside it: the matching is
    stopped, no hit is recorded and the run is left unfinished, its batches stored. The next
    run's end records that run's hits, for that run, beside its own, and says so; the run
    after it does not record them again. A clean run of the same records has the same hits."""
    url = "https://news.example/prices"
    price = f"{PARAGRAPH}\nA price freeze was announced.\n{CLOSING}"
    versions = [f"{PARAGRAPH}\n{CLOSING}", price, f"{price}\nA rent freeze was announced too.",
                f"{price}\nA rent freeze was announced too.\nMore."]
    files = [jsonl(tmp_path / f"v{n}.jsonl", [crawlgen.record(url, n, body)])
             for n, body in enumerate(versions)]
    db = str(tmp_path / "cdc.duckdb")
    assert main(["--db", db, "watch", "add", "freeze", "--added", "price freeze"]) == EXIT_OK
    assert main(["--db", db, "watch", "add", "rent", "--added", "rent freeze"]) == EXIT_OK
    assert main(["--db", db, "ingest", "--quiet", str(files[0])]) == EXIT_OK

    def fails(*args, **kwargs):
        raise RuntimeError("the disk went away")

    with monkeypatch.context() as patched:
        patched.setattr(Store, "_refresh_templates", fails)
        with pytest.raises(RuntimeError, match="the disk went away"):
            Ingester(Store(db)).run(iter_records(str(files[1])))
    assert watch_hits(Store(db)) == []
    with Store(db).reading() as connection:
        assert connection.execute("SELECT run FROM runs WHERE ended_at IS NULL").fetchall() == [(2,)]
    capsys.readouterr()
    assert main(["--db", db, "ingest", "--quiet", "--fail-on-watch", str(files[2])]) == EXIT_WATCH_HIT
    out = capsys.readouterr().out
    assert "watch rent: 1 hit (`cdc watch hits rent --run 3`)" in out
    assert ("watch freeze: 1 hit in run 2, which had not finished: recorded by this run's end "
            "(`cdc watch hits freeze --run 2`)") in out
    assert [(hit.name, hit.run) for hit in watch_hits(Store(db))] == [("freeze", 2), ("rent", 3)]
    assert main(["--db", db, "ingest", "--quiet", "--fail-on-watch", str(files[3])]) == EXIT_OK
    assert "run 2" not in capsys.readouterr().out
    assert [(hit.name, hit.run) for hit in watch_hits(Store(db))] == [("freeze", 2), ("rent", 3)]
    # The same records in a store whose runs all finished: the same hits, run for run.
    clean = str(tmp_path / "clean.duckdb")
    for name, phrase in (("freeze", "price freeze"), ("rent", "rent freeze")):
        assert main(["--db", clean, "watch", "add", name, "--added", phrase]) == EXIT_OK
    for file in files:
        main(["--db", clean, "ingest", "--quiet", str(file)])
    assert ([(hit.name, hit.run, hit.generation) for hit in watch_hits(Store(clean))]
            == [(hit.name, hit.run, hit.generation) for hit in watch_hits(Store(db))])


def _shuffled_histories(pages: int = 8, versions: int = 4) -> list[dict]:
    """Pages whose every version inserts a sentence of its own and drops the one before, their
    records shuffled: a page's later fetch comes first as often as not, so a batch re-measures
    changes an earlier batch stored (their words and index rows replaced)."""
    records = []
    for page in range(pages):
        sentences = [textgen.text(1_000 + 10 * page + version, 160).decode() for version in range(versions)]
        records += history(f"https://news{page % 2}.example/story/{page}",
                           *(f"{PARAGRAPH}\n{sentence}\n{CLOSING}" for sentence in sentences))
    random.Random(7).shuffle(records)
    return records


def test_the_batches_matches_are_what_the_index_holds_and_the_hits_those_a_search_finds(tmp_path):
    """A run's batches match the watches it started with as they are written (`watch_matches`,
    `cdc.store.indexwriter`), in shuffled input whose late fetches re-measure stored changes:
    before its end, each watch's matches are the sides its stored index rows hold the phrase
    on (the query a search runs), and its end (here the next run's: its own fails) records
    as hits what a search of that run finds; a watch added during the run is matched from the
    index by that end; then the matches are gone."""
    records = _shuffled_histories()
    db = tmp_path / "cdc.duckdb"
    store = Store(db)
    sentence = textgen.text(1_021, 160).decode().split()
    queries = {"phrase": SearchQuery(added=" ".join(sentence[2:5])), "word": SearchQuery(text="price"),
               "removed": SearchQuery(removed=" ".join(sentence[:3])),
               "both": SearchQuery(added="the", removed="and")}
    for name, query in queries.items():
        add_watch(store, name, query)
    re_measured = []

    def fails(*args, **kwargs):
        raise RuntimeError("the disk went away")

    def adds_a_watch(batch):
        re_measured.append(batch.removed_changes.num_rows)
        if len(re_measured) == 2:  # during the run: matched at its end, from the index
            add_watch(store, "late", SearchQuery(added="river"))

    original = Store._refresh_templates
    Store._refresh_templates = fails
    try:
        with pytest.raises(RuntimeError, match="the disk went away"):
            Ingester(store, batch_records=5, on_write=adds_a_watch).run(
                iter_records(str(jsonl(tmp_path / "shuffled.jsonl", records))))
    finally:
        Store._refresh_templates = original
    assert sum(re_measured) > 0
    with store.reading() as connection:
        matched = connection.execute(
            "SELECT name, natural_key, generation, added FROM watch_matches").fetchall()
        wanted = wanted_tables({name: query.words_filter() for name, query in queries.items()})
        query, values = matching_query(wanted, 1)
        with registered_tables(connection, wanted):
            indexed = connection.execute(f"""SELECT s.query, m.natural_key, m.generation, s.added
                                             FROM ({query}) m JOIN search_phrases s USING (search)""",
                                         values).fetchall()
    assert indexed and sorted(matched) == sorted(indexed)
    assert {name for name, *_ in matched} == set(queries)  # every watch matched; the late one not
    main(["--db", str(db), "ingest", "--quiet", str(jsonl(tmp_path / "next.jsonl", records[:1]))])
    queries["late"] = SearchQuery(added="river")
    for name, query in queries.items():
        found = search(store, SearchQuery(**{**vars(query), "run": 1}), limit=None).hits
        hits = watch_hits(store, name, 1)
        assert hits, name
        assert sorted((h.url, h.generation, h.side) for h in hits) == sorted(
            (h.url, h.generation, h.side) for h in found), name
    with store.reading() as connection:
        assert connection.execute("SELECT count(*) FROM watch_matches").fetchone() == (0,)
        assert connection.execute("SELECT count(*) FROM run_watches").fetchone() == (0,)


# --- the Chinese and Japanese histories of the shared corpus -------------------------------------

@pytest.fixture(scope="module")
def cjk(tmp_path_factory) -> Store:
    paths = [CORPUS / "rustbook-zh.jsonl.gz", CORPUS / "rustbook-ja.jsonl.gz"]
    if not all(path.exists() for path in paths):
        pytest.skip("the shared corpus is not at ../shared/corpus")
    store = Store(tmp_path_factory.mktemp("search-cjk") / "cjk.duckdb")
    store.set_retention(RetentionPolicy(keep=1_000))  # every text kept: each change can be compared again
    for path in paths:
        Ingester(store).run(iter_records(str(path)))
    return store


@pytest.mark.slow
@pytest.mark.parametrize(("host", "phrase"), [("doc.rust-lang.org.cn", "所有权"),
                                             ("doc.rust-jp.rs", "所有権")])
def test_cjk_phrases_are_found_in_the_edits_of_the_histories(cjk, host, phrase):
    """Every hit's edit holds the phrase; and the retained changes whose exact edits insert
    text holding it (compared here again, from the texts, on two pages with hits and three
    without) are hits."""
    hits = search(cjk, SearchQuery(added=phrase, host=host, include_template=True), limit=None).hits
    assert hits and all(phrase in hit.excerpt and hit.host == host for hit in hits)
    found = {(hit.url, hit.generation) for hit in hits}
    checked = 0
    hit_pages = sorted({hit.natural_key for hit in hits})
    others = [key for key in cjk.page_keys(host) if key not in hit_pages][:3]
    for key in [*hit_pages[:2], *others]:
        numbers = [g.generation for g in cjk.generations(key) if g.retained]
        for old, new in itertools.pairwise(numbers):
            comparison = compare_generations(cjk, key, old, new)
            text = comparison.new.text
            added = [text[e.new_offset:e.new_offset + e.new_length].decode() for e in comparison.report.edits
                     if e.kind in (INSERT, REPLACE)]
            if any(phrase in " ".join(piece.split()) for piece in added):
                checked += 1
                assert (key, new) in found
    assert checked
