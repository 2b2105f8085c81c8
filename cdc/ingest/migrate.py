"""Re-chunk a store made by an earlier cdc under this cdc's `SPEC`: `cdc migrate`.

A store records the chunker spec its digests were made under, and digests of two specs
never compare, so a newer cdc refuses an older store. Migrating re-chunks the text of every
retained generation with this cdc's chunker, replaces those chunk rows, and recomputes the
change row of each generation whose previous generation is retained too (exact edits from
the two texts) and the words it added and removed (`cdc.core.editwords`), and counts the hosts'
templates and the template-only flags again from the new digests, all in one transaction
with the new spec: killed midway, the store is as it was. What is not retained cannot be
re-chunked: those generations had no chunk rows, and their change rows stay as they were
measured then.

The texts are kept as stored. A text made by an older normalisation keeps its line breaks
where that normalisation put them (norm-v1: one line per title, description and section),
so its blocks are coarser than a new ingest's, and the first crawl after migrating reads as
a change of line breaks on pages whose sections hold several paragraphs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cdc.core.chunking import chunk_many
from cdc.core.compare import compare
from cdc.core.editwords import edit_words
from cdc.core.gear import DEFAULT_PARAMS, ChunkParams
from cdc.core.spec import spec_for
from cdc.ingest.versions import change_row
from cdc.store import Store
from cdc.store.rows import EDITS, ChangesRow, ChangeWordsRow, ChunkListsRow, arrow_table

PAGES_PER_STEP = 1_000  # pages read, re-chunked and written at a time (bounds memory)


@dataclass
class MigrationSummary:
    old_spec: str | None
    new_spec: str
    pages: int = 0
    generations: int = 0  # retained generations re-chunked
    changes: int = 0  # change rows recomputed from two retained texts

    @property
    def needed(self) -> bool:
        return self.old_spec != self.new_spec


def migrate(path: str | Path, params: ChunkParams = DEFAULT_PARAMS,
            progress: Callable[[MigrationSummary, int], None] | None = None) -> MigrationSummary:
    """Re-chunk the store at `path` under `spec_for(params)`; a store already there is left alone.
    `progress(summary, total_pages)` is called after each step."""
    old_spec = Store(path).stored_spec()
    summary = MigrationSummary(old_spec, spec_for(params))
    if not summary.needed:
        return summary
    store = Store(path, spec=old_spec)  # opened as what it is, until the last statement
    with store.writing() as connection:
        keys = store.retained_keys(connection)
        for start in range(0, len(keys), PAGES_PER_STEP):
            part = keys[start:start + PAGES_PER_STEP]
            rows = store.retained_texts(connection, part)
            chunk_lists = chunk_many([row.text for row in rows], params)
            chunks, changes, words = [], [], []
            previous = previous_chunks = None
            for row, found in zip(rows, chunk_lists):
                key, generation, text = row.natural_key, row.generation, row.text
                chunks.append(ChunkListsRow(key, generation, b"".join([c.digest for c in found]),
                                            [c.length for c in found]))
                if previous and previous.natural_key == key and previous.generation == row.previous:
                    report = compare(previous_chunks, found, old_text=previous.text, new_text=text)
                    changes.append(change_row(key, generation, row.previous, row.fetched_at, report,
                                              previous.text, text, EDITS))
                    said = edit_words(key, generation, 0, report.edits, previous.text, text)
                    words += [said] if said is not None else []
                previous, previous_chunks = row, found
            store.replace_chunks(connection, part, arrow_table(ChunkListsRow, chunks),
                                 arrow_table(ChangesRow, changes))
            store.replace_words(connection, arrow_table(ChangeWordsRow, words))
            summary.pages += len(part)
            summary.generations += len(rows)
            summary.changes += len(changes)
            if progress:
                progress(summary, len(keys))
        store.refresh_templates(connection)  # the templates are digests: new ones
        store.set_meta(connection, "spec", summary.new_spec)
    return summary
