"""PhiMoE (PhimoeForCausalLM, model_type phimoe): Microsoft's Phi-3.5-MoE, LayerNorm pre-norm blocks over a top-2
mixture routed by sparsemixer.

Every block is LayerNorm -> grouped-query attention -> add, LayerNorm -> mixture -> add; the norms are LayerNorms
with a gain and a bias (eps rms_norm_eps, despite its name), as is the final norm. The mixture (native ``mlp``) has a
bias-free router (``router``, a linear) and fused SwiGLU experts. Its routing is sparsemixer's, as the model runs at
inference: the first expert is the largest logit, the second the largest of the others, and each one's weight is
its softmax probability over only the logits within 2 · router_jitter_noise of it, relative to the larger magnitude
(the first masked out for the second), so the two weights neither sum to one nor are a softmax over both. That
routing is the shared mixture's SPARSEMIXER_ROUTING (nncanon.parts.blocks.mixture); in training the model samples
the experts instead (Gumbel noise), which nncanon does not serve. No relation is the family's own.
"""

from __future__ import annotations

import sys

from transformers.models.phimoe import modeling_phimoe as hf

from ..core.hosts import host
from ..core.layouts import RouterLogits
from ..core.locators import op
from ..core.model import StandardModel
from ..core.values import Value
from ..core.views import TOKENS
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
from ..parts.blocks.mixture import MOE_RELATIONS, SPARSEMIXER_ROUTING, MoE, MoEBlock
from .granitemoe import dim_sizes as dim_sizes  # PhimoeConfig names its experts num_local_experts too

FAMILY = "phimoe"
MODEL_TYPES = ("phimoe",)
RENAME = TEXT_RENAME

#: the router is a linear whose forward calls its parent's (forward_0): the logits it hands sparsemixer are that call's
#: output, where an edit reroutes
SparseMixerMoE = host("SparseMixerMoE", MoE, values=[
    Value("router_logits", RouterLogits, "The router's logits, one per expert (nn.Linear's forward, which the router "
          "calls as its parent's)", op("forward_0", module="router"), view=TOKENS),
], RELATIONS=(SPARSEMIXER_ROUTING, *MOE_RELATIONS[1:]))

ENVOYS = {hf.PhimoeDecoderLayer: MoEBlock, hf.PhimoeAttention: Attention, hf.PhimoeSparseMoeBlock: SparseMixerMoE}
ROOT = host("PhimoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.PhimoeForCausalLM)
layer_types = attention_layer_types  # every block attends in full on the released checkpoint (no sliding_window)
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.mlp.router", "layers.0.mlp.experts"]
