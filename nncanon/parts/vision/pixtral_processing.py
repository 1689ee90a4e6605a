"""Mistral 3's processor (Pixtral's) over ``PixtralImageProcessorPil``, which works without torchvision.

transformers' ``PixtralProcessor`` imports a helper from the torchvision-based ``PixtralImageProcessor`` module, so
without torchvision it cannot even be imported. :class:`PixtralImageTextProcessor` is that processor over the
PIL image processor: every image resized so its longest edge is at most ``size["longest_edge"]`` and each side a
multiple of ``patch_size · spatial_merge_size``, the batch padded, the true sizes handed on as ``image_sizes``; each
``[IMG]`` of a prompt expanded to one ``[IMG]`` per merged square of the image, each row of squares closed by
``[IMG_BREAK]``, the last by ``[IMG_END]``. It is not registered with ``AutoProcessor``;
`nncanon.core.processing.load_processor` loads a saved one by its class name.
"""

from __future__ import annotations

from transformers.processing_utils import ProcessorMixin


class PixtralImageTextProcessor(ProcessorMixin):
    """``PixtralProcessor`` without torchvision: ``image_processor`` (``PixtralImageProcessorPil``) and ``tokenizer``."""

    def __init__(self, image_processor=None, tokenizer=None, patch_size: int = 16, spatial_merge_size: int = 1,
                 chat_template=None, image_token="[IMG]", image_break_token="[IMG_BREAK]",
                 image_end_token="[IMG_END]", **kwargs):
        super(PixtralImageTextProcessor, self).__init__(image_processor, tokenizer, chat_template=chat_template)
        self.patch_size, self.spatial_merge_size = patch_size, spatial_merge_size
        self.image_token, self.image_break_token, self.image_end_token = image_token, image_break_token, image_end_token
        self.image_token_id, self.image_break_token_id, self.image_end_token_id = tokenizer.convert_tokens_to_ids(
            [image_token, image_break_token, image_end_token])

    @property
    def image_token_ids(self) -> list[int]:
        return [self.image_token_id, self.image_break_token_id, self.image_end_token_id]

    def _process_images(self, images, **images_kwargs):
        # each side a multiple of a merged square, so every image's patch grid merges whole
        images_kwargs["patch_size"] = self.patch_size * self.spatial_merge_size
        return super(PixtralImageTextProcessor, self)._process_images(images, **images_kwargs)

    def replace_image_token(self, image_inputs: dict, image_idx: int, **kwargs) -> str:
        square = self.patch_size * self.spatial_merge_size
        height, width = image_inputs["image_sizes"][image_idx]
        row = self.image_token * (int(width) // square)
        rows = [row + self.image_break_token] * (int(height) // square)
        rows[-1] = row + self.image_end_token
        return "".join(rows)

    @property
    def model_input_names(self):
        return self.tokenizer.model_input_names + self.image_processor.model_input_names + ["image_sizes"]


__all__ = ["PixtralImageTextProcessor"]
