"""A synthetic chunk store of many pages, written in bulk, for benchmarking queries.

Running 100,000 pages times 3 crawls through the ingest pipeline would take minutes; this
writes the same tables directly, through DuckDB from Arrow, in the layout ingest leaves:

- The empty store is made by `cdc.store.Store` itself (its `SCHEMA`, its meta rows:
  schema version, `cdc.SPEC`, the retention policy), so it opens with `Store(path)` and
  passes its meta check; the builder then checks those rows against `SCHEMA_VERSION`
  and `SPEC`.
- Rows arrive crawl by crawl (every page's first generation, then every page's second,
  ...), each crawl in a random page order cut into ingest-sized batches
  (`cdc.ingest.ingester.BATCH_RECORDS`) that are sorted by natural key, as `Ingester` writes them.
  So a page's rows lie in as many places as it has generations, and a host's pages are
  spread over the whole file, as after real crawls of interleaved hosts.
- Each crawl is a finished run (`runs`: run N labelled `crawl N`, ingested an hour after its
  last fetch, with its counts) that fetched every page once, 2.5 s apart in its order, a
  week after the crawl before: a `fetches` row and a `page_runs` row per page (fetch time,
  content digest; the fetch numbered by its place in the run's one input). A generation is
  numbered by its capture time (`cdc.core.captures.capture_id` of its fetch), and its change
  row names the generation before it and how it was measured (`edits`; none for a new
  page); `generations.first_run` is its crawl's run.
- Each generation has about 6 chunks with random 16-byte digests: a header and a footer
  shared by every page of the host (2 boilerplate digests per host), with probability 1/2
  one of `SHARED_CHUNKS` passages found on every host (syndicated text), and 3 or 4
  chunks of its own. The text is the chunks' texts end to end (so `Store.chunk_text`
  cuts real bytes), drawn from a pool of random words: about 3.4 KB per generation,
  stored uncompressed for the generations within retention, as the store keeps it.
- Between crawls each page changes (identical content makes no generation): a minor edit
  (55%), an inserted chunk (15%), a deleted chunk (5%), a rewrite of its own chunks (20%),
  or a different page, template included (5%). In the last crawl the pages of every
  `TEMPLATE_EVERY`th host change only their header, to one new header per host: a site-wide
  template change, which the store's end-of-run count flags template-only (every other
  flag is counted the same way, by `Store.refresh_templates`). `changes` rows carry the measures those
  chunk lists give (Jaccard similarity, byte shares kept; a few words for a minor edit)
  and the verdict `cdc.Thresholds` gives them, and `change_words` rows the text of the
  chunks added and removed (for a minor edit, the few words of its excerpt) as ingest's
  exact edits would give it, indexed (`change_tokens`) a batch of ingest's size at a time.

Everything is seeded: the same parameters give the same store.

    python benchmarks/synthetic_store.py --pages 100000 --out data/bench/synthetic.duckdb
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Run as a script, this working tree's `cdc` goes first, not an installed one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cdc
from cdc.core.captures import capture_id
from cdc.core.editwords import words_row
from cdc.core.urls import surt_key
from cdc.core.verdicts import NEW
from cdc.ingest.ingester import BATCH_RECORDS
from cdc.store import DEFAULT_KEEP, INDEXES, SCHEMA, SCHEMA_VERSION, RetentionPolicy, Store
from cdc.store import rows as stored_rows
from cdc.store.runs import RUN_COUNTS
from cdc.store.wordindex import index_rows

BUILDER_VERSION = 4  # bump when the generated data changes, so cached stores are rebuilt
CACHE_DIR = Path(__file__).resolve().parents[1] / "data" / "bench"  # data/ is git-ignored

SHARED_CHUNKS = 8  # passages found on every host; each page carries one with probability 1/2
POOL_BYTES = 4 << 20  # the random words every chunk's text is cut from
SLICE_PAGES = 20_000  # pages whose rows are built and inserted at a time: bounds memory
BUILD_MEMORY = "2GB"  # DuckDB's memory limit while the builder writes
REFRESH_HOSTS = 100  # hosts whose templates are counted in one transaction
CRAWL_START = datetime(2025, 1, 6)
CRAWL_EVERY = timedelta(days=7)
RUN_AFTER = timedelta(hours=1)  # a crawl's run is ingested this long after its last fetch
RUN_TAKES = timedelta(minutes=10)
THRESHOLDS = cdc.Thresholds()
CHANGE_KINDS = ("minor", "insert", "delete", "rewrite", "different_page")
CHANGE_WEIGHTS = (55, 15, 5, 20, 5)
TEMPLATE_EVERY = 10  # in the last crawl, every tenth host's pages change their header alone

Piece = tuple[bytes, int, int]  # one chunk: digest, length, offset of its text in the pool


@dataclass(frozen=True)
class BuildResult:
    path: Path
    seconds: float
    file_bytes: int
    pages: int
    generations: int
    chunk_rows: int
    text_bytes: int  # retained text, stored uncompressed
    cached: bool = False  # found in the cache: `seconds` is how long the build took then


# --- names -----------------------------------------------------------------------------------


def host_name(host: int) -> str:
    return f"www.site{host:03d}.example.com"


def page_key(page: int, hosts: int) -> str:
    """The natural key (a canonical URL) of page number `page`; pages go round the hosts."""
    section = ("news", "docs", "shop", "blog")[page // hosts % 4]
    return f"https://{host_name(page % hosts)}/{section}/{page:06d}-item.html"


def page_keys(pages: int, hosts: int) -> list[tuple[str, str]]:
    """(host, natural key) of every page of a store built with these parameters."""
    return [(host_name(page % hosts), page_key(page, hosts)) for page in range(pages)]


# --- content ---------------------------------------------------------------------------------


def word_pool(rng: random.Random) -> str:
    """POOL_BYTES of ASCII words, with numbers and punctuation among them."""
    generator = np.random.default_rng(rng.getrandbits(64))
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pre", "con", "ment",
                 "ing", "al", "or", "ex", "st", "qu", "an", "el"]
    vocabulary = ["".join(generator.choice(syllables, size=int(n))) for n in generator.integers(1, 5, 3000)]
    vocabulary += [f"{n}" for n in range(100)] + [f"${n}.99" for n in range(50)]
    vocabulary += [word + "." for word in vocabulary[:300]] + [word + "," for word in vocabulary[300:600]]
    words = generator.choice(np.array(vocabulary, dtype=object), size=POOL_BYTES // 5)
    return " ".join(words.tolist())[:POOL_BYTES]


class Pieces:
    """Random chunks (digest, length, text offset in the pool), drawn from one seeded stream."""

    def __init__(self, rng: random.Random, pool_size: int):
        self.rng = rng
        self.pool_size = pool_size

    def new(self, low: int, high: int) -> Piece:
        length = self.rng.randint(low, high)
        return self.rng.randbytes(16), length, self.rng.randrange(self.pool_size - length)

    def own(self) -> Piece:
        return self.new(400, 900)

    def edited(self, piece: Piece) -> Piece:
        """A new digest for a piece whose text changed by a few words, its length by a little."""
        _, length, offset = piece
        length = max(100, length + self.rng.randint(-30, 30))
        return self.rng.randbytes(16), length, min(offset + 1, self.pool_size - length)


@dataclass
class PageState:
    header: Piece | None
    shared: Piece | None
    own: list[Piece]
    footer: Piece | None

    def chunks(self) -> list[Piece]:
        return [p for p in (self.header, *self.own, self.shared, self.footer) if p is not None]


def first_version(rng: random.Random, pieces: Pieces, templates: list[tuple[Piece, Piece]],
                  shared: list[Piece], host: int) -> PageState:
    header, footer = templates[host]
    passage = rng.choice(shared) if rng.random() < 0.5 else None
    return PageState(header, passage, [pieces.own() for _ in range(rng.randint(3, 4))], footer)


def next_version(rng: random.Random, pieces: Pieces, page: PageState) -> tuple[PageState, str]:
    """The page after one crawl's change, and the kind of change."""
    kind = rng.choices(CHANGE_KINDS, CHANGE_WEIGHTS)[0]
    own = list(page.own)
    if kind == "delete" and len(own) < 2:
        kind = "minor"
    if kind == "minor":
        at = rng.randrange(len(own))
        own[at] = pieces.edited(own[at])
    elif kind == "insert":
        own.insert(rng.randint(0, len(own)), pieces.own())
    elif kind == "delete":
        del own[rng.randrange(len(own))]
    elif kind == "rewrite":
        own = [pieces.own() for _ in range(rng.randint(3, 4))]
    else:  # a different page at the same URL: a new template too
        return PageState(pieces.new(250, 450), None, [pieces.own() for _ in range(rng.randint(3, 5))],
                         pieces.new(350, 700)), kind
    return PageState(page.header, page.shared, own, page.footer), kind


