"""Batched vision towers (CLIP's, and the towers built like it): one row per image, read at a chosen layer.

Unlike the packed Qwen ViT, a CLIP tower runs the call's images as a batch, ``[images, 1 + patches,
width]``: the embeddings module prepends a learned class token to the patch embeddings (a stride-patch
convolution) and adds a learned position per row (``patch_embeddings``); ``pre_layrnorm`` norms the
stream; pre-norm LayerNorm blocks attend over all of an image's rows with no mask. A wrapper reads the
features at one hidden state (``vision_feature_layer``: hidden_states[0] is the stream entering the first
block, hidden_states[j] the stream leaving block j - 1), drops the class token under
``vision_feature_select_strategy`` "default", and calls its projector on that (``tower_output``).

The hosts take the standard names of the shared vision line (`vision_line`) and the Qwen ViT's block
(`TOWER_RENAME` maps CLIP's spelling onto them), so a block's values and relations read as the text
block's: the block's relations are the decoder's, the MLP's are fc1, activation, fc2 with no gate. A
vision tower's value ``patches`` counts every row of an image, the class token included.

A SigLIP tower (`siglip_tower`: gemma3's) is built the same way less three things: no class token (a row
per patch), no norm before the blocks, and ``post_layernorm`` on the last block's output, which is what
the wrapper's projector reads (``tower_output``); each wrapper states its own projector's relation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ...core.hosts import host
from ...core.layouts import Neurons, Patches, TowerHeadResults, layout
from ...core.locators import child
from ...core.precision import SUBBLOCK
from ...core.relations import first, relation
from ...core.values import Value
from ..attention.softmax import ATTENTION_RELATIONS, HEAD_RESULTS_RELATION, AttentionBase, head_results_value
from ..blocks.decoder import BLOCK_RELATIONS, TEXT_PATHS, Block
from ..blocks.mlp import MLP, MLP_RELATIONS
from .vision_line import MASK, SCATTER, AtRoot, image_features_value, image_token_mask_value

#: CLIP's names inside the tower -> the standard ones (the Qwen ViT's): blocks, norms, projections, MLP
TOWER_RENAME = {
    "encoder.layers": "layers",
    "layer_norm1": "input_layernorm",
    "layer_norm2": "post_attention_layernorm",
    "out_proj": "o_proj",
    "fc1": "linear_fc1",
    "activation_fn": "act_fn",
    "fc2": "down_proj",
}

#: a llava wrapper's modules by their standard names (llava, llava_next, llava_onevision): Llama's tree under
#: ``language_model``, the tower at ``vision`` with CLIP's names inside it, the projector's linear_1, act, linear_2 by
#: the merger's standard names
LLAVA_RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
    **TOWER_RENAME,
    "linear_1": "linear_fc1",
    "act": "act_fn",
    "linear_2": "down_proj",
}

#: the standard paths of a llava line's tower and projector, whatever its tower (CLIP's adds its pre_layrnorm)
LLAVA_VISION_PATHS = ("vision", "projector", "vision.layers.0.input_layernorm",
                      "vision.layers.0.post_attention_layernorm", "vision.layers.0.self_attn.o_proj",
                      "vision.layers.0.mlp.linear_fc1", "vision.layers.0.mlp.act_fn", "vision.layers.0.mlp.down_proj",
                      "projector.linear_fc1", "projector.act_fn", "projector.down_proj")


def llava_required_paths(*tower_paths: str) -> Callable[[Any], list[str]]:
    """A llava line's ``required_paths``: the text paths, and on an image-text-to-text load the tower's and the
    projector's (:data:`LLAVA_VISION_PATHS` and ``tower_paths``, what this line's tower has beyond them)."""
    vision = [*LLAVA_VISION_PATHS, *tower_paths]

    def required_paths(model: Any) -> list[str]:
        return [*TEXT_PATHS, *vision] if model.task == "image-text-to-text" else list(TEXT_PATHS)

    return required_paths


#: the rows the projector reads per image: ``patches`` less the class token under the "default" strategy
TowerFeatures = layout("TowerFeatures", "images features vision_hidden_size")

# -- relations on the tower (model.vision) -------------------------------------------------------------


@relation("patch_embeddings == [class_embedding, patch_embedding(pixel_values) per patch] + position_embedding "
          "(one learned row per position, the class token's first)", proves="patch_embeddings",
          reads="inputs patch_embeddings", tolerance=SUBBLOCK)
def _embeddings(host, r):
    """A patch's embedding is a conv of 3·patch² terms, recomputed in float64: SUBBLOCK."""
    import torch
    import torch.nn.functional as F

    embeddings = host.embeddings._module
    conv = embeddings.patch_embedding
    pixels = first(r["inputs"]).double()
    patches = F.conv2d(pixels, conv.weight.double(), None if conv.bias is None else conv.bias.double(),
                       stride=conv.stride).flatten(2).transpose(1, 2)
    cls = embeddings.class_embedding.double().expand(patches.shape[0], 1, -1)
    rows = torch.cat([cls, patches], dim=1)
    return [(rows + embeddings.position_embedding.weight.double()[: rows.shape[1]], r["patch_embeddings"])]


