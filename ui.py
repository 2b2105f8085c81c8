"""Streamlit wiring shared by the dashboard's pages: the store handle and small helpers.

The library (`cdc/`) never imports Streamlit; this module and the pages only connect
widgets to library calls.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import streamlit as st

from cdc.analyst.boilerplate import host_boilerplate, shared_across_hosts
from cdc.analyst.queries import compare_generations
from cdc.core.captures import current_generation
from cdc.core.timebins import choose_bin
from cdc.core.urls import host_of_key
from cdc.core.verdicts import CHANGE_VERDICTS, verdict_label, verdict_words
from cdc.errors import CdcError
from cdc.present.figures import host_change_distribution
from cdc.present.highlight import FIRST_CHANGE_IDS, PALETTE
from cdc.present.launch import StoreChoice, choose_store
from cdc.store import LABELS, PageMatch, Store
from cdc.store.sitediff import RunInfo


def store_choice() -> StoreChoice:
    return choose_store(sys.argv[1:], os.environ)


@st.cache_resource(show_spinner=False)
def _store(path: str) -> Store:
    """One Store per process (it holds no connection: each call opens its own)."""
    return Store(path)


def _version(store: Store) -> tuple[float, float]:
    """Changes whenever a writer commits: the modification times of the store file and of its
    write-ahead log (a commit that DuckDB has not yet checkpointed is in the log alone)."""
    times = []
    for path in (store.path, store.path.with_name(store.path.name + ".wal")):
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            times.append(0.0)
    return times[0], times[1]


def cached_read(max_entries: int) -> Callable[[Callable], Callable]:
    """A function whose first argument is a `Store`, made callable with the views'
    `CachedStore` and cached as the store's reads are: an answer per store version and
    arguments (hashed, so they must be hashable by Streamlit), at most `max_entries` of them
    (a comparison holds two texts: fewer of those). The one way the views cache a read."""

    def cache(function: Callable) -> Callable:
        # `version` is hashed with the other arguments (a leading underscore would leave it
        # out), so a writer's commit makes a new cache entry and every read sees it.
        def on_file(path: str, version: tuple[float, float], *args, **kwargs):
            return function(_store(path), *args, **kwargs)

        # Streamlit names a cache by its function's module, qualified name and source; every
        # `on_file` has the same source, so each is named for the function it caches.
        on_file.__name__ = on_file.__qualname__ = f"cached_{function.__name__}"
        on_file = st.cache_data(ttl=3600, show_spinner=False, max_entries=max_entries)(on_file)

        @functools.wraps(function)
        def read(store: CachedStore, *args, **kwargs):
            return on_file(str(store.path), _version(store.uncached), *args, **kwargs)
        return read
    return cache


@cached_read(max_entries=512)
def _read(store: Store, method: str, args: tuple, kwargs: tuple):
    """A `Store` read by name, for `CachedStore`."""
    return getattr(store, method)(*args, **dict(kwargs))


class CachedStore:
    """The store as the views read it: each read in `READS` cached until a writer commits.

    Every widget change reruns a view from the top, and each store call opens the file (about
    30 ms on a store of 100,000 pages before any query): uncached, a rerun of Overview or Site
    spent most of its time reopening the file for answers it already had. Keyed on the file's
    version, a cached answer is never older than the store. Anything else (`path`, a write,
    `reading()`) is the store's own; `uncached` is the store itself, for a read too large to
    keep (the whole CSV of an export). (`pages_with_digest` of a template chunk is large too,
    but the Boilerplate view shows all of it: kept, it costs no more than it shows.)"""

    READS = frozenset({
        "meta", "stats", "page", "generations", "history", "changes", "count_changes", "hosts",
        "verdict_counts", "biggest_changes", "host_activity", "time_span", "match_pages", "runs",
        "run_on", "site_diff", "pages_with_digest", "needs_upgrade", "annotation", "annotations",
        "search_words", "watches", "watch_hits",
    })

    def __init__(self, store: Store) -> None:
        self.uncached = store

    def __getattr__(self, name: str):
        if name not in self.READS:
            return getattr(self.uncached, name)

        def read(*args, **kwargs):
            return _read(self, name, args, tuple(sorted(kwargs.items())))
        return read


class _DemoBuild:
    """The first launch's demo build: once per process, in its own thread, so a reload or a
    second browser tab waits for it instead of starting, or breaking, another."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.done = 0.0
        self.error: str | None = None

    def start(self, path: Path) -> None:
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, args=(path,), daemon=True)
                self.thread.start()

    def _run(self, path: Path) -> None:
        from cdc.demo.build import build_demo

        try:
            build_demo(path, progress=self._progress)
        except CdcError as exc:
            self.error = str(exc)

    def _progress(self, done: float) -> None:
        self.done = done


