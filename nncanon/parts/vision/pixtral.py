"""The Pixtral tower and its patch merger (Mistral 3's): every image at its own size, packed in one row.

Pixtral's tower reads images of any size: ``patch_conv`` (a stride-patch convolution, no bias) embeds each image's
patches, cropped to the image's own ``image_sizes`` (the processor pads the batch to its largest image), and the
patches of every image are laid one image after another in ONE row, ``[1, patches, width]`` (``patch_embeddings``,
each image's patches row-major). ``ln_pre`` (an RMSNorm) norms the row; pre-norm RMSNorm blocks with a gated MLP
attend with a block-diagonal mask (a patch sees every patch of its own image, none of another) and a 2D rotary:
half of each head's rotated pairs turn with the patch's row in its image, half with its column (the frequencies
of the 1D rotary, taken alternately). Nothing adds positions to the stream.

The projector (``model.projector``) reads the tower's hidden state at ``vision_feature_layer`` (``tower_output``,
``[patches, width]``), norms it (``norm``, an RMSNorm), gathers every spatial_merge_size x spatial_merge_size square
of an image's patch grid into one row (``patch_merger``: the square's values channel by channel, as
``torch.nn.functional.unfold`` lays them) mapped back to the tower's width by ``merging_layer``, then two linears
around an activation (``linear_fc1``, ``act_fn``, ``down_proj``): one image token per square, the images' tokens one
after another.

The tower's names map onto the standard ones (`PIXTRAL_RENAME`); its blocks are the shared tower block
(`vision_towers.TowerBlock`), its MLP the gated one with the tower's layouts (`TowerGatedMLP`), its attention
`PixtralAttention`, whose relations recompute the rotary and the block mask from the call's image sizes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...core.hosts import host
from ...core.layouts import Patches, TowerHeadResults, layout
from ...core.locators import child
from ...core.precision import SUBBLOCK
from ...core.relations import first, relation
from ...core.values import Value
from ..attention.softmax import ATTENTION_RELATIONS, HEAD_RESULTS_RELATION, AttentionBase, head_results_value
from ..blocks.mlp import MLP, MLP_RELATIONS
from .vision_line import MASK, SCATTER, AtRoot, image_features_value, image_token_mask_value
from .vision_towers import _called_with, _patches, _TowerSizes

#: Pixtral's names inside the tower -> the standard ones
PIXTRAL_RENAME = {
    "transformer.layers": "layers",
    "attention_norm": "input_layernorm",
    "attention": "self_attn",
    "ffn_norm": "post_attention_layernorm",
    "feed_forward": "mlp",
}

#: the tower's hidden state the projector reads: every image's patches, one after another
PackedFeatures = layout("PackedFeatures", "patches vision_hidden_size")


def grids(host: Any, sizes: Any) -> list[tuple[int, int]]:
    """Each image's patch grid (rows, columns) from the call's ``image_sizes`` (pixels, height and width)."""
    patch = host._std_model.vision.patch_size
    return [(int(h) // patch, int(w) // patch) for h, w in sizes.tolist()]


def _image_sizes(inputs: Any) -> Any:
    args, kwargs = inputs
    return kwargs["image_sizes"] if "image_sizes" in kwargs else args[1]


# -- the tower (model.vision) -----------------------------------------------------------------------------------


@relation("patch_embeddings == patch_conv(pixel_values) of each image, cropped to its image_sizes, its patches "
          "row-major, the images one after another in one row", proves="patch_embeddings",
          reads="inputs patch_embeddings", tolerance=SUBBLOCK)
def _embeddings(host, r):
    """A patch's embedding is a conv of 3·patch² terms, recomputed in float64: SUBBLOCK."""
    import torch
    import torch.nn.functional as F

    conv = host.patch_conv._module
    pixels = first(r["inputs"]).double()
    rows = []
    for image, (h, w) in zip(pixels, grids(host, _image_sizes(r["inputs"]))):
        embedded = F.conv2d(image[None], conv.weight.double(), stride=conv.stride)[0, :, :h, :w]
        rows.append(embedded.flatten(1).T)
    return [(torch.cat(rows)[None], r["patch_embeddings"])]


@relation("layers[0].layer_input == ln_pre(patch_embeddings); layers[i].layer_output == layers[i+1].layer_input, "
          "on every block", proves="layers[*].layer_input",
          reads="patch_embeddings layers[*].layer_input layers[*].layer_output")
