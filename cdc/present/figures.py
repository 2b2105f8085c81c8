"""Plotly figures for the dashboard: pure functions from the library's types to a Figure.

No Streamlit here: each function takes plain data and returns a `plotly.graph_objects.Figure`,
so the figures are tested without a browser and the app only places them.

Page text and host names reach the figures' hover labels and tick labels, which Plotly reads
as a small subset of HTML (`<b>`, `<br>`, `<a href>`...). So every such string goes through
`html.escape` first and shows as text. The chunk colours are `cdc.present.highlight.PALETTE`, the
ones the highlighted text uses.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from statistics import fmean

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from cdc.core.chunking import Chunk
from cdc.core.compare import ChangeReport
from cdc.core.excerpts import first_chars
from cdc.core.refine import MOVE
from cdc.core.timebins import BINS, HOVER_FORMATS, TICK_FORMATS, bin_range, bin_start, choose_bin
from cdc.core.verdicts import (
    DIFFERENT_PAGE,
    MINOR,
    NEW,
    REWRITE,
    UNCHANGED,
    changed_share,
    kept_share,
    verdict_order,
)
from cdc.present.highlight import PALETTE
from cdc.store import ChangeRow, GenerationInfo

VERDICT_COLOURS = {
    UNCHANGED: "#BAB0AC",
    MINOR: "#72B7B2",
    REWRITE: "#F58518",
    DIFFERENT_PAGE: "#B2182B",
    NEW: "#4C78A8",
}
CATEGORY_LABELS = {
    "shared": "shared, in order",
    "moved": "moved",
    "removed": "removed (old only)",
    "added": "added (new only)",
    "boilerplate": "boilerplate (ignored)",
}
LINK_ALPHA = 0.18  # opacity of the bands joining shared chunks
MOVE_LINK_ALPHA = 0.45  # opacity of the bands joining moved text: above the shared ones
TRACK_Y = {"old": 1.0, "new": 0.0}  # old above, new below
BAR_WIDTH = 0.36  # of the unit distance between tracks
EXCERPT_CHARS = 80
FIGURE_HEIGHT = 260
MARGIN = {"l": 10, "r": 10, "t": 40, "b": 40}
PERIODS = BINS  # hour, day, week, month: `cdc.core.timebins`
Span = tuple[int, int, int, int]  # old start, old end, new start, new end (bytes)
WEEK_MS = 7 * 24 * 3600 * 1000  # a week as a Plotly date-axis step
AXIS_TICKS = 8  # about this many ticks on a time axis
PERIOD_LENGTHS = {"hour": 3600 * 1000, "day": 24 * 3600 * 1000, "week": WEEK_MS, "month": "M1"}  # Plotly's


def escape(text: str) -> str:
    """Text for a Plotly label: '<', '>' and '&' escaped, so no tag is read from it."""
    return html.escape(text, quote=False)


def excerpt(text: bytes, chunk: Chunk, limit: int = EXCERPT_CHARS) -> str:
    """The first `limit` characters of a chunk's text, whitespace folded, escaped."""
    return escape(first_chars(text, chunk.offset, chunk.end, limit))


def _rgba(colour: str, alpha: float) -> str:
    red, green, blue = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def _categories(chunks: Sequence[Chunk], aligned: set[int], moved: set[int], other: str,
                ignored: frozenset[bytes]) -> list[str]:
    """Each chunk's kind: boilerplate, moved, shared, or `other` (added or removed)."""
    kinds = []
    for chunk in chunks:
        if chunk.digest in ignored:
            kinds.append("boilerplate")
        elif chunk.index in moved:
            kinds.append("moved")
        elif chunk.index in aligned:
            kinds.append("shared")
        else:  # includes a duplicate chunk left without a partner
            kinds.append(other)
    return kinds


def _hover(track: str, chunk: Chunk, kind: str, text: bytes | None) -> str:
    lines = [f"{track} chunk {chunk.index}: {CATEGORY_LABELS[kind]}",
             f"offset {chunk.offset:,}, {chunk.length:,} bytes", f"digest {chunk.digest.hex()[:8]}"]
    if text is not None:
        lines.append(excerpt(text, chunk))
    return "<br>".join(lines)


