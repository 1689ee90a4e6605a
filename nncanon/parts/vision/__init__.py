"""Vision lines: an image's way into the text stream (a tower, a projector, the scatter at the image tokens or
cross-attention to the image states), and the processors' sizes the parts recompute."""
