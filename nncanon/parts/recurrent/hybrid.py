"""Hybrid stacks: blocks of several kinds in one model (bamba, granitemoehybrid, nemotron_h).

A hybrid's config names each block's kind (``layers_block_type``: ``linear_attention`` for a Mamba-2 mixer,
``full_attention`` for attention, and nemotron_h's ``mlp`` / ``moe`` for a block that is only an MLP). A
block has the mixer of its kind and not the others; `explain_missing` says which one a block has when a
user reaches for the other. The cache a decode keeps differs by kind too: a Mamba-2 block keeps a fixed
recurrent state and conv state whatever the length, an attention block keys and values per token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def explain_missing(mixers: dict[str, str], types_of: Callable[[Any], list[str]]):
    """A family's ``explain_missing`` for blocks that hold one mixer of ``mixers`` (block kind -> its standard
    child name): a block asked for a mixer it lacks says which it has and which blocks have the one asked for."""
    def explain(model: Any, envoy: Any, name: str) -> str | None:
        if getattr(type(envoy), "KIND", None) != "block" or name not in mixers.values():
            return None
        types = types_of(model)
        index = int(envoy.path.rsplit(".", 1)[-1])
        blocks = [i for i, t in enumerate(types) if mixers.get(t) == name]
        has = mixers.get(types[index])
        return (f"{envoy._std_path} is a {types[index]} block: it has {has or 'no sequence mixer'}, not {name}; "
                f"the blocks with {name} are {blocks}")

    return explain


def kv_bytes_per_token(num_kv_heads: int, head_dim: int, itemsize: int) -> int:
    """What one attention block's cache grows by per token: a key and a value per kv head."""
    return 2 * num_kv_heads * head_dim * itemsize


def ssm_state_bytes(heads: int, head_dim: int, state_size: int, itemsize: int = 4) -> int:
    """One Mamba-2 block's recurrent state (float32 in the decode cache and in ``states``, per token)."""
    return heads * head_dim * state_size * itemsize