def _runs(flags: list[bool]) -> int:
    """Number of runs of consecutive True values."""
    return sum(1 for i, flag in enumerate(flags) if flag and (i == 0 or not flags[i - 1]))


def measures(rng: random.Random, old: list[Piece], new: list[Piece], kind: str, pool: str) -> dict:
    """The `changes` columns that the chunk lists of two versions give."""
    old_digests = {digest for digest, _, _ in old}
    new_digests = {digest for digest, _, _ in new}
    old_bytes = sum(length for _, length, _ in old)
    new_bytes = sum(length for _, length, _ in new)
    added_flags = [digest not in old_digests for digest, _, _ in new]
    removed_flags = [digest not in new_digests for digest, _, _ in old]
    if kind == "minor":  # one chunk's digest changed, but only a few words of it
        removed = rng.randint(0, 40)
        added, regions = max(1, removed + new_bytes - old_bytes), 1
        position = rng.randrange(POOL_BYTES - 40)
        excerpt = f"{pool[position:position + 12].strip()} → {pool[position + 20:position + 34].strip()}"
        added_text, removed_text = [pool[position + 20:position + 34]], [pool[position:position + 12]]
    else:
        added = sum(length for (_, length, _), flag in zip(new, added_flags) if flag)
        removed = sum(length for (_, length, _), flag in zip(old, removed_flags) if flag)
        regions = _runs(added_flags) + _runs(removed_flags)
        first = next((piece for piece, flag in zip(new, added_flags) if flag), None)
        excerpt = "+ " + pool[first[2]:first[2] + 150] if first else f"- {removed} bytes"
        added_text = [pool[at:at + length] for (_, length, at), flag in zip(new, added_flags) if flag]
        removed_text = [pool[at:at + length] for (_, length, at), flag in zip(old, removed_flags) if flag]
    unchanged = 1 - added / new_bytes
    retained = 1 - removed / old_bytes
    return {
        "similarity": len(old_digests & new_digests) / len(old_digests | new_digests),
        "unchanged_ratio": unchanged, "retained_ratio": retained,
        "bytes_added": added, "bytes_removed": removed, "regions": regions,
        "verdict": THRESHOLDS.verdict(True, min(unchanged, retained)), "excerpt": excerpt,
        "measure": "edits",
        # What the change's edits said (`change_words`), as ingest stores it.
        WORDS: tuple([" ".join(piece.split()) for piece in side] for side in (added_text, removed_text)),
    }


