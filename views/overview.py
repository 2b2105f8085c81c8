"""Overview: how much the crawl holds, how it changed, and the biggest recent changes."""

import streamlit as st

import ui
from cdc.core.timebins import choose_bin
from cdc.core.verdicts import changed_share, verdict_words
from cdc.present.figures import first_sightings, host_heatmap, verdict_figure

store = ui.current_store()
st.title("Overview")

stats = store.stats()
columns = st.columns(5)
for column, (label, key) in zip(columns, [("Hosts", "hosts"), ("Pages", "pages"),
                                          ("Generations", "generations"),
                                          ("Retained texts", "retained_generations"),
                                          ("Chunk rows", "content_chunks")]):
    column.metric(label, f"{stats[key]:,}")

left, right = st.columns([1, 2])
with left:
    st.subheader("Verdicts of the changes")
    counts = store.verdict_counts()
    st.plotly_chart(verdict_figure(counts), key="verdicts")
    st.caption(f"First sightings, counted apart (a page seen for the first time is not a change): "
               f"**{first_sightings(counts):,}**. A change of the host's template alone counts as "
               "*template_only*, whatever its verdict.")
with right:
    # The bin fits the time the crawls cover: hours for a day, days for a month, weeks for a year.
    span = store.time_span()
    period = choose_bin(span or ())
    st.subheader(f"How much changed, per host and {period}")
    activity = [(row.host, row.bucket, float(row.bytes_changed)) for row in store.host_activity(period)]
    heatmap = host_heatmap(activity, period=period, aggregate="sum", value_label="bytes changed",
                                    span=span)
    st.plotly_chart(heatmap, key="heatmap")

st.subheader("Biggest changes")
st.caption("Each page's latest change, largest share changed first, the template-only changes (only "
           "the host's template changed) after the pages' own. Open one to see what changed.")
rows = store.biggest_changes(limit=25)
st.dataframe(
    [{
        "page": row.natural_key,
        "open": ui.compare_link(row.natural_key, row.previous_generation, row.generation),
        "host": row.host,
        "verdict": verdict_words(row.shown_verdict),
        "changed": changed_share(row.unchanged_ratio, row.retained_ratio),  # none: not measured
        "+bytes": row.bytes_added,
        "-bytes": row.bytes_removed,
        "fetched": row.fetched_at,
        "what changed": row.excerpt,
    } for row in rows],
    column_config={
        "open": st.column_config.LinkColumn("open", display_text="Compare"),
        "changed": st.column_config.ProgressColumn("changed", min_value=0.0, max_value=1.0, format="percent"),
    },
    hide_index=True,
)
