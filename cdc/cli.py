"""The `cdc` command line.

Exit codes: 0 all good; 1 failure (a message says what to do); 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from cdc import __version__
from cdc.chunking import DEFAULT_PARAMS, Chunk, Chunker, ChunkParams, chunk_content
from cdc.compare import ChangeReport, compare
from cdc.errors import CdcError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

READ_SIZE = 1 << 20


def _params(args: argparse.Namespace) -> ChunkParams:
    try:
        return ChunkParams(avg_size=args.avg_size, min_size=args.min_size, max_size=args.max_size)
    except ValueError as exc:
        raise CdcError(f"bad chunk sizes: {exc}") from exc


def _open_input(name: str) -> BinaryIO:
    if name == "-":
        return sys.stdin.buffer
    try:
        return open(name, "rb")
    except FileNotFoundError as exc:
        raise CdcError(f"{name}: no such file") from exc
    except IsADirectoryError as exc:
        raise CdcError(f"{name}: is a directory; give a file") from exc
    except PermissionError as exc:
        raise CdcError(f"{name}: permission denied") from exc


def _read_all(name: str) -> bytes:
    stream = _open_input(name)
    try:
        return stream.read()
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _stream_chunks(stream: BinaryIO, params: ChunkParams) -> Iterator[Chunk]:
    """Chunks of a stream of any size, in memory bounded by the chunk size."""
    chunker = Chunker(params)
    while block := stream.read(READ_SIZE):
        yield from chunker.feed(block)
    yield from chunker.finish()


def _chunk_command(args: argparse.Namespace) -> int:
    params = _params(args)
    streams = [_open_input(name) for name in args.files]  # a missing file fails before output
    out = sys.stdout
    if not args.json:
        out.write("index\toffset\tlength\tdigest\n")
    for name, stream in zip(args.files, streams):
        try:
            for chunk in _stream_chunks(stream, params):
                if args.json:
                    out.write(json.dumps({"file": name, "index": chunk.index, "offset": chunk.offset,
                                          "length": chunk.length, "digest": chunk.hex}) + "\n")
                else:
                    out.write(f"{chunk.index}\t{chunk.offset}\t{chunk.length}\t{chunk.hex}\n")
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
    return EXIT_OK


def _excerpt(text: bytes, offset: int, length: int, limit: int = 120) -> str:
    shown = text[offset:offset + min(length, limit)].decode("utf-8", errors="replace")
    shown = " ".join(shown.split())
    return shown + (" …" if length > limit else "")


def _report_dict(report: ChangeReport) -> dict:
    return {
        "changed": report.changed,
        "verdict": report.verdict,
        "similarity": round(report.similarity, 6),
        "unchanged_ratio": round(report.unchanged_ratio, 6),
        "retained_ratio": round(report.retained_ratio, 6),
        "bytes_added": report.bytes_added,
        "bytes_removed": report.bytes_removed,
        "changed_regions": report.changed_regions,
        "removed_regions": report.removed_regions,
        "moved": [chunk.index for chunk in report.moved],
        "edits": [edit._asdict() for edit in report.edits],
    }


def _print_report(report: ChangeReport, old: bytes, new: bytes) -> None:
    print(f"verdict: {report.verdict}")
    print(f"similarity (shared chunks): {report.similarity:.3f}")
    print(f"unchanged share of the new text: {report.unchanged_ratio:.3f}")
    print(f"retained share of the old text: {report.retained_ratio:.3f}")
    print(f"bytes added {report.bytes_added}, removed {report.bytes_removed}, "
          f"chunks moved {len(report.moved)}")
    for edit in report.edits:
        before = _excerpt(old, edit.old_offset, edit.old_length)
        after = _excerpt(new, edit.new_offset, edit.new_length)
        if edit.kind == "insert":
            print(f"  + at {edit.new_offset}: {after}")
        elif edit.kind == "delete":
            print(f"  - at {edit.old_offset}: {before}")
        else:
            print(f"  ~ at {edit.new_offset}: {before} -> {after}")


def _diff_command(args: argparse.Namespace) -> int:
    params = _params(args)
    old, new = _read_all(args.old), _read_all(args.new)
    report = compare(chunk_content(old, params), chunk_content(new, params), old_text=old, new_text=new)
    if args.json:
        print(json.dumps(_report_dict(report)))
    else:
        _print_report(report, old, new)
    return EXIT_OK


def _add_size_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--avg-size", type=int, default=DEFAULT_PARAMS.avg_size,
                        help="average distance between boundaries, a power of two (default %(default)s)")
    parser.add_argument("--min-size", type=int, default=DEFAULT_PARAMS.min_size,
                        help="smallest chunk but the last (default %(default)s)")
    parser.add_argument("--max-size", type=int, default=DEFAULT_PARAMS.max_size,
                        help="largest chunk (default %(default)s)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc", description="Which part of a page changed between two crawls, and how much.")
    parser.add_argument("--version", action="version", version=f"cdc {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chunk = commands.add_parser("chunk", help="print the chunks of files (streamed; - is stdin)")
    chunk.add_argument("files", nargs="+", metavar="FILE")
    chunk.add_argument("--json", action="store_true", help="one JSON object per chunk")
    _add_size_options(chunk)
    chunk.set_defaults(run=_chunk_command)

    diff = commands.add_parser("diff", help="compare two text files: verdict, measures, word edits")
    diff.add_argument("old", metavar="OLD")
    diff.add_argument("new", metavar="NEW")
    diff.add_argument("--json", action="store_true", help="the report as JSON")
    _add_size_options(diff)
    diff.set_defaults(run=_diff_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return args.run(args)
    except CdcError as exc:
        print(f"cdc: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:  # `cdc chunk big.txt | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("cdc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