@relation("layers[0].layer_input == pre_layrnorm(patch_embeddings); layers[i].layer_output == layers[i+1].layer_input, "
          "on every block", proves="layers[*].layer_input",
          reads="patch_embeddings layers[*].layer_input layers[*].layer_output")
def _stack(host, r):
    outs, ins = r["layers[*].layer_output"], r["layers[*].layer_input"]
    return [(host.pre_layrnorm._module(r["patch_embeddings"]), ins[0]),
            *[(first(out), entering) for out, entering in zip(outs[:-1], ins[1:])]]


def feature_layer(model: Any) -> int:
    """The hidden state the wrapper reads, 0 ... num_layers (the config's vision_feature_layer, negative from the end)."""
    config = model._module.config
    layer = config.vision_feature_layer
    if not isinstance(layer, int):
        raise ValueError(f"vision_feature_layer {layer!r}: only one feature layer is served (a list concatenates "
                         "several hidden states, which no one value here is)")
    return layer % (config.vision_config.num_hidden_layers + 1)


@relation("tower_output == hidden state vision_feature_layer (0: layers[0].layer_input; j: layers[j-1].layer_output), "
          "its class-token row dropped under vision_feature_select_strategy \"default\"; it is what the projector "
          "is called with", proves="tower_output",
          reads="layers[*].layer_input layers[*].layer_output tower_output model.projector.input")
def _feature(host, r):
    model = host._std_model
    layer = feature_layer(model)
    selected = r["layers[*].layer_input"][0] if layer == 0 else first(r["layers[*].layer_output"][layer - 1])
    if model._module.config.vision_feature_select_strategy == "default":
        selected = selected[:, 1:]
    return [(selected, r["tower_output"]), (first(r["model.projector.input"]), r["tower_output"])]


@relation("image_features == projector(tower_output) = down_proj(act_fn(linear_fc1(tower_output))), one image token "
          "per row, the images' rows one after another", proves="image_features", reads="tower_output image_features")
def _projector(host, r):
    projector = host._std_model.projector
    out = projector.down_proj._module(projector.act_fn._module(projector.linear_fc1._module(r["tower_output"])))
    return [(out.reshape(-1, out.shape[-1]), r["image_features"])]


TOWER_RELATIONS = (MASK, SCATTER, _embeddings, _stack, _feature, _projector)

# -- the tower host ------------------------------------------------------------------------------------


