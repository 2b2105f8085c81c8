"""Site: what changed on a site between two crawl runs, or the crawls of two dates, on every
host or one: the counts, the template changes grouped, the changed pages largest first.

Every filter is in the query string (`?a=4&b=5&host=&group=&label=&page=`, or `?by=dates&date_a=
&date_b=`), so a link reopens the same view. Page text is shown in table cells and option
labels only, which Streamlit renders as text.
"""

import datetime as dt
import math
from urllib.parse import urlencode

import streamlit as st

import ui
from cdc.analyst.search import watch_hits
from cdc.core.verdicts import TEMPLATE_ONLY, verdict_label
from cdc.errors import CdcError
from cdc.store import LABELS
from cdc.store.sitediff import latest_crawls

PAGE_SIZE = 50
SHOWN_TEMPLATE_CHANGES = 200
BY_RUNS, BY_DATES = "runs", "dates"

store = ui.current_store()
st.title("What changed on the site")

runs = store.runs()
finished = latest_crawls(runs)  # the earlier crawl first
if len(finished) < 2:
    st.info(f"This store holds {len(finished)} finished crawl run{'s' * (len(finished) != 1)}; this "
            "view compares two. Ingest each crawl as a run of its own, "
            "`cdc ingest --run LABEL FILE`, and `cdc runs` lists them.", icon=":material/info:")
    st.stop()

by_id = {run.run: run for run in runs}


def crawl_day(run: int) -> dt.date:
    """The day a run's crawl began (its first capture), else the day it was ingested."""
    return (by_id[run].crawled or by_id[run].started_at).date()


def run_label(run: int) -> str:
    info, day = by_id[run], crawl_day(run)
    last = info.last_captured.date() if info.last_captured else day
    when = f"{day}" if last == day else f"{day} to {last}"
    return f"run {run} · {info.label} · {when}" + ("" if info.finished else " · did not finish")


def to_query(key: str, name: str) -> dict:
    """A widget's on_change: its value to the query string; a changed diff starts at page 1
    of every changed page."""
    return ui.kept_in_query(key, name, "group", "page")


ui.query_to_state("site-by", "by", lambda value: value in (BY_RUNS, BY_DATES), default=BY_RUNS)
by = st.radio("Compare", [BY_RUNS, BY_DATES], key="site-by", horizontal=True,
              format_func={BY_RUNS: "two runs", BY_DATES: "two dates"}.get, **to_query("site-by", "by"))
left, middle, right = st.columns(3)
if by == BY_RUNS:
    ids = [run.run for run in runs]
    ui.query_to_state("site-a", "a", ids.__contains__, int, default=finished[0].run)
    ui.query_to_state("site-b", "b", ids.__contains__, int, default=finished[1].run)
    run_a = left.selectbox("Run A (before)", ids, key="site-a", format_func=run_label,
                           **to_query("site-a", "a"))
    run_b = middle.selectbox("Run B (after)", ids, key="site-b", format_func=run_label,
                             **to_query("site-b", "b"))
    ui.put_all_in_query({"a": run_a, "b": run_b})
    ui.drop_from_query("by", "date_a", "date_b")
else:
    for name, key, run in (("date_a", "site-date-a", finished[0].run),
                           ("date_b", "site-date-b", finished[1].run)):
        ui.query_to_state(key, name, lambda value: True, dt.date.fromisoformat, default=crawl_day(run))
    day_a = left.date_input("The crawl of (before)", key="site-date-a", **to_query("site-date-a", "date_a"))
    day_b = middle.date_input("The crawl of (after)", key="site-date-b", **to_query("site-date-b", "date_b"))
    ui.put_all_in_query({"by": BY_DATES, "date_a": day_a, "date_b": day_b})
    ui.drop_from_query("a", "b")
    picked = []
    for column, day in ((left, day_a), (middle, day_b)):
        info = store.run_on(day)
        if info is None:
            ui.fail(f"No finished crawl began on or before {day}: the first began on "
                    f"{min(crawl_day(run.run) for run in runs if run.finished)}.")
        column.caption(f"The latest crawl begun by then: {ui.plain_markdown(run_label(info.run))}")
        picked.append(info.run)
    run_a, run_b = picked

hosts = [""] + [row.host for row in store.hosts()]
ui.query_to_state("site-host", "host", hosts.__contains__, default="")
host = right.selectbox("Host", hosts, key="site-host", format_func=lambda value: value or "all hosts",
                       **to_query("site-host", "host"))
ui.put_in_query("host", host)

if run_a == run_b:
    ui.fail("Both sides are the same crawl run: pick two.")
if run_a > run_b:
    ui.fail(f"{ui.plain_markdown(run_label(run_a))} came after {ui.plain_markdown(run_label(run_b))}: "
            "put the earlier run first.")
for run in (run_a, run_b):
    if not by_id[run].finished:
        st.warning(f"{ui.plain_markdown(run_label(run))} did not finish: it saw only part of its crawl.")

ui.query_to_state("site-page", "page", lambda value: value >= 1, int, default=1)
wanted_group = ui.query_value("group") or None
# The label filter (`?label=noise,unsure`) is drawn with the list below, read here: the diff's
# list is made with it.
ui.labels_to_state("site-labels")
labels = st.session_state["site-labels"]


def diff_at(page: int, group: str | None):
    try:
        return store.site_diff(run_a, run_b, host or None, limit=PAGE_SIZE,
                               offset=(page - 1) * PAGE_SIZE, template_change=group, labels=tuple(labels))
    except CdcError as exc:
        ui.fail(str(exc))