WORDS = "words"  # not a `changes` column: the added and removed text of the change

# --- tables ----------------------------------------------------------------------------------

# The tables as ingest writes them, the schemas of its rows (`cdc.store.rows`): the builder
# leaves ingest's layout.
_GENERATIONS, _CHUNKS, _CHANGES, _FETCHES, _PAGE_RUNS, _PAGES = map(stored_rows.arrow_schema, (
    stored_rows.GenerationsRow, stored_rows.ChunkListsRow, stored_rows.ChangesRow, stored_rows.FetchesRow,
    stored_rows.PageRunsRow, stored_rows.PagesRow))
_RUNS = pa.schema([
    ("run", pa.int32()), ("label", pa.string()), ("started_at", pa.timestamp("us")),
    ("ended_at", pa.timestamp("us")), ("inputs", pa.list_(pa.string())),
    *((name, pa.int64()) for name in RUN_COUNTS),
])


def crawl_order(rng: random.Random, pages: int, keys: list[str]) -> list[int]:
    """Page numbers in the order one crawl's ingest writes them: random batches, each sorted."""
    order = list(range(pages))
    rng.shuffle(order)
    batches = [sorted(order[i:i + BATCH_RECORDS], key=keys.__getitem__)
               for i in range(0, pages, BATCH_RECORDS)]
    return [page for batch in batches for page in batch]


