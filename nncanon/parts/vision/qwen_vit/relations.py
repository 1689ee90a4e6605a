"""Relations of the Qwen ViT line: what each vision value means, as an equation the build checks.

The shared relations (`nncanon.core.relations`) state the text decoder's meanings; the packed vision
encoder keeps the block's (its residual adds and norms hold as they are, across the served
``[1, patches, width]`` and the native ``[patches, width]``) and states its own for the rest:

- the encoder (`VISION_RELATIONS` on ``model.vision``): the patch embedding over each patch's
  pixels, the stream from block to block (entering as the patch embeddings, plus the learned
  positions resampled to each image's grid on the lines that have them, in window order on
  Qwen2.5-VL), tower_output as the last block's stream, image_features as the projector's merge of
  it and as what the text stack receives at the image tokens;
- the attention (`ATTENTION_RELATIONS`): q, k and v out of qkv and the vision rotary, and heads
  mixed block-diagonally, within each image (each window on Qwen2.5-VL's windowed blocks), with no
  mask, over segments computed here from the image grids (`windows`);
- the MLP (`MLP_RELATIONS`): fc1, the activation, fc2 with no gate (Qwen2.5-VL's SwiGLU keeps the
  shared gated relations);
- the text root (`IMAGE_ROOT_RELATIONS`): the first block reads the token embeddings off the image
  tokens (the image features on them), and with DeepStack (`DEEPSTACK_ROOT_RELATIONS`) the stream
  passes from block to block except at the image tokens after a DeepStack block; what DeepStack
  adds there is stated on ``model.vision`` (`DEEPSTACK_RELATIONS`), where it exists.

A root relation holds under every load: it finds the image tokens by the config's image_token_id
in input_ids, which selects nothing on a text prompt (and nothing on a text-only load).
"""

from __future__ import annotations

from typing import Any

from ....core.hosts import index
from ....core.precision import SUBBLOCK
from ....core.relations import first, relation
from ...blocks.mlp import MLP_RELATIONS
from .. import vision_line
from ..vision_line import image_tokens, replace
from .windows import segment_bounds, window_order

# -- reading the call -----------------------------------------------------------------------------


def grid_of(inputs: Any) -> Any:
    """``image_grid_thw`` from the vision encoder's ``(args, kwargs)``."""
    args, kwargs = inputs
    return kwargs["grid_thw"] if "grid_thw" in kwargs else args[1]


def taps(model: Any) -> list[int]:
    """The vision blocks whose streams DeepStack feeds to text blocks 0, 1, ... (deepstack_visual_indexes)."""
    return list(getattr(model._module.config.vision_config, "deepstack_visual_indexes", None) or ())


# -- the text root, under every load ---------------------------------------------------------------


@relation("layers[i].layer_output == layers[i+1].layer_input, on every block, except at the image tokens after "
          "blocks i < len(deepstack_visual_indexes), where DeepStack adds layers[i].deepstack_output",
          proves="layers[*].layer_input", reads="input_ids layers[*].layer_output layers[*].layer_input")
def _deepstack_stack(host, r):
    import torch

    images = image_tokens(host, r["input_ids"])
    count = len(taps(host))
    pairs = []
    for i, (out, entering) in enumerate(zip(r["layers[*].layer_output"][:-1], r["layers[*].layer_input"][1:])):
        keep = ~images if i < count else torch.ones_like(images)
        pairs.append((first(out)[keep], entering[keep]))
    return pairs


#: the root of a Qwen VL line: the shared relations, the embeddings' stated off the image tokens
IMAGE_ROOT_RELATIONS = vision_line.IMAGE_ROOT_RELATIONS
#: the root of a DeepStack line: the stack too is stated off the image tokens of the DeepStack blocks
DEEPSTACK_ROOT_RELATIONS = replace(IMAGE_ROOT_RELATIONS, layers_layer_input=_deepstack_stack)

# -- the encoder (model.vision) --------------------------------------------------------------------


_mask, _scatter = vision_line.MASK, vision_line.SCATTER


