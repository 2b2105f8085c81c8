"""Trends: one URL's similarity and bytes changed over its generations; per host, how much
changed over time."""

import streamlit as st

import ui
from cdc.figures import host_change_distribution, trend_figure

store = ui.current_store()
st.title("Trends")

url = ui.url_picker(store)
history = store.generations(url)
st.subheader(f"{ui.short_url(url)}: {len(history)} generations")
st.plotly_chart(trend_figure(history), key="trend")
st.page_link("views/compare.py", label="Compare its latest two generations",
             query_params={"url": url}, icon=":material/compare:")

host = ui.host_of_key(url)
st.subheader(f"Change on {host} over time")
rows = [(host, when, share) for when, share, _ in store.host_changes(host) if share is not None]
if rows:
    st.plotly_chart(host_change_distribution(rows, period="week"), key="host-distribution")
else:
    st.write("No changes recorded on this host yet.")
