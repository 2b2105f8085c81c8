"""The `cdc` command, run as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cdc import __version__, chunk_content
from cdc.core.compiled import AHEAD_OF_TIME
from tests import textgen

ROOT = Path(__file__).resolve().parents[1]


def cdc(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cdc", *args], input=stdin,
                          capture_output=True, timeout=120)


def test_version_says_where_the_kernels_come_from():
    result = cdc("--version")
    assert result.returncode == 0
    kernels = "compiled ahead of time" if AHEAD_OF_TIME is not None else "from Numba's JIT"
    assert result.stdout.decode().startswith(f"cdc {__version__} (kernels {kernels}")
    jit = subprocess.run([sys.executable, "-m", "cdc", "--version"], capture_output=True, timeout=120,
                         env={**os.environ, "CDC_KERNELS": "jit"})
    assert "kernels from Numba's JIT" in jit.stdout.decode()


def test_chunk_prints_every_chunk_of_a_file(tmp_path):
    data = textgen.text(5, 40_000)
    path = tmp_path / "page.txt"
    path.write_bytes(data)
    result = cdc("chunk", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "index\toffset\tlength\tdigest"
    assert lines[1:] == [f"{c.index}\t{c.offset}\t{c.length}\t{c.hex}" for c in chunk_content(data)]


def test_chunk_reads_stdin_and_writes_json():
    data = textgen.text(6, 20_000)
    result = cdc("chunk", "-", "--json", stdin=data)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [(r["offset"], r["length"], r["digest"]) for r in rows] == \
        [(c.offset, c.length, c.hex) for c in chunk_content(data)]


def test_a_missing_file_is_one_line_and_exit_code_1(tmp_path):
    result = cdc("chunk", str(tmp_path / "absent.txt"))
    assert result.returncode == 1
    assert result.stdout == b""
    message = result.stderr.decode()
    assert message.count("\n") == 1 and "no such file" in message and "Traceback" not in message


def test_bad_sizes_are_one_line_and_exit_code_1(tmp_path):
    path = tmp_path / "page.txt"
    path.write_bytes(b"text")
    result = cdc("chunk", "--avg-size", "1000", str(path))
    assert result.returncode == 1
    assert "power of two" in result.stderr.decode() and "Traceback" not in result.stderr.decode()


def test_no_command_prints_usage_and_exit_code_2():
    result = cdc()
    assert result.returncode == 2
    assert b"usage" in result.stderr


def test_diff_reports_the_exact_edit(tmp_path):
    page = textgen.text(8, 30_000)
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    at = page.index(b" ", 15_000) + 1
    old.write_bytes(page[:at] + b"$19.99 " + page[at:])
    new.write_bytes(page[:at] + b"$24.99 " + page[at:])
    result = cdc("diff", str(old), str(new))
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert "verdict: minor" in text and "$19.99 -> $24.99" in text
    report = json.loads(cdc("diff", "--json", str(old), str(new)).stdout)
    assert report["edits"] == [{"kind": "replace", "old_offset": at, "old_length": 6,
                                "new_offset": at, "new_length": 6}]


def test_the_readme_example_shows_what_the_readme_says():
    result = subprocess.run([sys.executable, "-m", "cdc", "diff", "examples/old.txt", "examples/new.txt"],
                            capture_output=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    shown = result.stdout.decode()
    readme = (ROOT / "README.md").read_text()
    block = readme.split("cdc diff examples/old.txt examples/new.txt\n```\n\n```\n", 1)[1].split("```")[0]
    assert shown == block


def test_diff_shows_a_moved_paragraph_as_a_move(tmp_path):
    paragraphs = textgen.paragraphs(5, 10)
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    old.write_text("\n".join(paragraphs))
    new.write_text("\n".join(paragraphs[:1] + paragraphs[2:9] + paragraphs[1:2] + paragraphs[9:]))
    text = cdc("diff", str(old), str(new)).stdout.decode()
    moved = paragraphs[1].encode()
    source, target = old.read_bytes().index(moved), new.read_bytes().index(moved)
    assert f"  > moved from {source} to {target}: {paragraphs[1][:40]}" in text
    assert "verdict: minor" in text
    report = json.loads(cdc("diff", "--json", str(old), str(new)).stdout)
    assert report["edits"] == [{"kind": "move", "old_offset": source, "old_length": len(paragraphs[1]),
                                "new_offset": target, "new_length": len(paragraphs[1])}]
    assert report["unchanged_ratio"] == 1.0 and report["bytes_added"] == 0
