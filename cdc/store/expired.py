"""Texts a run has expired already, kept beside the store until a run that saw their pages ends.

A page imported with its history (a JSONL of many crawls, several WARCs in one run) brings
more generations than the store retains: the run's end trims all but the newest few
(`Store._trim`). Written to the file first, those texts were most of what a batch's commit
wrote, the trim deleted them again, and the file was then rewritten whole to drop their
bytes (`compact`): on the corpus (47.5 MB of JSONL, 42 MB of text, 3.6 MB retained), in
process on 2 processes and beside the code before in the same session, a run's end of
1.0-1.15 s (0.42-0.46 s of it the compaction) against 0.49-0.58 s, and 4.8-5.3 s against
4.3-4.4 s in all, all of it in the process that writes.

So a batch writes a generation's text and chunk list only while it is among the page's
newest `retained` (no later fetch can bring it back among them: a fetch adds a generation or
joins one, never removes one). The others are kept here instead, an Arrow file a batch,
uncompressed, beside the store (`<store>.expired/`), under the same rules as a text in the
store that a run's end has yet to trim:

- Any run finds them: a batch whose fetch is put in place next to such a generation reads its
  text here (`find`), as it would have read it from the store, its own run's or another's,
  so the rows are the same for any order and split of the records.
- A run's end deletes the texts of the pages it saw, as its trim would have (`finish`). A run
  holds a lock file (`<token>.lock`, `flock`) while it lives; a run that died (killed, or
  its process gone) leaves its files unlocked, and the next run's end takes them over: the
  texts of pages that run saw are deleted, the others written to a file of no run, left for
  a later run that sees their pages. So a rerun after a kill is built as one whole run
  would have been, whatever ran between.
- An erasure blanks the page's rows in every file (`erase_page`): an erased page's text must
  not outlive it anywhere.

Each change happens under the store's writer lock (a batch, a run's end, an erasure), so no
file is written while another process reads or rewrites the folder. A file is written
whole, or not there: as `.<name>.part`, then renamed.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import secrets
from collections.abc import Collection, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import xxhash

from cdc.errors import StoreError
from cdc.store import writelock
from cdc.store.diskspace import disk_full_error, out_of_space
from cdc.store.rows import ExpiredText

_SCHEMA = pa.schema([("natural_key", pa.string()), ("digest", pa.binary()), ("text", pa.binary()),
                     ("digests", pa.binary()), ("lengths", pa.list_(pa.int32()))])
_DATA, _LOCK, _PART = ".arrow", ".lock", ".part"
_ORPHAN = "orphan"  # the token of files no run holds: texts of pages no finished run has seen yet


def folder_of(store_path: Path) -> Path:
    """The folder of a store's expired texts: beside the file itself, however it is reached."""
    resolved = Path(store_path).resolve()
    return resolved.with_name(resolved.name + ".expired")


def _key(natural_key: str, digest: bytes) -> int:
    """A text's place in an index: a 64-bit digest of its page and content (a match is
    checked against the row itself, so a collision only costs a read)."""
    return xxhash.xxh3_64_intdigest(natural_key.encode() + b"\0" + digest)


def _token_of(path: Path) -> str:
    """The run a data file belongs to: its name up to its number (`<token>-<n>.arrow`)."""
    return path.name.removesuffix(_DATA).rsplit("-", 1)[0]


def _read(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        table = ipc.open_file(source).read_all()
    if table.schema != _SCHEMA:
        raise pa.ArrowInvalid(f"{path.name} is not a file of expired texts")
    return table


def _write(folder: Path, name: str, table: pa.Table) -> Path:
    """`table` as `folder/name.arrow`, written whole or not at all."""
    partial, path = folder / f".{name}{_PART}", folder / f"{name}{_DATA}"
    try:
        folder.mkdir(exist_ok=True)
        with pa.OSFile(str(partial), "wb") as sink, ipc.new_file(sink, _SCHEMA) as writer:
            writer.write_table(table)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        if out_of_space(exc):
            raise disk_full_error(folder) from exc
        raise StoreError(f"cannot keep expired texts in {folder}: {exc.strerror or exc}") from exc
    return path


def _data_files(folder: Path) -> list[Path]:
    """The folder's data files (anything else in it, a folder say, is not read)."""
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.glob(f"*{_DATA}") if path.is_file())


def _drop_partials(folder: Path) -> None:
    """Delete half-written files: called under the store's writer lock, when none is being
    written, so each is one that a run died writing."""
    for partial in folder.glob(f".*{_PART}"):
        partial.unlink(missing_ok=True)


