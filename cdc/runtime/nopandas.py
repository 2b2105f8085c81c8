"""Arrow without pandas: keep `pa.array` from importing pandas in a command that needs none.

Building any Arrow array from Python values (`pa.array`, and so every batch table of an
ingest) first asks pyarrow's lazy pandas shim whether the values are a pandas object, and
the first such question imports pandas: 0.33 s of an ingest's start, in a process that
builds rows from lists, for an answer that is always no.

`forgo_pandas` has the shim ask once with pandas out of reach: it remembers that pandas is
not there, and later arrays are built as before without the import. It remembers that for
the rest of the process: a pandas object given to pyarrow later is read as a plain
sequence (a categorical as its values), so only a command's own process, which passes no
pandas objects to pyarrow, calls it (`cdc ingest`). Where pandas is imported already, it does
nothing: the question costs nothing then.
"""

from __future__ import annotations

import sys

import pyarrow as pa


class _NoPandas:
    """A meta path finder that refuses to find pandas (only while it is installed)."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not needed here (cdc.runtime.nopandas)")
        return None


def forgo_pandas() -> None:
    """From now on in this process, building Arrow arrays from Python values does not import
    pandas; see the module docstring for who may call it."""
    if "pandas" in sys.modules:
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([], pa.int64())  # the shim tries pandas once, fails, and remembers
    finally:
        sys.meta_path.remove(finder)
