"""The dashboard's figures: built from real comparisons, coloured by kind, page text escaped."""

from __future__ import annotations

import time
from datetime import date, datetime, timedelta

import plotly.graph_objects as go
import pytest

from cdc import chunk_content, compare
from cdc.present.figures import (
    CATEGORY_LABELS,
    PALETTE,
    TRACK_Y,
    alignment_figure,
    changed_share_rows,
    host_change_distribution,
    host_heatmap,
    period_start,
    trend_figure,
    verdict_figure,
)
from cdc.store import ChangeRow, GenerationInfo
from tests import textgen


def bars(figure: go.Figure, kind: str) -> go.Bar | None:
    found = [t for t in figure.data if t.type == "bar" and t.name == CATEGORY_LABELS[kind]]
    assert len(found) <= 1
    return found[0] if found else None


def segments(figure: go.Figure, track: str) -> list[tuple[int, int]]:
    """(offset, length) of every bar on a track, in order."""
    return sorted((base, length) for t in figure.data if t.type == "bar"
                  for base, length, y in zip(t.base, t.x, t.y) if y == TRACK_Y[track])


def on_track(trace: go.Bar, track: str) -> list[int]:
    return sorted(base for base, y in zip(trace.base, trace.y) if y == TRACK_Y[track])


@pytest.fixture(scope="module")
def edited_page():
    """A 100 KB page with an insertion, a replaced stretch and two swapped blocks."""
    old = textgen.text(3, 100_000)
    new = (old[:20_000] + b"An inserted sentence here. " + old[20_000:40_000] + textgen.text(9, 3000)
           + old[43_000:60_000] + old[70_000:80_000] + old[60_000:70_000] + old[80_000:])
    old_chunks, new_chunks = chunk_content(old), chunk_content(new)
    report = compare(old_chunks, new_chunks, old_text=old, new_text=new)
    return old, new, old_chunks, new_chunks, report


def test_every_chunk_is_one_bar_on_its_track(edited_page):
    old, new, old_chunks, new_chunks, report = edited_page
    figure = alignment_figure(old_chunks, new_chunks, report, old, new)
    assert segments(figure, "old") == [(c.offset, c.length) for c in old_chunks]
    assert segments(figure, "new") == [(c.offset, c.length) for c in new_chunks]
    assert sum(t.type == "bar" for t in figure.data) <= len(CATEGORY_LABELS)
    assert len(figure.data) <= len(CATEGORY_LABELS) + 2  # bars by kind, links shared and moved
    assert figure.layout.height == 260
    figure.to_json()  # serialisable, as Streamlit needs it


def test_moved_added_and_removed_chunks_are_coloured_as_such(edited_page):
    old, new, old_chunks, new_chunks, report = edited_page
    assert report.moved and report.added and report.removed
    figure = alignment_figure(old_chunks, new_chunks, report, old, new)
    moved, added, removed = bars(figure, "moved"), bars(figure, "added"), bars(figure, "removed")
    assert moved.marker.color == PALETTE["moved"]
    assert added.marker.color == PALETTE["added"]
    assert removed.marker.color == PALETTE["removed"]
    assert on_track(moved, "new") == [c.offset for c in report.moved]
    moved_old = {o for o, n in report.alignment if n in {c.index for c in report.moved}}
    assert on_track(moved, "old") == sorted(old_chunks[o].offset for o in moved_old)
    assert on_track(added, "new") == [c.offset for c in report.added] and not on_track(added, "old")
    assert on_track(removed, "old") == [c.offset for c in report.removed]
    links = {t.name: t for t in figure.data if t.type == "scatter"}
    moves = [e for e in report.edits if e.kind == "move"]
    assert len(moves) == 2  # the two swapped blocks: one band each, labelled as the text labels them
    assert links["link: moved"].x.count(None) == len(moves)
    assert [a.text for a in figure.layout.annotations] == ["move 1", "move 2"]
    assert links["link: shared"].x.count(None) == len(report.alignment) - len(report.moved)
    # Without the texts there are no edits: one band per run of moved chunks.
    chunks_only = compare(old_chunks, new_chunks)
    figure = alignment_figure(old_chunks, new_chunks, chunks_only)
    links = {t.name: t for t in figure.data if t.type == "scatter"}
    bands = links["link: moved"].x.count(None)
    assert bands == len(figure.layout.annotations) >= 1
    moved_bytes = sum(c.length for c in chunks_only.moved)
    assert sum(links["link: moved"].x[k + 1] - links["link: moved"].x[k]
               for k in range(0, 6 * bands, 6)) == moved_bytes  # the runs cover the moved chunks


