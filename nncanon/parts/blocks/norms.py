"""Centred norms (LayerNorm) written out in float64, with the relations a pre-norm block, its final norm and
its parallel variants state over them.

Llama's tree proves its norms by calling the norm module itself (nncanon.core.relations). A LayerNorm's meaning
is the formula, not the module: OLMo's has no learnable weight or bias at all (eps fixed at 1e-5 inside its
forward, no attribute holds it), StarCoder2's has both, Cohere's a weight only. So these relations
recompute ``(x - mean(x)) / sqrt(var(x) + eps) · weight + bias`` from the module's parameters (whichever it
has), and their text says which form the family's norm takes, so the page states the norm it has.
"""

from __future__ import annotations

from typing import Any

from ...core.relations import Relation, first, relation

#: OlmoLayerNorm's epsilon, a literal in its forward (``F.layer_norm(..., eps=1e-5)``), held by no attribute
OLMO_EPS = 1e-5


def epsilon(norm: Any) -> float:
    """The norm's epsilon: nn.LayerNorm's ``eps``, Cohere's ``variance_epsilon``, OLMo's literal otherwise."""
    for name in ("eps", "variance_epsilon"):
        if isinstance(getattr(norm, name, None), float):
            return getattr(norm, name)
    return OLMO_EPS


def layer_norm(norm: Any, x: Any) -> Any:
    """``(x - mean) / sqrt(var + eps)`` over the last dimension (biased variance), times the norm's weight and
    plus its bias where it has them; in float64."""
    x = x.double()
    centred = x - x.mean(-1, keepdim=True)
    out = centred * (centred.pow(2).mean(-1, keepdim=True) + epsilon(norm)).rsqrt()
    weight, bias = getattr(norm, "weight", None), getattr(norm, "bias", None)
    if weight is not None:
        out = out * weight.double()
    if bias is not None:
        out = out + bias.double()
    return out


def formula(gain: str) -> str:
    """How a relation's text spells the norm of ``x`` with the given gain ("", "· weight", "· weight + bias")."""
    return f"(x - mean(x)) / sqrt(var(x) + eps){' ' + gain if gain else ''}"


def pre_norm_relations(gain: str) -> tuple[Relation, Relation]:
    """The sequential block's two norms as LayerNorms of the stated ``gain``: ``input_layernorm`` of
    ``layer_input`` is what the mixer reads, ``post_attention_layernorm`` of ``layer_mid`` what the MLP reads."""
    form = formula(gain)

    @relation(f"attention_norm_output == layernorm(layer_input) == what {{mixer}} is called with, "
              f"layernorm(x) = {form}", proves="attention_norm_output",
              reads="layer_input attention_norm_output {mixer}.input")
    def attention_norm(host, r):
        return [(layer_norm(host.input_layernorm._module, r["layer_input"]), r["attention_norm_output"]),
                (first(r["{mixer}.input"]), r["attention_norm_output"])]

    @relation(f"mlp_input == mlp_norm_output == layernorm(layer_mid), layernorm(x) = {form}",
              proves="mlp_norm_output mlp_input", reads="layer_mid mlp_norm_output mlp_input")
    def mlp_norm(host, r):
        return [(layer_norm(host.post_attention_layernorm._module, r["layer_mid"]), r["mlp_norm_output"]),
                (r["mlp_norm_output"], r["mlp_input"])]

    return attention_norm, mlp_norm


def final_norm_relation(gain: str) -> Relation:
    """The root's final norm as a LayerNorm of the stated ``gain``."""

    @relation(f"final_norm_output == layernorm(layers[-1].layer_output), layernorm(x) = {formula(gain)}",
              proves="final_norm_output", reads="layers[-1].layer_output final_norm_output")
    def final_norm(host, r):
        return [(layer_norm(host.norm._module, r["layers[-1].layer_output"]), r["final_norm_output"])]

    return final_norm
