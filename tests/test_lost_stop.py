"""A stop whose exception was lost still stops the command.

Python runs a signal's handler between two bytecodes of the main thread, wherever it is;
when that is inside a finalizer the garbage collector happened to run (a `__del__`, a
weakref's callback), the handler's exception is printed as "Exception ignored" and
dropped. Seen in a real `cdc ingest` SIGTERMed during HTML extraction: it went on to the
end and exited 0. Here the drop is made to happen on purpose, in the same place: the
signal is raised inside a `__del__`.
"""

from __future__ import annotations

import io
import json
import signal
import sys

import pytest

from cdc.ingest.ingester import Ingester
from cdc.runtime.lifeline import Terminated, is_stop, stop_on_sigterm
from cdc.sources.jsonl import iter_jsonl
from cdc.store import Store
from tests import textgen


@pytest.fixture
def command_signals():
    """The signal handling of a command (`stop_on_sigterm`), put back afterwards."""
    saved = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT), sys.unraisablehook
    # As a new `cdc` process starts: Python's own Ctrl-C handler, whatever a test before this
    # one in the worker left (the SIGINT case failed once, after such a test).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stop_on_sigterm()
    yield
    signal.signal(signal.SIGTERM, saved[0])
    signal.signal(signal.SIGINT, saved[1])
    sys.unraisablehook = saved[2]
    stop_on_sigterm.__globals__["_stopped_by"].clear()


class _SignalledWhileCollected:
    def __init__(self, signum: int):
        self.signum = signum

    def __del__(self):
        signal.raise_signal(self.signum)  # the handler runs here; its exception goes nowhere


def _records(pages: int) -> bytes:
    lines = [json.dumps({"url": f"https://lost.example/p/{page}", "fetched_at": "2025-03-01T00:00:00Z",
                         "sections": [{"text": text} for text in textgen.paragraphs(page, 3)]})
             for page in range(pages)]
    return "\n".join(lines).encode()


@pytest.mark.parametrize("signum, stop", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)],
                         ids=["SIGTERM", "SIGINT"])
def test_a_signal_dropped_by_a_finalizer_stops_the_ingest_before_its_next_batch(
        tmp_path, capfd, command_signals, signum, stop):
    store = Store(tmp_path / "store.duckdb")

    def after_batch(summary):
        if summary.batches == 1:
            _SignalledWhileCollected(signum)  # collected at once: the drop happens here

    ingester = Ingester(store, batch_records=10, on_batch=after_batch)
    with pytest.raises(stop):
        ingester.run(iter_jsonl(io.BytesIO(_records(40)), "lost.jsonl"))

    assert ingester.summary.batches == 1, "batches were written after the stop"
    assert store.stats()["pages"] == 10
    assert [run.ended_at for run in store.runs()] == [None], "a stopped run was recorded as finished"
    # Nor is the dropped stop an error to print (under pytest, its own hook would report it).
    assert "Exception ignored" not in capfd.readouterr().err



def test_an_error_raised_after_the_signal_is_the_stop(command_signals):
    """DuckDB's "Query interrupted", or a library's error from a call the signal cut short, is
    the stop the signal asked for (the command ends as stopped, a cluster's workers killed
    first: `cdc.ingest.cluster.dask_client`); before any signal, an error is an error."""
    assert not is_stop(RuntimeError("Query interrupted"))
    with pytest.raises(Terminated):
        signal.raise_signal(signal.SIGTERM)
    assert is_stop(RuntimeError("Query interrupted"))
    assert is_stop(Terminated())
