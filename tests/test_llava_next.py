"""LLaVA-NeXT's AnyRes line on its tiny checkpoint: the tiling arithmetic of nncanon.parts.anyres against
transformers' own functions over a sweep of image shapes, each vision value against plain PyTorch hooks and the
wrapper's own methods (no nnsight), and each edit by its effect.

Tiny recipe (families/llava_next.yaml): red (32 x 32) is a 2 x 2 grid kept whole, wide (64 x 32) a 2 x 3 grid whose
top and bottom feature rows are padding; 5 + 7 tiles of 28 x 28, 88 + 94 image tokens.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

IMAGE = "image-text-to-text"


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir("llava_next"), task=IMAGE)


def _inputs(model):
    from nncanon.parts.vision_towers import example_images

    pad = model.processor.image_token
    prompt = f"Compare {pad} with {pad}. Which one is red?"
    images = example_images(model.processor)
    return prompt, images, model.processor(text=prompt, images=images, return_tensors="pt")


@contextlib.contextmanager
def outputs_of(modules):
    """Each module's outputs, by plain forward hooks."""
    seen = {i: [] for i in range(len(modules))}
    handles = [m.register_forward_hook(lambda mod, args, out, i=i: seen[i].append(out)) for i, m in enumerate(modules)]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


# -- the arithmetic, against transformers' own functions -------------------------------------------------------

PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]  # llava-v1.6-mistral-7b-hf's
SHAPES = [(h, w) for h in (20, 97, 336, 500, 641, 1000, 1777) for w in (13, 240, 336, 480, 999, 2048)]


def test_best_pinpoint_is_transformers_choice():
    from transformers.image_processing_utils import select_best_resolution

    from nncanon.parts.anyres import best_pinpoint

    for h, w in SHAPES:
        assert best_pinpoint(h, w, PINPOINTS) == tuple(select_best_resolution((h, w), PINPOINTS)), (h, w)


def test_kept_span_is_what_unpad_image_keeps():
    from transformers.models.llava_next.modeling_llava_next import get_anyres_image_grid_shape, unpad_image

    from nncanon.parts.anyres import grid_of, kept_span

    side = 24  # 336 / 14
    for h, w in SHAPES:
        rows, cols = grid_of(h, w, PINPOINTS, 336)
        assert (rows, cols) == tuple(get_anyres_image_grid_shape((h, w), PINPOINTS, 336))
        grid = torch.arange(rows * side * cols * side).reshape(1, rows * side, cols * side)
        keep_rows, keep_cols = kept_span(h, w, rows * side, cols * side)
        assert torch.equal(grid[:, keep_rows, keep_cols], unpad_image(grid, (h, w))), (h, w)


def test_the_two_images_get_different_grids_and_unpadding(model):
    from nncanon.parts.anyres import grid_of, image_token_counts, kept_span, tiles_per_image

    _, images, encoding = _inputs(model)
    assert images[0].size != images[1].size
    sizes = encoding["image_sizes"]
    assert sizes.tolist() == [[32, 32], [32, 64]]
    config = model._module.config
    assert [grid_of(h, w, config.image_grid_pinpoints, 28) for h, w in sizes.tolist()] == [(2, 2), (2, 3)]
    assert kept_span(32, 32, 8, 8) == (slice(0, 8), slice(0, 8))  # square into square: nothing cut
    assert kept_span(32, 64, 8, 12) == (slice(1, 7), slice(0, 12))  # 2:1 into 3:2: a row of padding top and bottom
    assert tiles_per_image(model, sizes) == [5, 7]
    counts = image_token_counts(model, sizes)
    assert counts == [16 + 8 * 9, 16 + 6 * 13]
    assert int((encoding["input_ids"] == config.image_token_id).sum()) == sum(counts)


# -- the values, against the modules' own ---------------------------------------------------------------------


