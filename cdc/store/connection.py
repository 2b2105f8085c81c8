"""Opening the store file: read-only and write connections, the wait on another process's
lock, cdc's own write lock, and the file-level rewrites (`compact`, `erase`).

**Readers and writers.** DuckDB lets one process at a time open a file for writing, and
none may hold it open meanwhile, not even to read. So no connection lives long: a writer
opens the file for one batch (one transaction) and closes it; a reader opens it read-only
for one query and closes it (an attach to, and a detach from, an in-memory database the
process keeps: `_attached`). Each waits, with backoff, while another process (or another
thread of this one) holds a conflicting lock. The dashboard therefore sees every batch a
running ingest commits, and the ingest never fails because someone is looking.

**A full disk.** DuckDB reports one as an I/O error, or as a fatal error when it strikes a
checkpoint; either way the transaction is lost and the file stays as the last commit left
it, so running the same command again, once there is room, completes the work. Every
connection turns it into one `StoreFullError` that names the file and the space left.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb

from cdc.errors import StoreBusyError, StoreError, StoreNotFoundError
from cdc.runtime.lifeline import raise_if_stopped
from cdc.store import expired
from cdc.store.diskspace import disk_full_error, out_of_space
from cdc.store.lookups import _one
from cdc.store.schema import (
    CONNECTION_CONFIG,
    DEAD_TEXT,
    INDEX_TABLES,
    SCHEMA_VERSION,
    STORED_TABLES,
    WRITER_CONFIG,
)
from cdc.store.writelock import holding

LOCK_TIMEOUT = 30.0  # seconds a call waits for another process's lock
RETRY_CEILING = 0.03  # seconds between tries at a locked file, at most


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    return "lock" in str(exc).lower()


def _database_name(connection: duckdb.DuckDBPyConnection) -> str:
    (name,) = _one(connection.execute("SELECT current_database()"))
    return '"' + name.replace('"', '""') + '"'


# The in-memory DuckDB database that store files are attached to, one per process
# (`_attached`). A new DuckDB database (what `duckdb.connect` makes) costs 15 ms, whatever the
# file, and every read and batch paid one; attaching the file to one kept open costs about 2 ms
# (a read of a small table of a 2.8 GB store: 21.8 -> 6.0 ms), and takes and releases the
# file's lock as opening and closing it did. One per process, each file attached once however
# many threads read it: DuckDB's lock on a file is the process's (POSIX), which two handles in
# one process would neither respect nor keep (closing one releases both), so threads take
# turns here as processes do there: readers together, a writer alone.
_SHARED = threading.Lock()  # guards `_state` and the shared database's own connection
# files: path -> _Attachment; values: the settings in effect (`_apply`)
_state: dict = {"host": None, "files": {}, "attached": 0, "values": {}}
_ALIAS = "store_{number}"  # a file's name in the shared database, numbered (never input)
# What a reader runs with, and what a writer sets on top of it (`WRITER_SETTINGS`); with no
# file attached, one thread, so a process forked meanwhile (ingest's workers) copies no
# DuckDB thread.
READER_SETTINGS = {**CONNECTION_CONFIG, "threads": os.cpu_count() or 1}
WRITER_SETTINGS = {**READER_SETTINGS, **WRITER_CONFIG}
IDLE_SETTINGS = {**CONNECTION_CONFIG, "threads": 1}


_INHERITED: list[duckdb.DuckDBPyConnection] = []  # a forked process's copy of its parent's


def _forget_in_child() -> None:
    """A forked process starts with no shared database and the lock free (another thread may
    have held it at the fork). Its copy of the parent's database is kept, never closed:
    closing it would stop threads and free memory that are the parent's (a segfault)."""
    global _SHARED
    _SHARED = threading.Lock()
    if _state["host"] is not None:
        _INHERITED.append(_state["host"])
    _state.update(host=None, files={})


os.register_at_fork(after_in_child=_forget_in_child)


class _Attachment:
    """A file attached to the shared database: its name there, whether for writing, and how
    many connections use it."""

    def __init__(self, alias: str, write: bool):
        self.alias, self.write, self.users = alias, write, 0


def _host() -> duckdb.DuckDBPyConnection:
    """The process's shared database, made on first use; called with `_SHARED` held."""
    if _state["host"] is None:
        _state.update(values=dict(IDLE_SETTINGS), host=duckdb.connect(":memory:", config=IDLE_SETTINGS))
    return _state["host"]


def _apply(connection: duckdb.DuckDBPyConnection, settings: dict) -> None:
    """Each of `settings` set where it differs from what is in effect, and a writer's others
    back to DuckDB's defaults (for a reader): a statement costs 0.2-0.6 ms, and a reader
    after a reader changes none but the threads. Called with `_SHARED` held."""
    current: dict = _state["values"]
    for name in WRITER_SETTINGS.keys() | settings.keys():
        wanted = settings.get(name)
        if current.get(name) != wanted:
            connection.execute(f"RESET {name}" if wanted is None else f"SET {name} = '{wanted}'")
            current[name] = wanted


