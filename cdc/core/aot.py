"""Compile the kernels ahead of time into `cdc.core._kernels`: `python -m cdc.core.aot`.

The same Python functions Numba's JIT compiles (see `cdc.core.compiled`), compiled once with
Numba's AOT compiler (`numba.pycc`) into an extension module in the package directory,
for this machine's CPU, as the JIT would. Needs a C compiler; takes about ten seconds. Run it
again after changing a kernel: until then the JIT runs them, as a build from other sources
is not used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def kernels() -> list[tuple]:
    """What is compiled: (exported name, signature, module, function). Pages travel as
    `bytes`: the kernels that take them have a `bytes` entry point, which saves wrapping
    each page in an array (a third of a microsecond a call)."""
    from numba import types

    text = types.Bytes(types.uint8, 1, "C", readonly=True)
    i8, u8, u1 = types.int64, types.uint64, types.uint8

    def vector(dtype):
        return types.Array(dtype, 1, "C")

    records = types.Array(i8, 2, "C")
    rows = types.Array(i8, 2, "A")  # chunk or word rows, maybe a slice of a larger table
    return [
        ("cut", i8(vector(u1), vector(i8), records), "cdc.core.gear", "_cut"),
        ("cut_bytes", i8(text, vector(i8), records), "cdc.core.gear", "_cut"),
        ("cut_documents", i8(vector(u8), vector(i8), i8, i8, vector(i8), records, vector(i8)),
         "cdc.core.gear", "_cut_documents"),
        ("fold_bytes", i8(text, vector(u1)), "cdc.core.normalize", "_fold_bytes"),
        ("fold_blocks", i8(text, vector(u1)), "cdc.core.normalize", "_fold_blocks"),
        ("fold_lines", i8(text, vector(u1)), "cdc.core.normalize", "_fold_lines"),
        ("scan_words", i8(text, records, vector(u8), records), "cdc.core.words", "_scan_words"),
        ("count_chunk_words", i8(text, types.Array(i8, 2, "A"), i8), "cdc.core.words", "_count_chunk_words"),
        ("is_token_boundary", types.boolean(text, i8), "cdc.core.words", "is_token_boundary"),
        ("bound_region", i8(text, text, records, records, vector(i8)), "cdc.core.regions", "_bound"),
        ("pair_words", i8(text, rows, vector(u1), text, rows, vector(u1), records, vector(u8), records,
                          vector(u8), records, records), "cdc.core.regions", "_pair_words"),
        ("join_windows", i8(text, rows, vector(u1), text, rows, vector(u1), records, records),
         "cdc.core.regions", "_join_windows"),
        ("word_edits", i8(text, text, vector(u8), records, vector(u8), records, records, records, vector(i8),
                          types.boolean, records, records, vector(u8), vector(u8), vector(i8)),
         "cdc.core.wordchanges", "_word_edits"),
        ("digest_ids", i8(rows, rows, vector(i8), vector(i8), vector(i8)), "cdc.core.alignment",
         "_digest_ids"),
        ("chunk_alignment", i8(vector(i8), vector(i8), rows, rows, i8, vector(i8), vector(i8), i8, vector(i8),
                               vector(i8), vector(i8), vector(i8), records, records, vector(u1), vector(u1),
                               vector(i8)),
         "cdc.core.alignment", "_chunk_alignment"),
        ("compare_pair", i8(text, text, rows, rows, i8, vector(i8)), "cdc.core.fastcompare", "_compare_pair"),
        ("word_pairs", i8(vector(u8), vector(u8), vector(i8), vector(i8)), "cdc.core.lcs", "lcs_matches"),
        ("find_moves", i8(vector(u8), vector(i8), vector(u8), vector(i8), records), "cdc.core.moves",
         "_find_moves"),
        ("text_and_words", i8(text, records, vector(u1), vector(u1), vector(u1), records, vector(i8),
                              vector(i8)), "cdc.core.editwords", "_text_and_words"),
    ]


def build(directory: Path) -> Path:
    """Compile the kernels into `directory`; returns the extension module's path. Runs with
    the JIT's definitions (CDC_KERNELS=jit), in this process."""
    import importlib

    from numba.pycc import CC, compiler

    from cdc.core.compiled import MODULE, source_digest

    class ReleasingFlags(compiler.Flags):
        """The kernels run without the GIL, as `nogil=True` has them under the JIT, so
        `chunk_many`'s threads chunk in parallel."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.release_gil = True

    compiler.Flags = ReleasingFlags
    cc = CC(MODULE.rsplit(".", 1)[1])
    cc.output_dir = str(directory)
    cc.target_cpu = "host"
    cc.verbose = False
    for name, signature, module, function in kernels():
        cc.export(name, signature)(getattr(importlib.import_module(module), function).py_func)
    digest = source_digest()

    def recorded_digest():  # Numba compiles the captured value in as a constant
        return digest

    cc.export("source_digest", "u8()")(recorded_digest)
    cc.compile()
    return next(directory.glob(f"{MODULE.rsplit('.', 1)[1]}*.so"))


def main() -> int:
    from cdc.core.compiled import PACKAGE

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        # A fresh process with the JIT's definitions: this one may already run a build.
        code = f"from pathlib import Path; from cdc.core.aot import build; print(build(Path({work!r})))"
        env = {**os.environ, "CDC_KERNELS": "jit"}
        env.pop("NUMBA_DISABLE_JIT", None)
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            sys.stderr.write(result.stderr)
            sys.stderr.write("cdc: the kernels were not compiled ahead of time; cdc runs them with "
                             "Numba's JIT instead\n")
            return 1
        built = Path(result.stdout.strip().splitlines()[-1])
        target, partial = PACKAGE / built.name, PACKAGE / (built.name + ".partial")
        shutil.copy(built, partial)
        os.replace(partial, target)  # a process importing it sees all or none
    print(f"compiled the kernels into {target} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
