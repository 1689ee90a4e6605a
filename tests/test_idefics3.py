"""idefics3 and smolvlm on their tiny checkpoints: image splitting into tiles and a global image, the tower's
bucketed positions, the pixel-shuffle connector and the scatter, each vision value against plain PyTorch hooks and
transformers' own methods (no nnsight), and an edit of image_features by its effect on the logits.
"""

from __future__ import annotations

import pytest
import torch
from vision_inputs import IMAGE, image_inputs, one_thread, outputs_of  # noqa: F401 (one_thread: an autouse fixture)

from generator.recipe.family import get_family

FAMILIES = ("idefics3", "smolvlm")


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family(request.param)), task=IMAGE)


def test_each_image_is_split_into_tiles_and_a_global_image(model):
    """The red square (32 x 32) becomes 2 x 2 tiles and its global image, the wide noise (64 x 32) 1 x 2 tiles and
    its global image: eight tiles of the tower's image_size, each image_seq_len image tokens in the prompt."""
    _, images, encoding = image_inputs(model)
    assert images[0].size != images[1].size
    side = model.vision.image_size
    assert tuple(encoding["pixel_values"].shape) == (1, 5 + 3, 3, side, side)
    assert bool(encoding["pixel_attention_mask"].all())  # every tile is full: no padding patches
    text = model.processor.tokenizer.decode(encoding["input_ids"][0])
    assert text.count("<row_2_col_2>") == 1 and text.count("<row_1_col_2>") == 2 and text.count("<global-img>") == 2
    config = model._module.config
    per_tile = (side // model.vision.patch_size) ** 2 // config.scale_factor ** 2
    assert model.processor.image_seq_len == per_tile
    assert int((encoding["input_ids"] == config.image_token_id).sum()) == 8 * per_tile


def test_vision_values_are_the_modules_own(model):
    prompt, images, encoding = image_inputs(model)
    hf = model._module
    tower = hf.model.vision_model
    blocks = []
    with torch.no_grad(), model.trace(prompt, images=images):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        for i in range(model.vision.num_layers):
            blocks.append(model.vision.layers[i].layer_output.save())
        tower_output = model.vision.tower_output.save()
        features = model.vision.image_features.save()
        first_input = model.layers[0].layer_input.save()
        logits = model.logits.save()

    tiles = encoding["pixel_values"].flatten(0, 1)
    with torch.no_grad(), outputs_of([tower.embeddings, *tower.encoder.layers]) as seen:
        last = tower(pixel_values=tiles).last_hidden_state
        plain = hf(**encoding).logits
        own = hf.model.get_image_features(pixel_values=encoding["pixel_values"],
                                          pixel_attention_mask=encoding["pixel_attention_mask"]).pooler_output
    assert torch.equal(mask, encoding["input_ids"] == hf.config.image_token_id)
    assert torch.equal(patches, seen[0][0]) and patches.shape[:2] == (8, model.vision.image_size ** 2 // 16)
    for i, block in enumerate(blocks):
        assert torch.equal(block, seen[i + 1][0])
    assert torch.equal(tower_output, last)  # post_layernorm of the last block, every patch of every tile
    assert torch.equal(features, torch.cat(own))
    assert torch.equal(first_input[mask], features)  # the scatter, one row per image token, in order
    torch.testing.assert_close(logits, plain)


def test_the_pixel_shuffle_is_the_modules_and_not_the_identity(model):
    """`shuffle` (an independent reshape) against the connector's own pixel_shuffle on the tiny tower's output; the
    image features recomputed from it; and a square's rows really are neighbouring patches."""
    from nncanon.parts.vision.pixel_shuffle import shuffle

    prompt, images, _ = image_inputs(model)
    connector = model._module.model.connector
    with torch.no_grad(), model.trace(prompt, images=images):
        tower_output = model.vision.tower_output.save()
        features = model.vision.image_features.save()
    scale = connector.scale_factor
    assert torch.equal(shuffle(tower_output, scale), connector.pixel_shuffle(tower_output, scale))
    out = shuffle(tower_output.double(), scale) @ connector.modality_projection.proj.weight.double().T
    # float64 against float32 over one product of scale² · width (<= 640) terms: well inside 1e-4
    torch.testing.assert_close(out.flatten(0, 1), features.double(), rtol=1e-4, atol=1e-4)
    side, width = round(tower_output.shape[1] ** 0.5), tower_output.shape[2]
    grid = torch.arange(side * side).reshape(1, side * side, 1).float()
    first_square = shuffle(grid, scale)[0, 0]
    assert first_square.tolist() == [r * side + c for r in range(scale) for c in range(scale)]
    assert features.shape[0] == 8 * (side // scale) ** 2 and width * scale ** 2 == connector.modality_projection.proj.in_features


@pytest.mark.parametrize("rows,cols", [(4, 4), (3, 2), (1, 4), (3, 3)])
def test_bucketed_positions_are_the_embeddings_own(model, rows, cols):
    """A tile padded to the tower's grid (rows x cols real patches): each patch's position row, read off the module's
    output less the convolution, is `bucketed_positions`'s; padding patches take position 0."""
    from nncanon.families.idefics3 import bucketed_positions

    embeddings = model._module.model.vision_model.embeddings
    side = embeddings.num_patches_per_side
    mask = torch.zeros(1, side, side, dtype=torch.bool)
    mask[:, :rows, :cols] = True
    pixels = torch.randn(1, 3, model.vision.image_size, model.vision.image_size)
    with torch.no_grad():
        out = embeddings(pixel_values=pixels, patch_attention_mask=mask)
        conv = embeddings.patch_embedding(pixels).flatten(2).transpose(1, 2)
        positions = bucketed_positions(mask, side)
        torch.testing.assert_close(out - conv, embeddings.position_embedding.weight[positions])
    assert positions[0, 0] == 0 and int(positions.max()) <= side * side - 1
    if (rows, cols) == (side, side):
        assert positions[0].tolist() == list(range(side * side))  # a full tile: one position per patch
    else:
        assert not torch.equal(positions[0], torch.arange(side * side))  # stretched over the real patches


def test_an_edit_of_image_features_is_the_text_model_reading_zeros_there(model):
    """Zeroing image_features is the text model reading zero embeddings at the image tokens (transformers' own
    forward on those embeddings, no images), and nothing before the first image token moves."""
    prompt, images, encoding = image_inputs(model)
    hf = model._module
    with torch.no_grad(), model.trace(prompt, images=images):
        model.vision.image_features[:] = 0
        edited = model.logits.save()
    image = encoding["input_ids"] == hf.config.image_token_id
    with torch.no_grad():
        embeds = hf.get_input_embeddings()(encoding["input_ids"])
        embeds[image] = 0
        expected = hf(inputs_embeds=embeds, attention_mask=encoding["attention_mask"]).logits
        unedited = hf(**encoding).logits
    torch.testing.assert_close(edited, expected)
    first = int(image[0].nonzero()[0])
    assert torch.equal(edited[:, :first], unedited[:, :first])
    assert not torch.allclose(edited[:, first:], unedited[:, first:])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_wrapper_names_its_family_and_the_text_load_has_no_tower(family):
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.families import family_for_config

    wrapper = {"model_type": family, "text_config": {"model_type": "llama"}}
    assert family_for_config(wrapper, "config.json").FAMILY == family  # not llama, its text model's type
    text = nncanon.load(checkpoint_dir(get_family(family)))
    assert not hasattr(text._module.model, "vision_model") and not hasattr(text._module.model, "connector")
    with pytest.raises(AttributeError):
        text.vision  # noqa: B018
    with torch.no_grad(), text.trace("Which one is red?"):
        logits = text.logits.save()
    assert logits.shape[-1] == text._module.config.text_config.vocab_size


def test_a_grid_the_shuffle_cannot_fold_is_one_line():
    from nncanon.parts.vision.pixel_shuffle import shuffle

    with pytest.raises(ValueError, match="not a square grid whose side divides by 2") as error:
        shuffle(torch.zeros(1, 9, 4), 2)
    assert "\n" not in str(error.value)
