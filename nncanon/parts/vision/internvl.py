"""InternVL's tower (InternViT) and its pixel-shuffle MLP projector: layer-scaled blocks over tiles of one size.

The processor cuts each image into tiles of the tower's image_size (the grid whose aspect is closest to the
image's, at most max_patches tiles) and adds the whole image shrunk to one tile; each tile is one row of the tower's
batch. The embeddings prepend a learned class token to the patch embeddings (a stride-patch convolution) and add a
learned position per row (``patch_embeddings``); no norm before the blocks. Each block is pre-norm (LayerNorm) and
scales what each branch adds by a learned per-channel gain, ``lambda_1`` on the attention's output and ``lambda_2``
on the MLP's (`LAYER_SCALE_RELATIONS`), the attention over all of a tile's rows with no mask.

The wrapper reads the last hidden state (vision_feature_layer -1: the encoder's output through ``layernorm``, the
identity under use_mean_pooling), drops the class token under the "default" strategy, lays each tile's patches on
their square grid and folds every 2 x 2 square into one row (`pixel_shuffle.shuffle`, downsample_ratio 0.5):
``tower_output``, what the projector is called with, four times the tower's width. The projector is a LayerNorm and
two linears (`stacked_features.NORMED_PROJECTOR`): one image token per square.
"""

from __future__ import annotations

from typing import Any

from ...core.hosts import host
from ...core.layouts import Patches
from ...core.locators import child
from ...core.precision import SUBBLOCK
from ...core.relations import first, relation
from ...core.values import Value
from ..blocks.decoder import BLOCK_RELATIONS
from .pixel_shuffle import shuffle
from .stacked_features import NORMED_PROJECTOR, StackedFeatures
from .vision_line import FLAT, MASK, SCATTER, AtRoot, image_features_value, image_token_mask_value
from .vision_towers import TowerBlock, _siglip_stack, _TowerSizes

#: InternViT's names inside the tower -> the standard ones
INTERNVL_RENAME = {
    "encoder.layer": "layers",
    "layernorm_before": "input_layernorm",
    "layernorm_after": "post_attention_layernorm",
    "attention": "self_attn",
    "projection_layer": "o_proj",
    "layer_norm": "norm",
}

# -- the layer-scaled block ---------------------------------------------------------------------------------------


@relation("layer_input + lambda_1 · {mixer}.attention_output == layer_mid (lambda_1: the block's learned gain per "
          "channel)", proves="layer_mid {mixer}.attention_output", reads="layer_input {mixer}.attention_output layer_mid",
          adds=("layer_input", "{mixer}.attention_output", "layer_mid"))
def _scaled_mixer_add(host, r):
    return [(r["layer_input"] + host._module.lambda_1 * r["{mixer}.attention_output"], r["layer_mid"])]


@relation("layer_mid + lambda_2 · mlp.mlp_output == layer_output (lambda_2: the block's learned gain per channel)",
          proves="layer_output mlp.mlp_output", reads="layer_mid mlp.mlp_output layer_output",
          adds=("layer_mid", "mlp.mlp_output", "layer_output"))
def _scaled_mlp_add(host, r):
    return [(r["layer_mid"] + host._module.lambda_2 * r["mlp.mlp_output"], r["layer_output"])]


#: the pre-norm block's relations with each residual add scaled per channel
LAYER_SCALE_RELATIONS = (_scaled_mixer_add, _scaled_mlp_add, *BLOCK_RELATIONS[2:])
LayerScaleTowerBlock = host("LayerScaleTowerBlock", TowerBlock, HOST="model.vision.layers[i]",
                            RELATIONS=LAYER_SCALE_RELATIONS)

# -- the tower (model.vision) -------------------------------------------------------------------------------------


@relation("patch_embeddings == [cls_token, patch_embeddings.projection(pixel_values) per patch] + position_embeddings "
          "(one learned row per position, the class token's first)", proves="patch_embeddings",
          reads="inputs patch_embeddings", tolerance=SUBBLOCK)
