"""The Qwen ViT: the packed vision encoder of every Qwen vision-language line, and its merger.

The encoder runs on one row, ``[patches, vision_hidden_size]``: the patches of every image of
the call concatenated, image j being the ``t * h * w`` patches its ``image_grid_thw`` row says,
in merge-block order (the ``spatial_merge_size ** 2`` patches the merger folds into one image
token are consecutive rows). Its stream values are served ``[1, patches, vision_hidden_size]``
(`IMAGES_AXIS`: a view with a leading images axis of 1, so in-place edits land), while a
block's ``.input`` and ``.output`` stay native.

The attention computes the queries, keys and values of the whole row, then calls the
attention function once per image (the attention's ``cu_seqlens`` argument holds the split
points) and concatenates the outputs, so no one tensor is the block's pattern under any
implementation: attention_scores and attention_probabilities never exist here.

The merger (the wrapper's ``projector``) runs inside the encoder's forward, before it returns:
in one trace read the last block, then the projector, then ``vision.tower_output``, then
``vision.image_features`` (in the wrapper's forward, where the features are scattered into the
text embeddings), then the text blocks. ``tower_output`` is read-only: nothing reads the
returned stream after the merger has, so an edit belongs on the last block's layer_output.

This module gathers the line's parts, one idea per module:

- `hosts`: the hosts (``model.vision``, its blocks, attention and MLP), their locators and views;
- `relations`: what each value means, as equations the build checks, and the text root's
  relations under images (`IMAGE_ROOT_RELATIONS`, `DEEPSTACK_ROOT_RELATIONS`);
- `windows`: the packed row's attention segments and Qwen2.5-VL's window order, from the grids;
- `deepstack`: Qwen3-VL's DeepStack taps, served at ``model.layers[i].deepstack_output``;
- `lines`: the names (`MOUNTS`, `RENAME`, `RENAME_FC`, `envoys`) and the variants table;
- `loading`: the wrapper's loading, required paths and ``prepare``;
- `inputs`: the example images and trace inputs the encyclopedia measures with.
"""

from __future__ import annotations

from .deepstack import (
    DEEPSTACK,
    DEEPSTACK_MOUNTS,
    DEEPSTACK_PATHS,
    WITH_IMAGES,
    AfterBlock,
    DeepStackBlock,
    DeepStackVision,
    deepstack_blocks,
    install_deepstack,
)
from .hosts import (
    IMAGE_TOKENS,
    IMAGES_HEADS,
    NO_PATTERN,
    RETURNED,
    AtRoot,
    GatedVisionMLP,
    PositionedVision,
    Vision,
    VisionAttention,
    VisionBlock,
    VisionMLP,
    Worded,
    install_sources,
)
from .inputs import example_images, image_sizes, trace_inputs
from .lines import LINES, MOUNTS, RENAME, RENAME_FC, envoys, variant, variants, vision_variants
from .loading import VISION_PATHS, dense_dim_sizes, prepare, required_paths, wrapper_build
from .relations import DEEPSTACK_ROOT_RELATIONS, IMAGE_ROOT_RELATIONS, WINDOWED_VISION_RELATIONS

__all__ = ["Vision", "PositionedVision", "DeepStackVision", "VisionBlock", "VisionAttention", "VisionMLP",
           "GatedVisionMLP", "RENAME", "RENAME_FC", "MOUNTS", "DEEPSTACK_MOUNTS", "DEEPSTACK_PATHS", "DEEPSTACK",
           "AtRoot", "Worded", "AfterBlock", "install_sources", "install_deepstack", "prepare", "NO_PATTERN",
           "IMAGES_HEADS", "IMAGE_TOKENS", "RETURNED", "WITH_IMAGES", "DeepStackBlock", "deepstack_blocks",
           "example_images", "trace_inputs", "image_sizes", "envoys", "wrapper_build", "required_paths",
           "dense_dim_sizes", "VISION_PATHS", "LINES", "variant", "variants", "vision_variants",
           "IMAGE_ROOT_RELATIONS", "DEEPSTACK_ROOT_RELATIONS",
           "WINDOWED_VISION_RELATIONS"]
