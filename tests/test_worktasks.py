"""`cdc.ingest.worktasks`: tasks queued for a real process pool, taken back while no worker
has started them."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

from cdc.ingest.worktasks import Tasks, guided_parts, share_out

ROOT = Path(__file__).resolve().parent.parent


def _doubled(gate: str, items: list[int]) -> list[tuple[int, int]]:
    """Each item doubled, with the pid that did it; waits until `gate` exists (a worker held up)."""
    while not os.path.exists(gate):
        time.sleep(0.005)
    return [(item * 2, os.getpid()) for item in items]


def test_tasks_no_worker_started_are_done_here_and_every_result_comes_back_in_order(tmp_path):
    gate = str(tmp_path / "open")
    items = list(range(100))
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        tasks = Tasks(pool, partial(_doubled, gate), items, [1] * len(items), 2,
                      here=lambda part: [(items[n] * 2, os.getpid()) for n in part])
        tasks.take_back_all()  # the worker is held at its first task: only the few it holds stay there
        assert tasks.running()
        open(gate, "w").close()
        results = tasks.results(len(items))
    assert [doubled for doubled, _ in results] == [item * 2 for item in items]
    here = sum(pid == os.getpid() for _, pid in results)
    # A pool of one worker holds at most three tasks (one running, two queued to it).
    assert len(items) - 3 * max(map(len, tasks.parts)) <= here < len(items)
    assert not tasks.take_back()


def test_guided_parts_cut_every_item_once_heaviest_first_in_tasks_that_shrink():
    weights = [(n * 7919) % 101 + 1 for n in range(500)]
    parts = guided_parts(weights, 2)
    assert sorted(n for part in parts for n in part) == list(range(500))
    loads = [sum(weights[n] for n in part) for part in parts]
    assert loads[0] >= sum(weights) / 8 > max(loads[-3:])  # the last tasks, held by a worker, are small
    assert 10 <= len(parts) <= 40
    firsts = [weights[part[0]] for part in parts]
    assert firsts == sorted(firsts, reverse=True)
    assert guided_parts([], 2) == [] and guided_parts([0, 0], 2) == [[0, 1]]


def test_share_out_deals_heaviest_first_to_the_lightest_bin():
    assert share_out([5, 1, 4, 2], 2) == [[0, 1], [2, 3]]
    assert share_out([3], 3) == [[0], [], []]


ABANDON_SCRIPT = """
import sys, time
from cdc.ingest.ingester import Ingester
from cdc.store import Store
from cdc.ingest.worktasks import Tasks

def nap(seconds):
    time.sleep(sum(seconds))
    return seconds

ingester = Ingester(Store(sys.argv[1]), workers=2)
pool = ingester._workers()
tasks = Tasks(pool, nap, [30] + [0] * 40, [40] + [1] * 40, 2, here=lambda part: [None] * len(part))
time.sleep(1)  # the one worker is asleep in the first task; the rest wait in the pool
tasks.take_back_all()  # cancelled, but still pending in the pool
assert any(item.future.cancelled() for item in pool._pending_work_items.values())
ingester._close_pool(abandon=True)  # as a stop (Ctrl-C, SIGTERM) does
print("closed", flush=True)
"""


def test_an_abandoned_pool_with_tasks_taken_back_lets_the_process_exit(tmp_path):
    """A stop mid-batch, after this process took tasks back: the command ends (it hung at exit
    on the pool's call queue when the pool marked the cancelled futures broken)."""
    done = subprocess.run([sys.executable, "-c", ABANDON_SCRIPT, str(tmp_path / "store.duckdb")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "closed\n", done.stderr[-2000:]
    assert "InvalidStateError" not in done.stderr