def _columns(schema: pa.Schema) -> dict[str, list]:
    return {name: [] for name in schema.names}


@dataclass(frozen=True)
class Crawl:
    """One crawl as the builder has it: its run id, and per page number its fetch time, its
    generation's number (the capture id of that fetch) and the number before it (None on a
    first crawl), with the change measured between them (None: a new page)."""

    run: int
    fetched: list[datetime]
    numbers: list[int]
    previous: list[int | None]
    changes: list[dict | None]
    retained: bool


def crawl_tables(crawl: Crawl, start: int, part: Sequence[int], keys: list[str], versions: list[PageState],
                 pool: str) -> tuple[dict[str, pa.Table], int]:
    """One slice of a crawl's rows, by table (generations, chunk_lists, changes, fetches,
    page_runs), and its retained text bytes. `part` is the crawl's order from place `start`:
    a page's fetch is numbered by its place in the run's one input, as ingest numbers it."""
    g, c, ch = _columns(_GENERATIONS), _columns(_CHUNKS), _columns(_CHANGES)
    words = []
    f, seen = _columns(_FETCHES), _columns(_PAGE_RUNS)
    text_bytes = 0
    for place, page in enumerate(part, start + 1):
        key, chunks = keys[page], versions[page].chunks()
        text = "".join([pool[offset:offset + length] for _, length, offset in chunks])
        data = text.encode("ascii")
        content = cdc.content_digest(data)
        fetched, number = crawl.fetched[page], crawl.numbers[page]
        g["natural_key"].append(key)
        g["generation"].append(number)
        g["fetched_at"].append(fetched)
        g["content_digest"].append(content)
        g["length"].append(len(data))
        g["chunk_count"].append(len(chunks))
        g["text"].append(text if crawl.retained else None)
        g["first_run"].append(crawl.run)
        if crawl.retained:
            text_bytes += len(data)
            c["natural_key"].append(key)
            c["generation"].append(number)
            c["digests"].append(b"".join([digest for digest, _, _ in chunks]))
            c["lengths"].append([length for _, length, _ in chunks])
        change = crawl.changes[page]
        ch["natural_key"].append(key)
        ch["generation"].append(number)
        ch["previous_generation"].append(crawl.previous[page])
        ch["fetched_at"].append(fetched)
        if change is None:  # a new page, as ingest records it
            change = {"similarity": None, "unchanged_ratio": None, "retained_ratio": None,
                      "bytes_added": len(data), "bytes_removed": 0, "regions": 0, "verdict": NEW,
                      "excerpt": text[:200], "measure": None}
        for name, value in change.items():
            if name == WORDS:
                said = words_row(key, number, crawl.run, *value)
                words += [said] if said is not None else []
            else:
                ch[name].append(value)
        # Every page changes at every crawl: its one fetch in the run is its new generation's.
        f["natural_key"].append(key)
        f["fetched_at"].append(fetched)
        f["content_digest"].append(content)
        f["run"].append(crawl.run)
        f["sequence"].append(place)  # input 0 of the run: INPUT_SHIFT leaves the place as it is
        seen["natural_key"].append(key)
        seen["run"].append(crawl.run)
        seen["fetched_at"].append(fetched)
        seen["content_digest"].append(content)
    tables = {"generations": (g, _GENERATIONS), "chunk_lists": (c, _CHUNKS), "changes": (ch, _CHANGES),
              "fetches": (f, _FETCHES), "page_runs": (seen, _PAGE_RUNS)}
    result = {name: pa.table(columns, schema=schema) for name, (columns, schema) in tables.items()}
    return {**result, "change_words": stored_rows.arrow_table(stored_rows.ChangeWordsRow, words)}, text_bytes


