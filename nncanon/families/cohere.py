"""Cohere (CohereForCausalLM, model_type cohere): Command R's parallel block off one LayerNorm, and logits scaled.

Every block norms its input once (``input_layernorm``, a LayerNorm with a weight and no bias) and both
sublayers read that one normed tensor; their outputs are added to the stream in one sum:

    out = x + self_attn(input_layernorm(x)) + mlp(input_layernorm(x))

So there is no ``post_attention_layernorm``, no stream between two adds (``layer_mid`` is never served), and
``mlp_input`` is ``attention_norm_output`` itself (the block part is nncanon.parts.blocks.parallel's one-norm
block). The attention is Llama's but for its rotary, which pairs adjacent dimensions (``repeat_interleave``
of the frequencies, not two halves); ``use_qk_norm`` (Command R+; off on Command R) adds per-head
LayerNorms on queries and keys. The MLP is SwiGLU. The head is tied to the embedding and its output is
multiplied by ``logit_scale`` (0.0625 on Command R): ``logits`` is not ``lm_head_output``.
"""

from __future__ import annotations

import sys

from transformers.models.cohere import modeling_cohere as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import relation
from ..parts.attention.softmax import Attention
from ..parts.blocks import decoder
from ..parts.blocks.mlp import MLP
from ..parts.blocks.norms import final_norm_relation
from ..parts.blocks.parallel import parallel_block
from ..parts.blocks.text_family import intermediate_dims, root_relations

FAMILY = "cohere"
MODEL_TYPES = ("cohere",)
RENAME = decoder.TEXT_RENAME


@relation("logits == lm_head_output · logit_scale", proves="logits", reads="lm_head_output logits")
def _scaled_logits(host, r):
    return [(r["lm_head_output"].double() * host._module.logit_scale, r["logits"])]


#: CohereLayerNorm: a weight, no bias
_ROOT_OWN = {"final_norm_output": final_norm_relation("· weight"), "logits == lm_head_output": _scaled_logits}
ROOT_RELATIONS_COHERE = root_relations(_ROOT_OWN)

ENVOYS = {hf.CohereDecoderLayer: parallel_block("Cohere's block", one_norm=True), hf.CohereAttention: Attention,
          hf.CohereMLP: MLP}
ROOT = host("CohereStandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=ROOT_RELATIONS_COHERE,
            family_module=sys.modules[__name__])

build = decoder.text_only(hf.CohereForCausalLM)
layer_types = decoder.attention_layer_types  # CohereConfig has no layer_types: full attention on every block
prepare = decoder.nothing_to_prepare
dim_sizes = intermediate_dims


def required_paths(model: StandardModel) -> list[str]:
    """Llama's paths less post_attention_layernorm: the one norm serves both sublayers."""
    return [p for p in decoder.TEXT_PATHS if p != "layers.0.post_attention_layernorm"]


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): the causal LM multiplies the head's logits by logit_scale."""
    return logits * model._module.logit_scale
