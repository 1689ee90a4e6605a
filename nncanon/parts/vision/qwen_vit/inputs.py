"""How the encyclopedia traces a Qwen VL line: one prompt with two example images of different sizes."""

from __future__ import annotations

from typing import Any


def example_images(processor: Any = None) -> list:
    """A red square (2 x 2 merge blocks: 64 x 64 pixels at patch 16) and a wide image of seeded noise
    (4 x 2 merge blocks: 128 x 64), sides the processor keeps as they are (multiples of
    patch_size * merge_size, ``processor``'s, 16 * 2 when none is given)."""
    import numpy as np
    from PIL import Image

    ip = getattr(processor, "image_processor", None)
    unit = ip.patch_size * ip.merge_size if ip is not None else 32
    red = Image.new("RGB", (2 * unit, 2 * unit), (255, 0, 0))
    noise = np.random.default_rng(0).integers(0, 256, size=(2 * unit, 4 * unit, 3), dtype=np.uint8)
    return [red, Image.fromarray(noise)]


def trace_inputs(model: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of ``model.trace`` for one prompt with both example images."""
    from ....core.processing import image_placeholder

    pad = image_placeholder(model.processor)
    return (f"Compare {pad} with {pad}. Which one is red?",), {"images": example_images(model.processor)}


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The sizes of the image dimensions for a trace called with ``(args, kwargs)`` (the processor
    alone, no forward): ``images`` is the packed row's axis of 1, ``patches`` every image's
    t * h * w, ``image_tokens`` what the merger folds them into."""
    encoding = model.processor(text=args[0] if args else kwargs["text"], images=kwargs["images"],
                               return_tensors="pt")
    patches = int(encoding["image_grid_thw"].prod(-1).sum())
    return {"images": 1, "patches": patches, "image_tokens": patches // model.vision.spatial_merge_size ** 2,
            "vision_hidden_size": model.vision.vision_hidden_size}


__all__ = ["example_images", "trace_inputs", "image_sizes"]
