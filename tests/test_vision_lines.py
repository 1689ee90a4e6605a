"""The vision lines beyond the Qwen ViT, on their tiny checkpoints: each vision value against plain
PyTorch hooks and transformers' own methods (no nnsight), each edit by its effect on the logits, and the
registry naming a wrapper's family by the wrapper's own model_type.

llava: a CLIP tower (class token, positions, pre_layrnorm), features read at vision_feature_layer with the
class token dropped, a two-layer MLP projector, the scatter at the image tokens.
"""

from __future__ import annotations

import pytest
import torch
from vision_inputs import (  # noqa: F401 (one_thread: an autouse fixture)
    IMAGE,
    check_image_features_edit,
    image_inputs,
    one_thread,
    outputs_of,
)

from generator.recipe.family import get_family


@pytest.fixture(scope="module")
def llava():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("llava")), task=IMAGE)


def test_two_images_of_different_sizes_become_one_size(llava):
    _, images, encoding = image_inputs(llava)
    assert images[0].size != images[1].size
    side = llava.vision.image_size
    assert tuple(encoding["pixel_values"].shape) == (2, 3, side, side)  # the processor resizes and crops both
    per_image = (side // llava.vision.patch_size) ** 2  # the class token counted, then dropped
    assert int((encoding["input_ids"] == llava._module.config.image_token_id).sum()) == 2 * per_image


def test_vision_values_are_the_modules_own(llava):
    prompt, images, encoding = image_inputs(llava)
    hf = llava._module
    tower = hf.model.vision_tower
    blocks = []  # made outside the trace, filled inside: nnsight hands back only what the body mutates or saves
    with torch.no_grad(), llava.trace(prompt, images=images):
        mask = llava.vision.image_token_mask.save()
        patches = llava.vision.patch_embeddings.save()
        for i in range(llava.vision.num_layers):
            blocks.append(llava.vision.layers[i].layer_output.save())
        tower_output = llava.vision.tower_output.save()
        features = llava.vision.image_features.save()
        logits = llava.logits.save()

    with torch.no_grad(), outputs_of([tower.embeddings, *tower.encoder.layers]) as seen:
        hidden = tower(encoding["pixel_values"], output_hidden_states=True).hidden_states
        plain = hf(**encoding).logits
        own = hf.model.get_image_features(pixel_values=encoding["pixel_values"]).pooler_output
    assert torch.equal(mask, encoding["input_ids"] == hf.config.image_token_id)
    assert torch.equal(patches, seen[0][0])
    for i, block in enumerate(blocks):
        assert torch.equal(block, seen[i + 1][0])
    # vision_feature_layer -2 on 3 blocks: hidden_states[2], the stream leaving block 1, class token dropped
    assert hf.config.vision_feature_layer == -2
    assert torch.equal(tower_output, hidden[-2][:, 1:])
    assert torch.equal(tower_output, blocks[-2][:, 1:])
    assert torch.equal(features, torch.cat(list(own)))
    torch.testing.assert_close(logits, plain)


def test_an_edit_of_image_features_moves_the_logits_as_the_embeddings_say(llava):
    """Zeroing image_features is the forward on embeddings whose image-token rows are zeros."""
    check_image_features_edit(llava, *image_inputs(llava))


def test_an_edit_of_tower_output_reaches_the_projector(llava):
    """Zeroing tower_output leaves each image token the projector's response to zeros."""
    prompt, images, _ = image_inputs(llava)
    projector = llava._module.model.multi_modal_projector
    with torch.no_grad(), llava.trace(prompt, images=images):
        llava.vision.tower_output[:] = 0
        features = llava.vision.image_features.save()
    with torch.no_grad():
        response = projector(torch.zeros(1, llava.vision.vision_hidden_size))
    torch.testing.assert_close(features, response.expand_as(features))


def test_tower_attention_is_unmasked_over_each_image(llava):
    """Head outputs recomputed from the read queries, keys and values with no mask, per image."""
    prompt, images, _ = image_inputs(llava)
    attn = llava.vision.layers[0].self_attn
    with torch.no_grad(), llava.trace(prompt, images=images):
        q, k, v = attn.attention_queries.save(), attn.attention_keys.save(), attn.attention_values.save()
        heads = attn.attention_head_outputs.save()
    probabilities = (q.double() @ k.double().transpose(-1, -2) * attn._module.scale).softmax(-1)
    # float64 recomputation against a float32 kernel over 17 keys of 8 dims: well inside 1e-5
    torch.testing.assert_close((probabilities @ v.double()).transpose(1, 2), heads.double(), rtol=1e-5, atol=1e-5)


def test_a_wrapper_names_its_family():
    from nncanon.families import family_for_config

    wrapper = {"model_type": "llava", "text_config": {"model_type": "llama"}}
    assert family_for_config(wrapper, "config.json").FAMILY == "llava"
    assert family_for_config({"model_type": "llama"}, "config.json").FAMILY == "llama"
    qwen = {"model_type": "qwen2_vl", "text_config": {"model_type": "qwen2_vl_text"}}
    assert family_for_config(qwen, "config.json").FAMILY == "qwen2_vl"


def test_the_text_load_has_no_tower():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family("llava")))
    assert not hasattr(model._module.model, "vision_tower")
    with pytest.raises(AttributeError):
        model.vision  # noqa: B018
    with torch.no_grad(), model.trace("Which one is red?"):
        logits = model.logits.save()
    assert logits.shape[-1] == model._module.config.text_config.vocab_size
