"""Scaled residual branches, a scaled embedding and a scaled head: scalars of the config applied in the forward.

Granite's µP multipliers and MiniCPM3's scale_emb / scale_depth / dim_model_base are the same three mechanisms,
none of them a module or a parameter: a block that adds ``scale · branch`` to the stream instead of the branch
(granite's ``residual_multiplier``; MiniCPM3's ``scale_depth / √num_hidden_layers``, its layer's ``residual_scale``),
an embedding multiplied by a scalar (outside the embedding module on Granite, inside it on MiniCPM3), and the stream
divided by ``logits_scaling`` around the head (after it on Granite, before it on MiniCPM3: the head has no bias, so
the two are the same number, but the values the forward returns differ). Each is stated here once, with the name the
family's relation text gives the scale and where the scale is read.
"""

from __future__ import annotations

from collections.abc import Callable

from ...core.relations import Relation, relation
from .decoder import BLOCK_RELATIONS

#: the block's own relations that the scaled adds replace: the plain adds of layer_mid and layer_output
BLOCK_KEPT = tuple(r for r in BLOCK_RELATIONS if " == layer_mid" not in r.text and " == layer_output" not in r.text)


def scaled_adds(name: str, scale: Callable[[object], float]) -> tuple[Relation, Relation]:
    """The two adds of a block that scales each branch before adding it: ``layer_mid == layer_input + name ·
    attention_output``, ``layer_output == layer_mid + name · mlp_output``; ``scale(block_module)`` is the number."""

    @relation(f"layer_input + {name} · self_attn.attention_output == layer_mid",
              proves="layer_mid self_attn.attention_output", reads="layer_input self_attn.attention_output layer_mid",
              adds=("layer_input", "self_attn.attention_output", "layer_mid"))
    def attention_add(host, r):
        return [(r["layer_input"] + scale(host._module) * r["self_attn.attention_output"], r["layer_mid"])]

    @relation(f"layer_mid + {name} · mlp.mlp_output == layer_output", proves="layer_output mlp.mlp_output",
              reads="layer_mid mlp.mlp_output layer_output", adds=("layer_mid", "mlp.mlp_output", "layer_output"))
    def mlp_add(host, r):
        return [(r["layer_mid"] + scale(host._module) * r["mlp.mlp_output"], r["layer_output"])]

    return attention_add, mlp_add


@relation("layers[0].layer_input == token_embeddings == embed_tokens.weight[input_ids] · scale_emb",
          proves="token_embeddings", reads="input_ids token_embeddings layers[0].layer_input")
def embedding_scaled_inside(host, r):
    """MiniCPM3's embedding module multiplies its rows by scale_emb itself, so token_embeddings is already scaled."""
    table = host.embed_tokens._module.weight
    return [(table[r["input_ids"]] * host.text_config.scale_emb, r["token_embeddings"]),
            (r["token_embeddings"], r["layers[0].layer_input"])]


@relation("lm_head_output == lm_head(final_norm_output / logits_scaling), logits_scaling = hidden_size / "
          "dim_model_base", proves="lm_head_output", reads="final_norm_output lm_head_output")
def head_of_scaled_stream(host, r):
    """MiniCPM3 divides the normed stream by logits_scaling before lm_head reads it."""
    return [(host.lm_head._module(r["final_norm_output"] / host.text_config.logits_scaling), r["lm_head_output"])]


def divided_before_the_head(model, normed):
    """The lens's step before the head (`nncanon.lens`) of a model that divides the normed stream by
    logits_scaling before lm_head."""
    return normed / model.text_config.logits_scaling
