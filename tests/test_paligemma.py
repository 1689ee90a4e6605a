"""paligemma on its tiny checkpoint: the SigLIP tower, the linear projector, the scatter and the prefix-LM mask,
each vision value against plain PyTorch hooks and the module's own math (no nnsight), each edit by its effect on
the logits.
"""

from __future__ import annotations

import pytest
import torch
from vision_inputs import IMAGE, one_thread, outputs_of  # noqa: F401 (one_thread: an autouse fixture)

from generator.recipe.family import get_family


def _load(**kwargs):
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("paligemma")), **kwargs)


@pytest.fixture(scope="module")
def paligemma():
    return _load(task=IMAGE)


@pytest.fixture(scope="module")
def eager():
    return _load(task=IMAGE, attn_implementation="eager")


def _encoding(model):
    """The family's trace input: two images of different sizes, a prompt and a suffix."""
    from nncanon.families.paligemma import trace_inputs

    (encoding,), _ = trace_inputs(model)
    return encoding


def test_the_processor_writes_images_then_the_prefix_then_the_suffix(paligemma):
    from nncanon.parts.vision.vision_towers import example_images

    images = example_images(paligemma.processor)
    encoding = _encoding(paligemma)
    config, tokenizer = paligemma._module.config, paligemma.processor.tokenizer
    assert images[0].size != images[1].size
    side = paligemma.vision.image_size
    assert tuple(encoding["pixel_values"].shape) == (2, 3, side, side)  # the processor resizes both
    ids, types = encoding["input_ids"][0], encoding["token_type_ids"][0]
    tokens = 2 * (side // paligemma.vision.patch_size) ** 2  # one image token per patch
    assert (ids[:tokens] == config.image_token_id).all() and int((ids == config.image_token_id).sum()) == tokens
    assert ids[tokens] == tokenizer.bos_token_id  # <bos> after the images, once
    assert int((ids == tokenizer.bos_token_id).sum()) == 1
    assert ids[-1] == tokenizer.eos_token_id  # the suffix ends in <eos>
    prefix = int((types == 0).sum())
    assert 0 < prefix < ids.numel() and (types[:prefix] == 0).all() and (types[prefix:] == 1).all()


def test_tower_output_and_image_features_against_hooks_and_the_linear(paligemma):
    """tower_output is post_layernorm's output (a hook on it); image_features is the projector's Linear recomputed in
    float64, and the projector's own output (a hook), flat over the images."""
    encoding = _encoding(paligemma)
    hf = paligemma._module.model
    with torch.no_grad(), paligemma.trace(encoding):
        tower = paligemma.vision.tower_output.save()
        features = paligemma.vision.image_features.save()
    with torch.no_grad(), outputs_of([hf.vision_tower.post_layernorm, hf.multi_modal_projector]) as seen:
        paligemma._module(**encoding)
    torch.testing.assert_close(tower, seen[0][0])
    torch.testing.assert_close(features, seen[1][0].flatten(0, 1))
    linear = hf.multi_modal_projector.linear
    expected = tower.double() @ linear.weight.double().T + linear.bias.double()
    torch.testing.assert_close(features.double(), expected.flatten(0, 1), rtol=1e-5, atol=1e-5)
    assert features.shape == (encoding["pixel_values"].shape[0] * tower.shape[1], paligemma._module.config.text_config.hidden_size)


def test_the_prefix_attends_both_ways_and_the_suffix_causally(eager):
    """Under eager, every block's attention_allowed is the mask its pattern was made under; a prefix token gives weight
    to every later prefix token and to no suffix token; a suffix token stays causal."""
    encoding = _encoding(eager)
    types = encoding["token_type_ids"][0]
    prefix = int((types == 0).sum())
    allowed, probabilities = [], []
    with torch.no_grad(), eager.trace(encoding):
        for i in range(eager.num_layers):  # in forward order: each block's mask, then its pattern
            allowed.append(eager.layers[i].self_attn.attention_allowed.save())
            probabilities.append(eager.layers[i].self_attn.attention_probabilities.save())
    seq = types.numel()
    q, k = torch.arange(seq)[:, None], torch.arange(seq)[None, :]
    expected = (k <= q) | ((q < prefix) & (k < prefix))
    for block_allowed, block_p in zip(allowed, probabilities):
        assert torch.equal(block_allowed[0], expected.expand_as(block_allowed[0]))
        assert torch.equal(block_p > 0, block_allowed)
        p = block_p[0]
        assert (p[:, 0, 1:prefix] > 0).all()  # the first image token sees the prompt after it
        assert (p[:, :prefix, prefix:] == 0).all()  # no prefix token sees the suffix
        assert (p[:, prefix, prefix + 1:] == 0).all()  # a suffix token stays causal


def test_an_edit_of_image_features_moves_the_logits_as_the_embeddings_say(paligemma):
    """Zeroing image_features is the forward on embeddings whose image-token rows are zeros (same masks)."""
    encoding = _encoding(paligemma)
    hf = paligemma._module
    with torch.no_grad(), paligemma.trace(encoding):
        paligemma.vision.image_features[:] = 0
        edited = paligemma.logits.save()
    with torch.no_grad():
        embeds = hf.get_input_embeddings()(encoding["input_ids"])
        embeds[encoding["input_ids"] == hf.config.image_token_id] = 0
        expected = hf(inputs_embeds=embeds, attention_mask=encoding["attention_mask"],
                      token_type_ids=encoding["token_type_ids"]).logits
        unedited = hf(**encoding).logits
    torch.testing.assert_close(edited, expected)
    assert not torch.allclose(edited, unedited)


def test_an_image_feature_edit_reaches_the_prompt_before_it_only_through_the_prefix(paligemma):
    """The prefix sees itself both ways: an edit of the last image's features moves the first image token's stream
    in the first block (a causal mask would not let it)."""
    encoding = _encoding(paligemma)
    with torch.no_grad(), paligemma.trace(encoding):
        before = paligemma.layers[0].layer_output.save()
    with torch.no_grad(), paligemma.trace(encoding):
        paligemma.vision.image_features[-1] = 0
        after = paligemma.layers[0].layer_output.save()
    assert not torch.equal(before[0, 0], after[0, 0])


def test_a_wrapper_names_its_family():
    from nncanon.families import family_for_config

    for text in ("gemma", "gemma2"):
        wrapper = {"model_type": "paligemma", "text_config": {"model_type": text}}
        assert family_for_config(wrapper, "config.json").FAMILY == "paligemma"


def test_a_text_prompt_on_the_image_load_is_the_text_load_s():
    """PaliGemmaProcessor refuses a prompt with no image; the family's processor hands it to the tokenizer with <bos>
    first, so the image load reads what the text load reads."""
    text, image = _load(attn_implementation="eager"), _load(task=IMAGE, attn_implementation="eager")
    assert not hasattr(text._module.model, "vision_tower")
    with torch.no_grad(), text.trace("The cat sat"):
        ids = text.input_ids.save()
        a = text.logits.save()
    with torch.no_grad(), image.trace("The cat sat"):
        b = image.logits.save()
    assert ids[0, 0] == text.tokenizer.bos_token_id
    torch.testing.assert_close(a, b)


def test_paligemma2_sliding_blocks_see_the_whole_prefix_beyond_the_window():
    """PaliGemma 2 (the pg2 variant: Gemma 2's text model): on a sliding block a prefix token attends to every prefix
    token, beyond the window too (the prefix is ORed over the sliding causal mask); a suffix token sees only the keys
    within the window; the tower's pattern is not served while the tower runs sdpa (the text model runs eager)."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family
    from generator.recipe.variants import variant_family

    model = nncanon.load(checkpoint_dir(variant_family(get_family("paligemma"), "pg2")), task=IMAGE)
    assert model.text_config.model_type == "gemma2" and model.attn_implementation == "eager"
    assert model._module.config.vision_config._attn_implementation != "eager"
    encoding = _encoding(model)
    types = encoding["token_type_ids"][0]
    prefix, seq = int((types == 0).sum()), types.numel()
    sliding = model.text_config.layer_types.index("sliding_attention")
    window = model.text_config.sliding_window
    assert prefix > window
    with torch.no_grad(), model.trace(encoding):
        allowed = model.layers[sliding].self_attn.attention_allowed.save()
    q, k = torch.arange(seq)[:, None], torch.arange(seq)[None, :]
    expected = ((k <= q) & (k > q - window)) | ((q < prefix) & (k < prefix))
    assert torch.equal(allowed[0], expected.expand_as(allowed[0]))
    assert "attention_scores" not in {r.name for r in model.support() if r.host.startswith("model.vision") and r.available}
