"""Python's cycle collector paused around work that makes many objects and no cycles."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def collector_paused(task: Callable[..., T]) -> Callable[..., T]:
    """`task` run with Python's cycle collector off. A task that makes hundreds of thousands
    of objects and no cycles otherwise sets off collections that walk the whole process,
    again and again as its result grows: `chunk_many` on the corpus (265,000 chunks) spent a
    third of its time in them, and Dask worker tasks took two or three times as long."""

    @functools.wraps(task)
    def paused(*args, **kwargs) -> T:
        if not gc.isenabled():
            return task(*args, **kwargs)
        gc.disable()
        try:
            return task(*args, **kwargs)
        finally:
            gc.enable()

    return paused
