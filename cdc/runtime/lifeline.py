"""Worker processes that end with the process that started them.

A worker forked for the per-page work waits on a process pool's queue whose other end it
inherited too, so it never sees end-of-file when its parent goes. Killed alone (`kill -9
PID`, or the SIGTERM of a scheduler's timeout, `systemctl stop` or a container stop), an
ingest left its workers orphaned and asleep for good. `follow_parent`, run first in each
worker, ends the worker within moments of its parent, however the parent ends: on Linux the
kernel sends it SIGKILL when the parent dies (a parent-death signal), elsewhere a thread
polls for the parent. A worker never writes to the store, so nothing is lost with it.

`stop_on_sigterm` makes SIGTERM in the parent unwind like Ctrl-C (`Terminated` is a
`KeyboardInterrupt`): the open transaction rolls back, the pool is shut down and the lock
is released on the way out, instead of the process vanishing mid-statement. A signal's
exception can be lost, though: raised inside a weakref callback or a `__del__` that the
garbage collector happened to run (seen here: a WeakValueDictionary's, during HTML
extraction), it is printed as "Exception ignored" and dropped, and the command went on to
the end as if never stopped. So the signal is remembered too, and `raise_if_stopped`, run
before each store transaction begins, raises it again there.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
POLL_SECONDS = 0.2  # how often a worker without a parent-death signal looks for its parent


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stop as Ctrl-C stops, cleaning up on the way out."""


def follow_parent(parent: int) -> None:
    """Run first in a worker process (a pool's initializer): exit when `parent` is gone.

    Ctrl-C reaches the whole process group; the parent handles it and takes its workers
    down, so a worker ignores it rather than print a traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """Exit when `parent` is gone. The kernel's signal needs no GIL, so a worker busy in
    code that holds it still ends at once; a thread that watches a pipe (Dask's own way)
    took 1-2 s here to be scheduled."""
    if not _parent_death_signal(signal.SIGKILL):
        threading.Thread(target=_watch, args=(parent,), name="cdc-lifeline", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


def _parent_death_signal(signum: int) -> bool:
    """Ask the kernel to send `signum` when our parent exits (Linux); False where it can't."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    os._exit(1)


def process_exists(pid: int) -> bool:
    """Whether a process `pid` exists (a zombie counts: it is gone but for its exit code)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, and belongs to another user
        return True
    return True


_stopped_by: list[int] = []  # the signals that stopped this command, first first


def _terminate(signum, frame) -> None:
    _stopped_by.append(signum)
    raise Terminated()


def _interrupt(signum, frame) -> None:
    _stopped_by.append(signum)
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """In the main thread of a command: SIGTERM raises `Terminated` instead of killing, and
    both it and Ctrl-C are remembered (`stopped_by`, `raise_if_stopped`)."""
    global _next_unraisable_hook
    _stopped_by.clear()  # a command run in-process after another (tests) starts afresh
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupt)
        if sys.unraisablehook is not _unraisable:
            _next_unraisable_hook = sys.unraisablehook
            sys.unraisablehook = _unraisable


_next_unraisable_hook = sys.unraisablehook


def _unraisable(unraisable) -> None:
    """A stop's exception dropped where none can be raised is no error to print: the stop
    is remembered, and `raise_if_stopped` raises it at the next transaction."""
    if _stopped_by and isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    _next_unraisable_hook(unraisable)


def raise_if_stopped() -> None:
    """Raise the stop a signal asked for, if its exception was lost on the way (see the
    module's docstring); nothing when no signal came, or in a process that never called
    `stop_on_sigterm` (a library's user, the dashboard)."""
    if _stopped_by:
        raise Terminated() if _stopped_by[0] == signal.SIGTERM else KeyboardInterrupt()


def stopped_by() -> int | None:
    """The signal that stopped this command, if one did. DuckDB, interrupted in a query,
    raises its own error ("Query interrupted", a transaction left aborted) instead of the
    signal's exception, so an error after the signal is still a stop, not a failure."""
    return _stopped_by[0] if _stopped_by else None


def is_stop(exc: BaseException) -> bool:
    """Whether `exc` ends the command because it was told to stop: the signal's own exception,
    or any error raised after the signal came (DuckDB's "Query interrupted", a library's
    error from a call the signal cut short), which is the stop too."""
    return isinstance(exc, KeyboardInterrupt) or stopped_by() is not None
