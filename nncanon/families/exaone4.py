"""EXAONE 4 (Exaone4ForCausalLM, model_type exaone4): OLMo 2's post-norm block, per-head query/key norms,
three sliding-window blocks to every full one, and no rotary on the full ones.

The block is OLMo 2's (nncanon.families.olmo2): no norm before a sublayer; each sublayer reads the stream
itself and what it adds is its output RMS-normed (post_attention_layernorm, post_feedforward_layernorm).
The attention norms each query and key head by itself (q_norm, k_norm over head_dim, unlike OLMo 2's norm
across the whole projection), then rotates them only on ``sliding_attention`` blocks: ``config.layer_types``
(from ``sliding_window_pattern``, 4 or "LLLG" on the hybrid checkpoints) makes every fourth block
``full_attention``, which has no rotary (global NoPE) and sees the whole prefix; a config with no
``sliding_window`` rotates every block. Every attention module holds ``sliding_window`` but the forward hands
it to the attention function on sliding blocks only, so this family's attention host says which window the
call gets (``WINDOW``), as Mistral's does.
"""

from __future__ import annotations

import sys

from transformers.models.exaone4 import modeling_exaone4 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.nope import rotary_or_not
from ..parts.attention.softmax import ATTENTION_RELATIONS
from ..parts.blocks import decoder
from ..parts.blocks.text_family import intermediate_dims
from .olmo2 import PostNormAttention, PostNormBlock, PostNormMLP
from .olmo2 import required_paths as post_norm_paths

FAMILY = "exaone4"
MODEL_TYPES = ("exaone4",)
RENAME = decoder.TEXT_RENAME


def _rotates(module) -> bool:
    """The forward's own test: a model with no window rotates every block, a hybrid one its sliding blocks."""
    return module.sliding_window is None or module.is_sliding


def hybrid_attention(name: str, base, rotate):
    """EXAONE's attention host over ``base``: per-head q/k norms, the rotary on sliding blocks only (global NoPE),
    the window handed to sliding calls only. EXAONE 4's post-norm block and EXAONE MoE's pre-norm one share it."""
    return host(name, base, RELATIONS=(
        *ATTENTION_RELATIONS, rotary_or_not(rotate, flag=_rotates, normed=True,
                                            rotated_on="on sliding_attention blocks (and on every block of a model "
                                                       "with no sliding_window)",
                                            nope_on="on full_attention blocks of a hybrid model (global NoPE)")),
        WINDOW=lambda module: module.sliding_window if module.is_sliding else None)


HybridAttention = hybrid_attention("HybridAttention", PostNormAttention, hf.apply_rotary_pos_emb)

ENVOYS = {hf.Exaone4DecoderLayer: PostNormBlock, hf.Exaone4Attention: HybridAttention, hf.Exaone4MLP: PostNormMLP}
ROOT = host("Exaone4StandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=decoder.ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = decoder.text_only(hf.Exaone4ForCausalLM)
layer_types = decoder.attention_layer_types  # config.layer_types, from sliding_window_pattern
prepare = decoder.nothing_to_prepare
dim_sizes = intermediate_dims

#: OLMo 2's: no input_layernorm, a post-feedforward norm, q_norm and k_norm
required_paths = post_norm_paths