def run_row(crawl: Crawl, pages: int) -> dict[str, list]:
    """The crawl's `runs` row: finished, ingested in the hour after its last fetch, with the
    counts a run over every page (each of them new or changed) records."""
    last = max(crawl.fetched)
    counts = {"records": pages, "pages": pages, "new_pages": pages if crawl.run == 1 else 0,
              "changed": 0 if crawl.run == 1 else pages, "unchanged": 0, "older": 0, "skipped": 0,
              "failed": 0}
    return {"run": [crawl.run], "label": [f"crawl {crawl.run}"], "started_at": [last + RUN_AFTER],
            "ended_at": [last + RUN_AFTER + RUN_TAKES], "inputs": [[f"crawl-{crawl.run}.warc.gz"]],
            **{name: [value] for name, value in counts.items()}}


def _insert(connection: duckdb.DuckDBPyConnection, table: str, rows: pa.Table) -> None:
    """Append an Arrow table's rows to a store table, columns matched by name."""
    connection.register("bulk_rows", rows)
    try:
        # The table name is one of this module's constants, never input.
        connection.execute(f"INSERT INTO {table} BY NAME SELECT * FROM bulk_rows")
    finally:
        connection.unregister("bulk_rows")


def _index_words(connection: duckdb.DuckDBPyConnection, words: pa.Table) -> None:
    """Index a slice's words as ingest does, a batch of `BATCH_RECORDS` changes at a time:
    each batch's index rows sorted by token, so the index's layout is ingest's."""
    for start in range(0, words.num_rows, BATCH_RECORDS):
        connection.register("bulk_tokens", index_rows(words.slice(start, BATCH_RECORDS)))
        try:
            connection.execute("INSERT INTO change_tokens SELECT * FROM bulk_tokens")
        finally:
            connection.unregister("bulk_tokens")


def _slices(order: list[int]) -> Iterator[tuple[int, list[int]]]:
    for start in range(0, len(order), SLICE_PAGES):
        yield start, order[start:start + SLICE_PAGES]


# --- building --------------------------------------------------------------------------------


def _empty_store(path: Path, keep: int) -> None:
    """A store with no rows, its schema and meta rows made by `Store` itself."""
    store = Store(path)
    store.set_retention(RetentionPolicy(keep=keep))
    meta = store.meta()
    if meta.get("schema_version") != str(SCHEMA_VERSION) or meta.get("spec") != cdc.SPEC:
        raise RuntimeError(f"unexpected meta rows in a new store: {meta}")


