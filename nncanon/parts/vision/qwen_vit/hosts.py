"""The Qwen ViT's hosts: the packed encoder (``model.vision``), its blocks, attention and MLP.

The encoder runs on one row, ``[patches, vision_hidden_size]``: the patches of every image of
the call concatenated, image j being the ``t * h * w`` patches its ``image_grid_thw`` row says,
in merge-block order. Its stream values are served ``[1, patches, vision_hidden_size]``
(`IMAGES_AXIS`), while a block's ``.input`` and ``.output`` stay native. Each host carries the
relations of `relations`; a line whose encoder differs uses its own subclass
(`PositionedVision` for a learned pos_embed, `GatedVisionMLP` for Qwen2.5-VL's SwiGLU; Qwen2.5-VL's
window order and DeepStack's vision host live with the line and in `deepstack`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ....core.hosts import host
from ....core.layouts import HeadOutputs, Keys, Neurons, Patches, Queries, TowerHeadResults, Values
from ....core.locators import child, op, own
from ....core.values import Unavailable, Value, View, never
from ....core.views import IMAGES_AXIS, head_results
from ...attention.softmax import HEAD_RESULTS_RELATION, AttentionBase
from ...blocks.decoder import BLOCK_RELATIONS, Block
from ...blocks.mlp import MLP
from ..vision_line import (  # noqa: F401 (re-exported: the line's public names)
    IMAGE_TOKENS,
    AtRoot,
    Worded,
    image_features_value,
    image_token_mask_value,
    install_sources,
)
from . import relations

# The locators (Worded, AtRoot, install_sources), IMAGE_TOKENS and the image_token_mask and image_features
# values are the shared vision line's (nncanon.parts.vision.vision_line), re-exported here.

# -- views ---------------------------------------------------------------------------


def _heads_read(host: Any, x: Any) -> Any:
    return x.unsqueeze(0).unflatten(-1, (-1, host._module.head_dim))


def _heads_write(host: Any, x: Any, current: Any) -> Any:
    return x.flatten(-2).squeeze(0)


#: [patches, heads*head_dim] -> [1, patches, heads, head_dim] (what the output projection takes)
IMAGES_HEADS = View("images-axis, heads(head_dim)", _heads_read, _heads_write)


_TOWER_HEAD_RESULTS = head_results("o_proj", count=lambda host: host._module.num_heads)  # the tower's own heads

#: [patches, heads*head_dim] -> [1, patches, heads, width]: each of the tower's heads through its columns of o_proj
IMAGES_HEAD_RESULTS = View("images-axis, head results (o_proj)",
                           lambda host, x: _TOWER_HEAD_RESULTS.read(host, x).unsqueeze(0), None, derived=True)


#: the encoder's returned stream, [1, patches, width]; read-only, as nothing reads it after the
#: merger has (an edit belongs on the last block's layer_output)
RETURNED = View("images-axis, read-only", lambda host, x: x.unsqueeze(0), None)

# -- the encoder ---------------------------------------------------------------------

NO_PATTERN = never("no one tensor is the block's pattern")

_NO_IMAGE_SIZE = ("the processor cuts each image into its own grid (image_grid_thw: t, h, w patches per image); "
                  "there is no one image size")


class _VisionSizes:
    """The encoder's sizes, read off its own config (``model.vision``'s module's)."""

    @property
    def _vision_config(self) -> Any:
        return self._module.config

    @property
    def num_layers(self) -> int:
        return self._vision_config.depth

    @property
    def vision_hidden_size(self) -> int:
        """The encoder's width (``embed_dim`` on Qwen2-VL, whose ``hidden_size`` is the merger's output)."""
        config = self._vision_config
        return getattr(config, "embed_dim", None) or config.hidden_size

    @property
    def num_heads(self) -> int:
        return self._vision_config.num_heads

    @property
    def head_dim(self) -> int:
        return self.vision_hidden_size // self.num_heads

    @property
    def intermediate_size(self) -> int:
        """The MLP's width (``embed_dim * mlp_ratio`` on Qwen2-VL)."""
        config = self._vision_config
        size = getattr(config, "intermediate_size", None)
        return size if size is not None else int(self.vision_hidden_size * config.mlp_ratio)

    @property
    def patch_size(self) -> int:
        return self._vision_config.patch_size

    @property
    def spatial_merge_size(self) -> int:
        return self._vision_config.spatial_merge_size

    @property
    def window_size(self) -> int | None:
        """Qwen2.5-VL's attention window side in pixels; None on the lines without windows."""
        return getattr(self._vision_config, "window_size", None)

    @property
    def image_size(self) -> int:
        raise Unavailable(f"{self._standard_path()}.image_size is unavailable: {_NO_IMAGE_SIZE}")

    def dim_sizes(self, patches: int | None = None) -> dict[str, int]:
        """The size of every layout dimension name the vision blocks' values use, as they mean it there.

        The vision attention's and MLP's layouts reuse the text ones' names (Queries [batch
        num_heads seq qk_head_dim], Neurons [batch seq intermediate_size]): on a host under
        ``model.vision.layers[i]``, ``batch`` (like ``images``) is 1, ``seq`` (``query``, ``key``)
        is the call's ``patches``, and the head counts and widths are the encoder's. (On
        ``model.vision`` itself image_token_mask is the text's [batch seq] and image_features
        the text's hidden_size.)
        """
        sizes = {
            "images": 1,
            "batch": 1,
            "vision_hidden_size": self.vision_hidden_size,
            "num_heads": self.num_heads,
            "num_kv_heads": self.num_heads,
            "head_dim": self.head_dim,
            "qk_head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
        }
        if patches is not None:
            sizes.update(patches=patches, seq=patches, query=patches, key=patches)
        return sizes


