"""Annotations: an analyst's judgement of a change, stored in rows of their own.

A change is a page's generation against the one before it; an annotation marks it
`significant`, `noise` or `unsure`, with an optional note, who said so and when. Its row is
keyed by (natural_key, generation) and holds no page text, so retention leaves it alone (a
change's row may lose its text; its annotation stays), and `erase` removes it with the page.

Generation numbers are capture times (`cdc.core.captures.capture_id`) and never come to name
another version: a fetch of the same content found later, earlier in time, moves the
generation's start, and a number held before still falls inside it. An annotation is stored
at the generation's start (a number given is resolved first, as `Store.version` resolves
one), and the ingest batch that moves a start moves its annotations along
(`_follow_moved_generations`), so a read joins annotations to change rows exactly, by key and
number: a join of the few annotations, never a search of `generations`. Nothing else that
ingest, a backfill or `cdc migrate` writes touches this table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields
from datetime import datetime

import duckdb
import pyarrow as pa

from cdc.core.captures import current_generation
from cdc.errors import AnnotationError
from cdc.store.lookups import _by_keys, _for_keys, _one, _registered

SIGNIFICANT, NOISE, UNSURE = "significant", "noise", "unsure"
LABELS = (SIGNIFICANT, NOISE, UNSURE)


def checked_label(label: str) -> str:
    """A label as stored (lower case), or an `AnnotationError` naming the labels."""
    value = (label or "").strip().lower()
    if value not in LABELS:
        raise AnnotationError(f"unknown label {label!r}: a change is one of {', '.join(LABELS)}")
    return value


@dataclass(frozen=True)
class Annotation:
    """One stored annotation: the table's row, its columns in this order."""

    natural_key: str
    generation: int  # the annotated generation (a capture time): the change from the one before
    label: str  # one of LABELS
    note: str | None
    annotated_by: str
    annotated_at: datetime  # UTC


# Each column's SQL type and Arrow type, in the row's order: the table and the Arrow schema
# of its bulk writes are both made from this one list.
_COLUMN_TYPES = {
    "natural_key": ("VARCHAR NOT NULL", pa.string()),
    "generation": ("BIGINT NOT NULL", pa.int64()),
    "label": ("VARCHAR NOT NULL", pa.string()),
    "note": ("VARCHAR", pa.string()),
    "annotated_by": ("VARCHAR NOT NULL", pa.string()),
    "annotated_at": ("TIMESTAMP NOT NULL", pa.timestamp("us")),
}
ANNOTATION_COLUMNS = tuple(field.name for field in fields(Annotation))
if tuple(_COLUMN_TYPES) != ANNOTATION_COLUMNS:  # a field added to one and not the other
    raise ImportError(f"annotation columns {tuple(_COLUMN_TYPES)} differ from the row's {ANNOTATION_COLUMNS}")
_ARROW_SCHEMA = pa.schema([(name, arrow) for name, (_, arrow) in _COLUMN_TYPES.items()])
ANNOTATIONS_TABLE = "CREATE TABLE IF NOT EXISTS annotations (\n        " + ",\n        ".join(
    f"{name} {sql}" for name, (sql, _) in _COLUMN_TYPES.items()) + "\n    )"


def annotations_of(where: str = "") -> str:
    """A subquery of the annotations, one per change (the latest, should a change ever hold
    two), with the annotation columns; `where` narrows `annotations a` (its values bound by
    the caller)."""
    return f"""(
        SELECT natural_key, generation, label, note, annotated_by, annotated_at FROM annotations a {where}
        QUALIFY row_number() OVER (PARTITION BY natural_key, generation ORDER BY annotated_at DESC) = 1)"""


def annotated_as(changes: str) -> str:
    """The condition that a change of the table aliased `changes` (its natural_key and
    generation) is annotated with one of a list of labels, bound as its one parameter: the
    label filter of `cdc export`, the Site view and `cdc search`."""
    return f"""EXISTS (SELECT 1 FROM {annotations_of()} a
                       WHERE a.natural_key = {changes}.natural_key AND a.generation = {changes}.generation
                         AND list_contains(?, a.label))"""


@dataclass(frozen=True)
class AnnotatedChange:
    """An annotation with the change it judges, as `cdc annotations` lists it."""

    natural_key: str
    host: str
    generation: int
    previous_generation: int | None
    verdict: str | None
    label: str
    note: str | None
    annotated_by: str
    annotated_at: datetime


@dataclass(frozen=True)
class MergeResult:
    """What `put_annotations` did with its rows: `added` new, `replaced` the annotation the
    change had, `kept` the rows left out because a newer annotation of their change stands
    (the store's, or a later row's), and the indexes of the rows naming a page or a
    generation the store does not hold (`missing`)."""

    added: int = 0
    replaced: int = 0
    kept: int = 0
    missing: tuple[int, ...] = ()


