"""LLaVA-OneVision on its tiny checkpoint: each vision value against plain PyTorch hooks and the wrapper's own
get_image_features (no nnsight), the pooled packing recomputed, the processor without a video processor, and
each edit by its effect.

Tiny recipe (families/llava_onevision.yaml): two prompts, one image each (batch_num_images [1, 1]): red (32 x 32)
a 2 x 2 grid kept whole, 8 x 8 features pooled to 6 x 6 (58 tokens); wide (64 x 32) a 2 x 3 grid unpadded to
6 x 12, pooled to 4 x 9 (56 tokens); 5 + 7 tiles of 28 x 28, 16 features each.
"""

from __future__ import annotations

import pytest
import torch
import vision_inputs as vision
from vision_inputs import one_thread  # noqa: F401 (an autouse fixture)


@pytest.fixture(scope="module")
def model():
    return vision.image_load("llava_onevision")


def _inputs(model):
    from nncanon.parts.vision.onevision import onevision_trace_inputs

    (prompts,), kwargs = onevision_trace_inputs(model)
    return prompts, kwargs["images"], model.processor(text=prompts, images=kwargs["images"], return_tensors="pt")


# -- the processor and the counts -----------------------------------------------------------------------------


def test_the_processor_has_no_video_processor_and_counts_the_pooled_tokens(model):
    from nncanon.parts.vision.anyres import image_token_counts, pooled_size
    from nncanon.parts.vision.onevision_processing import OnevisionImageTextProcessor

    prompts, images, encoding = _inputs(model)
    assert isinstance(model.processor, OnevisionImageTextProcessor)
    assert not hasattr(model.processor, "video_processor")
    assert encoding["batch_num_images"].tolist() == [1, 1]
    tokens = (encoding["input_ids"] == model._module.config.image_token_id).sum(1).tolist()
    assert image_token_counts(model._module.config, encoding["image_sizes"], encoding["batch_num_images"]) == tokens
    assert tokens == [6 * 7 + 16, 4 * 10 + 16]
    # both kept grids are over anyres_max_3's 3 tiles' worth by more than 1.1: both pooled
    assert pooled_size(8, 8, 4, 3) == (6, 6) and pooled_size(6, 12, 4, 3) == (4, 9)
    with pytest.raises(ValueError, match="images and text only"):
        model.processor(text=prompts, videos=[images])


def test_a_prompt_of_two_images_reads_each_as_its_base_tile(model):
    """batch_num_images [2] (the images nested per prompt; a flat list counts one per image): each image its base
    tile's 16 features and one newline, as the wrapper packs it."""
    from nncanon.parts.vision.anyres import pack

    pad = model.processor.image_token
    encoding = model.processor(text=f"Compare {pad} with {pad}.", images=[_inputs(model)[1]], return_tensors="pt")
    hf = model._module
    assert encoding["batch_num_images"].tolist() == [2]
    assert int((encoding["input_ids"] == hf.config.image_token_id).sum()) == 2 * 17
    with torch.no_grad(), vision.outputs_of([hf.model.multi_modal_projector]) as seen:
        own = hf.model.get_image_features(pixel_values=encoding["pixel_values"], image_sizes=encoding["image_sizes"],
                                          batch_num_images=encoding["batch_num_images"])
    recomputed = pack(hf.config, seen[0][0], encoding["image_sizes"], hf.model.image_newline,
                      encoding["batch_num_images"])
    assert torch.equal(recomputed, torch.cat(list(own.pooler_output)))


# -- the values, against the modules' own ---------------------------------------------------------------------


def test_vision_values_are_the_modules_own(model):
    prompts, images, encoding = _inputs(model)
    patches, tower_output, own = vision.anyres_reads(model, prompts, images, encoding,
                                              batch_num_images=encoding["batch_num_images"])
    assert patches.shape[:2] == (12, 16)  # every tile of both images (5 + 7), 16 patches each, no class token
    # vision_feature_layer -1: the last block's output, before post_layernorm, every patch kept ("full")
    assert torch.equal(tower_output, own.hidden_states[-1])
    assert not torch.equal(tower_output, own.last_hidden_state)  # post_layernorm's output is not what is read


def test_pooled_packing_recomputed_is_within_its_bound(model):
    """The float64 recomputation of the bilinear pooling against the wrapper's float32 F.interpolate: within
    pool_bound of the features' scale (the relation's stated tolerance)."""
    from nncanon.core.relations import error
    from nncanon.parts.vision.anyres import pack
    from nncanon.parts.vision.onevision import pool_bound

    prompts, images, encoding = _inputs(model)
    with torch.no_grad(), model.trace(prompts, images=images):
        tiles = model.vision.tile_features.save()
        features = model.vision.image_features.save()
    newline = model._module.model.image_newline
    recomputed = pack(model._module.config, tiles, encoding["image_sizes"], newline, encoding["batch_num_images"])
    assert recomputed.shape == features.shape == (58 + 56, 60)
    assert error(recomputed, features) <= pool_bound()
    # the base tiles are copied, not pooled: exact
    assert torch.equal(recomputed[:16], features[:16]) and torch.equal(recomputed[58:74], features[58:74])
    # each pooled row closes with the newline: red's 6 rows of 6 + 1, wide's 4 rows of 9 + 1
    assert torch.equal(features[16:58].reshape(6, 7, -1)[:, 6], newline.expand(6, -1))
    assert torch.equal(features[74:].reshape(4, 10, -1)[:, 9], newline.expand(4, -1))


# -- edits and the text load ---------------------------------------------------------------------------------


def test_edits_and_the_text_load(model):
    """Zeroed tile features leave only the newlines nonzero in the packed (and pooled) image features; zeroed image_features are the
    forward on zeroed image-token embeddings; the wrapper's config names the family and its text load has no tower."""
    prompt, images, encoding = _inputs(model)
    vision.check_tile_features_edit(model, prompt, images, newlines=6 + 4)  # a newline per pooled row: red's 6, wide's 4
    vision.check_image_features_edit(model, prompt, images, encoding)
    vision.check_wrapper_and_text_load("llava_onevision", "qwen2")