def _bar_traces(tracks: list[tuple[str, Sequence[Chunk], list[str], bytes | None]]) -> list[go.Bar]:
    """One horizontal bar trace per kind of chunk, over both tracks: few traces, fast to draw."""
    columns: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for track, chunks, kinds, text in tracks:
        for chunk, kind in zip(chunks, kinds):
            column = columns[kind]
            column["x"].append(chunk.length)
            column["base"].append(chunk.offset)
            column["y"].append(TRACK_Y[track])
            column["hovertext"].append(_hover(track, chunk, kind, text))
    return [
        go.Bar(orientation="h", name=CATEGORY_LABELS[kind], legendgroup=kind, width=BAR_WIDTH,
               marker={"color": PALETTE[kind], "line": {"color": "white", "width": 1}},
               hovertemplate="%{hovertext}<extra></extra>", **columns[kind])
        for kind in CATEGORY_LABELS if kind in columns
    ]


def _link_trace(spans: list[Span], kind: str) -> go.Scatter:
    """Bands from each old span to its new span (bytes): one trace, None between bands."""
    top, bottom = TRACK_Y["old"] - BAR_WIDTH / 2, TRACK_Y["new"] + BAR_WIDTH / 2
    x: list[float | None] = []
    y: list[float | None] = []
    for old_start, old_end, new_start, new_end in spans:
        x += [old_start, old_end, new_end, new_start, old_start, None]
        y += [top, top, bottom, bottom, top, None]
    moved = kind == "moved"
    line = {"width": 1.5, "color": PALETTE[kind]} if moved else {"width": 0}
    return go.Scatter(x=x, y=y, mode="lines", fill="toself", line=line,
                      fillcolor=_rgba(PALETTE[kind], MOVE_LINK_ALPHA if moved else LINK_ALPHA),
                      hoverinfo="skip", name=f"link: {kind}", legendgroup=kind, showlegend=False)


def _runs_of_pairs(pairs: list[tuple[Chunk, Chunk]]) -> list[Span]:
    """Pairs of chunks that follow one another on both sides, merged into byte spans."""
    spans: list[list[int]] = []
    for old, new in sorted(pairs, key=lambda pair: pair[1].offset):
        if spans and spans[-1][1] == old.offset and spans[-1][3] == new.offset:
            spans[-1][1], spans[-1][3] = old.end, new.end
        else:
            spans.append([old.offset, old.end, new.offset, new.end])
    return [(a, b, c, d) for a, b, c, d in spans]


def move_spans(report: ChangeReport, moved_pairs: list[tuple[Chunk, Chunk]]) -> list[Span]:
    """What moved, as (old start, old end, new start, new end) in bytes, numbered as the
    side-by-side text numbers its moves: the `move` edits in order, then the runs of moved
    chunks no move edit covers (all of them when the report has no edits)."""
    spans = [(e.old_offset, e.old_offset + e.old_length, e.new_offset, e.new_offset + e.new_length)
             for e in report.edits if e.kind == MOVE]
    covered = [(start, end) for start, end, _, _ in spans]
    return spans + [span for span in _runs_of_pairs(moved_pairs)
                    if not any(_within(span[0], span[1], start, end) for start, end in covered)]


def _within(start: int, end: int, outer_start: int, outer_end: int) -> bool:
    """Whether chunks at `start:end` are text at `outer_start:outer_end`: a chunk ends with its
    block's line break, which a move of the block leaves out, hence the 1."""
    return outer_start <= start and end <= outer_end + 1


def _moved_by_edits(chunks: Sequence[Chunk], kinds: list[str], ranges: list[tuple[int, int]]) -> list[str]:
    """Added or removed chunks wholly inside moved text are moved (and edited inside)."""
    if not ranges:
        return kinds
    return ["moved" if kind in ("added", "removed") and any(_within(c.offset, c.end, s, e) for s, e in ranges)
            else kind for c, kind in zip(chunks, kinds)]


