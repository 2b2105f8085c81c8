"""The SPEC string: names everything that decides the digests, so digests made under
another are never compared."""

from __future__ import annotations

from cdc.core.gear import DEFAULT_PARAMS, ChunkParams
from cdc.core.normalize import NORMALIZATION_VERSION


def spec_for(params: ChunkParams) -> str:
    """The SPEC string for chunks made with `params`."""
    return f"{params.spec}/{NORMALIZATION_VERSION}"


SPEC = spec_for(DEFAULT_PARAMS)
"""Algorithm and gear table, sizes, digest, normalisation."""