def build_store(path: str | os.PathLike, pages: int = 100_000, generations: int = 3, hosts: int = 50,
                seed: int = 1, keep: int = DEFAULT_KEEP) -> BuildResult:
    """Write a store of `pages` pages with `generations` generations each at `path` (new file).

    Generations within `keep` of the latest keep their text and chunk rows, as ingest
    leaves them under `RetentionPolicy(keep)`, which the store's meta records.
    """
    if pages < 1 or generations < 1 or hosts < 1:
        raise ValueError("pages, generations and hosts must be at least 1")
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; give a new path")
    started = time.perf_counter()
    rng = random.Random(seed)
    pool = word_pool(rng)
    pieces = Pieces(rng, len(pool))
    keys = [page_key(page, hosts) for page in range(pages)]
    templates = [(pieces.new(250, 450), pieces.new(350, 700)) for _ in range(hosts)]
    shared = [pieces.new(300, 600) for _ in range(SHARED_CHUNKS)]
    versions = [first_version(rng, pieces, templates, shared, page % hosts) for page in range(pages)]
    first_order = crawl_order(rng, pages, keys)
    numbers: list[int | None] = [None] * pages
    first_seen: list[datetime] = []
    chunk_rows = text_bytes = 0
    with tempfile.TemporaryDirectory(prefix=".synthetic-", dir=path.parent if path.parent.exists()
                                     else None) as work:
        building = Path(work) / "store.duckdb"
        _empty_store(building, keep)
        # DuckDB's default memory limit (80% of the machine) let a 1,000,000-page build grow
        # past 11 GB, caching what it wrote; bounded, it writes out and reads back instead.
        connection = duckdb.connect(str(building), config={"memory_limit": BUILD_MEMORY})
        try:
            connection.execute("SET enable_progress_bar = false")
            # Rows go in unindexed; the indexes are made whole at the end, as a store cdc
            # writes has them.
            for statement in INDEXES:
                connection.execute(f"DROP INDEX {statement.split()[5]}")
            for run in range(1, generations + 1):
                # A transaction per slice of pages: DuckDB holds what a transaction appends in
                # memory past its limit until the commit. A 1,000,000-page build in one
                # transaction grew past 23 GB; with a transaction a crawl and the search index
                # rows, the kernel stopped it at 24 GB in its first crawl.
                order = first_order if run == 1 else crawl_order(rng, pages, keys)
                start = CRAWL_START + (run - 1) * CRAWL_EVERY
                fetched: list[datetime] = [start] * pages
                changes: list[dict | None] = [None] * pages
                headers = ({host: pieces.new(250, 450) for host in range(0, hosts, TEMPLATE_EVERY)}
                           if run > 1 and run == generations else {})
                for position, page in enumerate(order):
                    fetched[page] = start + timedelta(seconds=position * 2.5)
                    if run > 1:
                        old = versions[page].chunks()
                        if page % hosts in headers:  # the host's template changed
                            versions[page] = replace(versions[page], header=headers[page % hosts])
                            kind = "template"
                        else:
                            versions[page], kind = next_version(rng, pieces, versions[page])
                        changes[page] = measures(rng, old, versions[page].chunks(), kind, pool)
                if run == 1:
                    first_seen = list(fetched)
                crawl = Crawl(run, fetched, [capture_id(moment) for moment in fetched], numbers, changes,
                              retained=run > generations - keep)
                for first, part in _slices(order):
                    tables, text = crawl_tables(crawl, first, part, keys, versions, pool)
                    connection.execute("BEGIN TRANSACTION")
                    for table, rows in tables.items():
                        _insert(connection, table, rows)
                    _index_words(connection, tables["change_words"])
                    connection.execute("COMMIT")
                    chunk_rows += len(pc.list_flatten(tables["chunk_lists"].column("lengths")))
                    text_bytes += text
                _insert(connection, "runs", pa.table(run_row(crawl, pages), schema=_RUNS))
                numbers = crawl.numbers
            page_rows = pa.table({
                "natural_key": [keys[p] for p in first_order], "url": [keys[p] for p in first_order],
                "host": [host_name(p % hosts) for p in first_order],
                "retention_class": [None] * pages, "latest_generation": [numbers[p] for p in first_order],
                "first_seen": [first_seen[p] for p in first_order],
                "last_fetched": [fetched[p] for p in first_order],
                "last_checked": [fetched[p] for p in first_order],
                "etag": [None] * pages, "last_modified": [None] * pages,
            }, schema=_PAGES)
            page_rows = page_rows.append_column(  # as the writer gives a new page (schema 5)
                "surt", pa.array([surt_key(keys[p]) for p in first_order], pa.string()))
            _insert(connection, "pages", page_rows)
            for statement in INDEXES:
                connection.execute(statement)
            connection.execute("CHECKPOINT")
        finally:
            connection.close()
        # The templates and flags, as each run's end counts them, a slice of hosts at a time:
        # a host's count needs only its own pages, and the whole store at once outgrows the
        # writer's memory limit past a few hundred thousand pages.
        store = Store(building)
        for first in range(0, hosts, REFRESH_HOSTS):
            sliced = range(first, min(first + REFRESH_HOSTS, hosts))
            with store.writing() as writer:
                store._refresh_templates(writer, [keys[p] for h in sliced for p in range(h, pages, hosts)])
        os.replace(building, path)
    return BuildResult(path, time.perf_counter() - started, path.stat().st_size, pages,
                       pages * generations, chunk_rows, text_bytes)