class _TowerSizes:
    """The tower's sizes, read off its own config."""

    #: the width of the row a wrapper's projector reads where the wrapper lays several rows side by side (a
    #: property of such a tower: stacked_features.py, internvl.py), else None
    stacked_width: int | None = None

    @property
    def _vision_config(self) -> Any:
        return self._module.config

    @property
    def num_layers(self) -> int:
        return self._vision_config.num_hidden_layers

    @property
    def vision_hidden_size(self) -> int:
        return self._vision_config.hidden_size

    @property
    def num_heads(self) -> int:
        return self._vision_config.num_attention_heads

    @property
    def head_dim(self) -> int:
        return self.vision_hidden_size // self.num_heads

    @property
    def intermediate_size(self) -> int:
        return self._vision_config.intermediate_size

    @property
    def patch_size(self) -> int:
        return self._vision_config.patch_size

    @property
    def image_size(self) -> int:
        return self._vision_config.image_size

    @property
    def spatial_merge_size(self) -> None:
        """None: the projector maps each patch to its own image token (no merge)."""
        return None

    @property
    def window_size(self) -> None:
        return None

    def dim_sizes(self, patches: int | None = None) -> dict[str, int]:
        """The vision blocks' layout dimensions as they mean them there: ``batch`` is the call's images (each
        image its own row), ``seq`` (``query``, ``key``) its ``patches`` rows (the class token's included)."""
        sizes = {"vision_hidden_size": self.vision_hidden_size, "num_heads": self.num_heads,
                 "num_kv_heads": self.num_heads, "head_dim": self.head_dim, "qk_head_dim": self.head_dim,
                 "intermediate_size": self.intermediate_size}
        if self.stacked_width is not None:
            sizes["stacked_width"] = self.stacked_width
        images = getattr(self, "_images_of_call", None)  # set by image_sizes: the processor's count
        if images is not None:
            sizes.update(images=images, batch=images)
        if patches is not None:
            sizes.update(patches=patches, seq=patches, query=patches, key=patches)
        return sizes


def clip_tower(name: str, projector: str = "model.multi_modal_projector") -> type:
    """``model.vision`` of a wrapper whose CLIP-built tower's features its ``projector`` (native path) reads."""
    values = [
        image_token_mask_value(),
        Value("patch_embeddings", Patches,
              "The embeddings module's output: the class token and each patch's embedding, positions added, "
              "before pre_layrnorm", child("embeddings")),
        Value("tower_output", TowerFeatures,
              "The tower's output the projector reads: the hidden state at vision_feature_layer, after the "
              "feature-select strategy", AtRoot(io="input", module=projector, shown="model.projector", element=0,
                                                words="the projector's input, at the root")),
        image_features_value(),
    ]
    return type(name, (_TowerSizes, host(name, values=values, HOST="model.vision")),
                {"HOST": "model.vision", "RELATIONS": TOWER_RELATIONS, "class_tokens": 1})


# -- SigLIP's tower: no class token, no pre-norm, post_layernorm on the last block's output ---------------


@relation("patch_embeddings == patch_embedding(pixel_values) per patch + position_embedding (one learned row per "
          "patch; no class token)", proves="patch_embeddings", reads="inputs patch_embeddings", tolerance=SUBBLOCK)
def _siglip_embeddings(host, r):
    """A patch's embedding is a conv of 3·patch² terms, recomputed in float64: SUBBLOCK."""
    import torch.nn.functional as F

    embeddings = host.embeddings._module
    conv = embeddings.patch_embedding
    args, kwargs = r["inputs"]  # a wrapper may call the tower with pixel_values by keyword (gemma3's does)
    pixels = (args[0] if args else kwargs["pixel_values"]).double()
    patches = F.conv2d(pixels, conv.weight.double(), None if conv.bias is None else conv.bias.double(),
                       stride=conv.stride).flatten(2).transpose(1, 2)
    return [(patches + embeddings.position_embedding.weight.double()[: patches.shape[1]], r["patch_embeddings"])]


@relation("layers[0].layer_input == patch_embeddings (no norm before the blocks); layers[i].layer_output == "
          "layers[i+1].layer_input, on every block", proves="layers[*].layer_input",
          reads="patch_embeddings layers[*].layer_input layers[*].layer_output")
def _siglip_stack(host, r):
    outs, ins = r["layers[*].layer_output"], r["layers[*].layer_input"]
    return [(r["patch_embeddings"], ins[0]), *[(first(out), entering) for out, entering in zip(outs[:-1], ins[1:])]]


@relation("tower_output == post_layernorm(layers[-1].layer_output): the last hidden state, every patch (no class "
          "token to drop); it is what the projector is called with", proves="tower_output",
          reads="layers[*].layer_output tower_output model.projector.input")
def _siglip_feature(host, r):
    last = first(r["layers[*].layer_output"][-1])
    return [(host.post_layernorm._module(last), r["tower_output"]),
            (first(r["model.projector.input"]), r["tower_output"])]


#: a SigLIP tower's relations, less the projector's (each line's projector states its own)
SIGLIP_RELATIONS = (MASK, SCATTER, _siglip_embeddings, _siglip_stack, _siglip_feature)