def alignment_figure(old_chunks: list[Chunk], new_chunks: list[Chunk], report: ChangeReport,
                     old_text: bytes | None = None, new_text: bytes | None = None,
                     ignored: frozenset[bytes] = frozenset(), *,
                     labels: tuple[str, str] = ("old", "new")) -> go.Figure:
    """The two chunk lists as tracks (old above, new below), shared chunks joined by bands,
    moved text by stronger bands labelled `move N`, as the side-by-side text labels them.

    Bars are chunks laid end to end at their byte offsets, coloured by kind: shared (aligned
    in order), moved (chunks out of order, or inside a move edit's text), removed (old
    track), added (new track), boilerplate (`ignored` digests, grey). Hover shows index,
    offset, length, digest prefix and, given the texts, the first characters of the chunk's
    text (escaped). `labels` name the tracks.
    """
    moved_new = {chunk.index for chunk in report.moved}
    moved_pairs = {(o, n) for o, n in report.alignment if n in moved_new}
    old_by_index = {chunk.index: chunk for chunk in old_chunks}
    new_by_index = {chunk.index: chunk for chunk in new_chunks}
    spans = move_spans(report, [(old_by_index[o], new_by_index[n]) for o, n in sorted(moved_pairs)
                                if o in old_by_index and n in new_by_index])
    old_kinds = _moved_by_edits(old_chunks, _categories(
        old_chunks, {o for o, _ in report.alignment}, {o for o, _ in moved_pairs}, "removed", ignored),
        [(a, b) for a, b, _, _ in spans])
    new_kinds = _moved_by_edits(new_chunks, _categories(
        new_chunks, {n for _, n in report.alignment}, moved_new, "added", ignored),
        [(c, d) for _, _, c, d in spans])
    figure = go.Figure(_bar_traces([("old", old_chunks, old_kinds, old_text),
                                    ("new", new_chunks, new_kinds, new_text)]))
    shared = [(old_by_index[o].offset, old_by_index[o].end, new_by_index[n].offset, new_by_index[n].end)
              for o, n in report.alignment
              if (o, n) not in moved_pairs and o in old_by_index and n in new_by_index]
    if shared:
        figure.add_trace(_link_trace(shared, "shared"))
    if spans:
        figure.add_trace(_link_trace(spans, "moved"))
        for number, (old_start, old_end, new_start, new_end) in enumerate(spans, 1):
            figure.add_annotation(
                x=(old_start + old_end + new_start + new_end) / 4, y=(TRACK_Y["old"] + TRACK_Y["new"]) / 2,
                text=f"move {number}", showarrow=False, font={"size": 10, "color": "white"},
                bgcolor=PALETTE["moved"], borderpad=2)
    _alignment_layout(figure, old_chunks, new_chunks, labels)
    return figure


def _alignment_layout(figure: go.Figure, old_chunks: list[Chunk], new_chunks: list[Chunk],
                      labels: tuple[str, str]) -> None:
    width = max(old_chunks[-1].end if old_chunks else 0, new_chunks[-1].end if new_chunks else 0)
    figure.update_layout(
        barmode="overlay", height=FIGURE_HEIGHT, margin=MARGIN, plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        xaxis={"title": {"text": "byte offset"}, "range": [0, max(width, 1)], "showgrid": False,
               "zeroline": False},
        yaxis={"tickvals": [TRACK_Y["new"], TRACK_Y["old"]], "range": [-0.4, 1.4],
               "ticktext": [escape(labels[1]), escape(labels[0])], "showgrid": False,
               "zeroline": False, "fixedrange": True},
    )
    if not old_chunks and not new_chunks:
        figure.add_annotation(text="no chunks: both versions are empty", showarrow=False,
                              x=0.5, y=0.5, xref="paper", yref="paper")


def _trend_hover(row: GenerationInfo | ChangeRow) -> str:
    kept = kept_share(row.unchanged_ratio, row.retained_ratio)
    lines = [f"generation {row.generation}: {row.verdict or NEW}",
             f"kept {kept:.3f}" if kept is not None else "first generation"]
    if row.excerpt:
        lines.append(escape(row.excerpt[:EXCERPT_CHARS]))
    return "<br>".join(lines)


