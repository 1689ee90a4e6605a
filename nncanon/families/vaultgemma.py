"""VaultGemma (VaultGemmaForCausalLM, model_type vaultgemma): Google's VaultGemma 1B, trained with differential
privacy, Gemma 2's attention and root on a pre-norm block.

Every block is RMSNorm -> attention -> add, RMSNorm -> gated MLP (GELU, tanh approximation) -> add: Gemma 2's
block without its two post-norms, so what a sublayer adds to the stream is its own output. The MLP's norm is
named ``pre_feedforward_layernorm``, as on Gemma 2, and mounted as ``post_attention_layernorm`` (RENAME), where
the shared pre-norm block reads ``mlp_norm_output``. Everything else is Gemma 2's (nncanon.families.gemma2): the
norms multiply by 1 + weight, the embedding is scaled by sqrt(hidden_size), the scores are scaled by
query_pre_attn_scalar ** -0.5 and softcapped by attn_logit_softcapping before the mask, every other block attends
through a sliding window, and the logits are softcapped by final_logit_softcapping past the tied head. The module
was written by ``python -m generator new vaultgemma --from-survey --like gemma2``: the survey found the block's
relations not served (no post_attention_layernorm: the RENAME) and the head's (the softcap: Gemma 2's root).
"""


from __future__ import annotations

import sys

from transformers.models.vaultgemma import modeling_vaultgemma as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import (
    ROOT_VALUES,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP
from ..parts.blocks.text_family import intermediate_dims, text_paths
from .gemma2 import ROOT_RELATIONS_GEMMA2, SoftcappedAttention
from .gemma2 import past_the_head as past_the_head

FAMILY = "vaultgemma"
MODEL_TYPES = ("vaultgemma",)
RENAME = {**TEXT_RENAME, "pre_feedforward_layernorm": "post_attention_layernorm"}  # the MLP's pre-norm, Gemma 2's name
ENVOYS = {hf.VaultGemmaDecoderLayer: Block, hf.VaultGemmaAttention: SoftcappedAttention, hf.VaultGemmaMLP: MLP}
ROOT = host("VaultGemmaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS_GEMMA2,
            family_module=sys.modules[__name__])

build = text_only(hf.VaultGemmaForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
