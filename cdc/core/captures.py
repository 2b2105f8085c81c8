"""Generation numbers: the capture time of a generation's first fetch, YYYYMMDDhhmmss (UTC),
as Wayback and CDX indexes name captures. A number never changes when older fetches are
imported later (a backfill), so what is keyed by it (annotations, watch hits) survives."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

CAPTURE_FORMAT = "%Y%m%d%H%M%S"


def capture_id(moment: datetime) -> int:
    """A generation's number: the time of its first fetch as YYYYMMDDhhmmss (UTC)."""
    return int(moment.strftime(CAPTURE_FORMAT))


def capture_time(generation: int) -> datetime:
    """The time a generation number spells (the second its first fetch fell in)."""
    return datetime.strptime(str(generation), CAPTURE_FORMAT)


def current_generation(numbers: Iterable[int], number: int) -> int | None:
    """The generation a number names among a page's generation `numbers`: the one it is, else
    the last to start by then (a fetch of its content found later can move a generation's
    start earlier, and a number held before still falls inside it); None before the first."""
    return max((held for held in numbers if held <= number), default=None)


def number_after(previous: int | None, moment: datetime) -> int:
    """The number of a generation first fetched at `moment`, after one numbered `previous`:
    its capture id, or the next second after `previous` when two generations of a page
    began in the same second."""
    number = capture_id(moment)
    if previous is not None and number <= previous:
        number = capture_id(capture_time(previous) + timedelta(seconds=1))
    return number


def renumbered(rows: list[tuple[str, int, datetime]]) -> tuple[list[str], list[int], list[int]]:
    """Keys, old numbers and capture ids of (natural_key, generation, fetched_at) rows in key
    and generation order: an older store's generations 1, 2, 3 numbered as ingest numbers them."""
    keys, old, new = [], [], []
    previous_key, number = None, None
    for key, generation, fetched_at in rows:
        number = number_after(number if key == previous_key else None, fetched_at)
        previous_key = key
        keys.append(key)
        old.append(generation)
        new.append(number)
    return keys, old, new