@relation("patch_embeddings == patch_embed.proj over each patch: its pixel_values row · proj.weight (+ proj.bias)",
          proves="patch_embeddings", reads="inputs patch_embeddings", tolerance=SUBBLOCK)
def _patches(host, r):
    conv = host.patch_embed.proj._module
    pixels = first(r["inputs"]).double()
    out = pixels @ conv.weight.double().reshape(conv.weight.shape[0], -1).T
    if conv.bias is not None:
        out = out + conv.bias.double()
    return [(out, r["patch_embeddings"])]


@relation("tower_output == layers[-1].layer_output (no final norm) == what the projector reads",
          proves="tower_output", reads="layers[-1].layer_output tower_output model.projector.input")
def _tower(host, r):
    return [(r["layers[-1].layer_output"], r["tower_output"]), (first(r["model.projector.input"]), r["tower_output"])]


def merge(projector: Any, x: Any, merge_size: int, norm_after_fold: bool = False) -> Any:
    """A merger's math by its parts: norm each patch (or, ``norm_after_fold``, each folded row), fold
    each merge block's ``merge_size ** 2`` consecutive patches into one row, linear_fc1, act_fn, down_proj."""
    fold = lambda t: t.reshape(-1, t.shape[-1] * merge_size ** 2)  # noqa: E731
    folded = projector.norm._module(fold(x)) if norm_after_fold else fold(projector.norm._module(x))
    return projector.down_proj._module(projector.act_fn._module(projector.linear_fc1._module(folded)))


@relation("image_features == projector(tower_output): norm, each merge block's spatial_merge_size² patches "
          "folded into one row, linear_fc1, act_fn, down_proj", proves="image_features",
          reads="tower_output image_features")
def _projector(host, r):
    merged = merge(host._std_model.projector, r["tower_output"][0], host.spatial_merge_size)
    return [(merged, r["image_features"])]


@relation("image_features == projector(tower_output), merge blocks put back in the processor's order "
          "(row window_index[b] of the projector's output is image token b): norm, fold, linear_fc1, act_fn, down_proj",
          proves="image_features", reads="tower_output window_index image_features")
def _windowed_projector(host, r):
    merged = merge(host._std_model.projector, r["tower_output"][0], host.spatial_merge_size)
    return [(merged[r["window_index"].argsort()], r["image_features"])]


def _block_to_block(r) -> list:
    outs, ins = r["layers[*].layer_output"], r["layers[*].layer_input"]
    return [(first(out), entering) for out, entering in zip(outs[:-1], ins[1:])]


@relation("layers[0].layer_input == patch_embeddings; layers[i].layer_output == layers[i+1].layer_input, "
          "on every block", proves="layers[*].layer_input",
          reads="patch_embeddings layers[*].layer_input layers[*].layer_output")
def _stack(host, r):
    return [(r["patch_embeddings"], r["layers[*].layer_input"][0]), *_block_to_block(r)]


