"""Which store the dashboard opens, decided without Streamlit (so it is testable).

In order: `--db PATH` after `streamlit run app.py --`; the `CDC_DB` environment variable;
the user's own store at `data/cdc.duckdb` when it exists; else the demo store at
`data/demo.duckdb`, built on first launch. The demo lives in its own file so a user's
ingest never mixes with it, and the app says which store it shows.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DB = Path("data/cdc.duckdb")
DEMO_DB = Path("data/demo.duckdb")


@dataclass(frozen=True)
class StoreChoice:
    path: Path
    is_demo: bool  # the demo store: build it when it is missing
    reason: str  # said in the app, so nobody mistakes the demo for their crawl


def choose_store(argv: Sequence[str], environ: Mapping[str, str]) -> StoreChoice:
    parser = argparse.ArgumentParser(prog="streamlit run app.py --", add_help=False)
    parser.add_argument("--db")
    args, _ = parser.parse_known_args(list(argv))
    if args.db:
        return StoreChoice(Path(args.db), False, "--db")
    if environ.get("CDC_DB"):
        return StoreChoice(Path(environ["CDC_DB"]), False, "CDC_DB")
    if DEFAULT_DB.exists():
        return StoreChoice(DEFAULT_DB, False, "your store")
    return StoreChoice(DEMO_DB, True, "demo data (no store at data/cdc.duckdb yet)")