def test_a_moved_and_edited_paragraph_is_moved_chunks_joined_by_a_band():
    paragraphs = textgen.paragraphs(40, 30)
    words = paragraphs[3].split(" ")
    words[4] = "EDITED"
    new_paragraphs = [*paragraphs[:3], *paragraphs[4:25], " ".join(words), *paragraphs[25:]]
    old, new = "\n".join(paragraphs).encode(), "\n".join(new_paragraphs).encode()
    old_chunks, new_chunks = chunk_content(old), chunk_content(new)
    report = compare(old_chunks, new_chunks, old_text=old, new_text=new)
    [move] = [e for e in report.edits if e.kind == "move"]
    assert not report.moved  # the edit changed the paragraph's chunk: no chunk moved
    figure = alignment_figure(old_chunks, new_chunks, report, old, new)
    moved = bars(figure, "moved")
    # (a chunk holds its block's line break; the move, the block's text)
    inside_old = [c.offset for c in old_chunks
                  if move.old_offset <= c.offset and c.end <= move.old_offset + move.old_length + 1]
    inside_new = [c.offset for c in new_chunks
                  if move.new_offset <= c.offset and c.end <= move.new_offset + move.new_length + 1]
    assert inside_old and inside_new
    assert on_track(moved, "old") == inside_old and on_track(moved, "new") == inside_new
    [band] = [t for t in figure.data if t.type == "scatter" and t.name == "link: moved"]
    assert list(band.x[:4]) == [move.old_offset, move.old_offset + move.old_length,
                                move.new_offset + move.new_length, move.new_offset]
    assert [a.text for a in figure.layout.annotations] == ["move 1"]


def test_moved_chunks_inside_a_move_edit_are_one_band_numbered_as_the_text():
    paragraphs = textgen.paragraphs(41, 30)
    new_paragraphs = [*paragraphs[:3], *paragraphs[5:25], *paragraphs[3:5], *paragraphs[25:]]
    old, new = "\n".join(paragraphs).encode(), "\n".join(new_paragraphs).encode()
    old_chunks, new_chunks = chunk_content(old), chunk_content(new)
    report = compare(old_chunks, new_chunks, old_text=old, new_text=new)
    assert report.moved and [e.kind for e in report.edits] == ["move"]
    figure = alignment_figure(old_chunks, new_chunks, report, old, new)
    assert [a.text for a in figure.layout.annotations] == ["move 1"]


def test_hover_text_is_escaped():
    page = textgen.text(6, 12_000)
    old = b"Title <b>x</b> then <script>alert(1)</script> & more. " + page
    new = old[:6000] + b"A new sentence. " + old[6000:]
    old_chunks, new_chunks = chunk_content(old), chunk_content(new)
    report = compare(old_chunks, new_chunks, old_text=old, new_text=new)
    figure = alignment_figure(old_chunks, new_chunks, report, old, new)
    hovers = [text for t in figure.data if t.type == "bar" for text in t.hovertext]
    first = next(h for h in hovers if h.startswith("old chunk 0:"))
    assert "&lt;b&gt;x&lt;/b&gt;" in first and "&lt;script&gt;" in first and "&amp; more" in first
    assert not any("<b>" in h or "<script>" in h for h in hovers)
    assert f"digest {old_chunks[0].hex[:8]}" in first and "offset 0," in first


def test_boilerplate_is_grey_and_left_out_of_the_links(edited_page):
    old, new, old_chunks, new_chunks, report = edited_page
    ignored = frozenset({old_chunks[0].digest})
    report = compare(old_chunks, new_chunks, old_text=old, new_text=new, ignore=ignored)
    figure = alignment_figure(old_chunks, new_chunks, report, old, new, ignored)
    grey = bars(figure, "boilerplate")
    assert grey.marker.color == PALETTE["boilerplate"]
    assert on_track(grey, "old") == [0] and on_track(grey, "new") == [0]
    assert segments(figure, "old") == [(c.offset, c.length) for c in old_chunks]


def test_empty_generations_do_not_crash():
    for old, new in ((b"", b""), (b"", textgen.text(1, 5000)), (textgen.text(1, 5000), b"")):
        old_chunks, new_chunks = chunk_content(old), chunk_content(new)
        report = compare(old_chunks, new_chunks, old_text=old, new_text=new)
        figure = alignment_figure(old_chunks, new_chunks, report, old, new)
        assert len(segments(figure, "old")) == len(old_chunks)
        assert len(segments(figure, "new")) == len(new_chunks)
        figure.to_json()
    assert alignment_figure([], [], compare([], [])).layout.annotations


def test_without_texts_the_hover_has_no_excerpt(edited_page):
    _, _, old_chunks, new_chunks, report = edited_page
    figure = alignment_figure(old_chunks, new_chunks, report, labels=("gen <1>", "gen 2"))
    hovers = [text for t in figure.data if t.type == "bar" for text in t.hovertext]
    assert all(h.count("<br>") == 2 for h in hovers)
    assert list(figure.layout.yaxis.ticktext) == ["gen 2", "gen &lt;1&gt;"]