def resampled_positions(vision: Any, grid_thw: Any) -> Any:
    """The learned pos_embed table (a square grid) resampled to each image's grid by F.interpolate in
    the encoder's mode, rows in merge-block order, repeated over the frames: ``[patches, width]``."""
    import torch
    import torch.nn.functional as F

    side, merge_size = vision.num_grid_per_side, vision.spatial_merge_size
    table = vision.pos_embed.weight.double().reshape(side, side, -1).permute(2, 0, 1)[None]
    rows = []
    for t, h, w in grid_thw.tolist():
        grid = F.interpolate(table, size=(h, w), mode=vision.interpolation_mode,
                             align_corners=vision.interpolation_align_corners)[0].permute(1, 2, 0)
        blocks = grid.reshape(h // merge_size, merge_size, w // merge_size, merge_size, -1).permute(0, 2, 1, 3, 4)
        rows.append(blocks.reshape(h * w, -1).repeat(t, 1))
    return torch.cat(rows)


@relation("layers[0].layer_input == patch_embeddings + pos_embed resampled to each image's grid (bilinear, corners "
          "aligned), in merge-block order; layers[i].layer_output == layers[i+1].layer_input, on every block",
          proves="layers[*].layer_input", reads="inputs patch_embeddings layers[*].layer_input layers[*].layer_output",
          tolerance=SUBBLOCK)
def _positioned_stack(host, r):
    positions = resampled_positions(host._module, grid_of(r["inputs"]))
    return [(r["patch_embeddings"][0].double() + positions, r["layers[*].layer_input"][0][0]), *_block_to_block(r)]


@relation("layers[0].layer_input == patch_embeddings in window order (merge block b of the stream is merge block "
          "window_index[b]); layers[i].layer_output == layers[i+1].layer_input, on every block",
          proves="layers[*].layer_input",
          reads="window_index patch_embeddings layers[*].layer_input layers[*].layer_output")
def _windowed_stack(host, r):
    patches = r["patch_embeddings"][0]
    blocks = patches.reshape(-1, host.spatial_merge_size ** 2, patches.shape[-1])
    return [(blocks[r["window_index"]].reshape(patches.shape), r["layers[*].layer_input"][0][0]),
            *_block_to_block(r)]


@relation("window_index == the merge blocks window by window: each image's grid of merge blocks cut from the top "
          "left into windows of window_size / (patch_size · spatial_merge_size) blocks a side, raster order inside "
          "each", proves="window_index", reads="inputs window_index")
def _window_index(host, r):
    import torch

    config = host._module.config
    order, _ = window_order(grid_of(r["inputs"]), config.window_size, config.patch_size, config.spatial_merge_size)
    return [(torch.tensor(order), r["window_index"])]


_ENCODER = (_mask, _scatter, _patches, _tower)
#: ``model.vision`` of Qwen2-VL: no learned positions, no windows
VISION_RELATIONS = (*_ENCODER, _stack, _projector)
#: ``model.vision`` with a learned pos_embed (Qwen3-VL, Qwen3.5)
POSITIONED_VISION_RELATIONS = (*_ENCODER, _positioned_stack, _projector)
#: ``model.vision`` of Qwen2.5-VL: window order inside the encoder
WINDOWED_VISION_RELATIONS = (*_ENCODER, _window_index, _windowed_stack, _windowed_projector)

# -- DeepStack (on model.vision: it exists only with images) ------------------------------------------


@relation("layers[j+1].layer_input == layers[j].layer_output + layers[j].deepstack_output at the image tokens "
          "(image_token_mask), on each DeepStack block j < len(deepstack_visual_indexes)",
          proves="deepstack_layers[*].deepstack_output",
          reads="image_token_mask model.layers[*].layer_output model.layers[*].layer_input "
                "deepstack_layers[*].deepstack_output")
def _deepstack_add(host, r):
    mask, added = r["image_token_mask"], r["deepstack_layers[*].deepstack_output"]
    if not added:
        raise ValueError("no text block gets DeepStack features (vision_config.deepstack_visual_indexes is empty)")
    outs, ins = r["model.layers[*].layer_output"], r["model.layers[*].layer_input"]
    return [(first(outs[j])[mask] + added[j], ins[j + 1][mask]) for j in range(len(added))]


@relation("layers[j].deepstack_output == deepstack_projectors[j](vision.layers[deepstack_visual_indexes[j]]"
          ".layer_output): each merge block folded into one row, norm, linear_fc1, act_fn, down_proj",
          proves="deepstack_layers[*].deepstack_output",
          reads="layers[*].layer_output deepstack_layers[*].deepstack_output")
def _deepstack_features(host, r):
    model, blocks = host._std_model, r["layers[*].layer_output"]
    return [(merge(model.deepstack_projectors[j], blocks[tap][0], host.spatial_merge_size, norm_after_fold=True),
             added) for j, (tap, added) in enumerate(zip(taps(model), r["deepstack_layers[*].deepstack_output"]))]


DEEPSTACK_RELATIONS = (*POSITIONED_VISION_RELATIONS, _deepstack_add, _deepstack_features)

# -- the attention -----------------------------------------------------------------------------------


def rotate_half(x: Any) -> Any:
    import torch

    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@relation("attention_queries, attention_keys == qkv(input)'s queries and keys turned by the call's vision rotary "
          "(x·cos + rotate_half(x)·sin); attention_values == qkv(input)'s values",
          proves="attention_queries attention_keys attention_values",
          reads="inputs attention_queries attention_keys attention_values", tolerance=SUBBLOCK)
def _qkv(host, r):
    module, (args, kwargs) = host._module, r["inputs"]
    x = args[0]
    q, k, v = module.qkv(x).double().reshape(x.shape[0], 3, module.num_heads, -1).permute(1, 0, 2, 3)
    cos, sin = (t.double().unsqueeze(-2) for t in kwargs["position_embeddings"])
    turned = [t * cos + rotate_half(t) * sin for t in (q, k)]
    heads_first = lambda t: t.transpose(0, 1)[None]  # noqa: E731  ([patches, heads, d] -> [1, heads, patches, d])
    return [(heads_first(turned[0]), r["attention_queries"]), (heads_first(turned[1]), r["attention_keys"]),
            (heads_first(v), r["attention_values"])]


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling) · attention_values "
          "within each segment of the packed row (block-diagonal, no mask): each image's patches, or on a windowed "
          "block (Qwen2.5-VL outside fullatt_block_indexes) each window's; the call's cu_seqlens are those bounds",
          proves="attention_head_outputs",
          reads="inputs model.vision.inputs attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _packed_attention(host, r):
    import torch

    module = host._module
    bounds = segment_bounds(host._std_model.vision._module.config, grid_of(r["model.vision.inputs"]),
                            index(host._std_path))
    q, k, v = (r[f"attention_{name}"][0].double() for name in ("queries", "keys", "values"))
    mixed = [((q[:, a:b] @ k[:, a:b].transpose(-1, -2) * module.scaling).softmax(-1) @ v[:, a:b]).transpose(0, 1)
             for a, b in zip(bounds[:-1], bounds[1:])]
    return [(torch.tensor(bounds), r["inputs"][1]["cu_seqlens"]),
            (torch.cat(mixed)[None], r["attention_head_outputs"])]


