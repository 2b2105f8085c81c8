"""Work handed to worker processes in small tasks, which this process takes back from the
end of the queue for as long as no worker has started them.

A batch of an ingest is cut into tasks, big ones first (`TASK_SHARE`), all queued
for the workers; this process, once done with its own part of the batch (reading the
input, the store, writing), takes back the last tasks not yet started and does them itself.
So the work is shared by what each process turns out to have time for, not by a share
fixed beforehand: with 2 processes on the corpus a fixed half of the build left the worker
idle while this process wrote, and on the docs crawls a fixed two thirds of the extraction
left this process waiting for the worker, by whatever this process's own work weighed.

A process pool hands tasks out in the order they were queued, so once the last task not
taken back has started, every task before it has too: taking back stops there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future

# Tasks are cut heaviest first, each this part of the work left per process ("guided"
# scheduling), and none under the floor's part of the whole: the first tasks are big (few
# trips), the last ones small, since the last few a worker holds cannot be taken back and
# this process waits for them (a pool of one worker holds three: one running, two queued).
TASK_SHARE = 4  # with 2 processes: the first task an eighth of the work, the next 7/64, ...
TASK_FLOOR = 32  # with 2 processes: no task under a 64th of the whole (about 24 tasks in all)


def share_out(weights: Sequence[int], bins: int) -> list[list[int]]:
    """Indexes of `weights` dealt into `bins` of about equal total: heaviest first, each to
    the lightest bin so far (the first of equals). Each bin's indexes come heaviest first."""
    shares: list[list[int]] = [[] for _ in range(bins)]
    loads = [0] * bins
    for number in sorted(range(len(weights)), key=lambda n: -weights[n]):
        lightest = loads.index(min(loads))
        shares[lightest].append(number)
        loads[lightest] += weights[number]
    return shares


def guided_parts(weights: Sequence[int], processes: int) -> list[list[int]]:
    """Indexes of `weights` cut into tasks, heaviest first; see TASK_SHARE."""
    order = sorted(range(len(weights)), key=lambda n: -weights[n])
    total = sum(weights)
    if total <= 0:
        return [order] if order else []
    floor = total / (TASK_FLOOR * processes)
    parts: list[list[int]] = []
    part: list[int] = []
    left, load = total, 0
    for number in order:
        part.append(number)
        load += weights[number]
        if load >= max(left / (TASK_SHARE * processes), floor):
            parts.append(part)
            left -= load
            part, load = [], 0
    if part:
        parts.append(part)
    return parts


class Tasks:
    """Items (by number) dealt by weight into tasks, each queued on `pool` as
    `function(items of the task)`; `here(numbers)` does a task in this process instead."""

    def __init__(self, pool: Executor, function: Callable[[list], list], items: Sequence,
                 weights: Sequence[int], processes: int, here: Callable[[list[int]], list]):
        self.parts = guided_parts(weights, processes)
        self.futures: list[Future] = [pool.submit(function, [items[n] for n in part]) for part in self.parts]
        self._here = here
        self._done_here: dict[int, list] = {}
        self._back = len(self.parts)  # tasks from here on are settled: taken back, or started

    def take_back(self) -> bool:
        """Do here the last task no worker has started; False when every task left has started."""
        if self._back == 0:
            return False
        self._back -= 1
        if not self.futures[self._back].cancel():
            self._back = 0  # started, so every task before it has too
            return False
        self._done_here[self._back] = self._here(self.parts[self._back])
        return True

    def take_back_all(self) -> None:
        while self.take_back():
            pass

    def running(self) -> bool:
        """Whether a task left to the workers has not finished yet."""
        return any(not future.done() for future in self.futures)

    def results_so_far(self) -> dict[int, object]:
        """The results of the items whose tasks are done now (here, or by a worker), by item,
        without waiting for the others; a done task that raised raises here, as in `results`."""
        done: dict[int, object] = {}
        for task, (part, future) in enumerate(zip(self.parts, self.futures)):
            if task in self._done_here or future.done():
                done.update(zip(part, self._output(task), strict=True))
        return done

    def results(self, count: int) -> list:
        """Every item's result, in item order (`count` items), waiting for the workers' tasks."""
        results: list = [None] * count
        for task, part in enumerate(self.parts):
            for number, result in zip(part, self._output(task), strict=True):
                results[number] = result
        return results

    def _output(self, task: int) -> list:
        """A task's results: done here, or its worker's (waited for; raised if it raised)."""
        return self._done_here[task] if task in self._done_here else self.futures[task].result()

    def cancel(self) -> None:
        for future in self.futures:
            future.cancel()
