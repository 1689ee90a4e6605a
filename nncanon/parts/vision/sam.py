"""A SAM-style vision encoder (GOT-OCR 2.0's): a ViTDet tower on a patch grid, windowed and global attention with
decomposed relative positions, a convolutional neck, and a projector of two strided convolutions.

The tower keeps its stream on the patch grid, ``[images, rows, cols, width]``: a stride-patch convolution
(``patch_embed``) and a learned absolute position per grid cell (``pos_embed``) added to it. Each block is pre-norm
(LayerNorm): the normed grid is cut into ``window_size`` x ``window_size`` windows (padded at the bottom and right
to whole windows) on most blocks, or kept whole on the ``global_attn_indexes`` blocks; each window attends to itself
with one fused qkv projection, its scores plus a decomposed relative position bias (a learned vector per row offset
and one per column offset, dotted with the query: ``rel_pos_h``, ``rel_pos_w``), and the windows are laid back (the
padding cut off) before the residual add; then an MLP (lin1, GELU, lin2). The neck maps the last block's grid with a
1 x 1 and a 3 x 3 convolution, each followed by a channels-first LayerNorm, to ``output_channels``
(``vision.tower_output``, what the projector reads); the projector halves the grid twice with stride-2 3 x 3
convolutions, reaching the text width, and maps each cell with a linear: one image token per cell of the quartered
grid, row-major (``vision.image_features``).

No block of this tower is served (its stream is a grid, its windows a batch of their own): `TOWER` proves
``tower_output`` from ``patch_embeddings`` one block at a time, each block recomputed in float64 from what the
block before handed it, and `PROJECTOR` proves ``image_features`` from ``tower_output``.
"""

from __future__ import annotations

from typing import Any

from ...core.layouts import layout
from ...core.precision import SUBBLOCK
from ...core.relations import first, relation
from ...core.values import View

#: the neck's output the projector reads: each image's grid cells, ``output_channels`` wide
NeckFeatures = layout("NeckFeatures", "images features neck_channels")

#: [images, rows, cols, width] -> [images, rows · cols, width], row-major (a view: edits reach the grid)
GRID = View("the patch grid flattened row-major", lambda host, x: x.flatten(1, 2),
            lambda host, new, current: new.reshape(current.shape))
#: channels-first [images, channels, rows, cols] -> [images, rows · cols, channels]
CHANNELS_FIRST = View("channels-first grid, one row per cell (row-major)",
                      lambda host, x: x.flatten(2).transpose(1, 2),
                      lambda host, new, current: new.transpose(1, 2).reshape(current.shape))


def layer_norm(module: Any, x: Any) -> Any:
    """A LayerNorm over the last dimension in float64."""
    x = x.double()
    centered = x - x.mean(-1, keepdim=True)
    normed = centered / (centered.pow(2).mean(-1, keepdim=True) + module.eps).sqrt()
    return normed * module.weight.double() + module.bias.double()


def linear(module: Any, x: Any) -> Any:
    out = x.double() @ module.weight.double().T
    return out if module.bias is None else out + module.bias.double()


def _relative(table: Any, size: int) -> Any:
    """``[size, size, head_dim]``: the learned vector of the offset q - k for every query and key position (the table
    holds 2 · size - 1 offsets: interpolation is the identity at the size it was trained for, the only one here)."""
    import torch

    if table.shape[0] != 2 * size - 1:
        raise ValueError(f"relative positions: a table of {table.shape[0]} offsets for {size} positions (only the "
                         "trained size, 2 · size - 1 offsets, is stated)")
    offsets = torch.arange(size)[:, None] - torch.arange(size)[None, :] + size - 1
    return table.double()[offsets]


def attention(module: Any, windows: Any) -> Any:
    """SAM's attention over ``windows [n, h, w, width]`` in float64: fused qkv, scaled scores plus the decomposed
    relative bias, softmax, the heads side by side, ``proj``."""
    n, h, w, width = windows.shape
    heads = module.num_attention_heads
    qkv = linear(module.qkv, windows).reshape(n, h * w, 3, heads, -1).permute(2, 0, 3, 1, 4)
    query, key, value = qkv[0], qkv[1], qkv[2]  # [n, heads, h · w, head_dim]
    scores = (query * module.scale) @ key.transpose(-2, -1)
    if module.use_rel_pos:
        grid = query.reshape(n, heads, h, w, -1)
        rel_h = (grid[:, :, :, :, None, :] * _relative(module.rel_pos_h, h)[None, None, :, None]).sum(-1)
        rel_w = (grid[:, :, :, :, None, :] * _relative(module.rel_pos_w, w)[None, None, None]).sum(-1)
        scores = scores + (rel_h[..., :, None] + rel_w[..., None, :]).reshape(n, heads, h * w, h * w)
    out = (scores.softmax(-1) @ value).reshape(n, heads, h, w, -1).permute(0, 2, 3, 1, 4).reshape(n, h, w, -1)
    return linear(module.proj, out)


