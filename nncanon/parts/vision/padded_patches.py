"""Images padded to one size in the tower's batch (Idefics2's): the padding patches masked out as keys.

Idefics2's processor keeps each image's aspect (resized between a shortest and a longest edge) and pads every image
of a call at the bottom and right to the call's largest height and width, marking its own pixels in
``pixel_attention_mask``. The wrapper keeps a patch as real when every one of its pixels is
(``patch_attention_mask [images, rows, cols]``, what the tower is called with). In the tower's attention a padding
patch is no key: every row, a padding patch's included, attends over its image's real patches only, so no real
patch's row reads the padding; the padding rows still run through every block (and the resampler masks them out
of its context, `perceiver`).

`MaskedTowerAttention` is the tower attention (`vision_towers.TowerAttention`) with its pattern stated over the
real keys: the mask recomputed from the tower's own call, not read from the mask tensor the attention is handed.
"""

from __future__ import annotations

from typing import Any

from ...core.hosts import host
from ...core.precision import SUBBLOCK
from ...core.relations import relation
from .vision_towers import TowerAttention


def real_patches(call: Any, images: int, patches: int) -> Any:
    """``[images, patches]``: which of each image's patch rows hold pixels, from the tower's call ``(args, kwargs)``
    (its ``patch_attention_mask``; every patch when the tower is called without one)."""
    import torch

    _, kwargs = call
    mask = kwargs.get("patch_attention_mask")
    if mask is None:
        return torch.ones(images, patches, dtype=torch.bool)
    return mask.reshape(images, patches).bool()


def _masked(host: Any, r: dict) -> tuple[Any, Any]:
    queries, keys = r["attention_queries"].double(), r["attention_keys"].double()
    scores = queries @ keys.transpose(-1, -2) * host._module.scale
    real = real_patches(r["model.vision.inputs"], scores.shape[0], scores.shape[-1])
    scores = scores.masked_fill(~real[:, None, None, :], float("-inf"))
    return scores, scores.softmax(-1)


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scale, the image's padding "
          "patches masked out as keys) · attention_values", proves="attention_head_outputs",
          reads="model.vision.inputs attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _attention(host, r):
    _, probabilities = _masked(host, r)
    return [((probabilities @ r["attention_values"].double()).transpose(1, 2), r["attention_head_outputs"])]


@relation("attention_scores == attention_queries · attention_keysᵀ · scale, -inf at the image's padding patches "
          "(keys); attention_probabilities == softmax(attention_scores)",
          proves="attention_scores attention_probabilities",
          reads="model.vision.inputs attention_queries attention_keys attention_scores attention_probabilities",
          tolerance=SUBBLOCK)
def _pattern(host, r):
    import torch

    scores, probabilities = _masked(host, r)
    read = r["attention_scores"].double()
    # the module adds its dtype's lowest value where this writes -inf: compared where a key is real, and the
    # masked keys' scores must sit at least that low (float16's lowest is -65504, not float32's)
    keep = torch.isfinite(scores)
    not_low = ~keep & (read > torch.finfo(r["attention_scores"].dtype).min / 2)
    return [(torch.where(keep, scores, 0.0), torch.where(keep, read, 0.0)),
            (torch.zeros_like(read), not_low.double()), (probabilities, r["attention_probabilities"])]


#: the tower attention with its pattern over the image's real patches
MaskedTowerAttention = host("MaskedTowerAttention", TowerAttention, HOST="model.vision.layers[i].self_attn",
                            RELATIONS=(TowerAttention.RELATIONS[0], _attention, _pattern,
                                       *TowerAttention.RELATIONS[3:]))

__all__ = ["real_patches", "MaskedTowerAttention"]