def trend_figure(history: Sequence[GenerationInfo]) -> go.Figure:
    """A page's change over its generations: `Store.generations(key)`, oldest first.

    `Store.history(key)` rows (`ChangeRow`) work too: they carry the same fields. Top: the
    share kept (the smaller of unchanged and retained ratio, as the verdict uses it),
    markers coloured by verdict, and the chunk similarity. Bottom: bytes added and removed.
    x is `fetched_at`. A first generation has no measures and shows as a `new` marker at 1.
    """
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.6, 0.4],
                           vertical_spacing=0.06)
    when = [row.fetched_at for row in history]
    kept = [kept_share(row.unchanged_ratio, row.retained_ratio) for row in history]
    figure.add_trace(go.Scatter(x=when, y=kept, mode="lines", name="kept share",
                                line={"color": "#888"}, hoverinfo="skip"), row=1, col=1)
    figure.add_trace(go.Scatter(x=when, y=[row.similarity for row in history], mode="lines",
                                name="similarity (chunks)", line={"color": "#888", "dash": "dot"},
                                hovertemplate="similarity %{y:.3f}<extra></extra>"), row=1, col=1)
    by_verdict: dict[str, list] = defaultdict(list)
    for row, share in zip(history, kept):
        by_verdict[row.verdict or NEW].append((row, 1.0 if share is None else share))
    for verdict, points in sorted(by_verdict.items(), key=lambda item: verdict_order(item[0])):
        figure.add_trace(go.Scatter(
            x=[row.fetched_at for row, _ in points], y=[share for _, share in points],
            mode="markers", name=escape(verdict), marker={"color": _verdict_colour(verdict), "size": 9},
            hovertext=[_trend_hover(row) for row, _ in points],
            hovertemplate="%{hovertext}<extra></extra>"), row=1, col=1)
    for name, values, colour in (("bytes added", [row.bytes_added for row in history], PALETTE["added"]),
                                 ("bytes removed", [row.bytes_removed for row in history],
                                  PALETTE["removed"])):
        figure.add_trace(go.Bar(x=when, y=values, name=name, marker={"color": colour}), row=2, col=1)
    figure.update_layout(height=2 * FIGURE_HEIGHT, margin=MARGIN, barmode="group",
                         legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0})
    figure.update_xaxes(**time_axis(choose_bin(when), when))
    figure.update_yaxes(title_text="share", range=[0, 1.05], row=1, col=1)
    figure.update_yaxes(title_text="bytes", row=2, col=1)
    return figure


def _verdict_colour(verdict: str) -> str:
    return VERDICT_COLOURS.get(verdict, PALETTE["boilerplate"])