_demo = _DemoBuild()


def _wait_for_demo(path: Path) -> None:
    _demo.start(path)
    bar = st.progress(0.0, text="Building the demo store (first launch only)…")
    while _demo.thread.is_alive():
        bar.progress(min(_demo.done, 1.0), text=f"Building the demo store… {_demo.done:.0%}")
        time.sleep(0.2)
    bar.empty()
    if _demo.error:
        fail(f"Could not build the demo store: {_demo.error}")


def open_store() -> StoreChoice:
    """Which store this app shows, and why (app.py calls it once per run); builds the demo
    on first launch; stops with a message if the store cannot be opened."""
    choice = store_choice()
    if choice.is_demo and not choice.path.exists():
        _wait_for_demo(choice.path)
    try:
        store = current_store()
        # Checks the store's meta too (not a store, another spec, a newer schema: CdcError).
        if store.needs_upgrade():  # the first read upgrades it: not behind a blank page
            with st.spinner("Upgrading the store to this cdc's layout, once: about 5 s per "
                            "100,000 pages…"):
                store.uncached.meta()
    except CdcError as exc:
        fail(str(exc))
    return choice


def current_store() -> CachedStore:
    """For the views: the store app.py opened and checked in this run, its reads cached."""
    return CachedStore(_store(str(store_choice().path)))


def fail(message: str) -> None:
    st.error(message)
    st.stop()


def short_url(key: str) -> str:
    return key.split("://", 1)[-1]


def compare_link(natural_key: str, old: int | None, new: int) -> str:
    """A link that opens Compare on this page and these generations (a shareable view)."""
    query = {"url": natural_key, "to": str(new)}
    if old:
        query["from"] = str(old)
    return "compare?" + urlencode(query)


def _filter_changed() -> None:
    """A picker filter changed: its first match is the page, at its latest generations."""
    for stale in ("url", "from", "to"):
        st.session_state.pop(stale, None)
    drop_from_query("url", "from", "to")


EVERY_HOST = "every host"


def _run_label(run: RunInfo) -> str:
    changed = "" if run.changed is None else f", {run.changed:,} changed"
    return f"run {run.run}: {run.label}, crawled {run.crawled or run.started_at:%Y-%m-%d %H:%M}{changed}"


def _match_label(match: PageMatch) -> str:
    if match.verdict is None:
        return short_url(match.natural_key)
    share = "" if match.share_changed is None else f" {match.share_changed:.0%}"
    return f"{short_url(match.natural_key)} · {verdict_words(match.shown_verdict)}{share}"


