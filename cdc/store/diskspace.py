"""A full disk, told apart from other errors and said in one line: DuckDB's errors carry
the C library's message, Python's its errno, and a failed ROLLBACK hides the first."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from cdc.errors import StoreFullError

# What the C library says for ENOSPC and EDQUOT: DuckDB's messages carry its strerror text.
NO_SPACE_MESSAGES = ("No space left on device", "Disk quota exceeded")
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def out_of_space(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised while handling (a ROLLBACK that failed on a
    database the full disk invalidated), is a full disk."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of contexts; never a long one
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno in NO_SPACE_ERRNOS:
            return True
        if any(message in str(seen) for message in NO_SPACE_MESSAGES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def disk_full_error(path: Path) -> StoreFullError:
    """The one-line message for a full disk under the store at `path`."""
    try:
        free = f"{shutil.disk_usage(path.parent).free / 1e6:,.1f} MB free"
    except OSError:
        free = "free space unknown"
    return StoreFullError(f"the disk holding {path} is full ({free}): free space there, then run the "
                          "same command again (the store keeps what was committed before; the run "
                          "completes it)")
