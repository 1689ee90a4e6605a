"""GLM-4-0414 (Glm4ForCausalLM, model_type glm4): Zhipu AI's GLM-4-0414, GLM's attention and fused MLP in a
sandwich block.

Every block norms each sublayer on its way in and again on its way out: RMSNorm -> attention -> RMSNorm -> add,
RMSNorm -> gated MLP (silu) -> RMSNorm -> add, so what a sublayer adds to the stream is its post-norm's output, as on
Gemma 2, with the norms' gain ``weight`` (not 1 + weight). The four norms have names of their own:
``post_self_attn_layernorm`` norms the attention's output, ``post_attention_layernorm`` (the pre-norm's name on
Llama) the stream entering the MLP, ``post_mlp_layernorm`` the MLP's output; the shared sandwich block (nncanon.parts.blocks.sandwich) reads
them by these names (a rename to Gemma's would shadow GLM-4's own post_attention_layernorm). The attention is GLM's (q/k/v biased, the rotary on half of each head, in
adjacent pairs) and the MLP GLM's: one gate_up_proj chunked gate first (Phi-3's MLP host). The module was written by
``python -m generator new glm4 --from-survey --like glm``: the survey found the two adds broken (the sandwich).
"""


from __future__ import annotations

import sys

from transformers.models.glm4 import modeling_glm4 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.sandwich import weight_gain_block
from ..parts.blocks.text_family import intermediate_dims
from .phi3 import Phi3MLP

FAMILY = "glm4"
MODEL_TYPES = ("glm4",)
RENAME = TEXT_RENAME
#: GLM-4's norms past input_layernorm: the attention's post-norm, the MLP's pre-norm (Llama's name for it), the MLP's
#: post-norm; the sandwich block reads them by these names (a rename to Gemma's would shadow post_attention_layernorm)
NORMS = ("post_self_attn_layernorm", "post_attention_layernorm", "post_mlp_layernorm")
SandwichBlock = weight_gain_block("Glm4SandwichBlock", NORMS)
ENVOYS = {hf.Glm4DecoderLayer: SandwichBlock, hf.Glm4Attention: Attention, hf.Glm4MLP: Phi3MLP}
ROOT = host("Glm4StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.Glm4ForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
dim_sizes = intermediate_dims


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.post_self_attn_layernorm", "layers.0.post_mlp_layernorm"]
