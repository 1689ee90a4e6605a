"""GraniteMoeShared (GraniteMoeSharedForCausalLM, model_type granitemoeshared): Granite MoE's µP block with a dense
shared expert beside the mixture.

Every block is RMSNorm -> attention -> add residual_multiplier times its output, then RMSNorm -> two MLPs side by
side on the normed stream -> add residual_multiplier times the sum of their outputs. The two MLPs are granitemoe's
mixture, native ``block_sparse_moe`` (served as ``mlp``: a softmax over the router's top-k logits weighting fused
SwiGLU experts), and the shared expert, native ``shared_mlp`` (served as ``shared_experts``: a SwiGLU MLP whose gate
and up projections are one fused ``input_linear``, chunked in two), which every token goes through. The block, not
the mixture, calls the shared expert, so ``mlp.mlp_output`` is the mixture's output alone. As on granite,
``embedding_multiplier`` scales the embedding before the first block, ``attention_multiplier`` is the attention's
softmax scale, and the logits are lm_head's divided by ``logits_scaling``. The block is Granite 4.0-H's
(granitemoehybrid) with attention as its only mixer: `nncanon.parts.blocks.granite_shared` holds the mixture, the
shared expert and the block's relations for both. A config with ``shared_intermediate_size`` 0 builds no shared
expert (granitemoe's block) and is refused: this family covers the shared-expert checkpoints.
"""

from __future__ import annotations

import sys

from transformers.models.granitemoeshared import modeling_granitemoeshared as hf

from ..core.hosts import host
from ..core.model import FamilyMismatch, StandardModel
from ..parts.blocks.decoder import (
    TEXT_PATHS,
    TEXT_RENAME,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.granite_shared import GraniteMoE, GraniteSharedExpertBlock, SharedExpert
from .granite import ROOT as GRANITE_ROOT
from .granite import GraniteAttention
from .granite import past_the_head as past_the_head

FAMILY = "granitemoeshared"
MODEL_TYPES = ("granitemoeshared",)
RENAME = {**TEXT_RENAME, "block_sparse_moe": "mlp", "shared_mlp": "shared_experts"}
GraniteMoeSharedBlock = host("GraniteMoeSharedBlock", GraniteSharedExpertBlock, MIXERS=("self_attn",))
ENVOYS = {hf.GraniteMoeSharedDecoderLayer: GraniteMoeSharedBlock, hf.GraniteMoeSharedAttention: GraniteAttention,
          hf.GraniteMoeSharedMoE: GraniteMoE, hf.GraniteMoeSharedMLP: SharedExpert}
ROOT = host("GraniteMoeSharedStandardModel", GRANITE_ROOT, family_module=sys.modules[__name__])

build = text_only(hf.GraniteMoeSharedForCausalLM)
layer_types = attention_layer_types  # GraniteMoeSharedConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    if not model.text_config.shared_intermediate_size:
        raise FamilyMismatch(f"{FAMILY}: shared_intermediate_size is 0, so no block has a shared expert (granitemoe's "
                             "block): nncanon serves the shared-expert checkpoints under this family")
    return [*TEXT_PATHS, "layers.0.mlp.router", "layers.0.mlp.experts", "layers.0.shared_experts"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    """The Neurons layout is the shared expert's (shared_intermediate_size); the routed experts' width is the
    mixture's own (config.intermediate_size), read off its weights."""
    config = model.text_config
    return {"intermediate_size": config.shared_intermediate_size, "num_experts": config.num_local_experts,
            "top_k": config.num_experts_per_tok}
