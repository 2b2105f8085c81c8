"""Export: change summaries as CSV, with the same filters and the same function as
`cdc export`."""

import datetime as dt

import streamlit as st

import ui
from cdc.compare import VERDICTS
from cdc.export import changes_csv
from cdc.ingest import NEW

store = ui.open_store()
st.title("Export change summaries")

hosts = ["(all hosts)"] + [host for host, _ in store.hosts()]
left, right = st.columns(2)
host = left.selectbox("Host", hosts, key="export-host")
verdicts = right.multiselect("Verdicts", [*VERDICTS[1:], NEW], key="export-verdicts",
                             help="None selected: every verdict")
left, right = st.columns(2)
since = left.date_input("Fetched on or after", value=None, key="export-since")
until = right.date_input("Fetched before", value=None, key="export-until")
min_change = st.slider("At least this share changed", 0.0, 1.0, 0.0, 0.05, key="export-min-change")


def _start(day: dt.date | None) -> dt.datetime | None:
    return dt.datetime.combine(day, dt.time()) if day else None


rows = store.changes(host=None if host == hosts[0] else host, since=_start(since), until=_start(until),
                     verdicts=verdicts, min_change=min_change)
st.caption(f"{len(rows):,} changes match")
st.download_button("Download CSV", changes_csv(rows), file_name="cdc-changes.csv", mime="text/csv",
                   key="export-download", icon=":material/download:")
st.dataframe([{"url": r.natural_key, "generation": r.generation, "fetched": r.fetched_at,
               "verdict": r.verdict, "+bytes": r.bytes_added, "-bytes": r.bytes_removed,
               "what changed": r.excerpt} for r in rows[:500]], hide_index=True)