def url_picker(store: CachedStore) -> str:
    """Filters, then a URL. "Changed pages only" (on by default once the store has two runs)
    lists the pages a run changed (the latest by default), optionally of some verdicts,
    template-only changes left out unless asked for, largest change first; else every page.
    A host and a search (part of the URL) narrow either list. The store returns at most
    `PICK_LIMIT` keys, so a host of 100,000 pages never fills a selectbox. The URL is kept in
    the query string; a URL a link names opens even when the filters would not list it."""
    hosts = [row.host for row in store.hosts()]
    if not hosts:
        fail("The store has no pages yet: `cdc ingest FILE` adds some.")
    runs = store.runs()
    wanted = query_value("url")
    linked = wanted if wanted and wanted != st.session_state.get("url") and store.page(wanted) else None
    if linked and st.session_state.get("host") not in (None, EVERY_HOST, host_of_key(linked)):
        st.session_state["host"] = EVERY_HOST  # a link to another host's page: show it in context
    mode, run_column, verdict_column, template_column = st.columns([3, 4, 4, 3])
    changed_only = mode.toggle("Changed pages only", value=len(runs) >= 2, key="changed-only",
                               disabled=not runs, on_change=_filter_changed)
    run, verdicts, include_template = None, [], False
    if changed_only and runs:
        run = run_column.selectbox("Changed in", [r.run for r in runs], key="pick-run",
                                   format_func={r.run: _run_label(r) for r in runs}.get,
                                   on_change=_filter_changed)
        verdicts = verdict_column.multiselect(
            "Verdicts", CHANGE_VERDICTS, key="pick-verdicts", placeholder="every verdict",
            format_func=verdict_label, on_change=_filter_changed)
        include_template = template_column.toggle("Include template-only", key="pick-template",
                                                  on_change=_filter_changed)
    host_column, search_column, url_column = st.columns([1, 1, 2])
    host = host_column.selectbox("Host", [EVERY_HOST, *hosts], key="host", on_change=_filter_changed)
    search = search_column.text_input("Search URLs", key="url-search", placeholder="part of the URL",
                                      on_change=_filter_changed)
    with st.spinner("Finding the pages…"):
        matches = store.match_pages(search, host=None if host == EVERY_HOST else host, changed_in=run,
                                    verdicts=tuple(verdicts), include_template_only=include_template)
    labels = {match.natural_key: _match_label(match) for match in matches.pages}
    options = list(labels)
    if wanted and wanted not in labels and (linked or wanted == st.session_state.get("url")):
        options.insert(0, wanted)
    if not options:
        url_column.selectbox("URL", ["no page matches"], key="url-none", disabled=True)
        st.info("No page matches these filters: " + (
            "turn off *Changed pages only*, pick another run or verdict, or clear the search."
            if run is not None else "clear the search or pick another host."))
        st.stop()
    query_to_state("url", "url", options.__contains__)
    url = url_column.selectbox("URL", options, key="url", **kept_in_query("url", "url"),
                               format_func=lambda key: labels.get(key, short_url(key)))
    put_in_query("url", url)
    if matches.total > len(matches.pages):
        url_column.caption(f"The first {len(matches.pages):,} of {matches.total:,}"
                           f"{' changed pages, largest change first' if run is not None else ' pages'}: "
                           "search to narrow.")
    elif run is not None:
        url_column.caption(f"{matches.total:,} changed page(s), largest change first.")
    return url


def compare_pair(retained: list[int], clicked: int) -> tuple[int, int] | None:
    """The (from, to) generations a click on generation `clicked` of the trend picks: it and
    the retained one before it (the first and the second for the first); None when its text
    is gone."""
    if clicked not in retained or len(retained) < 2:
        return None
    at = max(retained.index(clicked), 1)
    return retained[at - 1], retained[at]


def pick_from_trend(key: str, retained: list[int]) -> None:
    """The trend chart's selection callback: the clicked generation becomes "to", the one
    before it "from", through the query string (which the generation pickers open at)."""
    points = (st.session_state.get(key) or {}).get("selection", {}).get("points", [])
    if not points:
        return
    clicked = points[0].get("customdata")
    if isinstance(clicked, list):
        clicked = clicked[0] if clicked else None
    pair = compare_pair(retained, int(clicked)) if isinstance(clicked, int | float) else None
    if pair is None:
        st.toast("That generation's text is no longer retained: it cannot be compared.")
        return
    put_in_query("from", pair[0])
    put_in_query("to", pair[1])


def linked_generation(name: str, numbers: list[int]) -> int | None:
    """The generation among `numbers` that the query string's `name` names (`?to=`): the one
    it is, else the one current at that time, as `Store.version` resolves it (a link made
    before an earlier fetch of the same content moved its start); None when it names none."""
    wanted = query_value(name)
    return current_generation(numbers, int(wanted)) if wanted is not None and wanted.isdigit() else None


