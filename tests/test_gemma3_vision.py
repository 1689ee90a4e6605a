"""gemma3 on its tiny checkpoint: the SigLIP tower, the average-pool projector, the scatter and the image-span
attention mask, each vision value against plain PyTorch hooks and transformers' own methods (no nnsight), each
edit by its effect on the logits.
"""

from __future__ import annotations

import pytest
import torch
from vision_inputs import IMAGE, image_inputs, one_thread, outputs_of  # noqa: F401 (one_thread: an autouse fixture)

from generator.recipe.family import get_family


@pytest.fixture(scope="module")
def gemma3():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("gemma3")), task=IMAGE)


def test_two_images_of_different_sizes_become_one_size(gemma3):
    _, images, encoding = image_inputs(gemma3)
    config = gemma3._module.config
    assert images[0].size != images[1].size
    side = gemma3.vision.image_size
    assert tuple(encoding["pixel_values"].shape) == (2, 3, side, side)  # the processor resizes both
    image = encoding["input_ids"] == config.image_token_id
    assert int(image.sum()) == 2 * config.mm_tokens_per_image  # pooled: fewer tokens than patches
    assert config.mm_tokens_per_image < (side // gemma3.vision.patch_size) ** 2
    assert torch.equal(encoding["token_type_ids"].bool(), image)  # the processor marks exactly the image tokens


def test_vision_values_are_the_modules_own(gemma3):
    prompt, images, encoding = image_inputs(gemma3)
    hf = gemma3._module
    tower = hf.model.vision_tower
    blocks = []
    with torch.no_grad(), gemma3.trace(prompt, images=images):
        mask = gemma3.vision.image_token_mask.save()
        patches = gemma3.vision.patch_embeddings.save()
        for i in range(gemma3.vision.num_layers):
            blocks.append(gemma3.vision.layers[i].layer_output.save())
        tower_output = gemma3.vision.tower_output.save()
        features = gemma3.vision.image_features.save()
        first_input = gemma3.layers[0].layer_input.save()
        logits = gemma3.logits.save()

    with torch.no_grad(), outputs_of([tower.embeddings, *tower.encoder.layers]) as seen:
        last = tower(pixel_values=encoding["pixel_values"]).last_hidden_state
        plain = hf(**encoding).logits
        own = hf.model.get_image_features(pixel_values=encoding["pixel_values"]).pooler_output
    assert torch.equal(mask, encoding["input_ids"] == hf.config.image_token_id)
    assert torch.equal(patches, seen[0][0])
    assert patches.shape[1] == (gemma3.vision.image_size // gemma3.vision.patch_size) ** 2  # no class token
    for i, block in enumerate(blocks):
        assert torch.equal(block, seen[i + 1][0])
    assert torch.equal(tower_output, last)  # post_layernorm of the last block, every patch
    assert torch.equal(features, own.flatten(0, 1))
    assert torch.equal(first_input[mask], features)  # the scatter
    torch.testing.assert_close(logits, plain)


def test_the_projector_pools_norms_and_projects(gemma3):
    """image_features recomputed from tower_output with the projector's own weights, and pooling is not the
    identity: each image token is the mean of a kernel x kernel square of patches."""
    import torch.nn.functional as F

    prompt, images, _ = image_inputs(gemma3)
    projector = gemma3._module.model.multi_modal_projector
    with torch.no_grad(), gemma3.trace(prompt, images=images):
        tower_output = gemma3.vision.tower_output.save()
        features = gemma3.vision.image_features.save()
    images_, patches, width = tower_output.shape
    side = int(patches ** 0.5)
    grid = tower_output.double().transpose(1, 2).reshape(images_, width, side, side)
    pooled = F.avg_pool2d(grid, projector.kernel_size).flatten(2).transpose(1, 2)
    assert pooled.shape[1] == gemma3._module.config.mm_tokens_per_image and projector.kernel_size > 1
    normed = pooled * (pooled.pow(2).mean(-1, keepdim=True) + projector.mm_soft_emb_norm.eps).rsqrt()
    out = normed * (1 + projector.mm_soft_emb_norm.weight.double()) @ projector.mm_input_projection_weight.double()
    # float64 against float32 over a 48-wide norm and product: well inside 1e-4
    torch.testing.assert_close(out.flatten(0, 1), features.double(), rtol=1e-4, atol=1e-4)


def test_image_tokens_of_one_image_attend_to_each_other_both_ways(gemma3):
    """Under eager, a full block's pattern and its attention_allowed: an image token gives weight to the later tokens
    of its own image, none to a later text token or to the other image; a text token stays causal."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    prompt, images, encoding = image_inputs(gemma3)
    full = gemma3._module.config.text_config.layer_types.index("full_attention")
    eager = nncanon.load(checkpoint_dir(get_family("gemma3")), task=IMAGE, attn_implementation="eager")
    with torch.no_grad(), eager.trace(prompt, images=images):
        allowed = eager.layers[full].self_attn.attention_allowed.save()
        probabilities = eager.layers[full].self_attn.attention_probabilities.save()
    assert torch.equal(probabilities > 0, allowed)  # the value is the mask the pattern was made under
    image = (encoding["input_ids"] == gemma3._module.config.image_token_id)[0]
    where = image.nonzero().flatten().tolist()
    first_image, second_image = where[:4], where[4:]
    p = probabilities[0]  # [heads, query, key]
    q = first_image[0]
    assert (p[:, q, first_image[1:]] > 0).all()  # later keys of its own image: seen
    assert (p[:, q, second_image] == 0).all()  # the other image, later: not seen
    assert (p[:, q, q + len(first_image):] == 0).all()  # everything after its own image: not seen
    text = [i for i in range(image.numel()) if not image[i]]
    t = text[1]
    assert (p[:, t, t + 1:] == 0).all()  # a text token stays causal


def test_an_edit_of_image_features_moves_the_logits_as_the_embeddings_say(gemma3):
    """Zeroing image_features is the forward on embeddings whose image-token rows are zeros (same masks)."""
    prompt, images, encoding = image_inputs(gemma3)
    hf = gemma3._module
    with torch.no_grad(), gemma3.trace(prompt, images=images):
        gemma3.vision.image_features[:] = 0
        edited = gemma3.logits.save()
    with torch.no_grad():
        embeds = hf.get_input_embeddings()(encoding["input_ids"])
        embeds[encoding["input_ids"] == hf.config.image_token_id] = 0
        expected = hf(inputs_embeds=embeds, attention_mask=encoding["attention_mask"],
                      token_type_ids=encoding["token_type_ids"]).logits
        unedited = hf(**encoding).logits
    torch.testing.assert_close(edited, expected)
    assert not torch.allclose(edited, unedited)


def test_a_wrapper_names_its_family():
    from nncanon.families import family_for_config

    wrapper = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text"}}
    assert family_for_config(wrapper, "config.json").FAMILY == "gemma3"
    assert family_for_config({"model_type": "gemma3_text"}, "config.json").FAMILY == "gemma3_text"


def test_the_text_load_has_no_tower():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family("gemma3")))
    assert not hasattr(model._module.model, "vision_tower")
    with pytest.raises(AttributeError):
        model.vision  # noqa: B018
    with torch.no_grad(), model.trace("Which one is red?"):
        logits = model.logits.save()
    assert logits.shape[-1] == model._module.config.text_config.vocab_size
