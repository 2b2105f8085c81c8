"""A batch's rows as the Arrow tables `Store.write` appends, built column by column from the
rows' definitions (`cdc.store.rows`)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from cdc.ingest.versions import PageOutcome
from cdc.runtime.collector import collector_paused
from cdc.store import WriteBatch
from cdc.store.rows import (
    ChangesRow,
    CheckedRow,
    ChunkListsRow,
    FetchesRow,
    GenerationsRow,
    PageRunsRow,
    PagesRow,
    RemovedRow,
    arrow_table,
)
from cdc.store.wordindex import WordTables, word_tables


@collector_paused
def outcome_tables(outcomes: Iterable[PageOutcome]) -> WriteBatch:
    """The rows of built pages as the Arrow tables `Store.write` appends."""
    columns = _Columns()
    for outcome in outcomes:
        columns.add(outcome)
    return columns.tables()


class _Columns:
    """Rows of one batch, gathered as columns for Arrow."""

    def __init__(self) -> None:
        self.generations: list[GenerationsRow] = []
        self.chunks: list[ChunkListsRow] = []
        self.changes: list[ChangesRow] = []
        self.pages: list[PagesRow] = []
        self.checked: list[CheckedRow] = []
        self.fetches: list[FetchesRow] = []
        self.seen: list[PageRunsRow] = []
        self.removed_generations: list[RemovedRow] = []
        self.removed_changes: list[RemovedRow] = []
        self.words: list[WordTables] = []  # `change_words` rows and their index, as `build_pages` built them

    def add(self, outcome: PageOutcome) -> None:
        self.generations += outcome.generations
        self.chunks += outcome.chunks
        self.changes += outcome.changes
        if outcome.word_tables is not None:
            self.words.append(outcome.word_tables)
        self.fetches += outcome.fetches
        key = outcome.natural_key
        if outcome.seen is not None:
            self.seen.append(outcome.seen)
        self.removed_generations += [RemovedRow(key, number) for number in outcome.removed_generations]
        self.removed_changes += [RemovedRow(key, number) for number in outcome.removed_changes]
        if outcome.page is not None:
            self.pages.append(outcome.page)
        elif outcome.last_checked is not None:
            self.checked.append(CheckedRow(key, outcome.last_checked))

    def tables(self) -> WriteBatch:
        words = (WordTables(*map(pa.concat_tables, zip(*self.words))) if self.words
                 else word_tables([]))
        return WriteBatch(pages=arrow_table(PagesRow, self.pages),
                          generations=arrow_table(GenerationsRow, self.generations),
                          chunks=arrow_table(ChunkListsRow, self.chunks),
                          changes=arrow_table(ChangesRow, self.changes),
                          checked=arrow_table(CheckedRow, self.checked),
                          fetches=arrow_table(FetchesRow, self.fetches),
                          seen=arrow_table(PageRunsRow, self.seen),
                          removed_generations=arrow_table(RemovedRow, self.removed_generations),
                          removed_changes=arrow_table(RemovedRow, self.removed_changes),
                          words=words.words, tokens=words.tokens)
