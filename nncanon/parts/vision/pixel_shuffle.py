"""The pixel-shuffle connector (Idefics3's, SmolVLM's): scale_factor x scale_factor patches become one image token.

The connector (``model.projector``) reads the tower's output ``[images, patches, vision_hidden_size]``, lays each
image's rows back on its square patch grid (``side = sqrt(patches)`` a side), and gathers every scale_factor x
scale_factor square of neighbouring patches into one row of ``scale_factor² · vision_hidden_size`` features, the
square's patches row-major (its first row's patches left to right, then its second row's ...), the squares
themselves row-major over the grid: ``patches / scale_factor²`` rows per image. ``modality_projection`` (one
linear map, no bias) takes each row to the text model's width: one image token per square.

`PIXEL_SHUFFLE` proves ``vision.image_features`` from ``vision.tower_output`` on every image with an independent
reshape (`shuffle`: the square's offsets as their own axes, permuted; not the module's own ``pixel_shuffle``,
which gets there by two views, two permutes and two reshapes) and the projection recomputed in float64.

Aya Vision's projector shuffles the same squares in the same order inside itself (its ``tower_output`` is the
unshuffled rows) and maps each shuffled row through a LayerNorm (``norm``) and a SwiGLU whose value and gate are the
two halves of one linear (``linear_fc1``: ``x, gate = halves``, ``silu(gate) · x``), then ``down_proj``:
`SHUFFLED_SWIGLU_PROJECTOR`.
"""

from __future__ import annotations

from typing import Any

from ...core.precision import SUBBLOCK
from ...core.relations import relation


def shuffle(rows: Any, scale: int) -> Any:
    """``[images, side², width]`` -> ``[images, (side / scale)², scale² · width]``: each scale x scale square of the
    patch grid as one row, its patches row-major, the squares row-major."""
    images, patches, width = rows.shape
    side = round(patches ** 0.5)
    if side * side != patches or side % scale:
        raise ValueError(f"pixel shuffle: {patches} patches are not a square grid whose side divides by {scale}")
    grid = rows.reshape(images, side // scale, scale, side // scale, scale, width)  # [image, I, di, J, dj, width]
    return grid.permute(0, 1, 3, 2, 4, 5).reshape(images, (side // scale) ** 2, scale * scale * width)


@relation("image_features == modality_projection(pixel_shuffle(tower_output, scale_factor)): each scale_factor x "
          "scale_factor square of an image's patch grid one row (its patches row-major), mapped to one image token; "
          "the images' tokens one after another", proves="image_features", reads="tower_output image_features",
          tolerance=SUBBLOCK)
def PIXEL_SHUFFLE(host, r):
    """Recomputed in float64; the model's float32 side rounds in one product of scale_factor² · vision_hidden_size
    terms (224 on idefics3's tiny model, 640 on smolvlm's), within SUBBLOCK's 800 roundings."""
    connector = host._std_model.projector._module
    weight = connector.modality_projection.proj.weight.double()
    out = shuffle(r["tower_output"].double(), connector.scale_factor) @ weight.T
    return [(out.reshape(-1, out.shape[-1]), r["image_features"])]


@relation("image_features == down_proj(silu(gate) · x), x and gate the two halves of linear_fc1(norm(pixel_shuffle("
          "tower_output, downsample_factor))), norm a LayerNorm over the shuffled row; one image token per square, the "
          "images' tokens one after another", proves="image_features", reads="tower_output image_features",
          tolerance=SUBBLOCK)
def SHUFFLED_SWIGLU_PROJECTOR(host, r):
    """Recomputed in float64 (the shuffle, the norm, both linears and the gate): SUBBLOCK."""
    import torch.nn.functional as F

    projector = host._std_model.projector
    norm, fc1, fc2 = projector.norm._module, projector.linear_fc1._module, projector.down_proj._module
    double = lambda t: None if t is None else t.double()  # noqa: E731
    rows = shuffle(r["tower_output"].double(), host._std_model._module.config.downsample_factor)
    rows = F.layer_norm(rows, norm.normalized_shape, double(norm.weight), double(norm.bias), norm.eps)
    x, gate = F.linear(rows, fc1.weight.double(), double(fc1.bias)).chunk(2, dim=-1)
    out = F.linear(F.silu(gate) * x, fc2.weight.double(), double(fc2.bias))
    return [(out.reshape(-1, out.shape[-1]), r["image_features"])]


__all__ = ["shuffle", "PIXEL_SHUFFLE", "SHUFFLED_SWIGLU_PROJECTOR"]
