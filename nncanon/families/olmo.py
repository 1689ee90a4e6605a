"""OLMo (OlmoForCausalLM, model_type olmo): Llama's block with LayerNorms that have no learnable weight.

Every block is LayerNorm -> attention -> add, LayerNorm -> gated SwiGLU MLP -> add, as Llama's, but each
norm (the two in a block and the final one) is a plain LayerNorm with neither weight nor bias: it centres
the stream and scales it to unit variance (eps 1e-5, fixed in its forward) and nothing else, so a norm's
output is the same function of its input on every block and every checkpoint, and there is no gain to fold
into the next projection. The relations state the norms by that formula (nncanon.parts.blocks.norms), not by
calling the module. The attention is multi-head with the rotary embedding on every dimension; a config may
clamp the query, key and value projections to ±clip_qkv before the heads are split (OLMo-1B-hf has no clamp),
which the values' relation states. OLMo-1B ties lm_head to embed_tokens.
"""

from __future__ import annotations

import sys

from transformers.models.olmo import modeling_olmo as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import first, pick, relation
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks import decoder
from ..parts.blocks.mlp import MLP
from ..parts.blocks.norms import final_norm_relation, pre_norm_relations
from ..parts.blocks.text_family import intermediate_dims, root_relations, text_paths

FAMILY = "olmo"
MODEL_TYPES = ("olmo",)
RENAME = decoder.TEXT_RENAME

#: OlmoLayerNorm: no weight, no bias
_WEIGHTLESS = "(no weight, no bias)"

WeightlessNormBlock = host("WeightlessNormBlock", decoder.Block, RELATIONS=(
    pick(decoder.BLOCK_RELATIONS, "layer_input + {mixer}"), pick(decoder.BLOCK_RELATIONS, "layer_mid + mlp"),
    *pre_norm_relations(_WEIGHTLESS)))


@relation("attention_values == clamp(v_proj(input), ±clip_qkv) split into heads (no clamp when clip_qkv is null)",
          proves="attention_values", reads="input attention_values")
def _clipped_values(host, r):
    module, x = host._module, first(r["input"])
    values = module.v_proj(x)
    if (clip := module.config.clip_qkv) is not None:
        values = values.clamp(-clip, clip)
    values = values.view(*x.shape[:-1], -1, module.head_dim).transpose(1, 2)
    return [(values, r["attention_values"][:, :, -x.shape[1]:])]


ClippedAttention = host("ClippedAttention", Attention, RELATIONS=(*ATTENTION_RELATIONS, _clipped_values))

ENVOYS = {hf.OlmoDecoderLayer: WeightlessNormBlock, hf.OlmoAttention: ClippedAttention, hf.OlmoMLP: MLP}
ROOT = host("OlmoStandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=root_relations(
    {"final_norm_output": final_norm_relation(_WEIGHTLESS)}),
    family_module=sys.modules[__name__])

build = decoder.text_only(hf.OlmoForCausalLM)
layer_types = decoder.attention_layer_types  # OlmoConfig has no layer_types: full attention on every block
prepare = decoder.nothing_to_prepare

required_paths = text_paths
dim_sizes = intermediate_dims