def test_vision_values_are_the_modules_own(model):
    prompt, images, encoding = _inputs(model)
    hf = model._module
    tower, projector = hf.model.vision_tower, hf.model.multi_modal_projector
    with torch.no_grad(), model.trace(prompt, images=images):
        patches = model.vision.patch_embeddings.save()
        tower_output = model.vision.tower_output.save()
        tiles = model.vision.tile_features.save()
        features = model.vision.image_features.save()
        logits = model.logits.save()

    with torch.no_grad(), outputs_of([tower.embeddings, projector]) as seen:
        own = hf.model.get_image_features(pixel_values=encoding["pixel_values"], image_sizes=encoding["image_sizes"])
        plain = hf(**encoding).logits
    assert patches.shape[0] == 12  # every tile of both images, the processor's padding tiles dropped
    assert torch.equal(patches, seen[0][0])
    assert torch.equal(tower_output, own.hidden_states[-2][:, 1:])  # vision_feature_layer -2, class token dropped
    assert torch.equal(tiles, seen[1][0])
    assert torch.equal(features, torch.cat(list(own.pooler_output)))
    torch.testing.assert_close(logits, plain)


def test_packing_recomputed_matches_the_wrapper(model):
    from nncanon.parts.anyres import pack

    prompt, images, encoding = _inputs(model)
    with torch.no_grad(), model.trace(prompt, images=images):
        tiles = model.vision.tile_features.save()
        features = model.vision.image_features.save()
    newline = model._module.model.image_newline
    assert torch.equal(pack(model, tiles, encoding["image_sizes"], newline), features)
    rows = features[88 + 16:].reshape(6, 13, -1)  # the wide image: 6 kept rows of 12 features and a newline
    assert torch.equal(rows[:, 12], newline.expand(6, -1))
    # the first kept row is the padded grid's second: feature row 1 of the top three grid tiles (6, 7, 8)
    assert torch.equal(rows[0, :12], torch.cat([tiles[6, 4:8], tiles[7, 4:8], tiles[8, 4:8]]))


# -- edits ----------------------------------------------------------------------------------------------------


def test_an_edit_of_tile_features_is_packed(model):
    """Zeroed tile features leave only the newlines nonzero in the packed image features."""
    prompt, images, encoding = _inputs(model)
    with torch.no_grad(), model.trace(prompt, images=images):
        model.vision.tile_features[:] = 0
        features = model.vision.image_features.save()
    newline = model._module.model.image_newline
    nonzero = features.abs().sum(-1) != 0
    assert int(nonzero.sum()) == 8 + 6  # a newline per kept row: red's 8, wide's 6
    assert torch.equal(features[nonzero], newline.expand(14, -1))


def test_an_edit_of_image_features_moves_the_logits_as_the_embeddings_say(model):
    prompt, images, encoding = _inputs(model)
    hf = model._module
    with torch.no_grad(), model.trace(prompt, images=images):
        model.vision.image_features[:] = 0
        edited = model.logits.save()
    with torch.no_grad():
        embeds = hf.get_input_embeddings()(encoding["input_ids"])
        embeds[encoding["input_ids"] == hf.config.image_token_id] = 0
        expected = hf(inputs_embeds=embeds, attention_mask=encoding["attention_mask"]).logits
        unedited = hf(**encoding).logits
    torch.testing.assert_close(edited, expected)
    assert not torch.allclose(edited, unedited)


# -- loading -------------------------------------------------------------------------------------------------


def test_a_wrapper_names_its_family():
    from nncanon.families import family_for_config

    wrapper = {"model_type": "llava_next", "text_config": {"model_type": "mistral"}}
    assert family_for_config(wrapper, "config.json").FAMILY == "llava_next"


def test_the_text_load_has_no_tower():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    text = nncanon.load(checkpoint_dir("llava_next"))
    assert not hasattr(text._module.model, "vision_tower")
    with torch.no_grad(), text.trace("Which one is red?"):
        logits = text.logits.save()
    assert logits.shape[-1] == text._module.config.text_config.vocab_size
