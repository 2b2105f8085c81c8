"""The verdicts: every word a change row's `verdict` can hold, their order and their labels.

One module, so that the library, the command line's choices, the dashboard's views and the
exports name the same verdicts and offer every one the store writes:

- `compare` gives one of `VERDICTS`: `unchanged`, `minor`, `rewrite`, `different_page`
  (`cdc.core.compare.Thresholds` routes the share kept to them).
- Ingest also writes `new` (`NEW`) for a page's first generation, which has nothing to be
  compared with, and `changed` (`UNMEASURED`) for a change whose previous text was no longer
  retained: the content differs, how much is not known (`cdc.ingest.versions`).
- `template_only` (`TEMPLATE_ONLY`) is never stored as a verdict: it is what a list shows in
  place of a change's verdict when its stored flag says every changed chunk is the host's
  template (`shown_verdict_of`). It is a label, not a filter on the stored verdict.
"""

from __future__ import annotations

NEW = "new"  # a page's first generation: no change to measure
UNCHANGED = "unchanged"  # the same words (the digests differ by how an older cdc normalised)
MINOR = "minor"
REWRITE = "rewrite"
DIFFERENT_PAGE = "different_page"
UNMEASURED = "changed"  # a change whose previous text was not retained: not measured
TEMPLATE_ONLY = "template_only"  # shown for a template-only change, never stored

VERDICTS = (UNCHANGED, MINOR, REWRITE, DIFFERENT_PAGE)  # what `compare` gives, smallest change first
STORED_VERDICTS = (NEW, *VERDICTS, UNMEASURED)  # every verdict the store writes: what a filter offers
CHANGE_VERDICTS = (MINOR, REWRITE, DIFFERENT_PAGE, UNMEASURED)  # of a change of a page's content
SHOWN_ORDER = (*STORED_VERDICTS, TEMPLATE_ONLY)  # the order lists, counts and figures show them in

VERDICT_LABELS = {
    NEW: "New page",
    UNCHANGED: "Unchanged",
    MINOR: "Minor",
    REWRITE: "Rewrite",
    DIFFERENT_PAGE: "Different page",
    UNMEASURED: "Changed, not measured",
    TEMPLATE_ONLY: "Template only",
}


def verdict_label(verdict: str) -> str:
    """A verdict as a heading or a table cell writes it (`Different page`); an unknown word as is."""
    return VERDICT_LABELS.get(verdict, verdict)


def verdict_words(verdict: str) -> str:
    """A verdict as a sentence or a picker writes it: its words (`different page`)."""
    return verdict.replace("_", " ")


def verdict_order(verdict: str) -> tuple[int, str]:
    """A sort key putting verdicts in `SHOWN_ORDER`, any other word after them by name."""
    return (SHOWN_ORDER.index(verdict) if verdict in SHOWN_ORDER else len(SHOWN_ORDER), verdict)


def shown_verdict_of(verdict: str | None, template_only: bool | None) -> str | None:
    """What a list shows of a change: `TEMPLATE_ONLY` for a template-only one, else its verdict.

    The verdict measures the whole text, template included: a short page whose only change
    is the host's new banner reads `rewrite` (the banner is half of it), though none of the
    page's own text changed. Lists label such a change by what it is and rank it after every
    change of a page's own; the stored verdict and measures stay as measured."""
    return TEMPLATE_ONLY if template_only else verdict


def kept_share(unchanged_ratio: float | None, retained_ratio: float | None) -> float | None:
    """The share of a page's content a change kept, as its verdict reads it (`compare` routes
    this share to a verdict): the smaller of the new text left unchanged and the old text
    retained (an insertion keeps all of the old text, a deletion all of the new: the smaller
    tells either). None where neither was measured (a page's first generation, a change
    whose previous text was gone). In SQL: `cdc.store.rows.changed_share_sql`."""
    measured = [ratio for ratio in (unchanged_ratio, retained_ratio) if ratio is not None]
    return min(measured) if measured else None


def changed_share(unchanged_ratio: float | None, retained_ratio: float | None) -> float | None:
    """1 - `kept_share`: what "largest change first" orders by; None where not measured."""
    kept = kept_share(unchanged_ratio, retained_ratio)
    return None if kept is None else 1 - kept

