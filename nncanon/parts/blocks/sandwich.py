"""The sandwich block (Gemma 2, 3 and 4): each sublayer normed on its way in and again on its way out, the
post-norm's output what the sublayer adds to the stream.

    layer_input -> input_layernorm -> self_attn -> post_attention_layernorm -> + -> layer_mid
    layer_mid -> pre_feedforward_layernorm -> mlp -> post_feedforward_layernorm -> + -> (the MLP's sum)

GLM-4-0414's block is the same with norms of its own names (``norms``: post_self_attn_layernorm, then its
post_attention_layernorm as the MLP's pre-norm, post_mlp_layernorm), and so is HyperCLOVA X's Peri-LN block (post_norm1,
post_attention_layernorm, post_norm2), which also scales each post-norm's output by residual_multiplier before its
add (``scale``). Gemma 2 and 3 norm with gain ``1 + weight``, Gemma 4, GLM-4 and HyperCLOVA X with ``weight``; Gemma
4's block goes on past the MLP's sum (its per-layer input branch), so the sum the MLP's add makes is named by the
family. :func:`sandwich` writes the values and the relations once for any gain, scale and any such name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core.hosts import host
from ...core.layouts import Residual
from ...core.locators import child
from ...core.relations import Relation, relation
from ...core.values import Value
from .decoder import Block
from .per_layer_inputs import rms

#: the names of a sandwich block's three norms past input_layernorm: Gemma's (the attention's post-norm, the MLP's
#: pre-norm, the MLP's post-norm). GLM-4's are its own (post_self_attn_layernorm, post_attention_layernorm,
#: post_mlp_layernorm): its post_attention_layernorm is the MLP's pre-norm, so no rename can mount Gemma's names
GEMMA_NORMS = ("post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")


def sandwich_values(norms: tuple[str, str, str] = GEMMA_NORMS) -> list[Value]:
    """The values a sandwich block adds to a plain block's (layer_input, layer_output and the sublayers' own), read
    at the norms named ``norms`` (the attention's post-norm, the MLP's pre-norm, the MLP's post-norm)."""
    post_attention, pre_mlp, post_mlp = norms
    return [
        Value("layer_mid", Residual, "The residual stream after the attention add", child(pre_mlp, "input"),
              assign_in_place=True),
        Value("attention_post_norm_output", Residual,
              f"What the attention adds to the stream: {post_attention}'s output", child(post_attention)),
        Value("mlp_norm_output", Residual, "The normed stream entering the MLP", child(pre_mlp)),
        Value("mlp_post_norm_output", Residual,
              f"What the MLP adds to the stream: {post_mlp}'s output", child(post_mlp)),
    ]


#: the values a sandwich block adds to a plain block's, at Gemma's norms
SANDWICH_VALUES = sandwich_values()


@dataclass(frozen=True)
class Sandwich:
    """The relations of one sandwich block: the two adds, then the four norms."""

    adds: tuple[Relation, ...]
    norms: tuple[Relation, ...]

    @property
    def relations(self) -> tuple[Relation, ...]:
        return (*self.adds, *self.norms)


def sandwich(rms: Callable[[Any, Any], Any], gain: str, mlp_sum: str = "layer_output",
             norms: tuple[str, str, str] = GEMMA_NORMS, scale: str | None = None) -> Sandwich:
    """The relations of a sandwich block whose norms compute ``rms(norm_module, x)`` (float64), their gain
    written ``gain`` with ``{}`` for the norm's name ("(1 + {}.weight)" or "{}.weight"), the MLP's add making
    the value ``mlp_sum``, its norms past input_layernorm named ``norms`` (as :func:`sandwich_values`). ``scale``
    names the block module's attribute each post-norm's output is multiplied by before its add (HyperCLOVA X's
    residual_multiplier); None adds it as it is."""
    post_attention, pre_mlp, post_mlp = norms
    times = f"{scale} · " if scale else ""

    def gained(norm: str) -> str:
        return gain.format(norm)

    def scaled(host, x):
        return getattr(host._module, scale) * x if scale else x

    # The add's second term names the module whose output is added (the post-norm), so the block diagram
    # draws each sublayer's branch up to that norm and the add after it.
    @relation(f"layer_input + {times}attention_post_norm_output == layer_mid", proves="layer_mid",
              reads="layer_input attention_post_norm_output layer_mid",
              adds=("layer_input", f"{post_attention}.output", "layer_mid"))
    def attention_add(host, r):
        return [(r["layer_input"] + scaled(host, r["attention_post_norm_output"]), r["layer_mid"])]

    @relation(f"layer_mid + {times}mlp_post_norm_output == {mlp_sum}", proves=mlp_sum,
              reads=f"layer_mid mlp_post_norm_output {mlp_sum}",
              adds=("layer_mid", f"{post_mlp}.output", mlp_sum))
    def mlp_add(host, r):
        return [(r["layer_mid"] + scaled(host, r["mlp_post_norm_output"]), r[mlp_sum])]

    @relation(f"attention_norm_output == rms(layer_input) · {gained('input_layernorm')} == what self_attn is called "
              "with", proves="attention_norm_output", reads="layer_input attention_norm_output self_attn.input")
    def attention_norm(host, r):
        return [(rms(host.input_layernorm._module, r["layer_input"]), r["attention_norm_output"]),
                (r["self_attn.input"], r["attention_norm_output"])]

    @relation(f"attention_post_norm_output == rms(self_attn.attention_output) · {gained(post_attention)}",
              proves="attention_post_norm_output self_attn.attention_output",
              reads="self_attn.attention_output attention_post_norm_output")
    def attention_post_norm(host, r):
        return [(rms(getattr(host, post_attention)._module, r["self_attn.attention_output"]),
                 r["attention_post_norm_output"])]

    @relation(f"mlp_input == mlp_norm_output == rms(layer_mid) · {gained(pre_mlp)}",
              proves="mlp_norm_output mlp_input", reads="layer_mid mlp_norm_output mlp_input")
    def mlp_norm(host, r):
        return [(rms(getattr(host, pre_mlp)._module, r["layer_mid"]), r["mlp_norm_output"]),
                (r["mlp_norm_output"], r["mlp_input"])]

    @relation(f"mlp_post_norm_output == rms(mlp.mlp_output) · {gained(post_mlp)}",
              proves="mlp_post_norm_output mlp.mlp_output", reads="mlp.mlp_output mlp_post_norm_output")
    def mlp_post_norm(host, r):
        return [(rms(getattr(host, post_mlp)._module, r["mlp.mlp_output"]), r["mlp_post_norm_output"])]

    return Sandwich((attention_add, mlp_add), (attention_norm, attention_post_norm, mlp_norm, mlp_post_norm))


def weight_gain_block(name: str, norms: tuple[str, str, str], scale: str | None = None) -> type:
    """A Llama-tree block host named ``name`` that is a sandwich block whose RMSNorms gain ``weight`` (GLM-4-0414's,
    HyperCLOVA X's), its norms past input_layernorm named ``norms``, each post-norm's output scaled by the block
    module's ``scale`` attribute before its add (None: added as it is)."""
    return host(name, Block, values=sandwich_values(norms),
                RELATIONS=sandwich(rms, "{}.weight", norms=norms, scale=scale).relations)
