"""A killed ingest takes its workers along and leaves no lock behind.

Real processes only: `python -m cdc ingest --processes 2` on real WARC and JSONL files, the
parent alone killed (SIGKILL, SIGTERM) at several moments, its process group left alone, as
a scheduler's timeout or `kill PID` does. Then no worker may be left after six seconds, and
the same ingest run again must end in the store of one clean run, row for row.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cdc.errors import StoreBusyError, StoreError
from cdc.sources.warc import write_warc_response
from cdc.store import RetentionPolicy, Store
from tests import textgen
from tests.httpserver import TestServer
from tests.storerows import assert_same_rows, consistency_problems

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
# Seconds after the parent is killed: a Dask worker ends by its own watch of its parent, 1-2 s
# on a quiet machine, longer with the suite on both cores.
WORKERS_GONE_WITHIN = 6.0
# Pages per input file: two files of each kind make batches large enough for two processes,
# and a run long enough (a few seconds) to be killed at each moment.
PAGES = {"warc": 1_500, "jsonl": 4_000}
START = datetime(2025, 3, 1, tzinfo=UTC)

# The module shares the xdist worker of the Dask tests (docs/testing.md): its cluster tests
# take the Dask dashboard's port 8787, and its inputs (`crawls`) are built there once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dask-dashboard")]


# --- inputs -----------------------------------------------------------------------------------


def _body(page: int, version: int) -> str:
    paragraphs = textgen.paragraphs(page * 7919, 6)
    if version:
        paragraphs[page % 6] = textgen.paragraphs(page * 7919 + 100 * version, 1)[0]
    return paragraphs


def _write_jsonl(path: Path, version: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for page in range(PAGES["jsonl"]):
            record = {"url": f"https://jsonl{page % 7}.example/p/{page}",
                      "fetched_at": (START + timedelta(days=version, seconds=page)).isoformat(),
                      "title": f"Page {page}",
                      "sections": [{"text": text} for text in _body(page, version)]}
            out.write(json.dumps(record) + "\n")


def _write_warc(path: Path, version: int) -> None:
    with path.open("wb") as out:
        for page in range(PAGES["warc"]):
            html = "".join(f"<p>{text}</p>" for text in _body(page, version))
            body = f"<html><head><title>Page {page}</title></head><body>{html}</body></html>"
            stamp = (START + timedelta(days=version, seconds=page)).strftime("%Y-%m-%dT%H:%M:%SZ")
            write_warc_response(out, f"https://warc{page % 7}.example/p/{page}", stamp, 200,
                                [("Content-Type", "text/html; charset=utf-8")], body.encode(),
                                compress=True)


@pytest.fixture(scope="module")
def crawls(tmp_path_factory) -> Callable[[str], tuple[list[Path], Path]]:
    """Each kind's inputs, built once for the module whatever order its tests run in (a
    module-scoped fixture parametrized by kind was built again each time the kind changed)."""
    built: dict[str, tuple[list[Path], Path]] = {}

    def crawl_of(kind: str) -> tuple[list[Path], Path]:
        if kind not in built:
            folder = tmp_path_factory.mktemp(kind)
            write = _write_warc if kind == "warc" else _write_jsonl
            suffix = "warc.gz" if kind == "warc" else "jsonl"
            files = [folder / f"crawl{version}.{suffix}" for version in (0, 1)]
            for version, path in enumerate(files):
                write(path, version)
            clean = folder / "clean.duckdb"
            done = _cdc("--db", str(clean), "ingest", "--processes", "2", *map(str, files))
            assert done.returncode == 0, done.stderr
            built[kind] = files, clean
        return built[kind]

    return crawl_of


@pytest.fixture
def crawl(request, crawls) -> tuple[list[Path], Path]:
    """Two input files of one kind (`request.param`: two crawls of the same pages) and the store
    of one clean run."""
    return crawls(request.param)


# --- processes --------------------------------------------------------------------------------


def _cdc(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cdc", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def _children(pid: int) -> set[int]:
    """Living descendants of `pid` (zombies are dead: they hold nothing and wait to be reaped)."""
    table = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry.name)] = (int(fields[1]), fields[0])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, (parent, _) in table.items() if parent in frontier} - found
        found |= frontier
    return {child for child in found if table[child][1] != "Z"}


def _alive(pids: set[int]) -> set[int]:
    left = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.add(pid)
    return left


def _kill_parent_alone(command: list[str], signum: int, after_workers: float, log: Path,
                       ready: str = "") -> tuple[set[int], float]:
    """Start `command`, wait until it has forked its workers (and written `ready` to stderr)
    and `after_workers` seconds more, then send `signum` to the parent process alone.
    Returns its workers and how long the last of them outlived the signal."""
    with log.open("wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "cdc", *command], cwd=ROOT, env=ENV,
                                   stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        while not (workers := _children(process.pid)) or ready not in log.read_text(errors="replace"):
            assert process.poll() is None, f"ended before it was killed: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "no worker was started"
            time.sleep(0.01)
        time.sleep(after_workers)
        assert process.poll() is None, "the ingest ended before it was killed: make the input larger"
        workers |= _children(process.pid)
        os.kill(process.pid, signum)
        killed = time.monotonic()
        while _alive(workers) and time.monotonic() - killed < 10:
            time.sleep(0.01)
        outlived = time.monotonic() - killed
        process.wait(timeout=30)
        if signum == signal.SIGTERM:  # a stop, not a failure, even where DuckDB was interrupted
            said = log.read_text(errors="replace")
            assert process.returncode == 143 and "Traceback" not in said, said[-3000:]
        return workers, outlived
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in _alive(_children(process.pid)):
            os.kill(pid, signal.SIGKILL)


# Each input kind is killed at each moment, and each signal at each moment and on each kind:
# the pairs of the three (6 runs), not their every combination (12), which cost the suite's
# Dask worker two minutes more and found nothing these do not.
KILLS = [pytest.param(kind, after_workers, signum, id=f"{kind}-{moment}-{signum.name}")
         for kind, moment, after_workers, signum in (
             ("warc", "at-fork", 0.0, signal.SIGKILL), ("warc", "early", 0.4, signal.SIGTERM),
             ("warc", "later", 1.0, signal.SIGKILL), ("jsonl", "at-fork", 0.0, signal.SIGTERM),
             ("jsonl", "early", 0.4, signal.SIGKILL), ("jsonl", "later", 1.0, signal.SIGTERM))]


@pytest.mark.parametrize(("crawl", "after_workers", "signum"), KILLS, indirect=["crawl"])
def test_killing_the_parent_ends_its_workers_and_a_rerun_ends_as_one_clean_run(
        tmp_path, crawl, signum, after_workers):
    files, clean = crawl
    store = tmp_path / "store.duckdb"
    command = ["--db", str(store), "ingest", "--processes", "2", *map(str, files)]
    workers, outlived = _kill_parent_alone(command, signum, after_workers, tmp_path / "stderr")
    print(f"\n{signal.Signals(signum).name} {after_workers} s after the fork: "
          f"{len(workers)} workers, the last gone {outlived * 1000:.0f} ms after the parent was signalled")
    assert workers, "no worker process was seen"
    assert not _alive(workers), f"workers {sorted(_alive(workers))} outlived their killed parent"
    assert outlived < WORKERS_GONE_WITHIN

    if store.exists():  # killed before its first commit, the store may not exist yet
        problems = consistency_problems(store)
        assert problems == dict.fromkeys(problems, 0)
    rerun = _cdc(*command, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert_same_rows(store, clean, runs=False)  # the rerun first saw what the killed run had not


@pytest.mark.parametrize(("crawl", "signum"), [pytest.param("warc", signal.SIGTERM, id="warc-SIGTERM"),
                                               pytest.param("jsonl", signal.SIGKILL, id="jsonl-SIGKILL")],
                         indirect=["crawl"])
def test_killing_a_cluster_ingest_ends_its_local_cluster(tmp_path, crawl, signum):
    files, clean = crawl
    store = tmp_path / "store.duckdb"
    command = ["--db", str(store), "ingest", "--workers", "2", *map(str, files)]
    # Killed once the cluster is up: while its workers still start, they end by Dask's own
    # watch of their parent, a thread that waits for the GIL behind their imports (1-2 s here).
    workers, outlived = _kill_parent_alone(command, signum, 0.5, tmp_path / "stderr", ready="Dask dashboard")
    print(f"\ncluster, {signal.Signals(signum).name}: {len(workers)} processes, the last gone "
          f"{outlived * 1000:.0f} ms after the client was signalled")
    assert len(workers) >= 2 and not _alive(workers) and outlived < WORKERS_GONE_WITHIN
    if signum == signal.SIGTERM:  # a stop: the command says what it committed (and no traceback)
        assert "partitions were committed" in (tmp_path / "stderr").read_text(errors="replace")
    rerun = _cdc(*command, timeout=180)
    assert rerun.returncode == 0, rerun.stderr
    assert_same_rows(store, clean, runs=False)


def test_a_killed_demo_build_ends_its_workers_and_a_new_build_succeeds(tmp_path):
    store = tmp_path / "demo.duckdb"
    command = ["--db", str(store), "demo", "--pages", "3000", "--generations", "4", "--workers", "2"]
    workers, outlived = _kill_parent_alone(command, signal.SIGKILL, 0.3, tmp_path / "stderr")
    assert workers and not _alive(workers) and outlived < WORKERS_GONE_WITHIN
    assert not store.exists(), "a killed build left a store in place"
    done = _cdc("--db", str(store), "demo", "--pages", "50", "--workers", "2", timeout=120)
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.glob("*.building-*")), "the killed build's files were left behind"


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_fetch_leaves_the_store_free_for_the_next_run(tmp_path, signum):
    server = TestServer().start()
    try:
        urls = tmp_path / "urls.txt"
        urls.write_text("".join(server.url(f"/many/{n}") + "\n" for n in range(600)))
        store = tmp_path / "store.duckdb"
        command = ["--db", str(store), "fetch", "--urls", str(urls), "--delay", "0", "--concurrency", "4"]
        log = tmp_path / "stderr"
        with log.open("wb") as stderr:
            process = subprocess.Popen([sys.executable, "-m", "cdc", *command], cwd=ROOT, env=ENV,
                                       stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 60
        while len(server.log) < 100:  # well into the run
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(process.pid, signum)
        process.wait(timeout=20)
        assert not _alive(_children(process.pid))
        done = _cdc(*command, timeout=120)
        assert done.returncode == 0, done.stderr
        assert Store(store).stats()["pages"] == 600
    finally:
        server.stop()


# --- the lock ---------------------------------------------------------------------------------

HOLDER = r"""
import sys, time
from cdc.store import Store
with Store(sys.argv[1]).writing():
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""

