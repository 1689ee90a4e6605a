"""LLaVA-NeXT's AnyRes line on its tiny checkpoint: the tiling arithmetic of nncanon.parts.vision.anyres against
transformers' own functions over a sweep of image shapes, each vision value against plain PyTorch hooks and the
wrapper's own methods (no nnsight), and each edit by its effect.

Tiny recipe (families/llava_next.yaml): red (32 x 32) is a 2 x 2 grid kept whole, wide (64 x 32) a 2 x 3 grid whose
top and bottom feature rows are padding; 5 + 7 tiles of 28 x 28, 88 + 94 image tokens.
"""

from __future__ import annotations

import pytest
import torch
import vision_inputs as vision
from vision_inputs import one_thread  # noqa: F401 (an autouse fixture)


@pytest.fixture(scope="module")
def model():
    return vision.image_load("llava_next")


# -- the arithmetic, against transformers' own functions -------------------------------------------------------

PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]  # llava-v1.6-mistral-7b-hf's
SHAPES = [(h, w) for h in (20, 97, 336, 500, 641, 1000, 1777) for w in (13, 240, 336, 480, 999, 2048)]


def test_best_pinpoint_is_transformers_choice():
    from transformers.image_processing_utils import select_best_resolution

    from nncanon.parts.vision.anyres import best_pinpoint

    for h, w in SHAPES:
        assert best_pinpoint(h, w, PINPOINTS) == tuple(select_best_resolution((h, w), PINPOINTS)), (h, w)


def test_kept_span_is_what_unpad_image_keeps():
    from transformers.models.llava_next.modeling_llava_next import get_anyres_image_grid_shape, unpad_image

    from nncanon.parts.vision.anyres import grid_of, kept_span

    side = 24  # 336 / 14
    for h, w in SHAPES:
        rows, cols = grid_of(h, w, PINPOINTS, 336)
        assert (rows, cols) == tuple(get_anyres_image_grid_shape((h, w), PINPOINTS, 336))
        grid = torch.arange(rows * side * cols * side).reshape(1, rows * side, cols * side)
        keep_rows, keep_cols = kept_span(h, w, rows * side, cols * side)
        assert torch.equal(grid[:, keep_rows, keep_cols], unpad_image(grid, (h, w))), (h, w)


def test_the_two_images_get_different_grids_and_unpadding(model):
    from nncanon.parts.vision.anyres import grid_of, image_token_counts, kept_span, tiles_per_image

    _, images, encoding = vision.image_inputs(model)
    assert images[0].size != images[1].size
    sizes = encoding["image_sizes"]
    assert sizes.tolist() == [[32, 32], [32, 64]]
    config = model._module.config
    assert [grid_of(h, w, config.image_grid_pinpoints, 28) for h, w in sizes.tolist()] == [(2, 2), (2, 3)]
    assert kept_span(32, 32, 8, 8) == (slice(0, 8), slice(0, 8))  # square into square: nothing cut
    assert kept_span(32, 64, 8, 12) == (slice(1, 7), slice(0, 12))  # 2:1 into 3:2: a row of padding top and bottom
    assert tiles_per_image(model._module.config, sizes) == [5, 7]
    counts = image_token_counts(model._module.config, sizes)
    assert counts == [16 + 8 * 9, 16 + 6 * 13]
    assert int((encoding["input_ids"] == config.image_token_id).sum()) == sum(counts)


ONEVISION_PINPOINTS = [[384 * i, 384 * j] for i in range(1, 7) for j in range(1, 7)]  # llava-onevision's