def time_axis(bin_name: str, times: Sequence[date | datetime] = ()) -> dict:
    """A date axis for times binned by `bin_name` (`cdc.core.timebins`): its tick and hover formats
    and, given the `times`, a tick every whole number of bins from the first one's, about
    `AXIS_TICKS` of them (Plotly's own steps can be finer than the format: "Jan 06" twice)."""
    axis = {"type": "date", "tickformat": TICK_FORMATS[bin_name], "hoverformat": HOVER_FORMATS[bin_name]}
    if times:
        starts = bin_range(min(times), max(times), bin_name)
        step = -(-len(starts) // AXIS_TICKS)  # bins a tick, rounded up
        length = PERIOD_LENGTHS[bin_name]
        axis.update(tick0=str(starts[0]),
                    dtick=f"M{step}" if isinstance(length, str) else step * length)
    return axis


def compare_trend_figure(history: Sequence[GenerationInfo], old: int, new: int) -> go.Figure:
    """Compare's small trend: a page's kept share and similarity per generation over fetch
    time, the generations `old` and `new` marked "from" and "to".

    Each point's `customdata` is its generation number, so a selected point names the
    generation to compare (the app reads it from the chart's selection). A generation whose
    text is no longer retained is a hollow marker: it cannot be compared.
    """
    when = [row.fetched_at for row in history]
    kept = [kept_share(row.unchanged_ratio, row.retained_ratio) for row in history]
    figure = go.Figure()
    figure.add_trace(go.Scatter(
        x=when, y=[1.0 if share is None else share for share in kept], mode="lines+markers",
        name="kept share", customdata=[row.generation for row in history], line={"color": "#4C78A8"},
        marker={"size": 9, "color": [_verdict_colour(row.verdict or NEW) for row in history],
                "symbol": ["circle" if row.retained else "circle-open" for row in history],
                "line": {"width": 1, "color": "#4C78A8"}},
        hovertext=[_trend_hover(row) + ("" if row.retained else "<br>text no longer retained")
                   for row in history],
        hovertemplate="%{hovertext}<extra></extra>"))
    figure.add_trace(go.Scatter(
        x=when, y=[row.similarity for row in history], mode="lines+markers", name="similarity (chunks)",
        customdata=[row.generation for row in history], line={"color": "#888", "dash": "dot"},
        marker={"size": 5, "color": "#888"}, hovertemplate="similarity %{y:.3f}<extra></extra>"))
    by_generation = {row.generation: (row, share) for row, share in zip(history, kept)}
    marked = [(label, *by_generation[g]) for label, g in (("from", old), ("to", new)) if g in by_generation]
    figure.add_trace(go.Scatter(
        x=[row.fetched_at for _, row, _ in marked], y=[1.0 if s is None else s for _, _, s in marked],
        customdata=[row.generation for _, row, _ in marked], text=[label for label, _, _ in marked],
        mode="markers+text", textposition="top center", name="compared",
        marker={"size": 16, "color": "rgba(0,0,0,0)", "line": {"width": 2.5, "color": "#B2182B"}},
        hovertemplate="%{text}: generation %{customdata}<extra></extra>"))
    figure.update_layout(height=FIGURE_HEIGHT, margin=MARGIN, clickmode="event+select", dragmode=False,
                         legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
                         xaxis=time_axis(choose_bin(when), when),
                         yaxis={"title": {"text": "share"}, "range": [0, 1.15], "fixedrange": True})
    return figure


def verdict_figure(counts: dict[str, int]) -> go.Figure:
    """How many changes had each verdict: one bar per verdict, in the usual order. A first
    sighting (`new`) is not a change and is left out: `first_sightings(counts)` says how many."""
    verdicts = sorted((v for v in counts if v != NEW), key=verdict_order)
    figure = go.Figure(go.Bar(
        x=[escape(v) for v in verdicts], y=[counts[v] for v in verdicts],
        marker={"color": [_verdict_colour(v) for v in verdicts]},
        hovertemplate="%{x}: %{y:,}<extra></extra>"))
    figure.update_layout(height=FIGURE_HEIGHT, margin=MARGIN, xaxis={"title": {"text": "verdict"}},
                         yaxis={"title": {"text": "changes"}})
    if not verdicts:
        figure.add_annotation(text="no changes yet", showarrow=False, x=0.5, y=0.5, xref="paper",
                              yref="paper")
    return figure


def first_sightings(counts: dict[str, int]) -> int:
    """How many change rows are a page's first generation: counted apart from the changes."""
    return counts.get(NEW, 0)


# --- hosts ----------------------------------------------------------------------------------

HostRow = tuple[str, date | datetime, float]  # host, when, how much changed


def changed_share_rows(changes: Iterable[ChangeRow]) -> list[HostRow]:
    """`Store.changes()` rows as the host figures' input: (host, fetched_at, changed share).

    The changed share is 1 minus the share kept (the verdict's measure); a first generation
    has none and is left out.
    """
    rows = []
    for change in changes:
        changed = changed_share(change.unchanged_ratio, change.retained_ratio)
        if changed is not None and change.previous_generation is not None:
            rows.append((change.host, change.fetched_at, changed))
    return rows


def _check_period(period: str) -> None:
    if period not in PERIODS:
        raise ValueError(f"period must be one of {PERIODS}, got {period!r}")


def period_start(when: date | datetime, period: str) -> date | datetime:
    """The hour (a datetime), or the day, the Monday of the ISO week or the first of the
    month (a date), that `when` falls in."""
    _check_period(period)
    return bin_start(when, period)


def _by_host_and_period(rows: Iterable[HostRow], period: str) -> dict[str, dict[date, list[float]]]:
    _check_period(period)
    grouped: dict[str, dict[date, list[float]]] = defaultdict(lambda: defaultdict(list))
    for host, when, value in rows:
        grouped[host][period_start(when, period)].append(value)
    return grouped


def _busiest(grouped: dict[str, dict[date, list[float]]], max_hosts: int | None) -> list[str]:
    """Hosts with the most changes first (name breaks ties), at most `max_hosts`."""
    hosts = sorted(grouped, key=lambda h: (-sum(map(len, grouped[h].values())), h))
    return hosts if max_hosts is None else hosts[:max_hosts]


def host_heatmap(rows: Iterable[HostRow], *, period: str = "week", aggregate: str = "mean",
                 max_hosts: int | None = 40, value_label: str = "changed share",
                 span: tuple[date | datetime, date | datetime] | None = None) -> go.Figure:
    """Hosts by time: how much changed per host per hour, day, week or month.

    `rows`: (host, when, value) per change; `when` a date or datetime, `value` how much
    changed, such as the changed share from `changed_share_rows(store.changes())`, or bytes
    changed. Cells hold the `aggregate` ("mean" or "sum") of the values in the period; empty
    cells mean no change was recorded. Rows are the `max_hosts` hosts with the most changes,
    busiest on top. `span` (first, last), such as the crawls' first and last fetch, makes a
    column of every period between them, changed or not, so the axis shows the time the
    data covers; `cdc.core.timebins.choose_bin` picks a `period` that fits it. The colour scale
    starts at 0, so one cell (or cells all alike) still reads as an amount, not a range.
    """
    if aggregate not in ("mean", "sum"):
        raise ValueError(f"aggregate must be 'mean' or 'sum', got {aggregate!r}")
    combine = fmean if aggregate == "mean" else sum
    grouped = _by_host_and_period(rows, period)
    hosts = _busiest(grouped, max_hosts)
    periods = {p for host in hosts for p in grouped[host]}
    if span is not None:
        periods.update(bin_range(*span, period))
    periods = sorted(periods)
    z = [[combine(grouped[host][p]) if p in grouped[host] else None for p in periods] for host in hosts]
    counts = [[len(grouped[host].get(p, ())) for p in periods] for host in hosts]
    top = max((value for line in z for value in line if value is not None), default=0)
    figure = go.Figure(go.Heatmap(
        x=periods, y=[escape(host) for host in hosts], z=z, zmin=0, zmax=top or 1, customdata=counts,
        colorscale="Reds", colorbar={"title": {"text": escape(value_label)}}, hoverongaps=False,
        # Each cell spans its period, start to end, not centred on the period's start.
        xperiod=PERIOD_LENGTHS[period], xperiodalignment="middle",
        hovertemplate=(f"%{{y}}<br>{period} of %{{x}}<br>{aggregate} {escape(value_label)} %{{z:.3g}}"
                       "<br>changes %{customdata}<extra></extra>")))
    figure.update_layout(height=max(FIGURE_HEIGHT, 60 + 22 * len(hosts)), margin=MARGIN,
                         yaxis={"autorange": "reversed", "type": "category"},
                         xaxis={"title": {"text": period}, **time_axis(period, periods)})
    return figure


def host_change_distribution(rows: Iterable[HostRow], *, period: str = "week", max_hosts: int | None = 8,
                             value_label: str = "changed share") -> go.Figure:
    """Per host, the spread of change in each hour, day, week or month: one box per host and
    period (`cdc.core.timebins.choose_bin` picks one that fits the rows' span).

    `rows`: as for `host_heatmap`, (host, when, value) per change. Boxes of one host share a
    colour; for one host's page pass only its rows. At most `max_hosts` hosts, busiest first.
    """
    grouped = _by_host_and_period(rows, period)
    figure = go.Figure()
    for host in _busiest(grouped, max_hosts):
        periods = sorted(grouped[host])
        figure.add_trace(go.Box(
            x=[p for p in periods for _ in grouped[host][p]],
            y=[value for p in periods for value in grouped[host][p]],
            name=escape(host), boxpoints="outliers"))
    figure.update_layout(height=FIGURE_HEIGHT + 100, margin=MARGIN, boxmode="group",
                         xaxis={"title": {"text": period},
                                **time_axis(period, [p for host in grouped for p in grouped[host]])},
                         yaxis={"title": {"text": escape(value_label)}},
                         legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0})
    return figure
