"""What a text-only family on Llama's tree (its paths those of nncanon.parts.decoder.TEXT_PATHS, one
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