def _onevision_config(max_tiles: int):
    from transformers import LlavaOnevisionConfig

    return LlavaOnevisionConfig(
        vision_config={"model_type": "siglip_vision_model", "image_size": 384, "patch_size": 14, "hidden_size": 8,
                       "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2},
        text_config={"model_type": "qwen2", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 16},
        image_grid_pinpoints=ONEVISION_PINPOINTS, vision_aspect_ratio=f"anyres_max_{max_tiles}")


@pytest.mark.parametrize("max_tiles", [9, 2])
def test_onevision_pooling_is_what_pack_image_features_does(max_tiles):
    """OneVision's anyres_max_N step (not yet on a family here): the packing recomputed, pooled grids included,
    against LlavaOnevisionModel.pack_image_features on the same random tile features."""
    from types import SimpleNamespace

    from transformers.models.llava_onevision.modeling_llava_onevision import LlavaOnevisionModel

    from nncanon.parts.vision.anyres import grid_of, kept_span, pack, pooled_size, tiles_per_image

    config = _onevision_config(max_tiles)
    sizes = torch.tensor([[336, 1000], [1777, 480], [500, 500], [20, 2048], [1000, 999], [1777, 2048], [2000, 900],
                          [641, 2048]])  # the last: a float floor one below the exact one (see pooled_size)
    counts = tiles_per_image(config, sizes)
    tiles = torch.randn(sum(counts), 27 * 27, 3, generator=torch.Generator().manual_seed(0))
    newline = torch.randn(3, generator=torch.Generator().manual_seed(1))
    theirs, _ = LlavaOnevisionModel.pack_image_features(SimpleNamespace(config=config), torch.split(tiles, counts),
                                                        sizes, image_newline=newline,
                                                        vision_aspect_ratio=config.vision_aspect_ratio)
    spans = [kept_span(h, w, 27 * r, 27 * c) for (h, w), (r, c) in
             ((hw, grid_of(*hw, ONEVISION_PINPOINTS, 384)) for hw in sizes.tolist())]
    assert any(pooled_size(a.stop - a.start, b.stop - b.start, 27, max_tiles) for a, b in spans)  # the sweep pools
    # float32 bilinear in the module against float64 here: the source coordinate (i + 0.5) · n_in / n_out - 0.5 is
    # rounded in float32 (<= 4 roundings of a number up to n_in, so the lerp's share is off by <= 4 · 2**-24 · n_in),
    # which moves an output by that share of |a - b| <= 2 · max|x|; the lerps' own roundings are far smaller
    n_in = 27 * 6  # the widest kept grid: 6 tiles of 27 features
    bound = 4 * 2.0 ** -24 * n_in * 2 * float(tiles.abs().max()) + 1e-6
    torch.testing.assert_close(pack(config, tiles, sizes, newline), torch.cat(theirs), rtol=0, atol=bound)


def test_onevision_counts_are_the_processors():
    from functools import partial
    from types import SimpleNamespace

    from transformers import LlavaOnevisionProcessor

    from nncanon.parts.vision.anyres import image_token_counts

    for max_tiles in (9, 2):
        config = _onevision_config(max_tiles)
        processor = SimpleNamespace(image_processor=SimpleNamespace(image_grid_pinpoints=ONEVISION_PINPOINTS),
                                    num_image_tokens=27 * 27, vision_aspect_ratio=config.vision_aspect_ratio)
        processor._get_unpadded_features = partial(LlavaOnevisionProcessor._get_unpadded_features, processor)
        expected = [LlavaOnevisionProcessor._get_number_of_features(processor, h, w, 384, 384) for h, w in SHAPES]
        assert image_token_counts(config, torch.tensor(SHAPES)) == expected, max_tiles
    # a prompt with several images: each its base tile and one newline, untiled
    assert image_token_counts(config, torch.tensor([[500, 500], [20, 2048]]), [2]) == [27 * 27 + 1] * 2


# -- the values, against the modules' own ---------------------------------------------------------------------


def test_vision_values_are_the_modules_own(model):
    patches, tower_output, own = vision.anyres_reads(model, *vision.image_inputs(model))
    assert patches.shape[0] == 12  # every tile of both images, the processor's padding tiles dropped
    assert torch.equal(tower_output, own.hidden_states[-2][:, 1:])  # vision_feature_layer -2, class token dropped


def test_packing_recomputed_matches_the_wrapper(model):
    from nncanon.parts.vision.anyres import pack

    prompt, images, encoding = vision.image_inputs(model)
    with torch.no_grad(), model.trace(prompt, images=images):
        tiles = model.vision.tile_features.save()
        features = model.vision.image_features.save()
    newline = model._module.model.image_newline
    assert torch.equal(pack(model._module.config, tiles, encoding["image_sizes"], newline), features)
    rows = features[88 + 16:].reshape(6, 13, -1)  # the wide image: 6 kept rows of 12 features and a newline
    assert torch.equal(rows[:, 12], newline.expand(6, -1))
    # the first kept row is the padded grid's second: feature row 1 of the top three grid tiles (6, 7, 8)
    assert torch.equal(rows[0, :12], torch.cat([tiles[6, 4:8], tiles[7, 4:8], tiles[8, 4:8]]))


# -- edits and the text load ---------------------------------------------------------------------------------


def test_edits_and_the_text_load(model):
    """Zeroed tile features leave only the newlines nonzero in the packed image features; zeroed image_features are the
    forward on zeroed image-token embeddings; the wrapper's config names the family and its text load has no tower."""
    prompt, images, encoding = vision.image_inputs(model)
    vision.check_tile_features_edit(model, prompt, images, newlines=8 + 6)  # a newline per kept row: red's 8, wide's 6
    vision.check_image_features_edit(model, prompt, images, encoding)
    vision.check_wrapper_and_text_load("llava_next", "mistral")
