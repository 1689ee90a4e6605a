"""StarCoder2 (Starcoder2ForCausalLM, model_type starcoder2): Llama's block order with GPT-style parts.

Every block is LayerNorm -> attention -> add, LayerNorm -> MLP -> add, as Llama's, but the norms are
LayerNorms with a weight and a bias (eps ``norm_epsilon``), the MLP is not gated (``c_fc`` -> GELU, tanh
approximation -> ``c_proj``, so ``mlp_neurons`` is ``mlp_activation`` itself), and every projection has a
bias (``use_bias``): q, k, v and o, c_fc and c_proj. The attention is grouped-query with the rotary embedding
on every dimension and attends within a sliding window (``config.sliding_window``, 4096 on the released
checkpoints, handed to the attention function as Mistral's is: the module has no attribute of its own). The
config's attention, residual and embedding dropouts do nothing at inference.

Native names map onto the standard ones: in the MLP ``act`` is ``act_fn`` and ``c_proj`` is ``down_proj``;
``c_fc`` keeps its name. The norms are stated by their formula (nncanon.parts.blocks.norms), the MLP by the
ungated relation (nncanon.parts.blocks.ungated).
"""

from __future__ import annotations

import sys

from transformers.models.starcoder2 import modeling_starcoder2 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import pick
from ..parts.blocks import decoder
from ..parts.blocks.norms import final_norm_relation, pre_norm_relations
from ..parts.blocks.text_family import intermediate_dims, root_relations
from ..parts.blocks.ungated import ungated_mlp
from .mistral import MistralAttention
from .mistral import layer_types as window_layer_types

FAMILY = "starcoder2"
MODEL_TYPES = ("starcoder2",)
RENAME = {**decoder.TEXT_RENAME, "act": "act_fn", "c_proj": "down_proj"}

#: nn.LayerNorm(hidden_size, eps=norm_epsilon): a weight and a bias
_AFFINE = "· weight + bias"

LayerNormBlock = host("LayerNormBlock", decoder.Block, RELATIONS=(
    pick(decoder.BLOCK_RELATIONS, "layer_input + {mixer}"), pick(decoder.BLOCK_RELATIONS, "layer_mid + mlp"),
    *pre_norm_relations(_AFFINE)))

ENVOYS = {hf.Starcoder2DecoderLayer: LayerNormBlock, hf.Starcoder2Attention: MistralAttention,
          hf.Starcoder2MLP: ungated_mlp("c_fc")}
ROOT = host("Starcoder2StandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=root_relations(
    {"final_norm_output": final_norm_relation(_AFFINE)}),
    family_module=sys.modules[__name__])

build = decoder.text_only(hf.Starcoder2ForCausalLM)
prepare = decoder.nothing_to_prepare
dim_sizes = intermediate_dims
#: Mistral's: sliding_attention on every block when the config sets a window (no layer_types in the config)
layer_types = window_layer_types


def required_paths(model: StandardModel) -> list[str]:
    return [*decoder.TEXT_PATHS, "layers.0.mlp.c_fc", "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]
