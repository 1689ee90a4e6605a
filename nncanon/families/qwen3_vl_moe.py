"""Qwen3-VL-MoE (Qwen3VLMoeForConditionalGeneration, model_type qwen3_vl_moe): Qwen3-VL over a mixture of experts.

Qwen3-VL with Qwen3-MoE's MLP: the router (native name gate) gives each token one logit per
expert, a softmax picks the num_experts_per_tok largest, renormalized to sum to one (the released
checkpoints set norm_topk_prob), and the fused experts add up their weighted SwiGLU outputs; no
shared expert. A block listed in mlp_only_layers keeps a dense MLP (none on the released
checkpoints). Loading, the Qwen ViT with its learned pos_embed, and DeepStack are Qwen3-VL's:
model.layers[j].deepstack_output is what the text model adds to the image tokens after block j,
the output of deepstack_projectors[j] (see nncanon.families.qwen3_vl).
"""

from __future__ import annotations

import sys

from transformers.models.qwen3_vl_moe import modeling_qwen3_vl_moe as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mixture import MoE, routing
from ..parts.blocks.mixture import moe_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision import qwen_vit
from ..parts.vision.qwen_vit import DeepStackBlock, image_sizes, prepare, trace_inputs, vision_variants  # noqa: F401 (the family API, shared)

FAMILY = "qwen3_vl_moe"
MODEL_TYPES = ("qwen3_vl_moe", "qwen3_vl_moe_text")
RENAME = {**qwen_vit.MOUNTS, **qwen_vit.RENAME, **qwen_vit.DEEPSTACK_MOUNTS, "gate": "router"}
#: Qwen3-VL-MoE's router always renormalises its top-k (its config has no norm_topk_prob)
Mixture = host("Mixture", MoE, RELATIONS=(routing(True), *MoE.RELATIONS[1:]))
ENVOYS = {hf.Qwen3VLMoeTextDecoderLayer: DeepStackBlock, hf.Qwen3VLMoeTextAttention: Attention,
          hf.Qwen3VLMoeTextSparseMoeBlock: Mixture, hf.Qwen3VLMoeTextMLP: MLP,
          **qwen_vit.envoys(hf.Qwen3VLMoeVisionModel, hf.Qwen3VLMoeVisionBlock, hf.Qwen3VLMoeVisionAttention,
                             hf.Qwen3VLMoeVisionMLP, vision_host=qwen_vit.DeepStackVision)}
ROOT = host("Qwen3VLMoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=qwen_vit.DEEPSTACK_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = qwen_vit.wrapper_build(hf.Qwen3VLMoeForConditionalGeneration)
required_paths = qwen_vit.required_paths(
    [*TEXT_PATHS, "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm", "layers.0.mlp.router",
     "layers.0.mlp.experts"], qwen_vit.DEEPSTACK_PATHS)
