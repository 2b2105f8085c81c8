"""Trends: one URL's similarity and bytes changed over its generations; per host, how much
changed in each hour, day, week or month (the bin that fits the span of its changes)."""

import streamlit as st

import ui
from cdc.core.urls import host_of_key
from cdc.present.figures import trend_figure

store = ui.current_store()
st.title("Trends")

url = ui.url_picker(store)
history = store.generations(url)
st.subheader(f"{ui.short_url(url)}: {len(history)} generations")
st.plotly_chart(trend_figure(history), key="trend")
st.page_link("views/compare.py", label="Compare its latest two generations",
             query_params={"url": url}, icon=":material/compare:")

host = host_of_key(url)
period, distribution = ui.cached_host_distribution(store, host)
st.subheader(f"Change on {host}, per {period}")
if distribution is not None:
    st.plotly_chart(distribution, key="host-distribution")
else:
    st.write("No changes recorded on this host yet.")
