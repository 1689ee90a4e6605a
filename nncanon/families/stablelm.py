"""StableLM (StableLmForCausalLM, model_type stablelm): Llama's block order with LayerNorms and a partial rotary.

Every block is LayerNorm -> attention -> add, LayerNorm -> gated MLP (SiLU) -> add, as Llama's, but the norms
are LayerNorms with a weight and a bias (eps ``layer_norm_eps``; the same block host as StarCoder2's), and the
final norm too. The attention has separate ``q_proj``, ``k_proj``, ``v_proj`` (with biases when
``use_qkv_bias``, as on Stable LM 2 1.6B) and a bias-free ``o_proj``; the rotary embedding turns only the first
``head_dim · partial_rotary_factor`` dimensions of each query and key head (``rotary_ndims``, a quarter), in
halves (dimension j with j + rotary_ndims/2, ``rotate_half``); the rest pass through as projected. The head is
untied.

StableLmConfig carries two switches that change the block: ``use_parallel_residual`` (the attention and the MLP
both read ``input_layernorm``'s output and are added in one sum, with no ``post_attention_layernorm``) and
``qk_layernorm`` (a LayerNorm per head, weight only, on the queries and keys before the rotary); Stable LM 2 12B
sets both. The config picks the hosts (``layout_envoys``): the sequential block above for 1.6B and
StableLM-3B-4E1T, and for 12B the parallel block with one norm (``parts/parallel.py``) and the attention whose
relation norms each projected head by its own LayerNorm before the rotary. The page's Layouts table says which
checkpoint has which; both are proven on a tiny checkpoint (the YAML's ``variants:``).
"""

from __future__ import annotations

import sys

from transformers.models.stablelm import modeling_stablelm as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention import rotary
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks import decoder
from ..parts.blocks.mlp import MLP
from ..parts.blocks.norms import final_norm_relation
from ..parts.blocks.parallel import parallel_block
from ..parts.blocks.text_family import intermediate_dims, root_relations
from .starcoder2 import LayerNormBlock

FAMILY = "stablelm"
MODEL_TYPES = ("stablelm",)
RENAME = decoder.TEXT_RENAME

#: nn.LayerNorm(hidden_size, eps=layer_norm_eps): a weight and a bias
_AFFINE = "· weight + bias"

StableLmAttention = host("StableLmAttention", Attention,
                         RELATIONS=(*ATTENTION_RELATIONS, rotary.projected("rotary_ndims", rotary.HALVES)))

ENVOYS = {hf.StableLmDecoderLayer: LayerNormBlock, hf.StableLmAttention: StableLmAttention, hf.StableLmMLP: MLP}

# -- Stable LM 2 12B's layout: the parallel block with one LayerNorm, per-head q/k LayerNorms before the rotary --
ParallelBlock = parallel_block("Stable LM 2 12B's block", flag="use_parallel_residual", one_norm=True)
NormedHeadsAttention = host("NormedHeadsAttention", Attention, RELATIONS=(
    *ATTENTION_RELATIONS, rotary.projected("rotary_ndims", rotary.HALVES, norms=("q_layernorm", "k_layernorm"))))


def layout_envoys(config) -> dict:
    """The hosts of the layout ``config`` selects, over ``ENVOYS`` (the sequential block without q/k norms)."""
    out = {}
    if config.use_parallel_residual:
        out[hf.StableLmDecoderLayer] = ParallelBlock
    if config.qk_layernorm:
        out[hf.StableLmAttention] = NormedHeadsAttention
    return out
ROOT = host("StableLmStandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=root_relations(
    {"final_norm_output": final_norm_relation(_AFFINE)}), family_module=sys.modules[__name__])

build = decoder.text_only(hf.StableLmForCausalLM)
layer_types = decoder.attention_layer_types  # StableLmConfig has no layer_types: full attention on every block
dim_sizes = intermediate_dims


def prepare(model: StandardModel) -> None:
    """Nothing to change: every layout StableLmConfig selects is served (``layout_envoys``)."""


def required_paths(model: StandardModel) -> list[str]:
    config = model.text_config
    paths = [p for p in decoder.TEXT_PATHS if not (config.use_parallel_residual and "post_attention" in p)]
    norms = ["layers.0.self_attn.q_layernorm", "layers.0.self_attn.k_layernorm"] if config.qk_layernorm else []
    return [*paths, *norms, "layers.0.self_attn.q_proj", "layers.0.self_attn.k_proj",
            "layers.0.self_attn.v_proj", "layers.0.self_attn.o_proj", "layers.0.mlp.gate_proj"]
