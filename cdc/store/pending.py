"""Texts a run has expired already, kept beside the store until the run ends.

A page imported with its history (a JSONL of many crawls, several WARCs in one run) brings
more generations than the store retains: the run's end trims all but the newest few
(`Store._trim`). Written to the file first, those texts were most of what a batch's commit
wrote, the trim deleted them again, and the file was then rewritten whole to drop their
bytes (`compact`): on the corpus (47.5 MB of JSONL, 42 MB of text, 3.6 MB retained) 1.4 s
of a 5.2 s ingest, all of it in the process that writes.

So a batch writes a generation's text and chunk list only while it is among the page's
newest `retained` (no later fetch can bring it back among them: a fetch adds a generation or
joins one, never removes one). The others are kept here instead, in an Arrow file a batch,
uncompressed, beside the store (`<store>.pending/`): a later batch of the run whose fetch is
put in place next to such a generation finds its text here, as it would have found it in the
store, so the rows are the same for any order and split of the records. The run's end
deletes its files.

A run that is killed leaves its files; the next run of the store adopts them (their writer
is gone) and deletes them at its end, so a rerun of the same input is built as the first
run would have been. An erasure deletes them all (`discard`): they are texts past the
retention limit, and an erased page's text must not outlive it anywhere.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.ipc as ipc

_SCHEMA = pa.schema([("natural_key", pa.string()), ("digest", pa.binary()), ("text", pa.binary()),
                     ("digests", pa.binary()), ("lengths", pa.list_(pa.int32()))])
_SUFFIX = ".arrow"


class PendingText(NamedTuple):
    """A generation's text and chunk list, by its page and content digest (a page that
    went back to an earlier content has two generations of one text)."""

    natural_key: str
    digest: bytes
    text: bytes
    digests: bytes  # its chunks' digests end to end
    lengths: list[int]


def folder_of(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".pending")


def discard(store_path: Path) -> None:
    """Delete every pending text of the store's runs (an erasure's part)."""
    folder = folder_of(store_path)
    for path in folder.glob("*"):
        path.unlink(missing_ok=True)
    with suppress(OSError):  # another run's file appeared meanwhile: it stays
        folder.rmdir()


def _writer_alive(path: Path) -> bool:
    """Whether the process that wrote `path` (its pid leads the name) still runs."""
    try:
        pid = int(path.name.lstrip(".").split("-", 1)[0])
    except ValueError:
        return False
    if pid == os.getpid():
        return False  # an earlier process of this pid, long gone: ours are not on disk yet
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


class PendingTexts:
    """One run's pending texts (its own and those it adopted), looked up by page and digest."""

    def __init__(self, store_path: Path):
        self.folder = folder_of(store_path)
        self._places: dict[tuple[str, bytes], tuple[Path, int]] = {}
        self._files: list[Path] = []  # deleted at the run's end
        self._numbers = itertools.count()
        for path in sorted(self.folder.glob("*")) if self.folder.is_dir() else []:
            if _writer_alive(path):
                continue  # a run still going: its texts are its own
            if path.suffix != _SUFFIX:  # a file a killed writer did not finish
                path.unlink(missing_ok=True)
                continue
            try:
                with pa.memory_map(str(path)) as source:
                    keys = ipc.open_file(source).read_all().select(["natural_key", "digest"])
            except (OSError, pa.ArrowInvalid):
                path.unlink(missing_ok=True)
                continue
            self._add(path, keys)

    def __len__(self) -> int:
        return len(self._places)

    def keep(self, texts: Sequence[PendingText]) -> None:
        """Write `texts` to a file of their own, and remember where each is."""
        if not texts:
            return
        name = f"{os.getpid()}-{id(self):x}-{next(self._numbers)}"
        partial, path = self.folder / f".{name}.part", self.folder / f"{name}{_SUFFIX}"
        table = pa.table([pa.array([text.natural_key for text in texts], pa.string()),
                          pa.array([text.digest for text in texts], pa.binary()),
                          pa.array([text.text for text in texts], pa.binary()),
                          pa.array([text.digests for text in texts], pa.binary()),
                          pa.array([text.lengths for text in texts], pa.list_(pa.int32()))], schema=_SCHEMA)
        for attempt in range(2):
            self.folder.mkdir(exist_ok=True)
            try:
                with pa.OSFile(str(partial), "wb") as sink, ipc.new_file(sink, _SCHEMA) as writer:
                    writer.write_table(table)
                break
            except FileNotFoundError:  # another run's end took the empty folder away meanwhile
                if attempt:
                    raise
        partial.rename(path)  # whole, or not there
        self._files.append(path)
        self._add(path, table)

    def find(self, wanted: Iterable[tuple[str, bytes]]) -> dict[tuple[str, bytes], PendingText]:
        """The pending texts of the (natural_key, digest) pairs `wanted` that are held here.
        A file deleted meanwhile (an erasure) holds none."""
        by_file: dict[Path, list[int]] = {}
        for pair in wanted:
            if (place := self._places.get(pair)) is not None:
                by_file.setdefault(place[0], []).append(place[1])
        found = {}
        for path, rows in by_file.items():
            try:
                with pa.memory_map(str(path)) as source:
                    table = ipc.open_file(source).read_all().take(sorted(set(rows)))
            except FileNotFoundError:
                continue
            for row in table.to_pylist():
                found[row["natural_key"], row["digest"]] = PendingText(**row)
        return found

    def finish(self) -> None:
        """The run ended (its trim committed): delete its files and those it adopted."""
        for path in self._files:
            path.unlink(missing_ok=True)
        self._files.clear()
        self._places.clear()
        with suppress(OSError):  # not empty: another run's files
            self.folder.rmdir()

    def _add(self, path: Path, keys: pa.Table) -> None:
        if path not in self._files:
            self._files.append(path)
        for row, (key, digest) in enumerate(zip(keys.column("natural_key").to_pylist(),
                                                keys.column("digest").to_pylist())):
            self._places[key, digest] = (path, row)