class Annotations:
    """The annotations, mixed into `Store`."""

    def _follow_moved_generations(self, connection: duckdb.DuckDBPyConnection) -> None:
        """In an ingest batch's transaction, once its rows are written (`removed_generations`
        registered): the annotations of generations whose start moved earlier go to the
        generation their number falls in now. Only the batch's removed generations are
        joined; the annotated ones among them (rare: a backfill of an annotated page) are
        looked up by key."""
        moved = connection.execute("""
            SELECT DISTINCT a.natural_key FROM annotations a
            JOIN removed_generations r USING (natural_key, generation)""").fetchall()
        if not moved:
            return
        _for_keys(connection, """
            UPDATE annotations SET generation = found.generation FROM (
                SELECT a.natural_key, a.generation AS given, max(g.generation) AS generation
                FROM annotations a JOIN removed_generations r USING (natural_key, generation)
                JOIN (SELECT natural_key, generation FROM generations WHERE natural_key IN ({keys})) g
                  ON g.natural_key = a.natural_key AND g.generation <= a.generation
                GROUP BY a.natural_key, a.generation) found
            WHERE annotations.natural_key = found.natural_key AND annotations.generation = found.given""",
                  [key for (key,) in moved], "generations")

    def put_annotations(self, rows: Sequence[Annotation], *, newer_only: bool = False) -> MergeResult:
        """Store annotations in one transaction, each at the generation its number falls in,
        in place of that change's annotation: always (the last row of a change wins), or with
        `newer_only` (an import) only where it is newer than the store's. A row whose page or
        generation the store does not hold is left out and named in `missing`; the others
        are kept."""
        if not rows:
            return MergeResult()
        with self.writing() as connection:
            keys = sorted({row.natural_key for row in rows})
            numbers: dict[str, list[int]] = {}
            for key, generation in _by_keys(connection, """
                    SELECT natural_key, generation FROM generations WHERE natural_key IN ({keys})""", keys):
                numbers.setdefault(key, []).append(generation)
            # The store's annotations of these pages by change: their raw numbers, the latest time.
            stored: dict[tuple[str, int], list[tuple[int, datetime]]] = {}
            for key, given, at in _by_keys(connection, """
                    SELECT natural_key, generation, annotated_at FROM annotations
                    WHERE natural_key IN ({keys})""", keys):
                current = current_generation(numbers.get(key, []), given)
                stored.setdefault((key, given if current is None else current), []).append((given, at))
            chosen: dict[tuple[str, int], Annotation] = {}
            missing = []
            for index, row in enumerate(rows):
                current = current_generation(numbers.get(row.natural_key, []), row.generation)
                if current is None:
                    missing.append(index)
                    continue
                place = (row.natural_key, current)
                rivals = [at for _, at in stored.get(place, [])]
                if place in chosen:
                    rivals.append(chosen[place].annotated_at)
                if newer_only and rivals and max(rivals) >= row.annotated_at:
                    continue
                chosen[place] = Annotation(row.natural_key, current, row.label, row.note, row.annotated_by,
                                           row.annotated_at)
            replaced = [place for place in chosen if place in stored]
            removed = [(place[0], given) for place in replaced for given, _ in stored[place]]
            with _registered(connection, "replaced_annotations", pa.table({
                    "natural_key": pa.array([key for key, _ in removed], pa.string()),
                    "generation": pa.array([given for _, given in removed], pa.int64())})):
                connection.execute("""
                    DELETE FROM annotations USING replaced_annotations r
                    WHERE annotations.natural_key = r.natural_key
                      AND annotations.generation = r.generation""")
            added = pa.Table.from_pylist(
                [dict(zip(ANNOTATION_COLUMNS, astuple(row))) for row in chosen.values()],
                schema=_ARROW_SCHEMA)
            with _registered(connection, "added_annotations", added):
                connection.execute("INSERT INTO annotations SELECT * FROM added_annotations")
        kept = len(rows) - len(missing) - len(chosen)  # a newer annotation of their change stands
        return MergeResult(len(chosen) - len(replaced), len(replaced), kept, tuple(missing))

    def annotation(self, natural_key: str, generation: int) -> Annotation | None:
        """The annotation of one change (the generation a number falls in), or None."""
        with self.reading() as connection:
            current = _one(connection.execute(
                "SELECT max(generation) FROM generations WHERE natural_key = ? AND generation <= ?",
                [natural_key, generation]))[0]
            if current is None:
                return None
            row = _one(connection.execute(f"""
                SELECT {", ".join(ANNOTATION_COLUMNS)} FROM {annotations_of("WHERE a.natural_key = ?")}
                WHERE generation = ?""", [natural_key, current]))
        return Annotation(*row) if row else None

    def annotations(self, labels: Sequence[str] = (),
                    natural_key: str | None = None) -> list[AnnotatedChange]:
        """Every annotation (of `labels`, of one page), with its change's previous generation
        and verdict, in page and generation order."""
        where, values = ("WHERE a.natural_key = ?", [natural_key]) if natural_key is not None else ("", [])
        label_filter = "WHERE list_contains(?, a.label)" if labels else ""
        with self.reading() as connection:
            rows = connection.execute(f"""
                SELECT a.natural_key, p.host, a.generation, c.previous_generation, c.verdict,
                       a.label, a.note, a.annotated_by, a.annotated_at
                FROM {annotations_of(where)} a
                JOIN pages p USING (natural_key)
                LEFT JOIN changes c ON c.natural_key = a.natural_key AND c.generation = a.generation
                {label_filter}
                ORDER BY a.natural_key, a.generation""",
                [*values, *([list(labels)] * bool(labels))]).fetchall()
        return [AnnotatedChange(*row) for row in rows]