_Vision = host("QwenVision", values=[
    image_token_mask_value(),
    Value("patch_embeddings", Patches, "The patch embedding's output, one row per patch", child("patch_embed"),
          view=IMAGES_AXIS),
    Value("tower_output", Patches,
          "The last block's stream after the tower's final norm, before any pooling or adapter",
          Worded(io="output", attr="last_hidden_state", words="the module's own output"), view=RETURNED),
    image_features_value(),
], HOST="model.vision")

#: ``model.vision``: the Qwen ViT, packed (Qwen2-VL's: no learned positions, no windows)
Vision = type("QwenVision", (_VisionSizes, _Vision),
              {"HOST": "model.vision", "RELATIONS": relations.VISION_RELATIONS})

#: ``model.vision`` with a learned pos_embed resampled to each image's grid (Qwen3-VL, Qwen3.5)
PositionedVision = host("QwenPositionedVision", Vision, RELATIONS=relations.POSITIONED_VISION_RELATIONS)

# -- a block ---------------------------------------------------------------------------


def _declared(host_class: type, name: str) -> Any:
    """``host_class``'s own declaration of ``name`` (a shared text host's)."""
    return vars(host_class)[name].value


def _on_patches(host_class: type, name: str, description: str) -> Value:
    """The text host's ``name`` read at the same point, served on the packed row as Patches."""
    return dataclasses.replace(_declared(host_class, name), layout=Patches, description=description,
                               view=IMAGES_AXIS)


# The text block's locators (and whatever else it declares, e.g. how layer_mid is assigned),
# served [1, patches, vision_hidden_size]; the text block's relations hold as they are.
VisionBlock = host("QwenVisionBlock", Block, values=[
    _on_patches(Block, "layer_input", "The tower's stream entering the block"),
    _on_patches(Block, "attention_norm_output", "The normed stream entering the attention"),
    _on_patches(Block, "layer_mid", "The tower's stream after the attention add"),
    _on_patches(Block, "mlp_norm_output", "The normed stream entering the MLP"),
    _on_patches(Block, "mlp_input", "What the MLP is called with"),
    _on_patches(Block, "layer_output", "The tower's stream leaving the block"),
], HOST="model.vision.layers[i]", RELATIONS=BLOCK_RELATIONS)

# print(model) lists a host's values most derived class first, in declaration order; the
# support table lists them in the base class's order (`Host.values`).
VisionAttention = host("QwenVisionAttention", AttentionBase, values=[
    Value("attention_queries", Queries, "The queries entering attention", op("unsqueeze_0")),
    Value("attention_keys", Keys, "The keys entering attention", op("unsqueeze_1")),
    Value("attention_values", Values, "The values entering attention", op("unsqueeze_2")),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
          op("torch_cat_0")),
    # the text attention returns a tuple (element 0); this one returns the tensor
    Value("attention_output", Patches, "What the attention adds to the tower's stream", own("output"),
          view=IMAGES_AXIS),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
          child("o_proj", "input"), view=IMAGES_HEADS),
    dataclasses.replace(_declared(AttentionBase, "attention_scores"), conditions=(NO_PATTERN,)),
    dataclasses.replace(_declared(AttentionBase, "attention_probabilities"), conditions=(NO_PATTERN,)),
    Value("attention_head_results", TowerHeadResults,
          "Each of the tower's heads' contribution to attention_output: its slice of attention_premix through its own "
          "columns of o_proj (TransformerLens's hook_result); summed over heads, plus o_proj's bias, "
          "attention_output; derived, read-only", child("o_proj", "input"), view=IMAGES_HEAD_RESULTS,
          extra={"projection": "o_proj"}),
], HOST="model.vision.layers[i].self_attn", RELATIONS=(*relations.ATTENTION_RELATIONS, HEAD_RESULTS_RELATION))

#: the MLP of fc1, an activation and fc2 (down_proj), no gate: Qwen2-VL, Qwen3-VL, Qwen3.5
VisionMLP = host("QwenVisionMLP", MLP, values=[
    _on_patches(MLP, "mlp_output", "What the MLP adds to the tower's stream"),
    Value("mlp_activation", Neurons, "The activation function's output", child("act_fn"), view=IMAGES_AXIS),
    Value("mlp_neurons", Neurons, "What the down projection receives", child("down_proj", "input"),
          view=IMAGES_AXIS),
], HOST="model.vision.layers[i].mlp", RELATIONS=relations.MLP_RELATIONS_FC)

#: Qwen2.5-VL's biased SwiGLU MLP (gate_proj, up_proj, down_proj), the same values
GatedVisionMLP = host("QwenGatedVisionMLP", VisionMLP, RELATIONS=relations.GATED_MLP_RELATIONS)

__all__ = ["Worded", "AtRoot", "install_sources", "IMAGES_HEADS", "IMAGE_TOKENS", "RETURNED", "NO_PATTERN",
           "Vision", "PositionedVision", "VisionBlock", "VisionAttention", "VisionMLP", "GatedVisionMLP"]
