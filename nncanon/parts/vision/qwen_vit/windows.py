"""Where the Qwen ViT's attention runs: the packed row's segments, and Qwen2.5-VL's window order.

The encoder's attention never crosses a segment of the packed row: each image's patches (each
frame's, ``h * w`` of them, in merge-block order) on every line, and on Qwen2.5-VL's windowed blocks
(those not in ``fullatt_block_indexes``) each window's. Qwen2.5-VL lays its windows out as
consecutive rows: right after ``patch_embed`` it permutes the merge blocks into window order
(``window_index``), each image's grid of merge blocks cut from the top left into windows of
``window_size / (patch_size * spatial_merge_size)`` blocks a side (the last row and column of
windows may be smaller), window after window, raster order inside each.

These are computed here from the image grids alone (``image_grid_thw``) and the vision config,
never by the model's helpers, so the relations in `relations` can check the model
against them.
"""

from __future__ import annotations

from typing import Any


def window_order(grid_thw: Any, window_size: int, patch_size: int, merge: int) -> tuple[list[int], list[int]]:
    """(merge block order, patches per window): the merge blocks of every image, window after window."""
    side = window_size // (patch_size * merge)
    order: list[int] = []
    lengths: list[int] = []
    start = 0
    for t, h, w in grid_thw.tolist():
        rows, cols = h // merge, w // merge
        for frame in range(t):
            base = start + frame * rows * cols
            for top in range(0, rows, side):
                for left in range(0, cols, side):
                    window = [base + r * cols + c for r in range(top, min(top + side, rows))
                              for c in range(left, min(left + side, cols))]
                    order += window
                    lengths.append(len(window) * merge * merge)
        start += t * rows * cols
    return order, lengths


def windowed(config: Any, block: int) -> bool:
    """Whether vision block ``block`` attends within windows (Qwen2.5-VL outside fullatt_block_indexes)."""
    return bool(getattr(config, "window_size", None)) and block not in config.fullatt_block_indexes


def segment_bounds(config: Any, grid_thw: Any, block: int) -> list[int]:
    """The cumulative bounds of the packed row's segments at vision block ``block`` (what its
    ``cu_seqlens`` must be): each frame of each image, or each window on a windowed block."""
    if windowed(config, block):
        _, lengths = window_order(grid_thw, config.window_size, config.patch_size, config.spatial_merge_size)
    else:
        lengths = [h * w for t, h, w in grid_thw.tolist() for _ in range(t)]
    bounds = [0]
    for length in lengths:
        bounds.append(bounds[-1] + length)
    return bounds


__all__ = ["window_order", "windowed", "segment_bounds"]