FORKING_HOLDER = r"""
import os, sys, time
from cdc.store import Store
with Store(sys.argv[1]).writing():
    child = os.fork()
    if child == 0:  # a child forked while the lock is held lives on after its parent
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        time.sleep(60)
        os._exit(0)
    print(child, flush=True)
"""


def _store_with_a_page(tmp_path: Path) -> Path:
    path = tmp_path / "store.duckdb"
    Store(path).set_retention(RetentionPolicy())
    return path


def test_a_held_lock_names_its_holder_and_since_when(tmp_path):
    store = _store_with_a_page(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store), "30"], cwd=ROOT, env=ENV,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreBusyError) as caught:
            Store(store, lock_timeout=0.2).set_retention(RetentionPolicy())
        message = str(caught.value)
        assert f"pid {holder.pid} " in message and "-c" in message and "since 20" in message
        assert "wait for it to finish and try again" in message and "\n" not in message
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    # Its holder killed, the lock is free at once: the next writer takes it over.
    Store(store, lock_timeout=0.2).set_retention(RetentionPolicy(keep=2))
    assert Store(store).retention().keep == 2


def test_a_process_forked_under_the_lock_does_not_keep_it(tmp_path):
    store = _store_with_a_page(tmp_path)
    done = subprocess.run([sys.executable, "-c", FORKING_HOLDER, str(store)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=60)
    child = int(done.stdout)
    try:
        assert _alive({child}), "the forked child should still be running"
        Store(store, lock_timeout=1.0).set_retention(RetentionPolicy(keep=2))
    finally:
        os.kill(child, signal.SIGKILL)


@pytest.mark.skipif(not Path("/usr/bin/flock").exists(), reason="util-linux flock is not installed")
def test_a_lock_held_by_a_process_the_holder_left_behind_names_that_process(tmp_path):
    """A lock file naming a writer that is gone, held by another process (an orphan of an
    older cdc, say): the message names the process that holds it and says to stop it."""
    store = _store_with_a_page(tmp_path)
    lock = store.with_name(store.name + ".lock")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    lock.write_text(json.dumps({"pid": int(gone), "since": "2026-01-01T00:00:00+00:00",
                                "command": "cdc ingest old.warc"}))
    orphan = subprocess.Popen(["/usr/bin/flock", "--no-fork", str(lock), "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while not _holds_open(orphan.pid, lock):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(StoreBusyError) as caught:
            Store(store, lock_timeout=0.2).set_retention(RetentionPolicy())
        message = str(caught.value)
        assert f"locked by pid {orphan.pid} (sleep 30)" in message and f"(kill {orphan.pid})" in message
        assert f"writer that has ended (pid {gone})" in message and "\n" not in message
    finally:
        orphan.kill()
        orphan.wait()


def _holds_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(fd) == str(path) for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False


def test_a_lock_file_left_by_a_crashed_writer_is_taken_over(tmp_path):
    store = _store_with_a_page(tmp_path)
    store.with_name(store.name + ".lock").write_text('{"pid": 999999999, "since": "2020-01-01"}\n')
    Store(store, lock_timeout=0.2).set_retention(RetentionPolicy(keep=5))
    assert Store(store).retention().keep == 5
    store.with_name(store.name + ".lock").write_bytes(b"\xff\x00 not a lock record")
    Store(store, lock_timeout=0.2).set_retention(RetentionPolicy(keep=4))
    assert Store(store).retention().keep == 4


def test_a_lock_path_that_is_not_a_file_is_one_clear_message(tmp_path):
    store = _store_with_a_page(tmp_path)
    lock = store.with_name(store.name + ".lock")
    lock.unlink()
    lock.mkdir()
    with pytest.raises(StoreError, match="remove it if it is not a regular file"):
        Store(store).set_retention(RetentionPolicy())
    done = _cdc("--db", str(store), "prune")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("cdc: cannot open the store's lock file") and done.stderr.count("\n") == 1


@pytest.fixture
def read_only_directory(tmp_path) -> Path:
    """A directory on a file system mounted read-only (root can write any writable one)."""
    folder = tmp_path / "readonly"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a file system here (mounting needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_store_in_a_read_only_directory_reads_and_refuses_writes_clearly(tmp_path, read_only_directory):
    source = _store_with_a_page(tmp_path)
    store = read_only_directory / "store.duckdb"
    store.write_bytes(source.read_bytes())
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_directory)], check=True)
    assert _cdc("--db", str(store), "stats").returncode == 0
    done = _cdc("--db", str(store), "prune")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "a writer needs a writable directory" in done.stderr and done.stderr.count("\n") == 1
