"""The results pinned before the speed work stay as they were (`tests/pins.py`).

Every pair of the three shared histories compared with exact edits, every store that
`cdc ingest` makes of them and of the two docs crawls: a faster path that changes one
measure, verdict, edit or digest fails here, naming what moved. An intended change of
results rewrites the pins (`python -m tests.pins`) and says so in CHANGELOG.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import pins

PINS = Path(__file__).parent / "data" / "pins"
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def _corpus(name: str) -> Path:
    path = CORPUS / pins.HISTORIES[name]
    if not path.exists():
        pytest.skip(f"the revision corpus is not at {CORPUS}")
    return path


def _first_difference(found: dict | list, pinned: dict | list) -> str:
    if isinstance(pinned, list):
        moved = [i for i, (a, b) in enumerate(zip(found, pinned)) if a != b]
        return f"{len(moved)} of {len(pinned)} pairs differ, the first at pair {moved[:1]}"
    moved = sorted(key for key in pinned.keys() | found.keys() if found.get(key) != pinned.get(key))
    return f"{len(moved)} of {len(pinned)} pages differ: {moved[:5]}"


@pytest.mark.parametrize("name", sorted(pins.HISTORIES))
def test_every_corpus_comparison_is_as_pinned(name):
    pinned = json.loads((PINS / f"corpus-{name}.json").read_text())
    found = pins.corpus_pins(_corpus(name))
    assert len(found) == len(pinned)
    assert found == pinned, _first_difference(found, pinned)


@pytest.mark.slow
def test_every_ingested_store_is_as_pinned(tmp_path, docs_crawls):
    _corpus("en")
    # The folder of conftest.py's crawls, the pins' pages and seed: found built there.
    found = pins.store_pin_sets(CORPUS, docs_crawls.crawl1.parent, tmp_path)
    same_docs = json.loads((PINS / pins.CRAWL_INPUTS).read_text())["docs"] == pins.docs_digest()
    for name, pages in found.items():
        if name.startswith("store-crawl-") and not same_docs:
            continue
        pinned = json.loads((PINS / f"{name}.json").read_text())
        assert pages == pinned, f"{name}: {_first_difference(pages, pinned)}"
    if not same_docs:
        pytest.skip("the corpus stores are as pinned; the docs crawls' are not checked: this "
                    "python3.11-doc's HTML is not the one their pins were made from")
