"""KV sharing across blocks (Gemma 4's ``num_kv_shared_layers``): the last ``num_kv_shared_layers`` blocks
compute no keys or values of their own (their attention has no k_proj, v_proj, k_norm or v_norm); each attends
over the keys and values of the last block before them of its own attention kind (``layer_types``), which hands
them on through the forward's ``shared_kv_states``.

Which block a shared block reads is a function of the config (`kv_sources`), recomputed here from
``layer_types`` and ``num_kv_shared_layers`` rather than read from transformers' ``kv_sharing_modes``; the
relation proves it on the model: a shared block's ``attention_keys`` and ``attention_values`` are its source
block's, element for element.
"""

from __future__ import annotations

from typing import Any

from ...core.relations import relation


def kv_sources(layer_types: list[str], shared: int) -> dict[int, int]:
    """{shared block: the block whose keys and values it attends over}: for every block past
    ``len(layer_types) - shared``, the last block before them of the same layer type."""
    count = len(layer_types)
    if shared <= 0:
        return {}
    if shared >= count:
        raise ValueError(f"num_kv_shared_layers {shared} leaves no block of {count} to compute keys and values")
    first = count - shared
    sources = {}
    for block in range(first, count):
        own_kind = [j for j in range(first) if layer_types[j] == layer_types[block]]
        if not own_kind:
            raise ValueError(f"block {block} ({layer_types[block]}) shares keys and values, but no block before "
                             f"{first} is a {layer_types[block]} block")
        sources[block] = own_kind[-1]
    return sources


def sources_of(model: Any) -> dict[int, int]:
    """`kv_sources` of a loaded model's text config (none without ``num_kv_shared_layers``)."""
    config = model.text_config
    return kv_sources(list(config.layer_types), getattr(config, "num_kv_shared_layers", 0) or 0)


@relation("layers[i].self_attn.attention_keys == layers[kv_source(i)].self_attn.attention_keys and likewise "
          "attention_values, on every block i of the last num_kv_shared_layers; kv_source(i) is the last block "
          "before them whose layer_type is block i's",
          proves="", reads="layers[*].self_attn.attention_keys layers[*].self_attn.attention_values")
def _shared_keys_values(host, r):
    keys, values = r["layers[*].self_attn.attention_keys"], r["layers[*].self_attn.attention_values"]
    pairs = []
    for block, source in sources_of(host).items():
        pairs += [(keys[source], keys[block]), (values[source], values[block])]
    return pairs


#: the root relation a family with shared keys and values adds to its root's
KV_SHARING_RELATIONS = (_shared_keys_values,)

__all__ = ["kv_sources", "sources_of", "KV_SHARING_RELATIONS"]
