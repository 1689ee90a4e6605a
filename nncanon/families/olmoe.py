"""OLMoE (OlmoeForCausalLM, model_type olmoe): a pre-norm decoder with query/key norms over the
whole projection and a 64-expert, top-8 mixture on every block.

The block is Llama's: RMSNorm -> attention -> add, RMSNorm -> mixture -> add, returning a tensor.
The attention differs in its norms: q_proj's whole output (num_attention_heads × head_dim wide,
hidden_size on every released config) is RMS-normed as one vector by q_norm, and k_proj's whole
output by k_norm, before it is split into heads and rotated; Qwen3's norms, by contrast, normalize
each head on its own. So attention_queries and attention_keys are normed across every head at once,
then rotated. With clip_qkv set (null on the released checkpoints) the normed queries, keys and
values are clamped in place before the heads are split. OlmoeAttention sizes q_norm by hidden_size
and k_norm by (hidden_size / num_attention_heads) × num_key_value_heads, so head_dim is always
hidden_size / num_attention_heads.

The MLP of every block is a mixture of num_experts (64) SwiGLU experts with no shared expert and no
dense block: the router (native name gate, one weight matrix without a bias) gives each token one
logit per expert, a softmax over all 64 (in float32) picks the num_experts_per_tok (8) largest, and
those probabilities are the expert weights as they are (norm_topk_prob is false on the released
checkpoints), so a token's eight weights add up to less than one. intermediate_size is each
expert's width. The fused experts add up their weighted outputs; routed_output is the whole MLP
output.
"""

from __future__ import annotations

import sys

from transformers.models.olmoe import modeling_olmoe as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import first, relation
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
from ..parts.blocks.mixture import MoE, MoEBlock, moe_dim_sizes

FAMILY = "olmoe"


@relation("q_norm.output == q_norm(q_proj(input)), one RMS norm over the whole projection (every head at once); "
          "attention_queries == its heads, rotated (each rotary pair keeps its length); likewise k_norm, "
          "attention_keys", proves="attention_queries attention_keys",
          reads="input q_norm.output k_norm.output attention_queries attention_keys")
def _whole_projection_qk_norms(host, r):
    module, x = host._module, first(r["input"])
    d = module.head_dim

    def pairs(t):
        return t[..., : d // 2] ** 2 + t[..., d // 2:] ** 2

    checks = []
    for norm, proj, normed, rotated in ((module.q_norm, module.q_proj, r["q_norm.output"], r["attention_queries"]),
                                        (module.k_norm, module.k_proj, r["k_norm.output"], r["attention_keys"])):
        checks.append((norm(proj(x)), normed))
        checks.append((pairs(normed.unflatten(-1, (-1, d)).transpose(1, 2)), pairs(rotated)))
    return checks


#: the attention with OLMoE's query/key norms over the whole projection, which its relations state
WholeProjectionQKNormAttention = host("WholeProjectionQKNormAttention", Attention,
                                      RELATIONS=(*ATTENTION_RELATIONS, _whole_projection_qk_norms))
MODEL_TYPES = ("olmoe",)
RENAME = {**TEXT_RENAME, "gate": "router"}
ENVOYS = {hf.OlmoeDecoderLayer: MoEBlock, hf.OlmoeAttention: WholeProjectionQKNormAttention, hf.OlmoeSparseMoeBlock: MoE}
ROOT = host("OlmoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.OlmoeForCausalLM)
layer_types = attention_layer_types  # OlmoeConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare
dim_sizes = moe_dim_sizes


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm", "layers.0.mlp.router",
            "layers.0.mlp.experts"]
