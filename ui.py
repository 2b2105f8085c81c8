"""Streamlit wiring shared by the dashboard's pages: the store handle and small helpers.

The library (`cdc/`) never imports Streamlit; this module and the pages only connect
widgets to library calls.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import streamlit as st

from cdc.boilerplate import host_boilerplate, shared_across_hosts
from cdc.errors import CdcError
from cdc.highlight import FIRST_CHANGE_IDS, PALETTE
from cdc.launch import StoreChoice, choose_store
from cdc.store import Store


def store_choice() -> StoreChoice:
    return choose_store(sys.argv[1:], os.environ)


@st.cache_resource(show_spinner=False)
def _store(path: str) -> Store:
    """One Store per process (it holds no connection: each call opens its own)."""
    return Store(path)


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
        from cdc.demo import build_demo

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
    store = _store(str(choice.path))
    try:
        store.meta()
    except CdcError as exc:
        fail(str(exc))
    return choice


def current_store() -> Store:
    """For the views: the store app.py opened and checked in this run."""
    return _store(str(store_choice().path))


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


@st.cache_data(ttl=10, show_spinner=False)
def _page_keys(path: str) -> list[str]:
    return Store(path).page_keys()


def page_keys(store: Store) -> list[str]:
    """Every page's key, cached for a few seconds: type-ahead over thousands of URLs."""
    return _page_keys(str(store.path))


def _to_query(*keys: str) -> None:
    """A widget's new value goes to the query string, so the address bar shares the view."""
    for key in keys:
        value = st.session_state.get(key)
        if value is None:
            st.query_params.pop(key, None)
        else:
            st.query_params[key] = str(value)


def _host_changed(keys: list[str]) -> None:
    on_host = [key for key in keys if host_of_key(key) == st.session_state["host"]]
    st.session_state["url"] = on_host[0]
    for stale in ("from", "to"):
        st.session_state.pop(stale, None)
        st.query_params.pop(stale, None)
    _to_query("url")


def from_query(key: str, options: list, convert=str) -> None:
    """Open at the value the query string names, when it is one of the options."""
    wanted = st.query_params.get(key)
    try:
        value = convert(wanted) if wanted is not None else None
    except ValueError:
        value = None
    if value in options:
        st.session_state[key] = value
    elif st.session_state.get(key) not in options:
        st.session_state.pop(key, None)


def url_picker(store: Store) -> str:
    """Host, then URL (type to filter); the URL is kept in the query string."""
    keys = page_keys(store)
    if not keys:
        fail("The store has no pages yet: `cdc ingest FILE` adds some.")
    hosts = sorted({host_of_key(key) for key in keys})
    from_query("url", keys)
    if "url" in st.session_state:
        st.session_state["host"] = host_of_key(st.session_state["url"])
    left, right = st.columns([1, 3])
    host = left.selectbox("Host", hosts, key="host", on_change=_host_changed, args=(keys,))
    on_host = [key for key in keys if host_of_key(key) == host]
    url = right.selectbox("URL", on_host, key="url", format_func=short_url, on_change=_to_query,
                          args=("url",))
    st.query_params["url"] = url
    return url


def generation_picker(column, label: str, key: str, options: list[int]) -> int:
    """A generation, opened from and kept in the query string. A number no generation starts
    at (a link made before an earlier fetch of the same content moved its start) opens the
    generation current at that time, as `Store.version` resolves it."""
    wanted = st.query_params.get(key)
    if wanted is not None and wanted.isdigit() and int(wanted) not in options:
        current = [option for option in options if option <= int(wanted)]
        if current:
            st.query_params[key] = str(max(current))
    from_query(key, options, int)
    value = column.selectbox(label, options, key=key, on_change=_to_query, args=(key,))
    st.query_params[key] = str(value)
    return value


def host_of_key(key: str) -> str:
    return key.split("://", 1)[-1].split("/", 1)[0]


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

# Joins each move's two labels (ids cdc-move-N-from / -to, see cdc.highlight) with a curve
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


def _version(store: Store) -> float:
    """Changes whenever a writer commits: the store file's modification time."""
    try:
        return store.path.stat().st_mtime
    except OSError:
        return 0.0


@st.cache_data(ttl=60, show_spinner=False, max_entries=64)
def _host_boilerplate(path: str, _version: float, host: str, share: float, min_pages: int):
    return host_boilerplate(Store(path), host, share, min_pages)


@st.cache_data(ttl=60, show_spinner=False, max_entries=8)
def _shared_across_hosts(path: str, _version: float):
    return shared_across_hosts(Store(path))


def cached_host_boilerplate(store: Store, host: str, share: float, min_pages: int):
    """Boilerplate per host, cached until the store changes: the sliders rerun the view."""
    return _host_boilerplate(str(store.path), _version(store), host, share, min_pages)


def cached_shared_across_hosts(store: Store):
    return _shared_across_hosts(str(store.path), _version(store))


def finished_runs(store: Store) -> list:
    """The store's finished runs, newest first: the Site view compares two of them."""
    return [run for run in store.runs() if run.finished]


@st.cache_data(ttl=60, show_spinner=False, max_entries=8)
def _run_captures(path: str, _version: float):
    return Store(path).run_captures()


def cached_run_captures(store: Store):
    """Each run's first and last capture, cached until the store changes."""
    return _run_captures(str(store.path), _version(store))


@st.cache_data(ttl=60, show_spinner=False, max_entries=32)
def _site_diff(path: str, _version: float, run_a: int, run_b: int, host: str | None, limit: int,
               offset: int, template_change: str | None):
    return Store(path).site_diff(run_a, run_b, host, limit=limit, offset=offset,
                                 template_change=template_change)


def cached_site_diff(store: Store, run_a: int, run_b: int, host: str | None, *, limit: int, offset: int,
                     template_change: str | None = None):
    """`Store.site_diff`, cached until the store changes: paging back reruns nothing."""
    return _site_diff(str(store.path), _version(store), run_a, run_b, host, limit, offset, template_change)


def query_to_state(key: str, name: str, valid, convert=str, default=None) -> None:
    """Before widget `key` is drawn: open it at the query string's `name` when that converts to
    a value `valid` accepts; else keep its value if still valid, else `default` (None: the
    widget's own). `state_to_query` is the widget's on_change, so a change wins over the URL."""
    wanted = st.query_params.get(name)
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


def state_to_query(key: str, name: str, *stale: str) -> None:
    """Widget `key`'s new value to the query string's `name`; the names in `stale` (filters
    that no longer apply, such as a page number) leave it."""
    value = st.session_state.get(key)
    if value is None or value == "":
        st.query_params.pop(name, None)
    else:
        st.query_params[name] = str(value)
    for other in stale:
        st.query_params.pop(other, None)


_MARKDOWN_ESCAPES = str.maketrans({char: "\\" + char for char in "\\`*_{}[]<>()#+-.!|~$:"})


def plain_markdown(text: str) -> str:
    """`text` (a run's label, say) as literal text inside a Streamlit message, which reads
    Markdown: every character Markdown would act on escaped."""
    return text.translate(_MARKDOWN_ESCAPES)
