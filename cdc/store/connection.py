"""Opening the store file: read-only and write connections, the wait on another process's
lock, cdc's own write lock, and the file-level rewrites (`compact`, `erase`).

**Readers and writers.** DuckDB lets one process at a time open a file for writing, and
none may hold it open meanwhile, not even to read. So no connection lives long: a writer
opens the file for one batch (one transaction) and closes it; a reader opens it read-only
for one query and closes it (an attach to, and a detach from, an in-memory database each
thread keeps: `_attached`). Each waits, with backoff, while another process holds a
conflicting lock. The dashboard therefore sees every batch a running ingest commits, and
the ingest never fails because someone is looking.

**A full disk.** DuckDB reports one as an I/O error, or as a fatal error when it strikes a
checkpoint; either way the transaction is lost and the file stays as the last commit left
it, so running the same command again, once there is room, completes the work. Every
connection turns it into one `StoreFullError` that names the file and the space left.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb

from cdc.errors import StoreBusyError, StoreError, StoreFullError, StoreNotFoundError
from cdc.runtime.lifeline import raise_if_stopped
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


# What the C library says for ENOSPC and EDQUOT: DuckDB's messages carry its strerror text.
NO_SPACE_MESSAGES = ("No space left on device", "Disk quota exceeded")
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def _out_of_space(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised while handling (a ROLLBACK that failed on a
    database the full disk invalidated), is a full disk."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of contexts; never a long one
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno in NO_SPACE_ERRNOS:
            return True
        if any(message in str(seen) for message in NO_SPACE_MESSAGES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def disk_full_error(path: Path) -> StoreFullError:
    """The one-line message for a full disk under the store at `path`."""
    try:
        free = f"{shutil.disk_usage(path.parent).free / 1e6:,.1f} MB free"
    except OSError:
        free = "free space unknown"
    return StoreFullError(f"the disk holding {path} is full ({free}): free space there, then run the "
                          "same command again (the store keeps what was committed before; the run "
                          "completes it)")


def _database_name(connection: duckdb.DuckDBPyConnection) -> str:
    (name,) = _one(connection.execute("SELECT current_database()"))
    return '"' + name.replace('"', '""') + '"'


# DuckDB's in-memory databases that store files are attached to, one per thread of a process
# (`_attached`). A new DuckDB database (what `duckdb.connect` makes) costs 15 ms, whatever the
# file, and every read and batch paid one; attaching the file to one kept open costs about 2 ms
# (a read of a small table of a 2.8 GB store: 21.8 -> 6.0 ms), and takes and releases the
# file's lock as opening and closing it did. Per thread: threads never share one.
_HOSTS = threading.local()
STORE_ALIAS = "store"  # the name a store file is attached under, in its thread's database
# What a reader runs with, and what a writer sets on top of it (`WRITER_SETTINGS`); between
# uses, one thread, so a process forked meanwhile (ingest's workers) copies no DuckDB thread.
READER_SETTINGS = {**CONNECTION_CONFIG, "threads": os.cpu_count() or 1}
WRITER_SETTINGS = {**READER_SETTINGS, **WRITER_CONFIG}
IDLE_SETTINGS = {"threads": 1}


def _host() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory database (a new one in a forked process, which must not use its
    parent's)."""
    host = getattr(_HOSTS, "connection", None)
    if host is None or _HOSTS.pid != os.getpid():
        host = duckdb.connect(":memory:", config={**CONNECTION_CONFIG, **IDLE_SETTINGS})
        _HOSTS.connection, _HOSTS.pid = host, os.getpid()
    return host


def _apply(connection: duckdb.DuckDBPyConnection, settings: dict) -> None:
    for name, value in settings.items():
        connection.execute(f"SET {name} = '{value}'")


def _attached(path: Path, write: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the store at `path`, attached to this thread's database (read-only
    unless `write`) and the default for its queries, with a reader's or writer's settings."""
    host = _host()
    _apply(host, WRITER_SETTINGS if write else READER_SETTINGS)
    try:
        host.execute(f"ATTACH ? AS {STORE_ALIAS} {'' if write else '(READ_ONLY)'}", [str(path)])
    except BaseException:
        try:
            _apply(host, IDLE_SETTINGS)
        except duckdb.Error:  # invalidated: the next use makes a new one
            _drop_host()
        raise
    connection = host.cursor()
    connection.execute(f"USE {STORE_ALIAS}")
    return connection


def _detach(connection: duckdb.DuckDBPyConnection, quietly: bool = False) -> None:
    """Close `connection` (its transaction, its temporary tables and registrations go with
    it) and detach every file from its thread's database: the store's (a writer's is
    checkpointed, as a closed one was) and any a caller attached. Where that fails (DuckDB
    invalidated the database: a full disk at a checkpoint), the database is dropped for a
    new one, which lets go of every file too; the error is raised unless `quietly`."""
    host = _HOSTS.connection
    try:
        connection.close()
        for (name,) in host.execute("SELECT database_name FROM duckdb_databases() "
                                    "WHERE NOT internal AND database_name <> 'memory'").fetchall():
            host.execute(f'DETACH "{name}"')
        _apply(host, IDLE_SETTINGS)
    except BaseException:
        _drop_host()
        if not quietly:
            raise


def _drop_host() -> None:
    """Forget this thread's database (the next use makes a new one), and close it."""
    host, _HOSTS.connection = _HOSTS.connection, None
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
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                connection = _attached(self.path, write)
                break
            except duckdb.IOException as exc:
                if _out_of_space(exc):
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
                if _out_of_space(exc):
                    raise disk_full_error(self.path) from exc
                raise StoreError(f"cannot open the store {self.path}: {exc}") from exc
        try:
            yield connection
        except BaseException as exc:
            _detach(connection, quietly=True)  # the error said first is the one raised
            if isinstance(exc, (duckdb.Error, OSError)) and _out_of_space(exc):
                raise disk_full_error(self.path) from exc
            raise
        _detach(connection)

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
                    if _out_of_space(exc):
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
                    connection.execute(f"COPY FROM DATABASE {_database_name(connection)} TO fresh")
                    # The copy holds live rows only: no trimmed text is left in it.
                    connection.execute("DELETE FROM fresh.meta WHERE key = ?", [DEAD_TEXT])
                    connection.execute("DETACH fresh")
            except BaseException:  # a full disk, say: the half-written copy would only fill it more
                for leftover in (fresh, fresh.with_name(fresh.name + ".wal")):
                    leftover.unlink(missing_ok=True)
                raise
            # Closed and checkpointed, so no WAL belongs to the old file; no writer can open
            # it while we hold the write lock, and readers that have it open keep reading it.
            os.replace(fresh, self.path)