def _attached(key: str, write: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the store at `key` (its resolved path; its tables the default for its
    queries), attached to the shared database read-only unless `write`, with a reader's or
    writer's settings.
    While another thread of the process writes the file, or reads it and this one would
    write, raises the lock conflict another process's lock raises, to be waited out the same
    way."""
    with _SHARED:
        host = _host()
        files: dict[str, _Attachment] = _state["files"]
        attachment = files.get(key)
        if attachment is not None and (write or attachment.write):
            raise duckdb.IOException(f"Could not set lock on file {key}: in use by another thread")
        if attachment is None:
            if write or not files:  # a reader of another file keeps what it found
                _apply(host, WRITER_SETTINGS if write else READER_SETTINGS)
            _state["attached"] += 1
            attachment = _Attachment(_ALIAS.format(number=_state["attached"]), write)
            try:
                host.execute(f"ATTACH ? AS {attachment.alias} {'' if write else '(READ_ONLY)'}", [key])
            except BaseException:
                _idle(host)
                raise
            files[key] = attachment
        attachment.users += 1
        try:
            connection = host.cursor()
            connection.execute(f"USE {attachment.alias}")
        except BaseException:
            _release(key)
            raise
    return connection


def _detach(connection: duckdb.DuckDBPyConnection, key: str, quietly: bool = False) -> None:
    """Close `connection` (its transaction, its temporary tables and registrations go with
    it), and detach the file once no connection uses it (a writer's is checkpointed, as a
    closed one was). Where that fails (DuckDB invalidated the database: a full disk at a
    checkpoint), the shared database is dropped for a new one, which lets go of every file
    too; the error is raised unless `quietly`."""
    failed: BaseException | None = None
    try:
        connection.close()
    except duckdb.Error as exc:
        failed = exc
    with _SHARED:
        try:
            _release(key)
        except duckdb.Error as exc:
            failed = failed or exc
            _drop_host()
    if failed is not None and not quietly:
        raise failed


def _release(key: str) -> None:
    """One connection fewer on the file `key`: detached with the last (with `_SHARED` held)."""
    files: dict[str, _Attachment] = _state["files"]
    attachment = files[key]
    attachment.users -= 1
    if attachment.users:
        return
    del files[key]
    host = _state["host"]
    host.execute(f"DETACH {attachment.alias}")
    if not files:
        _idle(host)


def _idle(host: duckdb.DuckDBPyConnection) -> None:
    """With no file attached: run one thread."""
    if _state["files"]:
        return
    try:
        # One thread, set whatever was in effect (a connection may have set its own: the run's
        # end takes every core); the other settings stay for the next connection.
        host.execute(f"SET threads = {IDLE_SETTINGS['threads']}")
        _state["values"]["threads"] = IDLE_SETTINGS["threads"]
    except duckdb.Error:  # invalidated: the next use makes a new one
        _drop_host()


def _drop_host() -> None:
    """Forget the shared database (the next use makes a new one), and close it."""
    host = _state["host"]
    _state.update(host=None, files={})
    if host is not None:
        with suppress(duckdb.Error):  # an invalidated database may fail even to close
            host.close()


class Connections:
    """The store's file, mixed into `Store`: every connection is opened here, for one
    batch or one read, and closed; and the rewrites that swap in a new file."""

    path: Path
    lock_timeout: float
    _lock_depth: int
    _schema_checked: tuple[int, int] | None

    @contextmanager
    def _connect(self, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if not write and not self.path.exists():
            raise StoreNotFoundError(f"no store at {self.path}; build one with `cdc ingest FILE`")
        if write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())  # the file, however the path names it
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                connection = _attached(key, write)
                break
            except duckdb.IOException as exc:
                if out_of_space(exc):
                    raise disk_full_error(self.path) from exc
                if not _is_lock_conflict(exc):
                    raise StoreError(f"cannot open the store {self.path}: {exc}") from exc
                if time.monotonic() > deadline:
                    raise StoreBusyError(
                        f"the store {self.path} is locked by another process that is writing to "
                        f"it; wait for it to finish and try again ({exc})") from exc
                time.sleep(delay * (1 + random.random()))
                # A writer releases its lock between batches for only milliseconds: a reader
                # that backed off for long would keep missing those gaps.
                delay = min(delay * 2, RETRY_CEILING)
            except duckdb.Error as exc:
                if out_of_space(exc):
                    raise disk_full_error(self.path) from exc
                raise StoreError(f"cannot open the store {self.path}: {exc}") from exc
        try:
            yield connection
        except BaseException as exc:
            _detach(connection, key, quietly=True)  # the error said first is raised
            if isinstance(exc, (duckdb.Error, OSError)) and out_of_space(exc):
                raise disk_full_error(self.path) from exc
            raise
        _detach(connection, key)

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """cdc's own lock for writers, held across a whole batch or a file swap.

        DuckDB's lock lasts as long as a connection; this one lets a writer read page
        states, compute, then write without another writer slipping in between, and lets
        a compaction close the database and swap files while no writer can open it.
        Readers do not take it. Re-entrant within one Store object.
        """
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        with holding(self.path.with_name(self.path.name + ".lock"), self.path, self.lock_timeout):
            self._lock_depth = 1
            try:
                yield
            finally:
                self._lock_depth = 0

    @contextmanager
    def reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection for a few queries; released at the end of the block."""
        with self._connect(write=False) as connection:
            current = self._check_meta(connection) >= SCHEMA_VERSION
            if current:
                yield connection
                return
        # An older layout is upgraded first, as a writer would (one transaction), then read.
        with self.writing():
            pass
        with self._connect(write=False) as connection:
            yield connection

    def create(self) -> None:
        """Make the store if it is missing, as the first write would: a writer that waits
        for its first rows can take that cost off its first write."""
        with self.write_lock():
            if not self.path.exists():
                try:
                    self._create()
                except (duckdb.Error, OSError) as exc:
                    if out_of_space(exc):
                        raise disk_full_error(self.path) from exc
                    raise

    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A write connection with the schema in place, inside one transaction."""
        raise_if_stopped()  # a stop whose exception was lost on the way ends the command here
        with self.write_lock():
            self.create()
            with self._connect(write=True) as connection:
                # Checked once per file: a store replaced since (a compaction, another
                # process's new store) is a new inode, and is checked again.
                identity = (stat := os.stat(self.path)).st_dev, stat.st_ino
                if identity != self._schema_checked:
                    self._ensure_schema(connection)
                    self._schema_checked = identity
                connection.execute("BEGIN TRANSACTION")
                try:
                    yield connection
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
                connection.execute("COMMIT")

    def erase(self, natural_key: str) -> int:
        """Remove a page from every table, then rewrite the file so its text is gone.

        DuckDB leaves deleted rows' bytes in freed blocks, so a delete and a checkpoint are
        not enough: the live data is copied to a fresh file that replaces the old one.
        Returns the number of rows removed (chunks counted as `content_chunks` rows).
        """
        removed = 0
        with self.writing() as connection:
            page = _one(connection.execute("SELECT host FROM pages WHERE natural_key = ?", [natural_key]))
            for table in STORED_TABLES:
                rows = "sum(len(lengths))" if table == "chunk_lists" else "count(*)"  # as the view counts
                (count,) = _one(connection.execute(
                    f"SELECT coalesce({rows}, 0) FROM {table} WHERE natural_key = ?", [natural_key]))
                connection.execute(f"DELETE FROM {table} WHERE natural_key = ?", [natural_key])
                removed += count
            for table in INDEX_TABLES:  # the page's index rows go with it, uncounted
                connection.execute(f"DELETE FROM {table} WHERE natural_key = ?", [natural_key])
            if page is not None:  # one page fewer: the host's template is counted again
                self._refresh_templates(connection, [], [page[0]])
            expired.erase_page(self.path, natural_key)  # its texts a run keeps beside the store
        self.compact()
        return removed

    def compact(self) -> None:
        """Rewrite the store into a new file holding only live rows, and swap it in."""
        if not self.path.exists():  # a write connection would make an empty file to compact
            raise StoreNotFoundError(f"no store at {self.path}; build one with `cdc ingest FILE`")
        fresh = self.path.with_name(self.path.name + ".compact")
        with self.write_lock():
            for leftover in (fresh, fresh.with_name(fresh.name + ".wal")):
                leftover.unlink(missing_ok=True)
            try:
                with self._connect(write=True) as connection:
                    connection.execute("CHECKPOINT")
                    connection.execute("ATTACH ? AS fresh", [str(fresh)])
                    try:
                        connection.execute(f"COPY FROM DATABASE {_database_name(connection)} TO fresh")
                        # The copy holds live rows only: no trimmed text is left in it.
                        connection.execute("DELETE FROM fresh.meta WHERE key = ?", [DEAD_TEXT])
                    finally:  # the process's database outlives this connection: it lets go here
                        with suppress(duckdb.Error):  # a database a fatal error invalidated
                            connection.execute("DETACH DATABASE IF EXISTS fresh")
            except BaseException:  # a full disk, say: the half-written copy would only fill it more
                for leftover in (fresh, fresh.with_name(fresh.name + ".wal")):
                    leftover.unlink(missing_ok=True)
                raise
            # Closed and checkpointed, so no WAL belongs to the old file; no writer can open
            # it while we hold the write lock, and readers that have it open keep reading it.
            os.replace(fresh, self.path)
