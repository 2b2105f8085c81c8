"""The run commands of `cdc`: `cdc runs` lists the crawl runs, `cdc site-diff` says what
changed on a site between two of them; and the run line the ingest and fetch summaries end
with. Registered by `cdc.cli.main`, which owns the exit codes and turns a `CdcError` into a message.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime

from cdc.cli.common import EXIT_OK
from cdc.core.verdicts import UNMEASURED
from cdc.errors import RunError
from cdc.store import RunInfo, SiteDiff, Store

SHOWN_CHANGED_PAGES = 20
SHOWN_TEMPLATE_CHANGES = 10
_COUNT_HEADINGS = (("pages", "pages"), ("new_pages", "new"), ("changed", "changed"),
                   ("unchanged", "unchanged"), ("older", "older"), ("skipped", "skipped"),
                   ("failed", "failed"))


def run_line(store: Store, run: int) -> str:
    """The last line of an ingest or fetch summary: which run it was."""
    info = store.run(run)
    return f"run {info.run} ({info.label})"


def add_commands(commands: argparse._SubParsersAction,
                 open_store: Callable[[argparse.Namespace], Store]) -> None:
    """`cdc runs` and `cdc site-diff`, reading the store `open_store(args)` opens."""
    runs = commands.add_parser("runs", help="the crawl runs (each ingest and fetch), newest first")
    runs.add_argument("--json", action="store_true", help="one JSON object per run")
    runs.set_defaults(run=lambda args: _runs_command(open_store(args), args))

    diff = commands.add_parser(
        "site-diff",
        help="what changed on a site between two runs: pages new, not seen again, changed, unchanged")
    diff.add_argument("runs", nargs="*", metavar="RUN",
                      help="two runs, each an id or a label, the earlier crawl first (default: the "
                           "finished runs of the latest two crawls)")
    diff.add_argument("--host", help="one host's pages only")
    diff.add_argument("--limit", type=int, default=SHOWN_CHANGED_PAGES, metavar="N",
                      help="changed pages listed, largest change first (default %(default)s)")
    diff.add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N changed pages")
    diff.add_argument("--json", action="store_true", help="the summary and the changed pages as JSON")
    diff.set_defaults(run=lambda args: _site_diff_command(open_store(args), args))


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S}" if moment else "-"


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _jsonable(value: object) -> object:
    return value.isoformat() + "Z" if isinstance(value, datetime) else value  # stored as UTC


def _run_dict(info: RunInfo) -> dict:
    return {**{name: _jsonable(value) for name, value in asdict(info).items()},
            "inputs": list(info.inputs), "status": info.status}


def _runs_command(store: Store, args: argparse.Namespace) -> int:
    runs = store.runs()
    if args.json:
        for info in runs:
            print(json.dumps(_run_dict(info)))
        return EXIT_OK
    if not runs:
        print(f"{store.path} has no runs yet; `cdc ingest FILE` or `cdc fetch URL` makes one")
        return EXIT_OK
    print(f"{'run':>5}  {'started':<19}  {'ended':<19}  {'status':<14}"
          + "".join(f"  {heading:>9}" for _, heading in _COUNT_HEADINGS) + "  label")
    for info in runs:
        print(f"{info.run:>5}  {_when(info.started_at):<19}  {_when(info.ended_at):<19}  {info.status:<14}"
              + "".join(f"  {_count(getattr(info, name)):>9}" for name, _ in _COUNT_HEADINGS)
              + f"  {info.label}")
    return EXIT_OK


def _chosen_runs(store: Store, refs: list[str]) -> tuple[int | str, int | str]:
    """The two runs asked for, or the finished runs of the latest two crawls."""
    if len(refs) == 2:
        return refs[0], refs[1]
    if refs:
        raise RunError(f"site-diff takes two runs (RUN_A RUN_B), or none for the latest two; got {len(refs)}")
    latest = store.latest_crawls(2)
    if len(latest) < 2:
        raise RunError(f"{store.path} has {len(latest)} finished run{'s' * (len(latest) != 1)}: "
                       "site-diff compares two; ingest or fetch another crawl first (`cdc runs` lists them)")
    return latest[0].run, latest[1].run


def _site_diff_command(store: Store, args: argparse.Namespace) -> int:
    if args.limit < 0 or args.offset < 0:
        raise RunError("--limit and --offset take a whole number of at least 0")
    run_a, run_b = _chosen_runs(store, args.runs)
    diff = store.site_diff(run_a, run_b, args.host, limit=args.limit, offset=args.offset)
    if args.json:
        print(json.dumps(_diff_dict(diff)))
    else:
        _print_diff(diff)
    return EXIT_OK


def _diff_dict(diff: SiteDiff) -> dict:
    result = {name: _jsonable(value) for name, value in asdict(diff).items()}
    result["run_a"], result["run_b"] = _run_dict(diff.run_a), _run_dict(diff.run_b)
    result["pages"] = [{**asdict(page), "shown_verdict": page.shown_verdict,
                        "share_changed": page.share_changed} for page in diff.pages]
    result["one_page_template_changes"] = diff.one_page_template_changes
    return result


def _print_diff(diff: SiteDiff) -> None:
    a, b = diff.run_a, diff.run_b
    where = f"host {diff.host}" if diff.host else "all hosts"
    print(f"run {a.run} ({a.label}, {_when(a.started_at)}) -> "
          f"run {b.run} ({b.label}, {_when(b.started_at)}), {where}")
    for info in (a, b):
        if not info.finished:
            print(f"  note: run {info.run} did not finish: it saw only part of its crawl")
    rows = [("pages seen by both", diff.seen_by_both), ("  unchanged", diff.unchanged),
            ("  changed", diff.changed)]
    rows += [(f"    {verdict}" + (" (not measured)" if verdict == UNMEASURED else ""), count)
             for verdict, count in diff.verdicts.items()]
    rows += [("    template only", diff.template_only), ("new pages", diff.new),
             ("not seen again", diff.not_seen_again)]
    for name, count in rows:
        print(f"{name:<26}{count:>10,}")
    site_wide = diff.site_wide_changes
    if site_wide:
        print("template changes (one edit on many pages):")
        for group in site_wide[:SHOWN_TEMPLATE_CHANGES]:
            print(f"  {group.host}  {group.pages:,} pages  {(group.excerpt or '')[:70]}")
        if len(site_wide) > SHOWN_TEMPLATE_CHANGES:
            print(f"  ... and {len(site_wide) - SHOWN_TEMPLATE_CHANGES:,} more")
    if diff.one_page_template_changes:
        print(f"  also {diff.one_page_template_changes:,} template-only change(s) on one page each "
              "(a block the host repeats, edited on that page alone)")
    if not diff.pages:
        return
    last = diff.offset + len(diff.pages)
    print(f"changed pages {diff.offset + 1:,}-{last:,} of {diff.changed:,}, largest change first, "
          "template-only ones last:")
    print(f"  {'verdict':<14}  {'template':>8}  {'changed':>7}  {'+bytes':>8}  {'-bytes':>8}  "
          "url  generations  what changed")
    for page in diff.pages:
        share = "-" if page.share_changed is None else f"{page.share_changed:.1%}"
        flag = {True: "yes", False: "no"}.get(page.template_only, "-")
        print(f"  {page.shown_verdict:<14}  {flag:>8}  {share:>7}  {_count(page.bytes_added):>8}  "
              f"{_count(page.bytes_removed):>8}  {page.natural_key}  "
              f"{page.generation_a} -> {page.generation_b}  {(page.excerpt or '')[:60]}")
    if last < diff.changed:
        print(f"  ... and {diff.changed - last:,} more (--offset {last} --limit N)")