def _table(texts: Sequence[ExpiredText]) -> pa.Table:
    return pa.table([pa.array([text.natural_key for text in texts], pa.string()),
                     pa.array([text.digest for text in texts], pa.binary()),
                     pa.array([text.text for text in texts], pa.binary()),
                     pa.array([text.digests for text in texts], pa.binary()),
                     pa.array([text.lengths for text in texts], pa.list_(pa.int32()))], schema=_SCHEMA)


@dataclass
class _Index:
    """Where each text of one file is: its keys (`_key`), sorted, and their rows."""

    keys: np.ndarray  # uint64
    rows: np.ndarray  # int64

    @classmethod
    def of(cls, natural_keys: Iterable[str | None], digests: Iterable[bytes | None]) -> _Index:
        keys = np.fromiter((_key(key, digest) if key and digest is not None else 0
                            for key, digest in zip(natural_keys, digests)), dtype=np.uint64)
        order = np.argsort(keys, kind="stable")
        return cls(keys[order], order)

    def rows_of(self, wanted: np.ndarray) -> np.ndarray:
        """The rows whose key is among `wanted` (sorted keys)."""
        starts = np.searchsorted(self.keys, wanted, side="left")
        stops = np.searchsorted(self.keys, wanted, side="right")
        if not (stops > starts).any():
            return np.empty(0, np.int64)
        return self.rows[np.concatenate([np.arange(a, b) for a, b in zip(starts, stops) if b > a])]


