"""Gemma 3, text only (Gemma3ForCausalLM, model_type gemma3_text): Gemma 2's sandwich block with
query/key norms, two rotary bases and five sliding blocks to every full one.

The block is Gemma 2's, served by the same host (``SandwichBlock`` of the gemma2 family):
RMSNorm -> attention -> RMSNorm -> add, RMSNorm -> gated MLP (GELU, tanh approximation) -> RMSNorm
-> add, so what a sublayer adds to the stream is its post-norm's output (``attention_post_norm_output``,
``mlp_post_norm_output``), every RMSNorm multiplies by ``(1 + weight)``, and the embedding module
(a ``Gemma3TextScaledWordEmbedding``) scales its rows by ``sqrt(hidden_size)``, so
``token_embeddings`` is already scaled.

The attention differs from Gemma 2's in three ways. Each query and key head is RMS-normed over its
head_dim by q_norm and k_norm (gain ``1 + weight``, like every Gemma norm) before the rotary
embedding, so ``attention_queries`` and ``attention_keys`` are normed, then rotated. The rotary base
depends on the block's kind: ``layer_types`` (five ``sliding_attention`` blocks, then one
``full_attention`` block, repeated: ``sliding_window_pattern`` 6) picks the block's entry of
``rope_parameters``, whose sliding base is the config's ``rope_local_base_freq`` (10,000 on the
released checkpoints) and whose full base is ``rope_theta`` (1,000,000). And nothing is softcapped:
Gemma3Attention calls the attention function with no softcap (the released configs set
``attn_logit_softcapping`` to null anyway), so the shared attention relations hold again, with the
scale ``query_pre_attn_scalar ** -0.5``; ``final_logit_softcapping`` is null on every released
config, so ``logits`` is ``lm_head_output``. Sliding blocks attend within the last
``sliding_window`` keys. transformers runs Gemma 3 under sdpa by default; the pattern is read under
eager.
"""

from __future__ import annotations

import sys

from transformers.models.gemma3 import modeling_gemma3 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import pick, relation
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP
from .gemma2 import SandwichBlock, _final_norm, _scaled_embeddings, gemma_rms, past_the_head, softcap  # noqa: F401 (past_the_head: the family API)

FAMILY = "gemma3_text"
MODEL_TYPES = ("gemma3_text",)
RENAME = TEXT_RENAME

# -- the attention: per-head q/k norms, then the rotary of the block's kind -----------------------------


def inverse_frequencies(config, layer_type: str, head_dim: int):
    """The rotary inverse frequencies of a block of ``layer_type``, in float64, from its entry of
    ``rope_parameters``: ``rope_theta ** -(2i / head_dim)`` for the default rope, transformers' own
    init function for a scaled one (gemma-3-4b and larger scale the full blocks' rope linearly)."""
    import torch

    params = config.rope_parameters[layer_type]
    if params.get("rope_type", "default") == "default":
        return params["rope_theta"] ** -(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim), 1.0
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    inv, scaling = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, layer_type=layer_type)
    return inv.double(), scaling


def rotate(x, position_ids, inv_freq, scaling=1.0):
    """``x`` ``[batch, heads, seq, head_dim]`` rotated at ``position_ids`` ``[batch, seq]`` (halves
    paired, as transformers' rotate_half), in float64."""
    import torch

    freqs = position_ids.double()[..., None] * inv_freq  # [batch, seq, head_dim / 2]
    angles = torch.cat((freqs, freqs), -1)[:, None]
    cos, sin = angles.cos() * scaling, angles.sin() * scaling
    x = x.double()
    half = x.shape[-1] // 2
    rotated_half = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos + rotated_half * sin


def _call(inputs):
    """(hidden_states, position_ids) from the attention module's (args, kwargs)."""
    args, kwargs = inputs
    hidden = args[0] if args else kwargs["hidden_states"]
    return hidden, kwargs["position_ids"]


@relation("q_norm.output == rms(q_proj(input), per head over head_dim) · (1 + q_norm.weight); attention_queries == "
          "rope(q_norm.output, position_ids, base of the block's kind: rope_parameters[layer_type].rope_theta, "
          "rope_local_base_freq on a sliding block, rope_theta on a full one); likewise k_norm, attention_keys",
          proves="attention_queries attention_keys",
          reads="inputs q_norm.output k_norm.output attention_queries attention_keys")
def _head_norms_and_rope(host, r):
    module = host._module
    x, positions = _call(r["inputs"])
    d = module.head_dim
    inv_freq, scaling = inverse_frequencies(module.config, module.layer_type, d)
    checks = []
    for norm, proj, normed, rotated in ((module.q_norm, module.q_proj, r["q_norm.output"], r["attention_queries"]),
                                        (module.k_norm, module.k_proj, r["k_norm.output"], r["attention_keys"])):
        heads = proj(x).unflatten(-1, (-1, d)).transpose(1, 2)
        checks.append((gemma_rms(norm, heads), normed))
        checks.append((rotate(normed, positions, inv_freq, scaling), rotated))
    return checks


#: Gemma 3's attention: no softcap, so the shared relations (scale query_pre_attn_scalar ** -0.5, the
#: causal mask within the block's sliding window) hold, plus the per-head q/k norms and the rotary of
#: the block's own kind
QKNormLocalGlobalAttention = host("QKNormLocalGlobalAttention", Attention,
                                  RELATIONS=(*ATTENTION_RELATIONS, _head_norms_and_rope))

# -- the root: a scaled embedding, a head with no softcap on the released configs -----------------------


@relation("logits == lm_head_output, softcapped only if final_logit_softcapping is set (cap · tanh(x / cap)); "
          "it is null on every released Gemma 3 config", proves="logits", reads="lm_head_output logits")
def _logits(host, r):
    return [(softcap(r["lm_head_output"].double(), host.text_config.final_logit_softcapping), r["logits"])]


ROOT_RELATIONS_GEMMA3 = (pick(ROOT_RELATIONS, "layers[i].layer_output"), _scaled_embeddings, _final_norm, pick(ROOT_RELATIONS, "lm_head_output"),
                         _logits, pick(ROOT_RELATIONS, "unembed("), pick(ROOT_RELATIONS, "next_token_probs"), pick(ROOT_RELATIONS, "input_ids"), pick(ROOT_RELATIONS, "attention_mask"))

ENVOYS = {hf.Gemma3DecoderLayer: SandwichBlock, hf.Gemma3Attention: QKNormLocalGlobalAttention, hf.Gemma3MLP: MLP}
ROOT = host("Gemma3TextStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS_GEMMA3,
            family_module=sys.modules[__name__])

build = text_only(hf.Gemma3ForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.pre_feedforward_layernorm", "layers.0.post_feedforward_layernorm",
            "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size}