def _embeddings(host, r):
    """A patch's embedding is a conv of 3·patch² terms, recomputed in float64: SUBBLOCK."""
    import torch
    import torch.nn.functional as F

    embeddings = host.embeddings._module
    conv = embeddings.patch_embeddings.projection
    args, kwargs = r["inputs"]
    pixels = (args[0] if args else kwargs["pixel_values"]).double()
    patches = F.conv2d(pixels, conv.weight.double(), conv.bias.double(), stride=conv.stride).flatten(2).transpose(1, 2)
    rows = torch.cat([embeddings.cls_token.double().expand(patches.shape[0], 1, -1), patches], dim=1)
    return [(rows + embeddings.position_embeddings.double(), r["patch_embeddings"])]


def _fold(model: Any) -> int:
    return round(1 / model._module.config.downsample_ratio)


@relation("tower_output == pixel_shuffle(layernorm(layers[-1].layer_output) without its class-token row, 1 / "
          "downsample_ratio): each 2 x 2 square of a tile's patch grid one row; it is what the projector is called "
          "with", proves="tower_output", reads="layers[*].layer_output tower_output model.projector.input")
def _feature(host, r):
    model = host._std_model
    if model._module.config.vision_feature_layer != -1 or model._module.config.vision_feature_select_strategy != "default":
        raise ValueError("only vision_feature_layer -1 under the \"default\" strategy is stated")
    last = host.layernorm._module(first(r["layers[*].layer_output"][-1]))
    return [(shuffle(last[:, 1:], _fold(model)), r["tower_output"]),
            (first(r["model.projector.input"]), r["tower_output"])]


class InternVLSizes(_TowerSizes):
    """The tower's sizes: image_size and patch_size are (height, width) pairs on InternVL's config."""

    @property
    def stacked_width(self) -> int:
        """The projector's row: a shuffled square of fold x fold patches side by side."""
        return _fold(self._std_model) ** 2 * self.vision_hidden_size

    @property
    def patch_size(self) -> int:
        size = self._vision_config.patch_size
        return size if isinstance(size, int) else size[0]

    @property
    def image_size(self) -> int:
        size = self._vision_config.image_size
        return size if isinstance(size, int) else size[0]


def internvl_tower(name: str) -> type:
    """``model.vision`` of an InternVL wrapper: InternViT's values and relations, the shuffle and the projector's."""
    values = [
        image_token_mask_value(),
        Value("patch_embeddings", Patches,
              "The embeddings module's output: the class token and each patch's embedding, positions added",
              child("embeddings")),
        Value("tower_output", StackedFeatures,
              "The tower's output the projector reads: the last hidden state less its class token, each 2 x 2 square "
              "of patches one row", AtRoot(io="input", module="model.multi_modal_projector", shown="model.projector",
                                           element=0, words="the projector's input, at the root")),
        image_features_value(view=FLAT),
    ]
    return type(name, (InternVLSizes, host(name, values=values, HOST="model.vision")),
                {"HOST": "model.vision", "class_tokens": 1,
                 "RELATIONS": (MASK, SCATTER, _embeddings, _siglip_stack, _feature, NORMED_PROJECTOR)})


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The image dimensions of a trace called with ``(args, kwargs)`` (the processor alone): ``images`` the tiles the
    tower runs, ``patches`` each tile's rows (the class token's included), ``stacked_width`` a shuffled row's width."""
    encoding = model.processor(text=args[0] if args else kwargs["text"], images=kwargs["images"], return_tensors="pt")
    tiles, _, height, width = encoding["pixel_values"].shape
    vision = model.vision
    vision._images_of_call = tiles
    patches = (height // vision.patch_size) * (width // vision.patch_size)
    tokens = int((encoding["input_ids"] == model._module.config.image_token_id).sum())
    return {"images": tiles, "patches": 1 + patches, "features": tokens // tiles, "image_tokens": tokens,
            "vision_hidden_size": vision.vision_hidden_size,
            "stacked_width": vision.stacked_width}


__all__ = ["INTERNVL_RENAME", "LAYER_SCALE_RELATIONS", "LayerScaleTowerBlock", "InternVLSizes", "internvl_tower",
           "image_sizes"]
