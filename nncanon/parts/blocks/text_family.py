"""What a text-only family on Llama's tree (its paths those of nncanon.parts.blocks.decoder.TEXT_PATHS, one
dense MLP width) declares the same way every time: written once, assigned by each family module."""

from __future__ import annotations

from typing import Any


def text_paths(model: Any) -> list[str]:
    """``required_paths`` of a family whose tree is Llama's: the causal LM's text stack and a block's four parts."""
    from .decoder import TEXT_PATHS

    return TEXT_PATHS


def intermediate_dims(model: Any) -> dict[str, int]:
    """``dim_sizes`` of a family with one dense MLP width."""
    return {"intermediate_size": model.text_config.intermediate_size}


def root_relations(own: dict) -> tuple:
    """Llama's root relations (nncanon.parts.blocks.decoder.ROOT_RELATIONS), each whose text starts with a key of
    ``own`` replaced by that key's relation, in place (the page lists them in the same order)."""
    from .decoder import ROOT_RELATIONS

    unknown = [start for start in own if not any(r.text.startswith(start) for r in ROOT_RELATIONS)]
    if unknown:
        raise ValueError(f"no root relation starts with {unknown}")
    return tuple(next((mine for start, mine in own.items() if r.text.startswith(start)), r) for r in ROOT_RELATIONS)