def generation_picker(column, label: str, key: str, options: list[int]) -> int:
    """A generation, opened from and kept in the query string. A number no generation starts
    at opens the generation current at that time (`linked_generation`)."""
    current = linked_generation(key, options)
    if current is not None:
        put_in_query(key, current)
    query_to_state(key, key, options.__contains__, int)
    value = column.selectbox(label, options, key=key, **kept_in_query(key, key))
    put_in_query(key, value)
    return value


# Scrolls the frame's own document only (scrollIntoView would scroll the whole app too).
SCROLL_TO_FIRST_CHANGE = f"""
<script>
const first = document.getElementById("{FIRST_CHANGE_IDS[1]}")
    || document.getElementById("{FIRST_CHANGE_IDS[0]}");
if (first) {{
  const top = first.getBoundingClientRect().top + window.scrollY;
  window.scrollTo(0, Math.max(0, top - 120));
}}
</script>
"""  # the new column's first change, else the old's

# Joins each move's two labels (ids cdc-move-N-from / -to, see cdc.present.highlight) with a curve
# across the gap between the columns, and makes a click on a label scroll to the other end.
# It reads only ids and positions of the module's own elements: page text is never read.
JOIN_MOVES = f"""
<script>
(() => {{
  const grid = document.querySelector(".cdc-sbs");
  if (!grid) return;
  const ns = "http://www.w3.org/2000/svg";
  function draw() {{
    grid.querySelectorAll("svg.cdc-links").forEach((old) => old.remove());
    const box = grid.getBoundingClientRect();
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "cdc-links");
    svg.setAttribute("width", box.width);
    svg.setAttribute("height", box.height);
    svg.style.cssText = "position:absolute;left:0;top:0;pointer-events:none;overflow:visible";
    for (const from of grid.querySelectorAll(".cdc-move-label[id$='-from']")) {{
      const to = document.getElementById(from.id.replace(/-from$/, "-to"));
      if (!to) continue;
      const a = from.getBoundingClientRect(), b = to.getBoundingClientRect();
      const x1 = from.closest(".cdc-cell").getBoundingClientRect().right - box.left;
      const x2 = to.closest(".cdc-cell").getBoundingClientRect().left - box.left;
      const y1 = a.top + a.height / 2 - box.top, y2 = b.top + b.height / 2 - box.top;
      const bend = (x2 - x1) / 2;
      const path = document.createElementNS(ns, "path");
      path.setAttribute("d",
          `M ${{x1}} ${{y1}} C ${{x1 + bend}} ${{y1}}, ${{x2 - bend}} ${{y2}}, ${{x2}} ${{y2}}`);
      path.setAttribute("fill", "none");
      path.setAttribute("stroke", "{PALETTE["moved"]}");
      path.setAttribute("stroke-width", "2");
      svg.appendChild(path);
      for (const [x, y] of [[x1, y1], [x2, y2]]) {{
        const dot = document.createElementNS(ns, "circle");
        dot.setAttribute("cx", x); dot.setAttribute("cy", y); dot.setAttribute("r", 3);
        dot.setAttribute("fill", "{PALETTE["moved"]}");
        svg.appendChild(dot);
      }}
    }}
    grid.appendChild(svg);
  }}
  grid.addEventListener("click", (event) => {{
    const label = event.target.closest(".cdc-move-label");
    if (!label) return;
    const other = document.getElementById(label.id.endsWith("-from")
        ? label.id.replace(/-from$/, "-to") : label.id.replace(/-to$/, "-from"));
    if (other) window.scrollTo(0, Math.max(0, other.getBoundingClientRect().top + window.scrollY - 120));
  }});
  draw();
  window.addEventListener("resize", draw);
  if (document.fonts) document.fonts.ready.then(draw);
}})();
</script>
"""


def framed_texts(html: str) -> str:
    """The side-by-side HTML with its scripts: open at the first change, join the moves."""
    return html + JOIN_MOVES + SCROLL_TO_FIRST_CHANGE