def siglip_tower(name: str, projector_relation: Any, features: Value | None = None,
                 projector: str = "model.multi_modal_projector") -> type:
    """``model.vision`` of a wrapper whose SigLIP tower's last hidden state (post_layernorm'd) its ``projector``
    reads; ``projector_relation`` proves image_features from tower_output, ``features`` replaces the shared
    image_features value (a wrapper whose scatter reads another shape)."""
    values = [
        image_token_mask_value(),
        Value("patch_embeddings", Patches,
              "The embeddings module's output: each patch's embedding, positions added (no class token)",
              child("embeddings")),
        Value("tower_output", TowerFeatures,
              "The tower's output the projector reads: the last block's output through post_layernorm",
              AtRoot(io="input", module=projector, shown="model.projector", element=0,
                     words="the projector's input, at the root")),
        features or image_features_value(),
    ]
    return type(name, (_TowerSizes, host(name, values=values, HOST="model.vision")),
                {"HOST": "model.vision", "RELATIONS": (*SIGLIP_RELATIONS, projector_relation), "class_tokens": 0})


# -- a block, its attention and MLP ----------------------------------------------------------------------


def _patches(host_class: type, name: str, description: str) -> Value:
    """``host_class``'s own declaration of ``name``, served as Patches (the tower's rows, natively batched)."""
    return dataclasses.replace(vars(host_class)[name].value, layout=Patches, description=description)


TowerBlock = host("TowerBlock", Block, values=[
    _patches(Block, "layer_input", "The tower's stream entering the block"),
    _patches(Block, "attention_norm_output", "The normed stream entering the attention"),
    _patches(Block, "layer_mid", "The tower's stream after the attention add"),
    _patches(Block, "mlp_norm_output", "The normed stream entering the MLP"),
    _patches(Block, "mlp_input", "What the MLP is called with"),
    _patches(Block, "layer_output", "The tower's stream leaving the block"),
], HOST="model.vision.layers[i]", RELATIONS=BLOCK_RELATIONS)


def _called_with(inputs: Any) -> Any:
    args, kwargs = inputs
    return args[0] if args else kwargs["hidden_states"]


@relation("attention_queries, attention_keys, attention_values == q_proj, k_proj, v_proj of what the attention is "
          "called with, split into heads (no rotary: the positions were added to the embeddings)",
          proves="attention_queries attention_keys attention_values",
          reads="inputs attention_queries attention_keys attention_values")
def _qkv(host, r):
    module = host._module
    x = _called_with(r["inputs"])
    heads = lambda t: t.unflatten(-1, (-1, module.head_dim)).transpose(1, 2)  # noqa: E731
    return [(heads(module.q_proj(x)), r["attention_queries"]), (heads(module.k_proj(x)), r["attention_keys"]),
            (heads(module.v_proj(x)), r["attention_values"])]


def _probabilities(host: Any, queries: Any, keys: Any) -> tuple[Any, Any]:
    scores = queries.double() @ keys.double().transpose(-1, -2) * host._module.scale
    return scores, scores.softmax(-1)


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scale) · attention_values over all of "
          "the image's rows (no mask)", proves="attention_head_outputs",
          reads="attention_queries attention_keys attention_values attention_head_outputs", tolerance=SUBBLOCK)
def _attention(host, r):
    _, probabilities = _probabilities(host, r["attention_queries"], r["attention_keys"])
    return [((probabilities @ r["attention_values"].double()).transpose(1, 2), r["attention_head_outputs"])]


@relation("attention_scores == attention_queries · attention_keysᵀ · scale (no mask); "
          "attention_probabilities == softmax(attention_scores)", proves="attention_scores attention_probabilities",
          reads="attention_queries attention_keys attention_scores attention_probabilities", tolerance=SUBBLOCK)
def _pattern(host, r):
    scores, probabilities = _probabilities(host, r["attention_queries"], r["attention_keys"])
    return [(scores, r["attention_scores"]), (probabilities, r["attention_probabilities"])]