def cache_name(pages: int, generations: int, hosts: int, seed: int, keep: int = DEFAULT_KEEP) -> str:
    """File name of a cached store: its parameters, and a fingerprint of what shapes it."""
    shape = repr((SCHEMA, INDEXES, SCHEMA_VERSION, cdc.SPEC, BUILDER_VERSION, BATCH_RECORDS, keep))
    fingerprint = hashlib.sha256(shape.encode()).hexdigest()[:10]
    return f"synthetic-p{pages}-g{generations}-h{hosts}-s{seed}-k{keep}-{fingerprint}.duckdb"


def copy_at_rest(source: Path, target: Path) -> Path:
    """`source` copied to `target` and written back to the disk, as a store at rest is (its
    pages stay in the page cache). A copy just made is all dirty pages, and the first commit
    into it (DuckDB syncs the file) wrote the whole copy back: 1.0 s on the 100,000-page
    store, a cost that grows with the store and is the copy's, not the commit's."""
    shutil.copyfile(source, target)
    descriptor = os.open(target, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return target


def cached_store(pages: int = 100_000, generations: int = 3, hosts: int = 50, seed: int = 1,
                 directory: Path = CACHE_DIR, rebuild: bool = False) -> BuildResult:
    """The store for these parameters, built unless a valid one is cached in `directory`.

    A built store is kept with a JSON note of its build beside it. Cached stores of the
    same parameters but an older schema, spec or builder are deleted.
    """
    directory.mkdir(parents=True, exist_ok=True)
    name = cache_name(pages, generations, hosts, seed)
    path = directory / name
    note = path.with_suffix(".json")
    if path.exists() and note.exists() and not rebuild:
        try:
            Store(path).meta()
            fields = json.loads(note.read_text())
            return BuildResult(**{**fields, "path": path, "cached": True})
        except (cdc.CdcError, ValueError, TypeError):
            pass
    stem = name.rsplit("-", 1)[0]
    for stale in [*directory.glob(f"{stem}-*.duckdb"), *directory.glob(f"{stem}-*.json")]:
        stale.unlink()
    result = build_store(path, pages, generations, hosts, seed)
    fields = {**dataclasses.asdict(result), "path": str(result.path)}
    del fields["cached"]
    note.write_text(json.dumps(fields, indent=1) + "\n")
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=int, default=DEFAULT_KEEP,
                        help="generations that keep text and chunk rows (default: %(default)s)")
    parser.add_argument("--out", type=Path, required=True, help="path of the new store file")
    parser.add_argument("--force", action="store_true", help="replace an existing file at --out")
    args = parser.parse_args(argv)
    if args.out.exists():
        if not args.force:
            parser.error(f"{args.out} exists; pass --force to replace it")
        args.out.unlink()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = build_store(args.out, args.pages, args.generations, args.hosts, args.seed, args.keep)
    print(f"built {result.path} in {result.seconds:.1f} s: {result.file_bytes / 1e6:,.1f} MB, "
          f"{result.pages:,} pages, {result.generations:,} generations, {result.chunk_rows:,} chunk "
          f"rows, {result.text_bytes / 1e6:,.1f} MB of retained text")


if __name__ == "__main__":
    main()
