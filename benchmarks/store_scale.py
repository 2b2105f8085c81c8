"""Does a batch cost more as the store grows? The same 10,000-page crawl ingested into a
small store and into a store of 1,000,000 pages, interleaved, medians over several runs.

The large store is the synthetic one (`benchmarks/synthetic_store.py`, cached under
`--cache`): `--pages` pages over `--hosts` hosts, three crawls each. The crawl recrawls every
page of a few of its hosts (`--crawl` pages, `--new-share` of them new URLs on those hosts,
the rest the stored pages with a few words changed), as a recrawl of some sites of a store
that holds many. It is ingested into copies of three stores:

- `large`: the whole synthetic store;
- `small`: the same store cut down to the crawl's hosts (every row of their pages, the runs,
  the meta rows): the same pages known, the same templates, the same work for the compare,
  with none of the other sites around. Cost that grows with the store is `large / small`;
- `empty`: a new store, where every page of the crawl is new (no compare, nothing read
  back): printed for reference, the issue's literal "empty store".

Each ingest runs in this process (`Ingester`, one process for the per-page work, as
`cdc ingest --processes 1`), and every statement the store runs is timed (first line of its
SQL), so the statements whose time grows with the store show up by name.

    python benchmarks/store_scale.py --pages 1000000 --cache /tmp/cdc-store-scale
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import synthetic_store
from cdc.ingest.ingester import Ingester
from cdc.sources.jsonl import iter_lines
from cdc.store import Store
from cdc.store.connection import Connections
from cdc.store.schema import INDEX_TABLES, STORED_TABLES
from cdc.store.writer import RetentionPolicy

CRAWL_AT = datetime(2025, 3, 3)  # weeks after the synthetic store's last crawl
STAGES = ("page_states", "page_histories", "write", "mark_checked", "start_run", "finish_run")


# --- the crawl -------------------------------------------------------------------------------


def crawl_hosts(pages: int, hosts: int, known: int) -> list[int]:
    """The hosts whose pages, all of them, make up `known` pages of the crawl (at least one)."""
    per_host = pages // hosts
    return list(range(max(1, min(hosts, round(known / max(1, per_host))))))


def edited(text: str, rng: random.Random) -> str:
    """`text` with a few words replaced and a sentence added: a changed page."""
    words = text.split(" ")
    for _ in range(3):
        words[rng.randrange(len(words))] = f"changed{rng.randrange(10**6)}"
    at = rng.randrange(len(words))
    words[at:at] = ["A", "new", "sentence", "about", f"item{rng.randrange(10**6)}."]
    return " ".join(words)


def write_crawl(big: Path, pages: int, hosts: int, crawl: int, new_share: float, out: Path) -> dict:
    """A JSONL crawl of the pages of the hosts `crawl_hosts` picks, as records of changed
    stored texts, plus new URLs on those hosts with texts of pages of other hosts."""
    rng = random.Random(21)
    chosen = crawl_hosts(pages, hosts, round(crawl * (1 - new_share)))
    names = [synthetic_store.host_name(host) for host in chosen]
    connection = duckdb.connect(str(big), read_only=True)
    try:
        known = connection.execute("""
            SELECT p.natural_key, g.text FROM pages p JOIN generations g
              ON g.natural_key = p.natural_key AND g.generation = p.latest_generation
            WHERE p.host IN (SELECT unnest(?::VARCHAR[])) ORDER BY p.natural_key""", [names]).fetchall()
        fresh = connection.execute("""
            SELECT g.text FROM pages p JOIN generations g
              ON g.natural_key = p.natural_key AND g.generation = p.latest_generation
            WHERE p.host NOT IN (SELECT unnest(?::VARCHAR[])) LIMIT ?""",
                                   [names, max(0, crawl - len(known))]).fetchall()
    finally:
        connection.close()
    records = [(key, edited(text, rng)) for key, text in known]
    records += [(f"https://{names[n % len(names)]}/new/{n:06d}-item.html", text)
                for n, (text,) in enumerate(fresh)]
    rng.shuffle(records)
    with out.open("w", encoding="utf-8") as stream:
        for n, (url, text) in enumerate(records):
            fetched = CRAWL_AT + timedelta(seconds=2 * n)
            stream.write(json.dumps({"url": url, "fetched_at": fetched.isoformat() + "+00:00",
                                     "title": url.rsplit("/", 1)[-1],
                                     "sections": [{"heading": "main", "text": text}]}) + "\n")
    return {"hosts": names, "known": len(known), "new": len(fresh), "bytes": out.stat().st_size}


# --- the stores ------------------------------------------------------------------------------


def small_store(big: Path, hosts: list[str], out: Path) -> None:
    """Every row of the pages of `hosts` (and the runs, meta and those hosts' templates) of
    `big`, in a new store made by `Store`."""
    out.unlink(missing_ok=True)
    Store(out).set_retention(Store(big).retention())
    connection = duckdb.connect(str(out))
    try:
        connection.execute("ATTACH ? AS big (READ_ONLY)", [str(big)])
        connection.execute("CREATE TEMP TABLE wanted AS SELECT natural_key FROM big.pages "
                           "WHERE host IN (SELECT unnest(?::VARCHAR[]))", [hosts])
        connection.execute("BEGIN TRANSACTION")
        for table in (*STORED_TABLES, *INDEX_TABLES):  # the rows and their index
            connection.execute(f"INSERT INTO {table} SELECT * FROM big.{table} "
                               "WHERE natural_key IN (SELECT natural_key FROM wanted)")
        connection.execute("INSERT INTO host_templates SELECT * FROM big.host_templates "
                           "WHERE host IN (SELECT unnest(?::VARCHAR[]))", [hosts])
        connection.execute("INSERT INTO runs SELECT * FROM big.runs")
        connection.execute("COMMIT")
        connection.execute("DETACH big")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()


def empty_store(big: Path, out: Path) -> None:
    out.unlink(missing_ok=True)
    Store(out).set_retention(RetentionPolicy(Store(big).retention().keep))


# --- timing ----------------------------------------------------------------------------------


class TimedConnection:
    """A DuckDB connection whose `execute` adds its time to `spent`, by statement."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, spent: dict[str, float]):
        self._connection = connection
        self._spent = spent

    def execute(self, query: str, *args):
        started = time.perf_counter()
        result = self._connection.execute(query, *args)
        name = re.sub(r"\s+", " ", query).strip()[:90]
        self._spent[name] += time.perf_counter() - started
        return result

    def __getattr__(self, name: str):
        return getattr(self._connection, name)


@contextmanager
def timed(spent_statements: dict[str, float], spent_stages: dict[str, float]) -> Iterator[None]:
    """Time every statement of the store, and each stage (`STAGES`) of the writer."""
    connect = Connections._connect
    originals = {name: getattr(Store, name) for name in STAGES}

    @contextmanager
    def timed_connect(self, write):
        with connect(self, write) as connection:
            yield TimedConnection(connection, spent_statements)

    def stage(name, method):
        def run(*args, **kwargs):
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent_stages[name] += time.perf_counter() - started
        return run

    Connections._connect = timed_connect
    for name, method in originals.items():
        setattr(Store, name, stage(name, method))
    try:
        yield
    finally:
        Connections._connect = connect
        for name, method in originals.items():
            setattr(Store, name, method)


def ingest_once(source: Path, work: Path, crawl: Path) -> tuple[float, dict, dict]:
    """Seconds to ingest `crawl` into a fresh copy of `source`, and the time by statement and
    by stage. The copy is on disk before the clock, as a store at rest is
    (`synthetic_store.copy_at_rest`): the ingest's first commit wrote a copy just made back
    whole, 1.0 s of each of the 100,000-page store's runs."""
    for leftover in (work, work.with_name(work.name + ".wal")):
        leftover.unlink(missing_ok=True)
    synthetic_store.copy_at_rest(source, work)
    statements: dict[str, float] = defaultdict(float)
    stages: dict[str, float] = defaultdict(float)
    with timed(statements, stages):
        started = time.perf_counter()
        ingester = Ingester(Store(work), workers=1, label="scale", inputs=[str(crawl)])
        summary = ingester.run_inputs([iter_lines(str(crawl))])
        seconds = time.perf_counter() - started
    if summary.records == 0:
        raise RuntimeError("the crawl ingested nothing")
    return seconds, dict(statements), dict(stages)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1_000_000, help="pages of the large store")
    parser.add_argument("--hosts", type=int, default=2000, help="hosts of the large store")
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--crawl", type=int, default=10_000, help="pages of the crawl")
    parser.add_argument("--new-share", type=float, default=0.1,
                        help="share of the crawl's pages that are new")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/cdc-store-scale"),
                        help="where the stores and the crawl are kept between runs")
    parser.add_argument("--skip-empty", action="store_true", help="time the large and small stores only")
    parser.add_argument("--top", type=int, default=12, help="statements shown, by time they grow")
    args = parser.parse_args(argv)

    args.cache.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    built = synthetic_store.cached_store(args.pages, args.generations, args.hosts, directory=args.cache)
    print(f"large store: {built.pages:,} pages, {built.generations:,} generations, "
          f"{built.file_bytes / 1e9:.2f} GB ({'cached' if built.cached else 'built'}, "
          f"{built.seconds:.0f} s to build)")
    stem = built.path.stem
    crawl = args.cache / f"{stem}-crawl{args.crawl}-n{args.new_share}.jsonl"
    info_path = crawl.with_suffix(".json")
    if not crawl.exists() or not info_path.exists():
        info_path.write_text(json.dumps(write_crawl(built.path, args.pages, args.hosts, args.crawl,
                                                    args.new_share, crawl)))
    info = json.loads(info_path.read_text())
    print(f"crawl: {info['known'] + info['new']:,} pages ({info['known']:,} known, changed; "
          f"{info['new']:,} new) on {len(info['hosts'])} hosts, {info['bytes'] / 1e6:.1f} MB")
    small = args.cache / f"{stem}-small-{len(info['hosts'])}hosts.duckdb"
    if not small.exists():
        small_store(built.path, info["hosts"], small)
    empty = args.cache / f"{stem}-empty.duckdb"
    if not empty.exists():
        empty_store(built.path, empty)
    print(f"small store: {small.stat().st_size / 1e6:.0f} MB; "
          f"set up in {time.perf_counter() - started:.0f} s")

    sources = {"large": built.path, "small": small}
    if not args.skip_empty:
        sources["empty"] = empty
    times: dict[str, list[float]] = defaultdict(list)
    statements: dict[str, list[dict]] = defaultdict(list)
    stages: dict[str, list[dict]] = defaultdict(list)
    for repeat in range(args.repeats):
        order = list(sources) if repeat % 2 == 0 else list(reversed(sources))
        for name in order:
            work = args.cache / f"work-{name}.duckdb"
            seconds, by_statement, by_stage = ingest_once(sources[name], work, crawl)
            work.unlink(missing_ok=True)
            times[name].append(seconds)
            statements[name].append(by_statement)
            stages[name].append(by_stage)
            print(f"  run {repeat + 1} {name:>5}: {seconds:7.2f} s", flush=True)

    def median(rows: list[dict], key: str) -> float:
        return statistics.median(row.get(key, 0.0) for row in rows)

    print()
    for name in sources:
        print(f"{name:>5}: median {statistics.median(times[name]):7.2f} s over {args.repeats} "
              f"({', '.join(f'{t:.2f}' for t in times[name])})")
    ratio = statistics.median(times["large"]) / statistics.median(times["small"])
    print(f"large / small: {ratio:.2f}x  (target: at most 1.3x)")
    if "empty" in sources:
        print(f"large / empty: {statistics.median(times['large']) / statistics.median(times['empty']):.2f}x"
              "  (the empty store compares nothing: every page is new)")
    print("\nstage (median s)      " + "".join(f"{name:>9}" for name in sources))
    for stage_name in STAGES:
        print(f"{stage_name:<22}" + "".join(f"{median(stages[name], stage_name):9.2f}" for name in sources))
    names = {key for rows in statements.values() for row in rows for key in row}
    grown = sorted(names, key=lambda key: median(statements["small"], key) - median(statements["large"], key))
    print(f"\nstatements, by the time the large store adds (median s: {', '.join(sources)})")
    for key in grown[:args.top]:
        print("  " + " ".join(f"{median(statements[name], key):7.3f}" for name in sources) + f"  {key}")


if __name__ == "__main__":
    main()
