"""Export: change summaries as CSV, with the same filters and the same function as
`cdc export`, annotations and the label filter included. Notes are shown in table cells
only, which Streamlit renders as text."""

import datetime as dt

import streamlit as st

import ui
from cdc.core.verdicts import STORED_VERDICTS, verdict_label
from cdc.present.export import changes_csv
from cdc.store import LABELS

PREVIEW_ROWS = 200

store = ui.current_store()
st.title("Export change summaries")

hosts = ["(all hosts)"] + [row.host for row in store.hosts()]
left, right = st.columns(2)
host = left.selectbox("Host", hosts, key="export-host")
verdicts = right.multiselect("Verdicts", STORED_VERDICTS, key="export-verdicts", format_func=verdict_label,
                             help="None selected: every verdict")
left, right = st.columns(2)
since = left.date_input("Fetched on or after", value=None, key="export-since")
until = right.date_input("Fetched before", value=None, key="export-until")
left, right = st.columns(2)
min_change = left.slider("At least this share changed", 0.0, 1.0, 0.0, 0.05, key="export-min-change")
labels = right.multiselect("Annotated as", LABELS, key="export-labels", placeholder="any change",
                           help="Only the changes an analyst marked so (in Compare, or `cdc annotate`)")


def _start(day: dt.date | None) -> dt.datetime | None:
    return dt.datetime.combine(day, dt.time()) if day else None


filters = {"host": None if host == hosts[0] else host, "since": _start(since), "until": _start(until),
           "verdicts": verdicts, "min_change": min_change, "labels": labels}
st.caption(f"{store.count_changes(**filters):,} changes match")
# The CSV is made when the button is pressed (a store may hold millions of changes), from
# the store itself: too large an answer to cache.
st.download_button("Download CSV", lambda: changes_csv(store.uncached.changes(**filters)),
                   file_name="cdc-changes.csv", mime="text/csv", key="export-download",
                   icon=":material/download:")
preview = store.changes(**filters, limit=PREVIEW_ROWS)
st.caption(f"The newest {len(preview):,}:" if preview else "")
st.dataframe([{"url": r.natural_key, "generation": r.generation, "fetched": r.fetched_at,
               "verdict": r.verdict, "+bytes": r.bytes_added, "-bytes": r.bytes_removed,
               "what changed": r.excerpt, "label": r.label, "note": r.note, "by": r.annotated_by}
              for r in preview], hide_index=True)
