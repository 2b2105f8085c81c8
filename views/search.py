"""Search: changes by the words they added or removed, as `cdc search` finds them (the same
`cdc.analyst.search.search`), each hit a link to Compare at that change, the hits as CSV.

The search is in the query string (`?q=&side=&host=&template=&label=&page=`), so a link
reopens it. Page text is shown in table cells only, which Streamlit renders as text.
"""

import math

import streamlit as st

import ui
from cdc.analyst.search import SearchQuery, hits_csv, search
from cdc.core.verdicts import STORED_VERDICTS, verdict_label
from cdc.errors import CdcError
from cdc.store import LABELS

PAGE_SIZE = 50
EITHER, ADDED, REMOVED = "either", "added", "removed"
SIDE_LABELS = {EITHER: "added or removed", ADDED: "added", REMOVED: "removed"}

store = ui.current_store()
st.title("Search the changes")
st.caption("Words a change added or removed, in its exact edits: a phrase of whole words, any case; "
           "in Chinese, Japanese or Thai, characters.")


def to_query(key: str, name: str) -> dict:
    """A widget's on_change: its value to the query string; a new search starts at page 1."""
    return ui.kept_in_query(key, name, "page")


ui.query_to_state("search-q", "q", lambda value: True, default="")
phrase = st.text_input("Words", key="search-q", placeholder="climate, 价格, 2,980円 …",
                       **to_query("search-q", "q"))
left, middle, right = st.columns(3)
ui.query_to_state("search-side", "side", SIDE_LABELS.__contains__, default=EITHER)
side = left.radio("The change", list(SIDE_LABELS), key="search-side", format_func=SIDE_LABELS.get,
                  horizontal=True, **to_query("search-side", "side"))
hosts = [""] + [row.host for row in store.hosts()]
ui.query_to_state("search-host", "host", hosts.__contains__, default="")
host = middle.selectbox("Host", hosts, key="search-host", format_func=lambda value: value or "all hosts",
                        **to_query("search-host", "host"))
verdicts = right.multiselect("Verdicts", STORED_VERDICTS, key="search-verdicts", format_func=verdict_label,
                             help="None selected: every verdict")
left, right = st.columns([1, 2])
ui.query_to_state("search-template", "template", lambda value: True, "True".__eq__, default=False)
include_template = left.toggle("Template-only changes too", key="search-template",
                               help="A change whose every changed block is the host's template is left out "
                                    "by default: a site-wide banner would be a hit on every page.",
                               **to_query("search-template", "template"))
ui.labels_to_state("search-labels")
labels = right.multiselect("Annotated as", LABELS, key="search-labels",
                           placeholder="any change, judged or not",
                           **ui.kept_in_query("search-labels", "label", "page", spell=",".join),
                           help="Only the changes an analyst marked so (Compare's *Judge this change*)")

if not phrase.strip():
    st.info("Type words to search for.", icon=":material/search:")
    st.stop()
try:
    query = SearchQuery(added=phrase if side == ADDED else None, removed=phrase if side == REMOVED else None,
                        text=phrase if side == EITHER else None, host=host or None, verdicts=tuple(verdicts),
                        include_template=include_template, labels=tuple(labels))
except CdcError as exc:
    st.warning(str(exc), icon=":material/warning:")
    st.stop()

ui.query_to_state("search-page", "page", lambda value: value >= 1, int, default=1)
try:
    result = search(store, query, limit=PAGE_SIZE, offset=(st.session_state["search-page"] - 1) * PAGE_SIZE)
except CdcError as exc:
    ui.fail(str(exc))
pages = max(1, math.ceil(result.total / PAGE_SIZE))
if st.session_state["search-page"] > pages:  # a link made when there were more
    st.session_state["search-page"] = pages
    result = search(store, query, limit=PAGE_SIZE, offset=(pages - 1) * PAGE_SIZE)

if not result.total:
    st.info("No change " + {EITHER: "added or removed", ADDED: "added", REMOVED: "removed"}[side]
            + " these words" + ("" if include_template else " (template-only changes left out)") + ".",
            icon=":material/search_off:")
    st.stop()

left, middle, right = st.columns([1, 3, 1])
page = left.number_input("Page", 1, pages, key="search-page", **ui.kept_in_query("search-page", "page"))
ui.put_in_query("page", page)
offset = (page - 1) * PAGE_SIZE
middle.caption(f"{offset + 1:,}-{offset + len(result.hits):,} of {result.total:,} hits, newest change first. "
               "*Compare* opens the change: its two generations side by side, at the first edit.")
# Made when the button is pressed, from every hit of the search: too large an answer to cache.
right.download_button("Download CSV", lambda: hits_csv(search(store.uncached, query, limit=None).hits),
                      file_name="cdc-search.csv", mime="text/csv", key="search-download",
                      icon=":material/download:")
st.dataframe([{
    "page": hit.url,
    "open": ui.compare_link(hit.natural_key, hit.previous_generation, hit.generation),
    "side": hit.side,
    "words": hit.excerpt,
    "generation": hit.generation,
    "fetched": hit.fetched_at,
    "verdict": hit.verdict,
    "template only": hit.template_only,
} for hit in result.hits],
    column_config={"open": st.column_config.LinkColumn("open", display_text="Compare")},
    hide_index=True, key="search-hits")