# `compare_generations` (the Compare view's switches rerun it), boilerplate per host (with
# sample texts) and across hosts, cached as the store's reads are.
cached_comparison = cached_read(max_entries=32)(compare_generations)
cached_host_boilerplate = cached_read(max_entries=64)(host_boilerplate)
cached_shared_across_hosts = cached_read(max_entries=8)(shared_across_hosts)


@cached_read(max_entries=32)
def cached_host_distribution(store: Store, host: str):
    """The bin that fits the span of a host's changes, and the figure of how much changed in
    each (None when the host has no changes yet), cached as the store's reads are: a host
    of 100,000 pages has as many changes, too many to hash as a figure's arguments."""
    rows = [(host, row.fetched_at, row.share_changed) for row in store.host_changes(host)
            if row.share_changed is not None]
    period = choose_bin(when for _, when, _ in rows)  # from the span of the host's changes
    return period, host_change_distribution(rows, period=period) if rows else None


def finished_runs(store: CachedStore) -> list:
    """The store's finished runs, newest first: the Site view compares two of them."""
    return [run for run in store.runs() if run.finished]


# The query string: every view's filters live in it, so a link reopens the same view. These
# are the one way the views read and write it.

def query_value(name: str) -> str | None:
    """The query string's `name`, as written; None when it is not there."""
    return st.query_params.get(name)


def query_except(*names: str) -> dict[str, str]:
    """The query string without `names`: the rest of a view's filters, for a link that keeps them."""
    return {name: value for name, value in st.query_params.to_dict().items() if name not in names}


def put_in_query(name: str, value, spell: Callable = str) -> None:
    """`value` to the query string's `name`, written by `spell`; None or an empty value
    (``, an empty list) takes `name` out of it."""
    if value is None or value == "" or value == []:
        st.query_params.pop(name, None)
    else:
        st.query_params[name] = spell(value)


def put_all_in_query(values: dict) -> None:
    """Several names at once (`put_in_query` each)."""
    for name, value in values.items():
        put_in_query(name, value)


def drop_from_query(*names: str) -> None:
    """Take `names` out of the query string: filters that no longer apply."""
    for name in names:
        st.query_params.pop(name, None)


def query_to_state(key: str, name: str, valid, convert=str, default=None) -> None:
    """Before widget `key` is drawn: open it at the query string's `name` when that converts to
    a value `valid` accepts; else keep its value if still valid, else `default` (None: the
    widget's own). `state_to_query` is the widget's on_change, so a change wins over the URL."""
    wanted = query_value(name)
    try:
        value = convert(wanted) if wanted is not None else None
    except ValueError:
        value = None
    if value is not None and valid(value):
        st.session_state[key] = value
    elif key not in st.session_state or not valid(st.session_state[key]):
        if default is None:
            st.session_state.pop(key, None)
        else:
            st.session_state[key] = default


def state_to_query(key: str, name: str, *stale: str, spell: Callable = str) -> None:
    """Widget `key`'s new value to the query string's `name` (`put_in_query`); the names in
    `stale` (filters that no longer apply, such as a page number) leave it."""
    put_in_query(name, st.session_state.get(key), spell)
    drop_from_query(*stale)


def kept_in_query(key: str, name: str, *stale: str, spell: Callable = str) -> dict:
    """A widget's `on_change` and its arguments: its value to the query string's `name`, the
    names in `stale` out of it (`state_to_query`)."""
    return {"on_change": state_to_query, "args": (key, name, *stale), "kwargs": {"spell": spell}}


def labels_to_state(key: str) -> None:
    """Before an "Annotated as" multiselect `key` is drawn: open it at the query string's
    labels (`?label=noise,unsure`), as `query_to_state` does for one value."""
    query_to_state(key, "label", lambda value: set(value) <= set(LABELS),
                   lambda text: [label for label in LABELS if label in text.split(",")], default=[])


_MARKDOWN_ESCAPES = str.maketrans({char: "\\" + char for char in "\\`*_{}[]<>()#+-.!|~$:"})


def plain_markdown(text: str) -> str:
    """`text` (a run's label, say) as literal text inside a Streamlit message, which reads
    Markdown: every character Markdown would act on escaped."""
    return text.translate(_MARKDOWN_ESCAPES)
