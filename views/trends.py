"""Trends: one URL's similarity and bytes changed over its generations; per host, how much
changed in each hour, day, week or month (the bin that fits the span of its changes)."""

import streamlit as st

import ui
from cdc.figures import host_change_distribution, trend_figure
from cdc.timebins import choose_bin

store = ui.current_store()
st.title("Trends")

url = ui.url_picker(store)
history = store.generations(url)
st.subheader(f"{ui.short_url(url)}: {len(history)} generations")
st.plotly_chart(trend_figure(history), key="trend")
st.page_link("views/compare.py", label="Compare its latest two generations",
             query_params={"url": url}, icon=":material/compare:")

host = ui.host_of_key(url)
rows = [(host, when, share) for when, share, _ in store.host_changes(host) if share is not None]
period = choose_bin(when for _, when, _ in rows)  # from the span of the host's changes
st.subheader(f"Change on {host}, per {period}")
if rows:
    st.plotly_chart(host_change_distribution(rows, period=period), key="host-distribution")
else:
    st.write("No changes recorded on this host yet.")
