"""The parallel block: the attention and the MLP read the same block input, and both outputs are added
to the stream in one sum.

    out = x + attention(norm_a(x)) + mlp(norm_m(x))       two norms (GPT-NeoX, Pythia)
    out = x + attention(norm(x)) + mlp(norm(x))          one norm (GPT-J, CodeGen, Phi-1/2)

So no tensor is "the stream after the attention add": ``layer_mid`` is never served, and the MLP
cannot see what its own block's attention wrote. The relations say both: the block's sum, and what the
MLP reads (``post_attention_layernorm(layer_input)``, or the attention's own normed input).
"""

from __future__ import annotations

from ...core.hosts import host
from ...core.layouts import Residual
from ...core.locators import child
from ...core.relations import first, relation
from ...core.values import Value, never
from .decoder import Block

_SUM = ("layer_input", "self_attn.attention_output", "layer_input + self_attn.attention_output")
_MLP_BRANCH = ("layer_input + self_attn.attention_output", "mlp.mlp_output", "layer_output", "layer_input")


@relation("layer_input + self_attn.attention_output + mlp.mlp_output == layer_output: one sum, both sublayers "
          "reading layer_input (use_parallel_residual)",
          proves="layer_output self_attn.attention_output mlp.mlp_output",
          reads="layer_input self_attn.attention_output mlp.mlp_output layer_output", adds=_SUM)
def parallel_sum(host, r):
    return [(r["layer_input"] + r["self_attn.attention_output"] + r["mlp.mlp_output"], r["layer_output"])]


def _without_mlp(r):
    """The block's output less the MLP's is the stream plus the attention's: the MLP's branch is all that is left."""
    return (r["layer_output"] - r["mlp.mlp_output"], r["layer_input"] + r["self_attn.attention_output"])


@relation("mlp_input == mlp_norm_output == post_attention_layernorm(layer_input), not of any sum with the "
          "attention's output; layer_output - mlp.mlp_output == layer_input + self_attn.attention_output",
          proves="mlp_norm_output mlp_input",
          reads="layer_input mlp_norm_output mlp_input self_attn.attention_output mlp.mlp_output layer_output",
          adds=_MLP_BRANCH)
def _own_norm_mlp(host, r):
    return [(host.post_attention_layernorm._module(r["layer_input"]), r["mlp_norm_output"]),
            (r["mlp_norm_output"], r["mlp_input"]), _without_mlp(r)]


@relation("mlp_input == attention_norm_output: the MLP reads the attention's normed input (one norm), not any "
          "sum with the attention's output; layer_output - mlp.mlp_output == layer_input + self_attn.attention_output",
          proves="mlp_input",
          reads="layer_input attention_norm_output mlp_input self_attn.attention_output mlp.mlp_output layer_output",
          adds=_MLP_BRANCH)
def _shared_norm_mlp(host, r):
    return [(r["attention_norm_output"], r["mlp_input"]), _without_mlp(r)]


@relation("attention_norm_output == input_layernorm(layer_input) == what self_attn is called with",
          proves="attention_norm_output", reads="layer_input attention_norm_output self_attn.input")
def _attention_norm(host, r):
    return [(host.input_layernorm._module(r["layer_input"]), r["attention_norm_output"]),
            (first(r["self_attn.input"]), r["attention_norm_output"])]


def _sum_text(flag: str | None):
    """The sum relation as the family's page states it: ``(flag)`` names the config switch, when it has one."""
    if flag == "use_parallel_residual":
        return parallel_sum
    tail = f" ({flag})" if flag else ""
    return relation(parallel_sum.text.split(" (use_parallel_residual)")[0] + tail,
                    proves=" ".join(parallel_sum.proves), reads=" ".join(parallel_sum.reads),
                    adds=parallel_sum.adds)(parallel_sum.compute)


def parallel_block(who: str, flag: str | None = None, one_norm: bool = False):
    """The block host of a parallel family. ``who`` names it in the reason ``layer_mid`` is never served
    ("GPT-NeoX's block"), ``flag`` the config switch that makes it parallel; ``one_norm``: the MLP reads
    ``input_layernorm``'s output too (no ``post_attention_layernorm``), so ``mlp_norm_output`` is never served."""
    switch = f" ({flag})" if flag else ""
    reads = ("the MLP reads the attention's normed input (one LayerNorm)" if one_norm
             else "the MLP reads post_attention_layernorm(layer_input)")
    no_mid = never(f"{who} is parallel{switch}: the attention's and the MLP's outputs are added to layer_input in "
                   f"one sum, and {reads}, so no tensor is the stream after the attention add")
    values = [Value("layer_mid", Residual, "The residual stream after the attention add",
                    child("post_attention_layernorm", "input"), conditions=(no_mid,))]
    if one_norm:
        values.append(Value("mlp_norm_output", Residual, "The normed stream entering the MLP",
                            child("mlp", "input"),
                            conditions=(never(f"{who} has one LayerNorm (input_layernorm): the MLP reads "
                                              "attention_norm_output, the attention's own input"),)))
        relations = (_sum_text(flag), _shared_norm_mlp, _attention_norm)
    else:
        values.append(Value("mlp_norm_output", Residual, "The normed stream entering the MLP: "
                            "post_attention_layernorm of layer_input (not of an attention add)",
                            child("post_attention_layernorm")))
        relations = (_sum_text(flag), _own_norm_mlp, _attention_norm)
    return host("ParallelBlock", Block, values=values, RELATIONS=relations)