@relation("attention_output == o_proj(attention_premix)", proves="attention_premix attention_output",
          reads="attention_premix attention_output")
def _output_projection(host, r):
    premix = r["attention_premix"]
    return [(host.o_proj._module(premix.flatten(-2)), r["attention_output"])]


ATTENTION_RELATIONS = (_qkv, _packed_attention, _output_projection)

# -- the MLP -------------------------------------------------------------------------------------------


@relation("mlp_activation == act_fn(linear_fc1(input)); mlp_neurons == mlp_activation (no gate)",
          proves="mlp_activation", reads="input mlp_activation mlp_neurons")
def _two_linears(host, r):
    activation = host.act_fn._module(host.linear_fc1._module(first(r["input"])))
    return [(activation, r["mlp_activation"]), (r["mlp_activation"], r["mlp_neurons"])]


#: fc1, the activation, fc2 (down_proj): Qwen2-VL, Qwen3-VL, Qwen3.5
MLP_RELATIONS_FC = (MLP_RELATIONS[0], _two_linears)
#: Qwen2.5-VL's biased SwiGLU: the shared gated relations
GATED_MLP_RELATIONS = MLP_RELATIONS

__all__ = ["IMAGE_ROOT_RELATIONS", "DEEPSTACK_ROOT_RELATIONS", "VISION_RELATIONS", "POSITIONED_VISION_RELATIONS",
           "WINDOWED_VISION_RELATIONS", "DEEPSTACK_RELATIONS", "ATTENTION_RELATIONS", "MLP_RELATIONS_FC",
           "GATED_MLP_RELATIONS", "image_tokens", "grid_of", "taps", "merge", "resampled_positions"]