def test_alignment_figure_time_for_a_100kb_page(edited_page):
    old, new, old_chunks, new_chunks, report = edited_page
    alignment_figure(old_chunks, new_chunks, report, old, new)  # Plotly loads its validators once
    times = []
    for _ in range(20):
        start = time.perf_counter()
        alignment_figure(old_chunks, new_chunks, report, old, new)
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"\nalignment_figure, {len(old)} B page, {len(old_chunks)}+{len(new_chunks)} chunks: "
          f"median {times[10] * 1e3:.1f} ms, best {times[0] * 1e3:.1f} ms")


T0 = datetime(2024, 3, 4, 12, 0)


def generation(number: int, verdict: str | None, kept: float | None, excerpt: str | None = None):
    return GenerationInfo(number, T0 + timedelta(days=number), 5000, 3, True, verdict,
                          kept, kept, kept, 0 if kept is None else 100, 0 if kept is None else 20, excerpt)


def change_row(host: str, when: datetime, kept: float | None, verdict: str = "minor") -> ChangeRow:
    previous = None if kept is None else 1
    return ChangeRow(f"https://{host}/p", host, 2, previous, when, verdict, kept, kept, kept,
                     10, 5, 1, "<b>x</b>", None if kept is None else "edits")


def test_trend_figure_takes_generations_or_history_rows():
    history = [generation(1, "new", None), generation(2, "minor", 0.95, "<b>x</b> $1 → $2"),
               generation(3, "rewrite", 0.4), generation(4, "minor", 0.9)]
    figure = trend_figure(history)
    markers = {t.name: t for t in figure.data if t.type == "scatter" and t.mode == "markers"}
    assert set(markers) == {"new", "minor", "rewrite"}
    assert len(markers["minor"].x) == 2 and list(markers["new"].y) == [1.0]
    hovers = [h for t in markers.values() for h in t.hovertext]
    assert any("&lt;b&gt;x&lt;/b&gt;" in h for h in hovers) and not any("<b>" in h for h in hovers)
    assert {t.name for t in figure.data if t.type == "bar"} == {"bytes added", "bytes removed"}
    figure.to_json()
    rows = [change_row("a.example", T0, None, "new"), change_row("a.example", T0 + timedelta(1), 0.8)]
    assert {t.name for t in trend_figure(rows).data
            if t.type == "scatter" and t.mode == "markers"} == {"new", "minor"}
    trend_figure([]).to_json()


def test_verdict_figure_orders_verdicts():
    figure = verdict_figure({"rewrite": 3, "minor": 10, "new": 5, "odd <i>": 1})
    [bar] = figure.data
    assert list(bar.x) == ["minor", "rewrite", "odd &lt;i&gt;"]  # first sightings are not changes
    assert list(bar.y) == [10, 3, 1]
    verdict_figure({}).to_json()


def host_rows() -> list[tuple[str, datetime, float]]:
    rows = []
    for day in range(21):
        when = T0 + timedelta(days=day)
        rows.append(("a.example", when, 0.1))
        rows.append(("a.example", when, 0.3))
        if day % 7 == 0:
            rows.append(("<b>b</b>.example", when.date(), 0.9))
    return rows


def test_host_heatmap_cells_are_hosts_by_period():
    figure = host_heatmap(host_rows())
    [heatmap] = figure.data
    assert list(heatmap.y) == ["a.example", "&lt;b&gt;b&lt;/b&gt;.example"]  # busiest first
    assert list(heatmap.x) == [period_start(T0 + timedelta(days=d), "week") for d in (0, 7, 14)]
    assert [round(v, 6) for v in heatmap.z[0]] == [0.2, 0.2, 0.2]
    assert list(heatmap.z[1]) == [0.9, 0.9, 0.9]
    daily = host_heatmap(host_rows(), period="day", aggregate="sum", max_hosts=1).data[0]
    assert len(daily.x) == 21 and list(daily.y) == ["a.example"] and round(daily.z[0][0], 6) == 0.4
    host_heatmap([]).to_json()
    with pytest.raises(ValueError, match="period"):
        host_heatmap([], period="fortnight")


def test_host_change_distribution_has_a_box_per_host():
    figure = host_change_distribution(host_rows())
    assert [t.name for t in figure.data] == ["a.example", "&lt;b&gt;b&lt;/b&gt;.example"]
    assert len(figure.data[0].y) == 42 and set(figure.data[0].x) == {
        period_start(T0 + timedelta(days=d), "week") for d in (0, 7, 14)}
    host_change_distribution([]).to_json()


def test_changed_share_rows_skip_first_generations():
    rows = changed_share_rows([change_row("a.example", T0, None, "new"), change_row("a.example", T0, 0.75)])
    assert rows == [("a.example", T0, 0.25)]


def test_period_start():
    assert period_start(date(2024, 3, 7), "week") == date(2024, 3, 4)
    assert period_start(datetime(2024, 3, 7, 23, 59), "day") == date(2024, 3, 7)