def block(layer: Any, x: Any) -> Any:
    """One SAM block in float64 on the grid ``x [images, rows, cols, width]``."""
    import torch.nn.functional as F

    normed = layer_norm(layer.layer_norm1, x)
    size = layer.window_size
    if size > 0:
        images, rows, cols, width = normed.shape
        padded = F.pad(normed, (0, 0, 0, (-cols) % size, 0, (-rows) % size))
        ph, pw = padded.shape[1], padded.shape[2]
        windows = padded.reshape(images, ph // size, size, pw // size, size, width).permute(0, 1, 3, 2, 4, 5)
        mixed = attention(layer.attn, windows.reshape(-1, size, size, width))
        mixed = mixed.reshape(images, ph // size, pw // size, size, size, width).permute(0, 1, 3, 2, 4, 5)
        mixed = mixed.reshape(images, ph, pw, width)[:, :rows, :cols]
    else:
        mixed = attention(layer.attn, normed)
    x = x.double() + mixed
    mlp = layer.mlp
    return x + linear(mlp.lin2, mlp.act(linear(mlp.lin1, layer_norm(layer.layer_norm2, x))))


def neck(module: Any, x: Any) -> Any:
    """The neck in float64: ``[images, rows, cols, width]`` -> ``[images, output_channels, rows, cols]``."""
    import torch.nn.functional as F

    y = F.conv2d(x.double().permute(0, 3, 1, 2), module.conv1.weight.double())
    y = layer_norm(module.layer_norm1, y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
    y = F.conv2d(y, module.conv2.weight.double(), padding=1)
    return layer_norm(module.layer_norm2, y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


@relation("patch_embeddings == patch_embed(pixel_values): a stride-patch convolution, one row per grid cell "
          "(row-major; the stream stays on the grid)", proves="patch_embeddings", reads="inputs patch_embeddings",
          tolerance=SUBBLOCK)
def EMBEDDINGS(host, r):
    """A cell's embedding is a conv of 3·patch² terms, recomputed in float64: SUBBLOCK."""
    import torch.nn.functional as F

    conv = host.patch_embed._module.projection
    args, kwargs = r["inputs"]
    pixels = (args[0] if args else kwargs["pixel_values"]).double()
    out = F.conv2d(pixels, conv.weight.double(), conv.bias.double(), stride=conv.stride)
    return [(out.flatten(2).transpose(1, 2), r["patch_embeddings"])]


@relation("tower_output == neck(blocks(patch_embeddings + pos_embed)): every block pre-norm, its attention over "
          "window_size x window_size windows (whole-grid on global_attn_indexes) with fused qkv and a decomposed "
          "relative position bias, then an MLP; the neck a 1 x 1 and a 3 x 3 convolution, each LayerNormed over the "
          "channels; it is what the projector is called with", proves="tower_output",
          reads="patch_embeddings layers[*].inputs layers[*].output tower_output model.projector.input",
          tolerance=SUBBLOCK)
def TOWER(host, r):
    """Each pair is one step (the positions' add, one block, the neck) recomputed from what the forward handed that
    step: one sub-block of roundings each, SUBBLOCK."""
    tower = host._module
    calls, outs = r["layers[*].inputs"], [first(out) for out in r["layers[*].output"]]
    entering = [first(call[0]) if call[0] else call[1]["hidden_states"] for call in calls]
    grid = entering[0].shape
    pairs = [((r["patch_embeddings"].double() + tower.pos_embed.double().flatten(1, 2)).reshape(grid), entering[0])]
    for i, (layer, x, out) in enumerate(zip(tower.layers, entering, outs)):
        if i:
            pairs.append((outs[i - 1], x))
        pairs.append((block(layer, x), out))
    served = lambda t: t.flatten(2).transpose(1, 2)  # noqa: E731 (the view CHANNELS_FIRST serves)
    return [*pairs, (served(neck(tower.neck, outs[-1])), r["tower_output"]),
            (served(first(r["model.projector.input"])), r["tower_output"])]


@relation("image_features == multimodal_projector(conv_upsampler2(conv_upsampler1(tower_output))): two stride-2 3 x 3 "
          "convolutions quarter each side of the grid and reach the text width, a linear maps each cell to one image "
          "token (row-major, the images one after another)", proves="image_features",
          reads="tower_output image_features", tolerance=SUBBLOCK)
def PROJECTOR(host, r):
    import torch.nn.functional as F

    projector = host._std_model.projector._module
    features = r["tower_output"].double()  # [images, cells, channels]
    images, cells, channels = features.shape
    side = round(cells ** 0.5)
    grid = features.transpose(1, 2).reshape(images, channels, side, side)
    grid = F.conv2d(grid, projector.conv_upsampler1.weight.double(), stride=2, padding=1)
    grid = F.conv2d(grid, projector.conv_upsampler2.weight.double(), stride=2, padding=1)
    out = linear(projector.multimodal_projector, grid.flatten(2).transpose(1, 2))
    return [(out.reshape(-1, out.shape[-1]), r["image_features"])]


__all__ = ["NeckFeatures", "GRID", "CHANNELS_FIRST", "layer_norm", "attention", "block", "neck", "EMBEDDINGS", "TOWER",
           "PROJECTOR"]
