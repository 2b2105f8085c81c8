"""Boilerplate: chunks on many of a host's pages, chunks shared across hosts, and where a
chunk occurs."""

import streamlit as st

import ui
from cdc.store import BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE

store = ui.current_store()
st.title("Boilerplate")

hosts = [row.host for row in store.hosts()]
if not hosts:
    ui.fail("The store has no pages yet: `cdc ingest FILE` adds some.")
left, middle, right = st.columns([2, 1, 1])
ui.query_to_state("bp-host", "bp-host", hosts.__contains__)
host = left.selectbox("Host", hosts, key="bp-host")
ui.put_in_query("bp-host", host)
share = middle.slider("On more than this share of its pages", 0.01, 0.9, BOILERPLATE_SHARE, 0.01)
min_pages = right.number_input("And at least this many pages", 2, 1000, BOILERPLATE_MIN_PAGES)

chunks = ui.cached_host_boilerplate(store, host, share, int(min_pages))
st.subheader(f"{host}: {len(chunks)} boilerplate chunks")
st.dataframe([{"digest": c.hex[:16], "pages": c.pages, "share": c.share, "sample text": c.sample}
              for c in chunks],
             column_config={"share": st.column_config.ProgressColumn(
                 "share", min_value=0.0, max_value=1.0, format="percent")},
             hide_index=True)

shared = ui.cached_shared_across_hosts(store)
st.subheader(f"Across hosts: {len(shared)} chunks on two or more hosts")
st.dataframe([{"digest": c.hex[:16], "hosts": ", ".join(c.hosts), "pages": c.pages, "sample text": c.sample}
              for c in shared], hide_index=True)

choices = {c.hex[:16]: c.digest for c in chunks} | {c.hex[:16]: c.digest for c in shared}
if choices:
    st.subheader("Where a chunk occurs")
    picked = st.selectbox("Chunk", list(choices), key="bp-digest")
    holders = store.pages_with_digest(choices[picked])
    st.caption(f"{len(holders)} retained generations hold it")
    st.dataframe([{"page": place.natural_key, "generation": place.generation, "chunk": place.chunk_index,
                   "open": ui.compare_link(place.natural_key, None, place.generation)} for place in holders],
                 column_config={"open": st.column_config.LinkColumn("open", display_text="Compare")},
                 hide_index=True)