class ExpiredTexts:
    """The expired texts of a store, as one run sees them: it keeps its own (`keep`), finds
    any run's (`find`), and at its end deletes those of the pages it saw (`finish`)."""

    def __init__(self, store_path: Path):
        self.folder = folder_of(store_path)
        self._token = f"{os.getpid()}-{secrets.token_hex(6)}"
        self._lock: int | None = None  # the descriptor of its lock file, from the first keep on
        self._numbers = itertools.count()
        self._indexes: dict[Path, _Index] = {}  # every data file read so far, by path
        self.kept_under: int | None = None  # the least retention limit its texts were expired under

    def keep(self, texts: Sequence[ExpiredText], retained: int) -> None:
        """Write `texts`, expired with `retained` newer generations of their page, to a file of
        this run's (under the store's writer lock)."""
        if not texts:
            return
        self.kept_under = retained if self.kept_under is None else min(self.kept_under, retained)
        if self._lock is None:
            self._lock = self._take_lock()
        path = _write(self.folder, f"{self._token}-{next(self._numbers)}", _table(texts))
        self._indexes[path] = _Index.of((text.natural_key for text in texts), (text.digest for text in texts))

    def find(self, wanted: Collection[tuple[str, bytes]]) -> dict[tuple[str, bytes], ExpiredText]:
        """The expired texts of the (natural_key, digest) pairs `wanted` that any run kept."""
        if not wanted or not self._refresh():
            return {}
        keys = np.unique(np.fromiter((_key(*pair) for pair in wanted), dtype=np.uint64, count=len(wanted)))
        found: dict[tuple[str, bytes], ExpiredText] = {}
        for path, index in self._indexes.items():
            rows = index.rows_of(keys)
            if not len(rows):
                continue
            try:
                table = _read(path).take(pa.array(np.sort(rows)))
            except (OSError, pa.ArrowInvalid):  # taken over meanwhile by another run's end
                continue
            for row in table.to_pylist():
                pair = (row["natural_key"], row["digest"])
                if row["text"] is not None and pair in wanted:  # an erased page's rows are blank
                    found[pair] = ExpiredText(**row)
        return found

    def own(self) -> pa.Table:
        """Every text this run kept."""
        return pa.concat_tables([_read(path) for path in _data_files(self.folder)
                                 if _token_of(path) == self._token] or [_SCHEMA.empty_table()])

    def finish(self, seen: Collection[str] | None) -> None:
        """The run ended, having seen the pages `seen` (None: every page, a `cdc prune`),
        under the store's writer lock, after its trim committed: its own files go, and those
        of runs that died, their texts of pages not seen written to a file of no run first."""
        taken = self._dead_runs()
        files = _data_files(self.folder)
        seen_keys = pa.array(list(seen), pa.string()) if taken and seen is not None else None
        orphans: list[pa.Table] = []
        for path in files:
            token = _token_of(path)
            if token == self._token:
                path.unlink(missing_ok=True)
            elif token in taken and seen_keys is not None:
                with suppress(OSError, pa.ArrowInvalid):  # unreadable: nothing in it can be found
                    table = _read(path)
                    unseen = pc.invert(pc.is_in(table.column("natural_key"), seen_keys))
                    orphans.append(table.filter(pc.and_(unseen, pc.is_valid(table.column("text")))))
        if orphans and (table := pa.concat_tables(orphans)).num_rows:
            _write(self.folder, f"{_ORPHAN}{secrets.token_hex(6)}-0", table)  # before the files go
        for path in files:
            if _token_of(path) in taken:
                path.unlink(missing_ok=True)
        for token, descriptor in taken.items():
            (self.folder / f"{token}{_LOCK}").unlink(missing_ok=True)
            if descriptor is not None:
                os.close(descriptor)
        self.close()
        with suppress(OSError):  # not empty: other runs' files
            self.folder.rmdir()

    def close(self) -> None:
        """Let go of this run's lock (its end, or its failure: then its files are a dead
        run's, for the next run's end to take over)."""
        if self._lock is not None:
            writelock.lock_released(self._lock)
            (self.folder / f"{self._token}{_LOCK}").unlink(missing_ok=True)
            os.close(self._lock)
            self._lock = None
        self._indexes.clear()

    def _take_lock(self) -> int:
        """A lock file for this run, held until it ends: a run's files whose lock nobody
        holds are a dead run's. The kernel lets go of it when the process dies."""
        try:
            self.folder.mkdir(exist_ok=True)
            descriptor = os.open(self.folder / f"{self._token}{_LOCK}",
                                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if out_of_space(exc):
                raise disk_full_error(self.folder) from exc
            raise StoreError(f"cannot keep expired texts in {self.folder}: {exc.strerror or exc}") from exc
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        writelock.lock_taken(descriptor)
        return descriptor

    def _refresh(self) -> bool:
        """Index the data files other runs wrote since the last look, forget those gone;
        whether any file is left to look in."""
        present = set(_data_files(self.folder))
        for path in set(self._indexes) - present:
            del self._indexes[path]
        for path in present - set(self._indexes):
            try:
                keys = _read(path).select(["natural_key", "digest"])
            except (OSError, pa.ArrowInvalid):
                continue
            self._indexes[path] = _Index.of(keys.column("natural_key").to_pylist(),
                                            keys.column("digest").to_pylist())
        return bool(self._indexes)

    def _dead_runs(self) -> dict[str, int | None]:
        """The tokens of the data files no living run holds, each with the descriptor of its
        lock file, now held here (None for a file no run held: an orphan, or a lock file
        gone). Their half-written files are deleted."""
        if not self.folder.is_dir():
            return {}
        _drop_partials(self.folder)
        dead: dict[str, int | None] = {}
        locks = {path.name.removesuffix(_LOCK) for path in self.folder.glob(f"*{_LOCK}")}
        for token in ({_token_of(path) for path in _data_files(self.folder)} | locks) - {self._token}:
            lock = self.folder / f"{token}{_LOCK}"
            try:
                descriptor = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                dead[token] = None
                continue
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a living run's
                os.close(descriptor)
                continue
            dead[token] = descriptor
        return dead


def erase_page(store_path: Path, natural_key: str) -> None:
    """Blank an erased page's rows in every file of expired texts (its key, text and chunks;
    the rows stay, so a living run's index still points at the others), under the store's
    writer lock: no file is being written, so a half-written one is a dead run's, deleted."""
    folder = folder_of(store_path)
    if not folder.is_dir():
        return
    _drop_partials(folder)
    for path in _data_files(folder):
        try:
            table = _read(path)
        except pa.ArrowInvalid:
            path.unlink()  # not a file of ours to read: it may hold anything
            continue
        erased = np.flatnonzero(pc.equal(table.column("natural_key"), natural_key)
                                .to_numpy(zero_copy_only=False))
        if not len(erased):
            continue
        # Each column taken anew, the erased rows from a blank value appended to it: a
        # selection that reused the column's buffers would keep the erased bytes in them.
        rows = np.arange(table.num_rows)
        rows[erased] = table.num_rows
        blank = [pc.take(pa.concat_arrays([column.combine_chunks(), pa.array([blank], column.type)]), rows)
                 for column, blank in zip(table.columns, ("", None, None, None, None))]
        _write(folder, path.name.removesuffix(_DATA), pa.table(blank, schema=_SCHEMA))


def drop_dead_runs(store_path: Path) -> None:
    """Delete every text the runs that died kept (`cdc prune`: every page is trimmed), under
    the store's writer lock."""
    ExpiredTexts(store_path).finish(None)
