"""Where the compiled kernels come from: a module built ahead of time, or Numba's JIT.

The kernels (chunking, the folding pass of normalisation, the word scan of refinement) are
Python functions compiled with Numba. Two ways to run them:

- **Ahead of time.** `python -m cdc.core.aot` compiles the same functions once into an
  extension module, `cdc.core._kernels`, with Numba's AOT compiler. A process that uses it never
  imports Numba or LLVM: about 140 MB less resident memory in every cdc process (Numba's
  modules, and LLVM with the kernels loaded from its cache), and half a second less
  start-up. The module records a digest of the kernels' source files, and one built from
  other sources is not used.
- **Just in time.** Without that module (no C compiler, or sources edited since), or with
  `CDC_KERNELS=jit`, the decorators are Numba's own: compiled on first use and cached.

Under `NUMBA_DISABLE_JIT=1` the kernels run as plain Python, the reference the tests
compare the compiled code against.
"""

from __future__ import annotations

import ctypes
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import xxhash

PACKAGE = Path(__file__).resolve().parent
MODULE = "cdc.core._kernels"
# The files whose code is compiled into the kernels, and the recipe (what is exported, with
# which signatures): a change to any of them makes a build ahead of time stale.
KERNEL_SOURCES = ("gear.py", "normalize.py", "words.py", "regions.py", "wordchanges.py", "alignment.py",
                  "lcs.py", "fastcompare.py", "native.py", "native_jit.py", "editwords.py",
                  "moves.py", "aot.py")


def source_digest() -> int:
    """A 64-bit digest of the kernels' source files, as a build ahead of time records it."""
    digest = xxhash.xxh3_64()
    for name in KERNEL_SOURCES:
        digest.update((PACKAGE / name).read_bytes())
    return digest.intdigest()


def _ahead_of_time() -> ModuleType | None:
    if os.environ.get("NUMBA_DISABLE_JIT") == "1" or os.environ.get("CDC_KERNELS") == "jit":
        return None
    # The kernels call XXH3_128bits by name: make the xxhash package's library, which
    # exports it, visible to the extension module before it is loaded.
    try:
        ctypes.CDLL(xxhash._xxhash.__file__, mode=ctypes.RTLD_GLOBAL)
        module = importlib.import_module(MODULE)
    except (ImportError, OSError, AttributeError):
        return None
    return module if module.source_digest() == source_digest() else None


AHEAD_OF_TIME = _ahead_of_time()


def njit(**options) -> Callable[[Callable], Callable]:
    """Numba's `njit(**options)`; with the kernels built ahead of time, the function as it
    is (the extension module's copy runs instead, and Numba is never imported)."""
    if AHEAD_OF_TIME is not None:
        return lambda function: function
    from numba import njit as numba_njit

    return numba_njit(**options)
