"""The dashboard's annotation control: beside the verdict in Compare, the label, note and
name of the change shown, written to the store by `cdc annotate` in a process of its own.

Notes are untrusted text (another analyst's, or an imported file's): escaped into HTML of
ours, never read as Markdown or markup.
"""

from __future__ import annotations

import os
import subprocess
import sys
from html import escape
from pathlib import Path

import streamlit as st

import cdc
import ui
from cdc.analyst.annotations import NAME_MAX_CHARS, NOTE_MAX_CHARS, default_annotator
from cdc.store import LABELS, Annotation

# `python -m cdc` of this checkout, whatever the directory the app was started from.
_CDC_ROOT = Path(cdc.__file__).resolve().parents[1]
ANNOTATE_TIMEOUT = 120  # seconds: the store's lock timeout (30 s) and a process's start, with room
LABEL_ICONS = {"significant": ":material/priority_high:", "noise": ":material/volume_off:",
               "unsure": ":material/help:"}
CAPTION_STYLE = "font-size: 0.875rem; color: rgba(49, 51, 63, 0.6); margin: 0; white-space: pre-wrap"
NAME_KEY = "annotator"  # the name last annotated under, for the session's next annotation


def save_annotation(store: ui.CachedStore, url: str, generation: int, label: str, note: str,
                    by: str) -> str | None:
    """Annotate a change with `cdc annotate`, in a process of its own; None when done, else
    the one-line message that says why not. DuckDB lets a process hold a file open read-only
    or for writing, not both, and this process's other sessions read it in their threads
    (a write here would make their reads fail); the child takes cdc's write lock and waits
    for an ingest's batch to end, as every writer does, and the views' cached reads see its
    commit by the file's new version."""
    command = [sys.executable, "-m", "cdc", "--db", str(store.path), "annotate", f"--generation={generation}",
               f"--label={label}", f"--note={note}", f"--by={by}", "--", url]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(_CDC_ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=ANNOTATE_TIMEOUT,
                              env=environment, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"The store did not take the annotation within {ANNOTATE_TIMEOUT} s: try again."
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines() or [f"cdc annotate exited with {done.returncode}"]
    return lines[-1].removeprefix("cdc: ")


def describe(annotation: Annotation | None) -> str:
    """A line of HTML for the change's annotation, its name and note escaped. Not Markdown:
    Streamlit's Markdown turns a URL into a link even when every Markdown character of it is
    escaped (found by `tests/test_browser.py`), and a note's URL is nobody's to link."""
    if annotation is None:
        return f'<p style="{CAPTION_STYLE}">Not judged yet.</p>'
    said = (f"<strong>{escape(annotation.label)}</strong>, by {escape(annotation.annotated_by)}, "
            f"{annotation.annotated_at:%Y-%m-%d %H:%M} UTC")
    note = f": <span class=\"cdc-note\">{escape(annotation.note)}</span>" if annotation.note else ""
    return f'<p style="{CAPTION_STYLE}">{said}{note}</p>'


def annotation_control(column, store: ui.CachedStore, url: str, generation: int,
                       previous: int | None) -> Annotation | None:
    """A button in `column` that shows the label of the change that made `generation` (against
    `previous`) and opens the form that sets it; returns the change's annotation."""
    current = store.annotation(url, generation)
    title = f"{current.label.capitalize()}" if current else "Judge this change"
    icon = LABEL_ICONS.get(current.label) if current else ":material/rate_review:"
    popover = column.popover(title, icon=icon, use_container_width=True)
    against = f" against generation {previous}" if previous else ""
    popover.caption(f"The change that made generation {generation}{against}: is it significant?")
    keys = f"{url}\0{generation}"  # a form per change, opened at its own annotation
    with popover.form(f"annotate\0{keys}", border=False):
        label = st.segmented_control("Label", LABELS, key=f"annotate-label\0{keys}",
                                     default=current.label if current else None)
        note = st.text_area("Note", value=(current.note or "") if current else "", max_chars=NOTE_MAX_CHARS,
                            key=f"annotate-note\0{keys}", placeholder="why (optional)")
        name = st.text_input("Your name", value=st.session_state.get(NAME_KEY) or default_annotator(),
                             max_chars=NAME_MAX_CHARS, key=f"annotate-name\0{keys}")
        if st.form_submit_button("Save", icon=":material/save:"):
            if label is None:
                st.error("Pick a label: significant, noise or unsure.")
            else:
                with st.spinner("Saving…"):
                    problem = save_annotation(store, url, generation, label, note, name)
                if problem:
                    st.error(ui.plain_markdown(problem))
                else:
                    st.session_state[NAME_KEY] = name
                    st.toast(f"Marked {label}.")
                    st.rerun()
    return current
