"""Compare: two generations of one URL, side by side: the page's trend, chunk alignment,
text, exact edits.

The URL and the generations live in the query string (?url=&from=&to=), so a link reopens
the same view; a click on a point of the trend picks that generation.
"""

import streamlit as st

import ui
import ui_annotate
from cdc.analyst.queries import version_chunks
from cdc.core.verdicts import changed_share, verdict_words
from cdc.errors import CdcError
from cdc.present.figures import alignment_figure, compare_trend_figure
from cdc.present.highlight import changes_list, side_by_side_html
from cdc.store.rows import OWN_EDITS

store = ui.current_store()
st.title("Compare")

url = ui.url_picker(store)
history = store.generations(url)
generations = [g.generation for g in history if g.retained]
if len(generations) < 2:
    st.info(f"{url} has {len(generations)} retained generation(s): nothing to compare yet.")
    st.stop()

# A link may name generations whose text the store no longer keeps: say so, not silently
# open others (a number resolves to the generation current at that time, as Store.version).
numbers = [g.generation for g in history]
for name in ("from", "to"):
    current = ui.linked_generation(name, numbers)
    if current is not None and current not in generations:
        st.warning(f"Generation {current} ({name} in the link) is past the retention limit: its "
                   "text and chunks were dropped. Showing retained generations instead.",
                   icon=":material/history:")

controls, trend = st.columns([2, 3])
left, middle = controls.columns(2)
new = ui.generation_picker(middle, "To generation", "to", generations[::-1][:-1])
old = ui.generation_picker(left, "From generation", "from", [g for g in generations if g < new][::-1])
ignore_boilerplate = controls.toggle("Leave the host's boilerplate out", key="ignore")
# What is left out of the measures is what the texts dim or hide.
boilerplate_view = controls.segmented_control(
    "Boilerplate blocks in the texts", ["dimmed", "hidden"], key="bp-view", default="dimmed",
    disabled=not ignore_boilerplate) or "dimmed"
# The callback runs before the next run, so the pickers above open at the clicked generation.
trend.plotly_chart(compare_trend_figure(history, old, new), key="generation-trend",
                   selection_mode="points",
                   on_select=lambda: ui.pick_from_trend("generation-trend", generations))
trend.caption("Kept share and similarity of each generation against the one before; ringed: the two "
              "compared. Click a point to compare that generation with the one before it.")

try:
    result = ui.cached_comparison(store, url, old, new, ignore_boilerplate)
except CdcError as exc:
    ui.fail(str(exc))
report = result.report

verdict, annotating, *figures = st.columns([1.2, 1.3, 1, 1, 1, 1])
verdict.metric("Verdict", verdict_words(report.verdict))
figures[0].metric("Unchanged (new text)", f"{report.unchanged_ratio:.1%}")
figures[1].metric("Similarity (shared chunks)", f"{report.similarity:.2f}")
figures[2].metric("Bytes added", f"{report.bytes_added:,}")
figures[3].metric("Bytes removed", f"{report.bytes_removed:,}")
stored = next((row for row in store.history(url) if row.generation == new), None)
# Beside the verdict, the analyst's judgement of the change that made `new`: its stored row's.
annotating.caption("Your judgement")
annotation = ui_annotate.annotation_control(annotating, store, url, new,
                                            stored.previous_generation if stored else None)
st.html(ui_annotate.describe(annotation))  # the note escaped: text, never markup
# The stored change row is this comparison's when it was measured from `old`.
if stored is not None and stored.previous_generation == old and stored.template_only:
    st.info("A template change: every changed chunk is part of the host's template (its "
            "boilerplate). Leave the boilerplate out to see this page's own content unchanged.",
            icon=":material/dashboard:")
elif stored is not None and stored.previous_generation == old and stored.measure == OWN_EDITS:
    changed = changed_share(stored.unchanged_ratio, stored.retained_ratio) or 0.0
    st.info(f"The host's template changed here too, beside the page's own text: the lists rank and "
            f"label this change by the page's own text alone ({verdict_words(stored.verdict)}, "
            f"{changed:.0%} changed). Leave the boilerplate out to compare the page's own text.",
            icon=":material/dashboard:")

old_chunks, new_chunks = version_chunks(result.old), version_chunks(result.new)
st.plotly_chart(
    alignment_figure(old_chunks, new_chunks, report, result.old.text, result.new.text, result.ignored,
                     labels=(f"generation {old}", f"generation {new}")),
    key="alignment")

st.subheader("The two texts")
st.caption("Block by block, rows aligned. Shaded: blocks with an edit, the words removed struck "
           "out and the words added in green. Orange, labelled *move N* at both ends and joined: "
           "text that moved." + (" Grey: the host's boilerplate, left out." if ignore_boilerplate else ""))
html = side_by_side_html(result.old.text, result.new.text, report, old_chunks=old_chunks,
                         new_chunks=new_chunks, boilerplate=result.ignored, boilerplate_view=boilerplate_view,
                         labels=(f"generation {old}", f"generation {new}"))
# In its own frame, so the view can open at the first change. Every piece of page text in
# `html` is escaped by cdc.present.highlight: the only markup and script are ours.
st.iframe(ui.framed_texts(html), height=640)

st.subheader("What changed")
changes = changes_list(result.old.text, result.new.text, report, old_chunks=old_chunks)
if changes:
    st.dataframe(changes, hide_index=True)
else:
    st.write("No difference in the words (the chunks differ only in whitespace).")
