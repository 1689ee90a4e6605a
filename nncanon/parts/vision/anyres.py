"""AnyRes: an image read as tiles (LLaVA-NeXT's and LLaVA-OneVision's), packed back into one image's features.

The processor hands the tower every image as tiles of the tower's one ``image_size``: first a base tile (the
whole image resized), then the tiles of a grid: the image resized, aspect kept, into the best of
``image_grid_pinpoints`` (the largest share of the image's own pixels kept, then the least padding), padded to it
and cut into ``image_size`` squares. The tower and the projector run on every tile alike (``tile_features``:
the projector's output, ``[tiles, features, hidden_size]``). The wrapper then packs each image's tiles into
one run of image tokens (``image_features``): the base tile's features first; then the grid's tiles laid back
on one feature grid (``grid rows · side`` by ``grid columns · side`` features, ``side = image_size /
patch_size``), the rows (a wide image) or columns (a tall one) that only padding filled cut off, and the learned
``image_newline`` appended to every remaining row, read row by row. OneVision adds two steps (`pooled_size`,
`bilinear`, `max_tiles_of`): under ``vision_aspect_ratio`` "anyres_max_N" a kept grid of more than N tiles'
worth is bilinearly resized down to about N, and an image that shares its prompt with others
(``batch_num_images``) is its base tile alone. Only ``image_sizes`` (each image's original
height and width, handed to the model beside pixel_values) says where the padding is, so the number of image
tokens differs per image.

This module recomputes all of it on its own, from ``image_sizes`` and the config (`best_pinpoint`,
`kept_span`, `pack`): exact rational arithmetic for the aspect comparisons and the kept span, never the
wrapper's ``get_anyres_image_grid_shape``, ``unpad_image`` or ``pack_image_features``; the relation
`PACKED` checks the packing on the model. A line served by it gives its tower the value `tile_features_value`
and the relations `TILES` and `PACKED` beside the shared scatter (`vision_line.SCATTER`). OneVision's two steps
(its own bilinear weights; the pooled size in floating point, as the wrapper takes it) are checked against
transformers' LlavaOnevisionModel.pack_image_features and its processor's counts (tests/test_llava_next.py), and
proven on llava_onevision's model by `nncanon.parts.vision.onevision.POOLED_PACKED`.
"""

from __future__ import annotations

from fractions import Fraction
from math import sqrt
from typing import Any

from ...core.layouts import layout
from ...core.relations import relation
from ...core.values import Value
from .vision_line import AtRoot

#: the projector's output, one row per tile (the tower's ``images`` are its tiles), a feature per patch
TileFeatures = layout("TileFeatures", "images features hidden_size")

# -- the arithmetic, from image_sizes and the config alone ----------------------------------------------------


def best_pinpoint(height: int, width: int, pinpoints: list) -> tuple[int, int]:
    """The ``(height, width)`` of ``pinpoints`` an image of ``height`` x ``width`` is resized into: the one keeping
    the most of the image's own pixels (its size fit inside, aspect kept, never more than it has), then the one
    with the least padding, the first on a tie."""
    def score(point: Any) -> tuple[int, int]:
        h, w = point
        scale = min(Fraction(w, width), Fraction(h, height))  # the image fit inside, aspect kept
        kept = min(int(width * scale) * int(height * scale), width * height)
        return -kept, h * w - kept
    h, w = min(pinpoints, key=score)
    return int(h), int(w)


def grid_of(height: int, width: int, pinpoints: list, tile: int) -> tuple[int, int]:
    """The grid of tiles (rows, columns) an image of ``height`` x ``width`` is cut into."""
    h, w = best_pinpoint(height, width, pinpoints)
    return h // tile, w // tile


def kept_span(height: int, width: int, rows: int, cols: int) -> tuple[slice, slice]:
    """The rows and columns of a ``rows`` x ``cols`` feature grid an image of ``height`` x ``width`` fills: it was
    resized to fit and padded evenly on the other axis, so a wider image (width / height > cols / rows) fills
    ``floor(height · cols / width)`` rows in the middle, a taller one ``floor(width · rows / height)`` columns; the
    padding cut is ``(grid - kept) // 2`` on each side (an odd remainder keeps one row of padding at the end)."""
    if width * rows > cols * height:
        kept = (height * cols) // width
        pad = (rows - kept) // 2
        return slice(pad, rows - pad), slice(0, cols)
    kept = (width * rows) // height
    pad = (cols - kept) // 2
    return slice(0, rows), slice(pad, cols - pad)