def _stack(host, r):
    outs, ins = r["layers[*].layer_output"], r["layers[*].layer_input"]
    return [(host.ln_pre._module(r["patch_embeddings"]), ins[0]),
            *[(first(out), entering) for out, entering in zip(outs[:-1], ins[1:])]]


@relation("tower_output == hidden state vision_feature_layer (0: layers[0].layer_input; j: layers[j-1].layer_output), "
          "its one row; it is what the projector is called with", proves="tower_output",
          reads="layers[*].layer_input layers[*].layer_output tower_output model.projector.input")
def _feature(host, r):
    config = host._std_model._module.config
    # LightOnOCR's wrapper has no vision_feature_layer: it reads the last hidden state
    layer = getattr(config, "vision_feature_layer", -1) % (config.vision_config.num_hidden_layers + 1)
    selected = r["layers[*].layer_input"][0] if layer == 0 else first(r["layers[*].layer_output"][layer - 1])
    return [(selected[0], r["tower_output"]), (first(r["model.projector.input"]), r["tower_output"])]


def merge(rows: Any, shape: tuple[int, int], size: int) -> Any:
    """``[h · w, width]`` (one image's patches, row-major) -> ``[(h / size) · (w / size), width · size²]``: each
    size x size square one row, channel by channel (each channel's square row-major), the squares row-major."""
    h, w = shape
    grid = rows.reshape(h // size, size, w // size, size, -1)  # [I, di, J, dj, width]
    return grid.permute(0, 2, 4, 1, 3).reshape((h // size) * (w // size), -1)


@relation("image_features == down_proj(act_fn(linear_fc1(merging_layer(merged))))), merged: norm(tower_output) with "
          "each spatial_merge_size x spatial_merge_size square of an image's patch grid one row (channel by channel); "
          "one image token per square, the images one after another", proves="image_features",
          reads="inputs tower_output image_features", tolerance=SUBBLOCK)
def _merger(host, r):
    """Recomputed in float64 from the norm on: SUBBLOCK."""
    import torch
    import torch.nn.functional as F

    projector = host._std_model.projector
    norm = projector.norm._module
    x = r["tower_output"].double()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon) * norm.weight.double()
    size = host._std_model._module.config.spatial_merge_size
    shapes = grids(host, _image_sizes(r["inputs"]))
    merged = torch.cat([merge(rows, shape, size)
                        for rows, shape in zip(x.split([h * w for h, w in shapes]), shapes)])
    linear = lambda module, t: F.linear(t, module._module.weight.double())  # noqa: E731
    out = linear(projector.patch_merger.merging_layer, merged)
    out = linear(projector.down_proj, projector.act_fn._module(linear(projector.linear_fc1, out)))
    return [(out, r["image_features"])]


def pixtral_tower(name: str, projector: str = "model.multi_modal_projector") -> type:
    """``model.vision`` of a Mistral 3 wrapper (or LightOnOCR's, whose projector is at ``projector``): the Pixtral
    tower's values and relations, the patch merger's."""
    values = [
        image_token_mask_value(),
        Value("patch_embeddings", Patches,
              "Every image's patch embeddings, cropped to its size, in one row (what ln_pre norms)",
              child("ln_pre", "input")),
        Value("tower_output", PackedFeatures,
              "The tower's output the projector reads: the hidden state at vision_feature_layer, every image's "
              "patches one after another", AtRoot(io="input", module=projector,
                                                   shown="model.projector", element=0,
                                                   words="the projector's input, at the root")),
        image_features_value(),
    ]
    return type(name, (PixtralSizes, host(name, values=values, HOST="model.vision")),
                {"HOST": "model.vision", "RELATIONS": (MASK, SCATTER, _embeddings, _stack, _feature, _merger),
                 "class_tokens": 0})


class PixtralSizes(_TowerSizes):
    """The tower's sizes: its own head_dim."""

    @property
    def head_dim(self) -> int:
        return self._vision_config.head_dim


# -- the attention: a 2D rotary, a block-diagonal mask ---------------------------------------------------------


def rotary(host: Any, shapes: list[tuple[int, int]]) -> tuple[Any, Any]:
    """cos, sin ``[patches, head_dim]`` of the 2D rotary: each image's (row, column) per patch; the 1D rotary's
    frequencies taken alternately, the even ones turning with the row, the odd ones with the column, the pairs in
    halves."""
    import torch

    config = host._module.config
    dim = config.head_dim
    inverse = 1.0 / (config.rope_parameters["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    rows = torch.cat([torch.arange(h).repeat_interleave(w) for h, w in shapes]).double()
    cols = torch.cat([torch.arange(w).repeat(h) for h, w in shapes]).double()
    angles = torch.cat([rows[:, None] * inverse[0::2], cols[:, None] * inverse[1::2]], dim=-1)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def _turn(x: Any, cos: Any, sin: Any) -> Any:
    import torch

    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


@relation("attention_queries, attention_keys == the 2D rotary of q_proj, k_proj of what the attention is called with "
          "(split into heads; each patch turned by its row and column in its image); attention_values == v_proj, "
          "split into heads", proves="attention_queries attention_keys attention_values",
          reads="inputs model.vision.inputs attention_queries attention_keys attention_values", tolerance=SUBBLOCK)
def _qkv(host, r):
    """The rotary recomputed in float64 (the module's cos and sin are float32): SUBBLOCK."""
    module = host._module
    x = _called_with(r["inputs"]).double()
    heads = lambda t: t.unflatten(-1, (-1, module.head_dim)).transpose(1, 2)  # noqa: E731
    project = lambda linear: heads(x @ linear.weight.double().T)  # noqa: E731
    cos, sin = rotary(host, grids(host, _image_sizes(r["model.vision.inputs"])))
    return [(_turn(project(module.q_proj), cos, sin), r["attention_queries"]),
            (_turn(project(module.k_proj), cos, sin), r["attention_keys"]),
            (project(module.v_proj), r["attention_values"])]


def _scores(host: Any, r: dict) -> Any:
    import torch

    shapes = grids(host, _image_sizes(r["model.vision.inputs"]))
    image = torch.cat([torch.full((h * w,), i) for i, (h, w) in enumerate(shapes)])
    scores = r["attention_queries"].double() @ r["attention_keys"].double().transpose(-1, -2) * host._module.scaling
    return scores.masked_fill(image[:, None] != image[None, :], float("-inf"))


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling, each patch seeing only "
          "its own image's patches) · attention_values", proves="attention_head_outputs",
          reads="model.vision.inputs attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _attention(host, r):
    probabilities = _scores(host, r).softmax(-1)
    return [((probabilities @ r["attention_values"].double()).transpose(1, 2), r["attention_head_outputs"])]


@relation("attention_scores == attention_queries · attention_keysᵀ · scaling + the block-diagonal mask (the dtype's "
          "minimum off each patch's own image); attention_probabilities == softmax(attention_scores)",
          proves="attention_scores attention_probabilities",
          reads="model.vision.inputs attention_queries attention_keys attention_scores attention_probabilities",
          tolerance=SUBBLOCK)
def _pattern(host, r):
    scores = _scores(host, r)
    own = scores > float("-inf")
    return [(scores[own], r["attention_scores"][own]), (scores.softmax(-1), r["attention_probabilities"])]


PixtralAttention = host("PixtralAttention", AttentionBase, values=[
    _patches(AttentionBase, "attention_output", "What the attention adds to the tower's stream"),
    dataclasses.replace(head_results_value("o_proj", count=lambda host: host._module.num_heads),
                        layout=TowerHeadResults),
], HOST="model.vision.layers[i].self_attn",
    RELATIONS=(_qkv, _attention, _pattern, HEAD_RESULTS_RELATION, ATTENTION_RELATIONS[-1]))

#: the tower's gated MLP (act(gate) · up, then down), its output in the tower's layout
TowerGatedMLP = host("TowerGatedMLP", MLP, values=[_patches(MLP, "mlp_output", "What the MLP adds to the tower's stream")],
                     HOST="model.vision.layers[i].mlp", RELATIONS=MLP_RELATIONS)


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The image dimensions of a trace called with ``(args, kwargs)`` (the processor alone): the tower's one row
    (``images`` 1), ``patches`` every image's patches, ``image_tokens`` what the prompt holds."""
    encoding = model.processor(text=args[0] if args else kwargs["text"], images=kwargs["images"], return_tensors="pt")
    vision = model.vision
    vision._images_of_call = 1
    patch = vision.patch_size
    patches = sum((int(h) // patch) * (int(w) // patch) for h, w in encoding["image_sizes"].tolist())
    tokens = int((encoding["input_ids"] == model._module.config.image_token_id).sum())
    return {"images": 1, "patches": patches, "image_tokens": tokens, "vision_hidden_size": vision.vision_hidden_size}


__all__ = ["PIXTRAL_RENAME", "PackedFeatures", "grids", "merge", "pixtral_tower", "PixtralSizes", "rotary",
           "PixtralAttention", "TowerGatedMLP", "image_sizes"]
