"""A search of the changes' words, validated once: what `cdc search`, the Search page and a
watch ask (`cdc.analyst.search`), and how a watch's is saved (`to_json`), so that a run's end
reads its watches back (`cdc.store.search`) without reaching up to the analyst's modules."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from datetime import datetime

from cdc.core.editwords import MAX_SEARCH_CHARS, search_words
from cdc.errors import SearchError
from cdc.store.annotations import checked_label
from cdc.store.wordindex import WordsFilter


@dataclass(frozen=True)
class SearchQuery:
    """A search of the changes' words: a phrase per side (`added`, `removed`; both given, a
    change must have done both) or on either side (`text`), and the change rows' filters.
    Refused here when it has no phrase, or one that is empty or too long."""

    added: str | None = None
    removed: str | None = None
    text: str | None = None
    host: str | None = None
    run: int | None = None
    since: datetime | None = None
    until: datetime | None = None
    verdicts: tuple[str, ...] = ()
    include_template: bool = False
    labels: tuple[str, ...] = ()  # changes an analyst annotated so only (`cdc annotate`)

    def __post_init__(self) -> None:
        given = {name: value for name, value in (("added", self.added), ("removed", self.removed),
                                                 ("text", self.text)) if value is not None}
        if not given:
            raise SearchError("say what to search for: --added TEXT, --removed TEXT or --text TEXT")
        if self.text is not None and len(given) > 1:
            raise SearchError("--text searches both sides: give it alone, or --added and --removed")
        for name, value in given.items():
            if len(value) > MAX_SEARCH_CHARS:
                raise SearchError(f"the --{name} text is {len(value):,} characters; at most "
                                  f"{MAX_SEARCH_CHARS} are searched")
            if not search_words(value):
                raise SearchError(f"the --{name} text is empty: give a word or a phrase to search for")
        object.__setattr__(self, "verdicts", tuple(self.verdicts))
        object.__setattr__(self, "labels", tuple(checked_label(label) for label in self.labels))

    def words_filter(self) -> WordsFilter:
        return WordsFilter(
            added=search_words(self.added) if self.added is not None else None,
            removed=search_words(self.removed) if self.removed is not None else None,
            either=search_words(self.text) if self.text is not None else None,
            host=self.host, run=self.run, since=self.since, until=self.until, verdicts=self.verdicts,
            include_template=self.include_template, labels=self.labels)

    def describe(self) -> str:
        """The query as `cdc search` options, for lists (`cdc watch list`)."""
        parts = [f"--{name} {json.dumps(value, ensure_ascii=False)}" for name, value in
                 (("added", self.added), ("removed", self.removed), ("text", self.text)) if value is not None]
        parts += [f"--host {self.host}"] if self.host else []
        parts += [f"--since {self.since:%Y-%m-%dT%H:%M:%S}"] if self.since else []
        parts += [f"--until {self.until:%Y-%m-%dT%H:%M:%S}"] if self.until else []
        parts += [f"--verdict {verdict}" for verdict in self.verdicts]
        parts += ["--include-template"] if self.include_template else []
        parts += [f"--label {label}" for label in self.labels]
        return " ".join(parts)

    def to_json(self) -> str:
        data = {name: value for name, value in asdict(self).items() if value not in (None, (), [], False)}
        for moment in ("since", "until"):
            if moment in data:
                data[moment] = data[moment].isoformat()
        return json.dumps(data, sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> SearchQuery:
        data = json.loads(text)
        for moment in ("since", "until"):
            if moment in data:
                data[moment] = datetime.fromisoformat(data[moment])
        data["verdicts"] = tuple(data.get("verdicts", ()))
        data["labels"] = tuple(data.get("labels", ()))
        known = {field.name for field in fields(cls)}
        return cls(**{name: value for name, value in data.items() if name in known})
