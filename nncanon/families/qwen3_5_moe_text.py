"""Qwen3.5-MoE / 3.6-MoE text (Qwen3_5MoeForCausalLM, model_type qwen3_5_moe_text).

Llama's tree with a hybrid block: three blocks in four carry a gated DeltaNet mixer,
linear_attn, the fourth ordinary attention, self_attn (config.layer_types). Each block has
one or the other, never both, so on a linear block every self_attn value is reported
missing and the linear values live at layers[i].linear_attn (see
nncanon.parts.recurrent.deltanet). The MLP is a mixture of experts with a shared expert scaled
by a sigmoid gate. Every released checkpoint is a qwen3_5_moe wrapper:
task="text-generation" (the default) builds Qwen3_5MoeForCausalLM out of it,
task="image-text-to-text" the wrapper, whose text stack sits at model.language_model;
RENAME carries both.

On the wrapper the Qwen ViT model.visual is vision (packed, [1, patches,
vision_hidden_size], with a learned pos_embed added after patch_embed and no deepstack),
its blocks vision.layers; its merger is projector.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts import loading
from ..parts.attention.softmax import OutputGatedAttention
from ..parts.blocks.decoder import ROOT_VALUES, Block
from ..parts.blocks.mixture import SharedMoE, moe_dim_sizes, routing
from ..parts.blocks.mlp import TokenMLP
from ..parts.recurrent import deltanet
from ..parts.recurrent.deltanet import DeltaNet
from ..parts.vision import qwen_vit

FAMILY = "qwen3_5_moe_text"
MODEL_TYPES = ("qwen3_5_moe_text",)

RENAME = {
    # the text stack, mounted at the root from the causal LM and from the wrapper
    "model.embed_tokens": "embed_tokens",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.layers": "layers",
    "model.language_model.layers": "layers",
    "model.norm": "norm",
    "model.language_model.norm": "norm",
    # inside the mixture
    "gate": "router",
    "shared_expert": "shared_experts",
    # -- the vision encoder (task="image-text-to-text"): the Qwen ViT at model.visual, its merger
    "model.visual": "vision",
    "model.visual.merger": "projector",
    **qwen_vit.RENAME,
}

Layer = host("Layer", Block, TRACKS_TOKENS=True)
#: Qwen3.5-MoE's router always renormalises its top-k (its config has no norm_topk_prob)
Mixture = host("Mixture", SharedMoE, RELATIONS=(routing(True), *SharedMoE.RELATIONS[1:]))
KERNELS = deltanet.KERNELS  # a DeltaNet family: generator/facts/collect.py adds its kernel routes as loads

ENVOYS = {
    hf.Qwen3_5MoeDecoderLayer: Layer,
    hf.Qwen3_5MoeAttention: OutputGatedAttention,
    hf.Qwen3_5MoeGatedDeltaNet: DeltaNet,
    hf.Qwen3_5MoeSparseMoeBlock: Mixture,
    hf.Qwen3_5MoeMLP: TokenMLP,
    # -- the vision encoder (task="image-text-to-text")
    hf.Qwen3_5MoeVisionModel: qwen_vit.PositionedVision,
    hf.Qwen3_5MoeVisionBlock: qwen_vit.VisionBlock,
    hf.Qwen3_5MoeVisionAttention: qwen_vit.VisionAttention,
    hf.Qwen3_5MoeVisionMLP: qwen_vit.VisionMLP,
}

ROOT = host("Qwen3_5MoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=qwen_vit.IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])


def build(checkpoint: Path, task: str, **hf_kwargs: Any) -> tuple[Any, dict]:
    loading.check_task(task)
    if task == "text-generation":
        module = loading.text_model(checkpoint, hf.Qwen3_5MoeForCausalLM, "model.language_model.", **hf_kwargs)
        return module, {"tokenizer": loading.tokenizer(checkpoint)}
    from ..core.processing import load_processor

    module = loading.pretrained(hf.Qwen3_5MoeForConditionalGeneration, checkpoint, **hf_kwargs)
    processor = load_processor(checkpoint)
    return module, {"tokenizer": processor.tokenizer, "processor": processor}


# what nncanon.core.loading.meta_module builds on meta for each task
build.causal_lm, build.wrapper = hf.Qwen3_5MoeForCausalLM, hf.Qwen3_5MoeForConditionalGeneration


def required_paths(model: StandardModel) -> list[str]:
    paths = [*deltanet.HYBRID_PATHS, "layers.0.mlp.router", "layers.0.mlp.experts", "layers.0.mlp.shared_experts"]
    if model.task == "image-text-to-text":
        # the vision encoder
        paths += ["vision", "projector", "vision.layers.0.input_layernorm", "vision.layers.0.post_attention_layernorm",
                  "vision.layers.0.self_attn.o_proj", "vision.layers.0.mlp.down_proj", "projector.down_proj"]
    return paths


layer_types, explain_missing = deltanet.layer_types, deltanet.explain_missing


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {**moe_dim_sizes(model), **deltanet.dim_sizes(model)}


def prepare(model: StandardModel) -> None:
    deltanet.prepare(model, hf)
    # the vision encoder: image_features is read inside the wrapper's forward (model.model)
    qwen_vit.install_sources(model)


# -- the vision encoder: how the encyclopedia traces images (generator/facts/collect.py) --------------

trace_inputs = qwen_vit.trace_inputs
image_sizes = qwen_vit.image_sizes
vision_variants = qwen_vit.variants

