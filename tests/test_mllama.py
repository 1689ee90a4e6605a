"""mllama (Llama 3.2 Vision) on its tiny checkpoint: the gated cross-attention blocks against plain PyTorch hooks (no
nnsight), the tiles of two images of different aspect ratios, and an edit of the image features by its effect: it
reaches the stream at the first cross-attention block and not before.
"""

from __future__ import annotations

import pytest
import torch
from vision_inputs import IMAGE, calls_of, one_thread  # noqa: F401 (one_thread: an autouse fixture)

from generator.recipe.family import get_family


@pytest.fixture(scope="module")
def mllama():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("mllama")), task=IMAGE)


def _call(model):
    from nncanon.families import mllama as family

    args, kwargs = family.trace_inputs(model)
    return args, kwargs, model.processor(text=args[0], images=kwargs["images"], return_tensors="pt")


def _cross_layers(model):
    return list(model._module.config.text_config.cross_attention_layers)


def test_two_aspect_ratios_give_two_tile_counts(mllama):
    _, kwargs, encoding = _call(mllama)
    images = kwargs["images"][0]
    assert images[0].size[0] / images[0].size[1] != images[1].size[0] / images[1].size[1]
    tiles = encoding["aspect_ratio_mask"].sum(-1)[0].tolist()
    assert len(tiles) == 2 and tiles[0] != tiles[1]  # each image its own canvas
    assert encoding["pixel_values"].shape[2] == mllama._module.config.vision_config.max_num_tiles


def test_gated_adds_against_plain_hooks(mllama):
    """layer_mid and layer_output of every cross-attention block, read through nncanon, equal the hooked block's
    residual plus tanh(gate) times its hooked cross_attn and MLP outputs (the MLP's add zeroed on the rows the
    block's own full_text_row_masked_out_mask zeroes)."""
    args, kwargs, encoding = _call(mllama)
    layers = [mllama._module.model.language_model.layers[i] for i in _cross_layers(mllama)]
    modules = [m for layer in layers for m in (layer, layer.cross_attn, layer.mlp)]
    with torch.no_grad(), calls_of(modules) as seen:
        mllama._module(**encoding)
    read = []  # made outside the trace: what the trace body binds stays inside it
    with torch.no_grad(), mllama.trace(*args, **kwargs):
        for i in _cross_layers(mllama):  # in the forward's order: the block's inputs, then inside it
            rows = mllama.layers[i].text_row_mask.save()
            read.append((mllama.layers[i].layer_mid.save(), mllama.layers[i].layer_output.save(), rows))
    for k, layer in enumerate(layers):
        (block_args, block_kwargs, block_out), = seen[3 * k]
        (_, _, (attn_out, _)), = seen[3 * k + 1]
        (_, _, mlp_out), = seen[3 * k + 2]
        residual = block_args[0] if block_args else block_kwargs["hidden_states"]
        mid = residual + layer.cross_attn_attn_gate.tanh() * attn_out
        rows = block_kwargs["full_text_row_masked_out_mask"][:, 0]
        out = mid + layer.cross_attn_mlp_gate.tanh() * (rows * mlp_out)
        layer_mid, layer_output, text_rows = read[k]
        torch.testing.assert_close(layer_mid, mid, rtol=0, atol=0)
        torch.testing.assert_close(layer_output, out, rtol=0, atol=0)
        torch.testing.assert_close(layer_output, block_out, rtol=0, atol=0)
        assert text_rows[0, 0] == 0 and bool(text_rows[0, 1:].all())  # BOS before any <|image|> sees no tile


def test_the_gates_matter(mllama):
    """A gate of zero removes the block's cross-attention add: tanh(0) = 0, so layer_mid == layer_input."""
    args, kwargs, _ = _call(mllama)
    i = _cross_layers(mllama)[0]
    gate = mllama._module.model.language_model.layers[i].cross_attn_attn_gate
    saved = gate.detach().clone()
    try:
        with torch.no_grad():
            gate.zero_()
            with mllama.trace(*args, **kwargs):
                entering, mid = mllama.layers[i].layer_input.save(), mllama.layers[i].layer_mid.save()
    finally:
        with torch.no_grad():
            gate.copy_(saved)
    torch.testing.assert_close(mid, entering, rtol=0, atol=0)


def test_image_features_edit_reaches_the_stream_at_the_first_cross_attention_block(mllama):
    """Zeroing image_features leaves every block before the first cross-attention block as it was, and changes that
    block's output and the logits."""
    args, kwargs, _ = _call(mllama)
    first = _cross_layers(mllama)[0]
    before, edited = [], []  # made outside the traces: what a trace body binds stays inside it
    with torch.no_grad(), mllama.trace(*args, **kwargs):
        for i in range(first + 1):
            before.append(mllama.layers[i].layer_output.save())
        logits = mllama.logits.save()
    with torch.no_grad(), mllama.trace(*args, **kwargs):
        mllama.vision.image_features[:] = 0
        for i in range(first + 1):
            edited.append(mllama.layers[i].layer_output.save())
        edited_logits = mllama.logits.save()
    for i in range(first):
        torch.testing.assert_close(edited[i], before[i], rtol=0, atol=0)
    assert not torch.allclose(edited[first], before[first])
    assert not torch.allclose(edited_logits, logits)


def test_cross_attention_states_are_the_projected_image_features(mllama):
    args, kwargs, _ = _call(mllama)
    i = _cross_layers(mllama)[-1]
    with torch.no_grad(), mllama.trace(*args, **kwargs):
        features = mllama.vision.image_features.save()
        states = mllama.layers[i].cross_attn.cross_attention_states.save()
    torch.testing.assert_close(states, features.reshape(-1, *features.shape[-2:]), rtol=0, atol=0)


def test_a_text_prompt_skips_the_cross_attention_blocks(mllama):
    """The default load serves the self-attention blocks and says why a cross-attention block's values are not."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    text = nncanon.load(checkpoint_dir(get_family("mllama")))
    i = _cross_layers(text)[0]
    with pytest.raises(nncanon.Unavailable, match="skips the cross-attention blocks"):
        with torch.no_grad(), text.trace("The cat sat"):
            text.layers[i].layer_mid.save()
    with torch.no_grad(), text.trace("The cat sat"):
        out = text.layers[i - 1].layer_output.save()
    assert out.shape[-1] == text.hidden_size