def pooled_size(rows: int, cols: int, side: int, max_tiles: int | None) -> tuple[int, int] | None:
    """OneVision's ``anyres_max_N``: a kept grid of more than N tiles' worth of features (by a ratio r =
    sqrt(rows · cols / (N · side²)) over 1.1) is resized to floor(rows / r) x floor(cols / r); None: kept as it is.
    r is taken in floating point as the wrapper and the processor take it, not exactly: where rows / r is a whole
    number the float r can land above it and the floor one below (50 x 162 features at N = 9, side 27: r = 10 / 9,
    rows / r = 45 exactly, and both give 44 rows), and the token count must be theirs."""
    if max_tiles is None:
        return None
    ratio = sqrt(rows * cols / (max_tiles * side ** 2))
    return (int(rows // ratio), int(cols // ratio)) if ratio > 1.1 else None


def bilinear(n_in: int, n_out: int) -> Any:
    """[n_out, n_in] float64: each output row's weights over the input rows of a bilinear resize whose pixel centres
    line up (align_corners off): output i reads position (i + 0.5) · n_in / n_out - 0.5 (at least 0) between its two
    nearest inputs."""
    import torch

    weights = torch.zeros(n_out, n_in, dtype=torch.float64)
    for i in range(n_out):
        at = max((i + 0.5) * n_in / n_out - 0.5, 0.0)
        low = int(at)
        high, share = min(low + 1, n_in - 1), at - low
        weights[i, low] += 1 - share
        weights[i, high] += share
    return weights


def max_tiles_of(config: Any) -> int | None:
    """N of the config's vision_aspect_ratio "anyres_max_N" (OneVision's); None on a config without one."""
    ratio = getattr(config, "vision_aspect_ratio", None)
    return int(ratio.removeprefix("anyres_max_")) if ratio else None


def _patched(image_sizes: Any, batch_num_images: Any) -> list[bool]:
    """Which images are tiled: all, unless batch_num_images says a prompt holds several (OneVision then reads each
    of its images as the base tile alone)."""
    if batch_num_images is None:
        return [True] * len(image_sizes)
    return [int(n) == 1 for n in batch_num_images for _ in range(int(n))]


def tiles_per_image(config: Any, image_sizes: Any, batch_num_images: Any = None) -> list[int]:
    """Each image's tile count: the base tile and its grid's (the base tile alone for an untiled image)."""
    tile = config.vision_config.image_size
    grids = [grid_of(int(h), int(w), config.image_grid_pinpoints, tile) for h, w in image_sizes.tolist()]
    return [1 + rows * cols if tiled else 1
            for (rows, cols), tiled in zip(grids, _patched(image_sizes, batch_num_images))]


def _feature_grid(config: Any, height: int, width: int) -> tuple[int, int, tuple[slice, slice], Any]:
    """An image's grid of tiles, the span of its feature grid it fills, and the size it is pooled to (or None)."""
    side = config.vision_config.image_size // config.vision_config.patch_size
    rows, cols = grid_of(height, width, config.image_grid_pinpoints, config.vision_config.image_size)
    kept = kept_span(height, width, rows * side, cols * side)
    kept_rows, kept_cols = (s.stop - s.start for s in kept)
    return rows, cols, kept, pooled_size(kept_rows, kept_cols, side, max_tiles_of(config))


def pack(config: Any, tiles: Any, image_sizes: Any, newline: Any, batch_num_images: Any = None) -> Any:
    """Every image's packed features, one after another: ``tiles`` ``[tiles, side², width]`` split per image;
    per image the base tile, then the grid's features, unpadded (and pooled, under anyres_max_N), a ``newline``
    after each row; an untiled image is its base tile and one newline."""
    import torch

    side = config.vision_config.image_size // config.vision_config.patch_size
    out, start = [], 0
    counts = tiles_per_image(config, image_sizes, batch_num_images)
    for (height, width), count in zip(image_sizes.tolist(), counts):
        own, start = tiles[start: start + count], start + count
        if count == 1:
            out += [own[0], newline.to(own.dtype)[None]]
            continue
        rows, cols, kept, pooled = _feature_grid(config, int(height), int(width))
        grid = own[1:].reshape(rows, cols, side, side, -1).permute(0, 2, 1, 3, 4).reshape(rows * side, cols * side, -1)
        grid = grid[kept]
        if pooled is not None:
            grid = torch.einsum("ij,jkc,lk->ilc", bilinear(grid.shape[0], pooled[0]), grid.double(),
                                bilinear(grid.shape[1], pooled[1])).to(grid.dtype)
        closed = torch.cat([grid, newline.to(grid.dtype).expand(grid.shape[0], 1, -1)], dim=1)
        out += [own[0], closed.reshape(-1, closed.shape[-1])]
    return torch.cat(out)


def image_token_counts(config: Any, image_sizes: Any, batch_num_images: Any = None) -> list[int]:
    """Each image's packed feature count (what the processor expands its ``<image>`` to)."""
    side = config.vision_config.image_size // config.vision_config.patch_size
    counts = []
    for (height, width), tiled in zip(image_sizes.tolist(), _patched(image_sizes, batch_num_images)):
        if not tiled:
            counts.append(side * side + 1)
            continue
        _, _, (kept_rows, kept_cols), pooled = _feature_grid(config, int(height), int(width))
        rows, cols = pooled or (kept_rows.stop - kept_rows.start, kept_cols.stop - kept_cols.start)
        counts.append(side * side + rows * (cols + 1))
    return counts


# -- the value and the relations ---------------------------------------------------------------------------------


def tile_features_value(projector: str = "model.multi_modal_projector") -> Value:
    """``model.vision.tile_features``: the projector's output, every tile's features before the packing."""
    return Value("tile_features", TileFeatures,
                 "The projector's output: each tile's features the width of the text stream, before the packing "
                 "(base tile first, then the grid's tiles, image after image)",
                 AtRoot(io="output", module=projector, shown="model.projector", words="the projector's output, at the root"))


def image_sizes_of(inputs: Any) -> Any:
    """The root call's image_sizes ``[images, 2]`` (height, width)."""
    return inputs[1]["image_sizes"]


@relation("tile_features == projector(tower_output) = down_proj(act_fn(linear_fc1(tower_output))), one row per tile",
          proves="tile_features", reads="tower_output tile_features")
def TILES(host, r):
    projector = host._std_model.projector
    return [(projector.down_proj._module(projector.act_fn._module(projector.linear_fc1._module(r["tower_output"]))),
             r["tile_features"])]


@relation("image_features == per image (image_sizes): tile_features of its base tile, then its grid's tiles laid on "
          "one feature grid, the padded rows or columns cut off, image_newline after every row, row by row; the "
          "images one after another", proves="image_features", reads="model.inputs tile_features image_features")
def PACKED(host, r):
    model = host._std_model
    newline = model._module.model.image_newline
    inputs = r["model.inputs"]
    return [(pack(model._module.config, r["tile_features"], image_sizes_of(inputs), newline,
                  inputs[1].get("batch_num_images")), r["image_features"])]




def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The image dimensions for a trace called with ``(args, kwargs)`` (the processor alone, no forward): ``images``
    the tower's rows (every tile of every image: the processor pads each image's tiles to the most any has, the
    wrapper drops the padding ones), ``patches`` each tile's rows (class token included), ``features`` what the
    projector reads per tile, ``image_tokens`` what the prompt holds."""
    encoding = model.processor(text=args[0] if args else kwargs["text"], images=kwargs["images"], return_tensors="pt")
    height, width = encoding["pixel_values"].shape[-2:]
    vision = model.vision
    tiles = sum(tiles_per_image(model._module.config, encoding["image_sizes"], encoding.get("batch_num_images")))
    vision._images_of_call = tiles
    per_tile = (height // vision.patch_size) * (width // vision.patch_size)
    tokens = int((encoding["input_ids"] == model._module.config.image_token_id).sum())
    kept = vision.class_tokens if model._module.config.vision_feature_select_strategy == "full" else 0
    return {"images": tiles, "patches": vision.class_tokens + per_tile, "image_tokens": tokens,
            "features": per_tile + kept,
            "vision_hidden_size": vision.vision_hidden_size}


__all__ = ["TileFeatures", "best_pinpoint", "grid_of", "kept_span", "pooled_size", "bilinear", "max_tiles_of",
           "tiles_per_image", "pack", "image_token_counts",
           "tile_features_value", "image_sizes_of", "TILES", "PACKED", "image_sizes"]