with st.spinner("Comparing the two runs…"):
    diff = diff_at(st.session_state["site-page"], wanted_group)
    groups = {change.key: change for change in diff.template_changes}
    if wanted_group is not None and wanted_group not in groups:  # a link to a change this diff lacks
        ui.drop_from_query("group")
        wanted_group, st.session_state["site-page"] = None, 1
        diff = diff_at(1, None)
    group = groups.get(wanted_group)
    pages = max(1, math.ceil((diff.changed if diff.listed is None else diff.listed) / PAGE_SIZE))
    if st.session_state["site-page"] > pages:  # a link made when there were more
        st.session_state["site-page"] = pages
        diff = diff_at(pages, wanted_group)

first, second = st.columns(4), st.columns(max(len(diff.verdicts) + 1, 4))
for column, (label, count) in zip(first, [("New pages", diff.new), ("Not seen again", diff.not_seen_again),
                                          ("Changed", diff.changed), ("Unchanged", diff.unchanged)]):
    column.metric(label, f"{count:,}")
counts = [(verdict_label(verdict), count) for verdict, count in diff.verdicts.items()]
for column, (label, count) in zip(second, [*counts, (verdict_label(TEMPLATE_ONLY), diff.template_only)]):
    column.metric(label, "-" if count is None else f"{count:,}")

if store.watches():  # the saved searches' hits at the two runs' ends (`cdc watch`)
    hits = [hit for run in (run_a, run_b) for hit in watch_hits(store, run=run)]
    st.subheader(f"Watch hits: {len(hits):,}")
    if hits:
        st.dataframe([{"watch": hit.name, "run": hit.run, "page": hit.url,
                       "open": ui.compare_link(hit.natural_key, hit.previous_generation, hit.generation),
                       "side": hit.side, "words": hit.excerpt} for hit in hits],
                     column_config={"open": st.column_config.LinkColumn("open", display_text="Compare")},
                     hide_index=True, key="site-watch-hits")
    else:
        st.caption("No watch hit in either run (`cdc watch list` lists the watches).")

shared = ui.query_except("group", "page")
site_wide, single = diff.site_wide_changes, diff.one_page_template_changes
st.subheader(f"Template changes: {len(site_wide):,}")
if site_wide:
    st.caption("One edit of a host's template (the same template blocks inserted, removed or replaced) "
               "on many of its pages, shown once. *List its pages* lists them below.")
    st.dataframe([{"host": change.host, "pages": change.pages,
                   "list": "?" + urlencode({**shared, "group": change.key}),
                   "what changed": change.excerpt, "examples": [ui.short_url(key) for key in change.examples]}
                  for change in site_wide[:SHOWN_TEMPLATE_CHANGES]],
                 column_config={"list": st.column_config.LinkColumn("list", display_text="List its pages"),
                                "examples": st.column_config.ListColumn("examples")},
                 hide_index=True, key="site-template-changes")
    if len(site_wide) > SHOWN_TEMPLATE_CHANGES:
        st.caption(f"The {SHOWN_TEMPLATE_CHANGES} on most pages of {len(site_wide):,}.")
elif not single:
    st.caption("None: no changed page differs by its host's template alone.")
if single:
    st.caption(f"Also {single:,} template-only change{'s' * (single != 1)} on one page each: a block the "
               "host repeats on other pages, edited on this page alone. They are among the changed pages "
               "below, marked *template only*.")

st.subheader("Changed pages, largest change first")
st.caption("A page's own changes first, largest first; then the template-only ones (only the host's "
           "template changed: none of the page's own text), however large a share of a short page "
           "the template is.")
options = ["", *groups]
ui.query_to_state("site-group", "group", options.__contains__, default="")


def group_label(key: str) -> str:
    if not key:
        return "every changed page"
    change = groups[key]
    return (f"the pages of one template change: {change.host}, {change.pages:,} pages, "
            f"{(change.excerpt or '')[:90]}")


show, judged = st.columns([3, 2])
show.selectbox("Show", options, key="site-group", format_func=group_label,
               **ui.kept_in_query("site-group", "group", "page"))
judged.multiselect("Annotated as", LABELS, key="site-labels", placeholder="any change, judged or not",
                   **ui.kept_in_query("site-labels", "label", "page", spell=",".join),
                   help="Only the pages whose change an analyst marked so")
total = diff.changed if diff.listed is None else diff.listed
left, right = st.columns([1, 4])
page = left.number_input("Page", 1, pages, key="site-page", **ui.kept_in_query("site-page", "page"))
ui.put_in_query("page", page)
if diff.pages:
    right.caption(f"{diff.offset + 1:,}-{diff.offset + len(diff.pages):,} of {total:,}. "
                  "*Compare* opens the page's two generations side by side.")
elif labels:
    right.caption(f"No changed page between these runs is annotated {' or '.join(labels)}: mark a change "
                  "beside its verdict in *Compare*, or clear *Annotated as*.")
st.dataframe([{
    "page": changed.natural_key,
    "open": ui.compare_link(changed.natural_key, changed.generation_a, changed.generation_b),
    "host": changed.host,
    "verdict": verdict_label(changed.shown_verdict),
    "template only": changed.template_only,
    "changed": changed.share_changed,
    "what changed": changed.excerpt,
    "label": changed.label,
    "+bytes": changed.bytes_added,
    "-bytes": changed.bytes_removed,
} for changed in diff.pages],
    column_config={
        "open": st.column_config.LinkColumn("open", display_text="Compare"),
        "changed": st.column_config.ProgressColumn("changed", min_value=0.0, max_value=1.0, format="percent"),
    },
    hide_index=True, key="site-pages")