#: attention_head_results over the tower's own heads (its module's num_heads, not the text model's), proven by the
#: shared sum relation: summed over heads, plus o_proj's bias, attention_output
TowerAttention = host("TowerAttention", AttentionBase, values=[
    _patches(AttentionBase, "attention_output", "What the attention adds to the tower's stream"),
    dataclasses.replace(head_results_value("o_proj", count=lambda host: host._module.num_heads),
                        layout=TowerHeadResults),
], HOST="model.vision.layers[i].self_attn",
    RELATIONS=(_qkv, _attention, _pattern, HEAD_RESULTS_RELATION, ATTENTION_RELATIONS[-1]))


@relation("mlp_activation == act_fn(linear_fc1(input)); mlp_neurons == mlp_activation (no gate)",
          proves="mlp_activation", reads="input mlp_activation mlp_neurons")
def _two_linears(host, r):
    activation = host.act_fn._module(host.linear_fc1._module(first(r["input"])))
    return [(activation, r["mlp_activation"]), (r["mlp_activation"], r["mlp_neurons"])]


TowerMLP = host("TowerMLP", MLP, values=[
    _patches(MLP, "mlp_output", "What the MLP adds to the tower's stream"),
    Value("mlp_activation", Neurons, "The activation function's output", child("act_fn")),
    Value("mlp_neurons", Neurons, "What the down projection receives", child("down_proj", "input")),
], HOST="model.vision.layers[i].mlp", RELATIONS=(MLP_RELATIONS[0], _two_linears))

# -- loading and inputs ----------------------------------------------------------------------------------


def tower_build(wrapper: type, tower: str = "vision_tower", projector: str = "multi_modal_projector"):
    """A family's ``build`` for a wrapper whose checkpoints are all ``wrapper``: "image-text-to-text" loads it with
    its processor; "text-generation" (the default) loads it and drops its tower and projector (text prompts never
    reach them), so model.vision does not exist."""
    from .. import loading
    from .qwen_vit.loading import _quiet_text_pipeline

    _quiet_text_pipeline(wrapper)

    def build(checkpoint, task: str, **hf_kwargs: Any) -> tuple[Any, dict]:
        loading.check_task(task)
        module = loading.pretrained(wrapper, checkpoint, **hf_kwargs)
        if task == "text-generation":
            delattr(module.model, tower)
            delattr(module.model, projector)
            return module, {"tokenizer": loading.tokenizer(checkpoint)}
        from ...core.processing import load_processor

        processor = load_processor(checkpoint)
        return module, {"tokenizer": processor.tokenizer, "processor": processor}

    build.wrapper = wrapper  # what nncanon.core.loading.meta_module builds on meta
    build.text_drops = (tower, projector)
    return build


def example_images(processor: Any = None) -> list:
    """A red square (32 x 32 pixels) and a wide image of seeded noise (64 x 32): two sizes, which a CLIP processor
    resizes (shortest edge) and center-crops to the tower's one image_size."""
    import numpy as np
    from PIL import Image

    red = Image.new("RGB", (32, 32), (255, 0, 0))
    noise = np.random.default_rng(0).integers(0, 256, size=(32, 64, 3), dtype=np.uint8)
    return [red, Image.fromarray(noise)]


def trace_inputs(model: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of ``model.trace`` for one prompt with both example images."""
    pad = model.processor.image_token
    return (f"Compare {pad} with {pad}. Which one is red?",), {"images": example_images(model.processor)}


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The image dimensions for a trace called with ``(args, kwargs)`` (the processor alone, no forward): ``images``
    the call's, ``patches`` each image's rows (class token included), ``image_tokens`` what the prompt holds."""
    encoding = model.processor(text=args[0] if args else kwargs["text"], images=kwargs["images"], return_tensors="pt")
    images, _, height, width = encoding["pixel_values"].shape
    vision = model.vision
    vision._images_of_call = images
    patches = vision.class_tokens + (height // vision.patch_size) * (width // vision.patch_size)
    tokens = int((encoding["input_ids"] == model._module.config.image_token_id).sum())
    return {"images": images, "patches": patches, "image_tokens": tokens, "features": tokens // images,
            "vision_hidden_size": vision.vision_hidden_size}


__all__ = ["TOWER_RENAME", "TOWER_RELATIONS", "TowerFeatures", "TowerHeadResults", "clip_tower", "SIGLIP_RELATIONS", "siglip_tower", "TowerBlock", "TowerAttention", "TowerMLP",
           "feature_layer", "tower_build", "example_images", "trace_inputs", "image_sizes"]
