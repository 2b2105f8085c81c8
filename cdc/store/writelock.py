"""The store's writer lock: a lock file beside the store, and a record of who holds it.

The lock is `flock` on `STORE.lock`. The kernel releases it when its holder's last
descriptor of it closes, so a lock whose holder has died, however it died, is free for the
next writer: a lock file left behind by a crashed process is simply taken over. One way
round that remained: a process forked while the lock is held (an ingest's worker pool)
shares the parent's descriptor, and kept the lock held after the parent was killed. So a
forked child drops its copy at once (`_drop_in_child`); it never writes to the store.

The holder writes its pid, command line and start time into the file, so a writer that
finds the lock taken can say who holds it and since when, and, if that process has gone,
which living process holds the file open instead.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from cdc.errors import StoreBusyError, StoreError
from cdc.runtime.lifeline import process_exists

RETRY_SECONDS = 0.01  # between tries at a lock another process holds
COMMAND_SHOWN = 120  # characters of a holder's command line in a message

_held: set[int] = set()  # descriptors of the lock files this process holds now


def _drop_in_child() -> None:
    """After a fork: point the inherited lock descriptors at /dev/null, so the child holds
    no lock (the number stays open: nothing else can take it and be closed by mistake)."""
    if not _held:
        return
    null = os.open(os.devnull, os.O_RDONLY)
    for fd in _held:
        os.dup2(null, fd)
    os.close(null)
    _held.clear()


os.register_at_fork(after_in_child=_drop_in_child)


def lock_taken(fd: int) -> None:
    """Record that this process holds the `flock` on `fd`: a process forked from now on drops
    its copy (`_drop_in_child`), so the lock goes with this process."""
    _held.add(fd)


def lock_released(fd: int) -> None:
    """Record that this process let go of the lock on `fd`."""
    _held.discard(fd)


@contextlib.contextmanager
def holding(lock_path: Path, store_path: Path, timeout: float) -> Iterator[None]:
    """Hold the writer lock of `store_path` for the block, waiting up to `timeout` seconds."""
    fd = _open(lock_path, store_path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreBusyError(busy_message(lock_path, store_path)) from None
                time.sleep(RETRY_SECONDS)
        lock_taken(fd)
        try:
            _record_holder(fd)
            yield
        finally:
            lock_released(fd)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # a lock file at rest names nobody
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _open(lock_path: Path, store_path: Path) -> int:
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise StoreError(
                f"cannot write to the store {store_path}: its lock file {lock_path} cannot be "
                f"created or opened ({reason}); a writer needs a writable directory: copy the "
                "store into one, or give --db a path there (reading needs no lock)") from None
        raise StoreError(f"cannot open the store's lock file {lock_path} ({reason}); remove "
                         "it if it is not a regular file, and try again") from None


def _record_holder(fd: int) -> None:
    holder = {"pid": os.getpid(), "since": datetime.now(UTC).isoformat(timespec="seconds"),
              "command": _command_of(os.getpid()) or " ".join(sys.argv)}
    data = (json.dumps(holder) + "\n").encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def read_holder(lock_path: Path) -> dict | None:
    """What the lock file says of its holder, or None when it says nothing readable."""
    try:
        holder = json.loads(lock_path.read_bytes() or b"null")
    except (OSError, ValueError):
        return None
    if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
        return None
    return holder


def busy_message(lock_path: Path, store_path: Path) -> str:
    """One line: who holds the lock (pid, command, since when) and what to do."""
    holder = read_holder(lock_path)
    if holder and process_exists(holder["pid"]):
        pid = holder["pid"]
        return (f"another cdc process is writing to {store_path}: pid {pid} "
                f"({_shown(_command_of(pid) or holder.get('command'))}), {_since(holder.get('since'))}; "
                "wait for it to finish and try again")
    others = [pid for pid in _processes_with_open(lock_path) if pid != os.getpid()]
    if others:
        named = ", ".join(f"pid {pid} ({_shown(_command_of(pid))})" for pid in others)
        gone = f" (pid {holder['pid']})" if holder else ""
        return (f"the store {store_path} is locked by {named}, left holding the lock of a writer "
                f"that has ended{gone}; stop it (kill {' '.join(map(str, others))}) and try again")
    return (f"another process is writing to {store_path} (its lock file {lock_path} does not "
            "say which); wait for it to finish and try again")


def _command_of(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace") or None


def _shown(command: str | None) -> str:
    if not command:
        return "command unknown"
    command = " ".join(command.split())  # a `python -c` script's lines, say
    return command if len(command) <= COMMAND_SHOWN else command[:COMMAND_SHOWN - 3] + "..."


def _since(stamp: str | None) -> str:
    try:
        started = datetime.fromisoformat(stamp or "")
    except ValueError:
        return "since a time it did not record"
    seconds = max(0, int((datetime.now(UTC) - started).total_seconds()))
    return f"since {started:%Y-%m-%d %H:%M:%S} UTC ({seconds:,} s ago)"


def _processes_with_open(path: Path) -> list[int]:
    """Processes with `path` open (Linux's /proc; empty elsewhere or when unreadable)."""
    target = str(path.resolve())
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) == target for fd in entry.joinpath("fd").iterdir()):
                found.append(int(entry.name))
    return sorted(found)
