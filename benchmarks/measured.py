"""Commands timed as a user runs them, with their CPU time and peak memory, and a yardstick
for how much of a second core the machine gives right now.

`run` starts a command, waits for it with `os.wait4` and returns its wall time, the CPU
time of it and the processes it waited for (forked helpers, a cluster's workers), and its
peak resident memory: Linux reports for a waited child the largest of its own and of any
descendant it waited for, so the figure is the largest single process of the command.

`yardstick` runs pure-Python work (it holds the GIL, as ingest's per-page work does) in one
forked process, then the same work in two at once: twice the work in the time of one is
2.00x, no second core 1.00x. On a machine shared with other jobs, a 2-process ingest can
only be as much faster than 1 process as this says.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

YARDSTICK_LOOPS = 4_000_000  # about half a second of Python on one core


@dataclass
class Measured:
    wall: float  # seconds
    cpu: float  # seconds, of the command and the processes it waited for
    peak_mb: float  # largest resident set of the command or one of its processes, 1 MB = 10^6 bytes
    returncode: int
    stdout: str
    stderr: str


def run(command: list[str], cwd: Path) -> Measured:
    """`command` run in `cwd`; see the module docstring."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024 / 1e6,
                        process.returncode, out.read(), err.read())


def _work(_: object = None) -> int:
    total = 0
    for number in range(YARDSTICK_LOOPS):
        total += number & 7
    return total


def _timed(processes: int) -> float:
    context = multiprocessing.get_context("fork")
    started = time.perf_counter()
    workers = [context.Process(target=_work) for _ in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def yardstick(rounds: int = 3) -> float:
    """How much more pure-Python work 2 processes do than 1 in the same time, here, now
    (the best of `rounds`, one and two interleaved)."""
    times = [(_timed(1), _timed(2)) for _ in range(rounds)]
    return 2 * min(one for one, _ in times) / min(two for _, two in times)


def load() -> str:
    """The machine's load averages (runnable processes over 1, 5 and 15 minutes) and its
    cores, to print beside every figure: other jobs share the cores."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} cores"


# Run in a child as `python -c SERIAL_SCRIPT ARGS...`: `cdc ARGS` in that process, timing the
# CPU it spends while no task is queued for or running in a worker process (the pool's
# `submit` and each task's end counted), and the CPU of the workers it waited for.
SERIAL_SCRIPT = """
import json, os, resource, sys, threading, time
from concurrent.futures import ProcessPoolExecutor
lock, state = threading.Lock(), {"out": 0, "serial": 0.0, "since": 0.0}
submit = ProcessPoolExecutor.submit
def done(_):
    with lock:
        state["out"] -= 1
        if state["out"] == 0:
            state["since"] = time.process_time()
def counted(self, *args, **kwargs):
    with lock:
        if state["out"] == 0:
            state["serial"] += time.process_time() - state["since"]
        state["out"] += 1
    future = submit(self, *args, **kwargs)
    future.add_done_callback(done)
    return future
ProcessPoolExecutor.submit = counted
from cdc.cli.main import main
code = main(sys.argv[1:])
own = time.process_time()
serial = state["serial"] + (own - state["since"] if state["out"] == 0 else 0.0)
child = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "main": own, "workers": child.ru_utime + child.ru_stime, "serial": serial}))
"""


@dataclass
class Serial:
    """CPU seconds of one `cdc` command: its own process (start-up included), its workers,
    and its own while no worker had a task (`serial`)."""

    main: float
    workers: float
    serial: float

    @property
    def two_core_estimate(self) -> float:
        """Wall seconds on two free cores, if the work done while a worker had a task were
        shared evenly (the tasks are taken back by whichever process is free): serial + half
        the rest. A bound from below that does not depend on what else the machine runs."""
        return self.serial + (self.main + self.workers - self.serial) / 2


def serial_cpu(arguments: list[str], cwd: Path) -> Serial:
    """`python -m cdc ARGUMENTS` in a child, measured as `Serial` says."""
    done = subprocess.run([sys.executable, "-c", SERIAL_SCRIPT, *arguments], cwd=cwd, capture_output=True,
                          text=True, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return Serial(found["main"], found["workers"], found["serial"])
