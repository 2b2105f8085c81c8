"""Time bins that fit the data: hours for a day's crawls, days for a month, weeks for a year,
months beyond. Pure functions, shared by the figures and the store's bucketed reads.

A bin is named by the `date_trunc` part DuckDB knows ("hour", "day", "week", "month"), so a
view can pass the same name to `Store.host_activity(bucket=...)` and to a figure.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta

BINS = ("hour", "day", "week", "month")
# The longest span each bin is chosen for: at most 48 hours, 92 days or 105 weeks on an axis.
HOUR_SPAN = timedelta(days=2)
DAY_SPAN = timedelta(days=92)
WEEK_SPAN = timedelta(days=2 * 366)
MAX_FILLED_BINS = 500  # an axis filled bin by bin stops here (a bin far too fine for its span)

# Plotly tick and hover formats per bin (a date axis).
TICK_FORMATS = {"hour": "%H:%M\n%b %d", "day": "%b %d\n%Y", "week": "%b %d\n%Y", "month": "%b %Y"}
HOVER_FORMATS = {"hour": "%Y-%m-%d %H:00", "day": "%Y-%m-%d", "week": "week of %Y-%m-%d", "month": "%Y-%m"}


def _check(bin_name: str) -> None:
    if bin_name not in BINS:
        raise ValueError(f"bin must be one of {BINS}, got {bin_name!r}")


def _as_datetime(when: date | datetime) -> datetime:
    return when if isinstance(when, datetime) else datetime(when.year, when.month, when.day)


def choose_bin(times: Iterable[date | datetime]) -> str:
    """The bin for an axis over `times`, from their span (last minus first): "hour" up to
    two days, "day" up to three months, "week" up to two years, then "month". No times,
    or a single one, is a span of zero: hours."""
    first = last = None
    for when in times:
        moment = _as_datetime(when)
        if first is None or moment < first:
            first = moment
        if last is None or moment > last:
            last = moment
    span = timedelta(0) if first is None else last - first
    if span <= HOUR_SPAN:
        return "hour"
    if span <= DAY_SPAN:
        return "day"
    if span <= WEEK_SPAN:
        return "week"
    return "month"


def bin_start(when: date | datetime, bin_name: str) -> date | datetime:
    """The start of the bin `when` falls in: the hour (a datetime), or the day, the Monday of
    the ISO week, the first of the month (dates)."""
    _check(bin_name)
    if bin_name == "hour":
        return _as_datetime(when).replace(minute=0, second=0, microsecond=0)
    day = when.date() if isinstance(when, datetime) else when
    if bin_name == "day":
        return day
    if bin_name == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def next_bin(start: date | datetime, bin_name: str) -> date | datetime:
    """The start of the bin after the one starting at `start`."""
    _check(bin_name)
    if bin_name == "hour":
        return start + timedelta(hours=1)
    if bin_name == "day":
        return start + timedelta(days=1)
    if bin_name == "week":
        return start + timedelta(weeks=1)
    return (start.replace(day=28) + timedelta(days=4)).replace(day=1)


def bin_range(first: date | datetime, last: date | datetime, bin_name: str,
              limit: int = MAX_FILLED_BINS) -> list[date | datetime]:
    """Every bin start from `first`'s bin to `last`'s, at most `limit` of them."""
    start, end = bin_start(first, bin_name), bin_start(last, bin_name)
    starts = []
    while start <= end and len(starts) < limit:
        starts.append(start)
        start = next_bin(start, bin_name)
    return starts
