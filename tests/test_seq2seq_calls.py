"""What a trace and generate take on the encoder-decoders loaded under the feature-extraction pipeline (t5, whisper).

nnsight splits a prompt's keywords with the pipeline's own parameters, and the feature-extraction pipeline keeps
only its tokenizer's: a generation setting or a decoder_input_ids beside a prompt was dropped, with no error. And
nnsight batches no features: two audio invokes in one trace were refused. Each call here is checked against what
transformers itself gives for the same input (its own generate, a plain forward), never against nncanon's code.
"""

from __future__ import annotations

import pytest
import torch
from float_error import within

from nncanon.core.inputs import InputError

PROMPTS = ["the river ran low", "a quiet machine hums in the yard"]
#: fewer new tokens than either checkpoint's max_length (20): a setting dropped on the way gives more
SETTINGS = dict(max_new_tokens=3, do_sample=False)


def _load(family: str):
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    return nncanon.load(checkpoint_dir(get_family(family)))


@pytest.fixture(scope="module")
def t5():
    return _load("t5")


@pytest.fixture(scope="module")
def whisper():
    return _load("whisper")


def _generated(model, *inputs, invoke: bool = False, **kwargs):
    """``tracer.result`` of ``model.generate``: the input and the settings together, or the settings on generate and
    the input in ``tracer.invoke`` (``invoke``)."""
    with torch.no_grad():
        if invoke:
            with model.generate(**SETTINGS) as tracer:
                with tracer.invoke(*inputs, **kwargs):
                    result = tracer.result.save()
        else:
            with model.generate(*inputs, **kwargs, **SETTINGS) as tracer:
                result = tracer.result.save()
    return result


# -- t5: a prompt's keywords -------------------------------------------------------------------------------------


@pytest.mark.parametrize("prompts", [PROMPTS[0], PROMPTS], ids=["one", "two"])
def test_t5_generate_honours_its_settings_beside_a_prompt_and_on_generate(t5, prompts):
    with torch.no_grad():
        native = t5._module.generate(**t5.tokenizer(prompts, return_tensors="pt", padding=True), **SETTINGS)
    assert native.shape[1] == 1 + SETTINGS["max_new_tokens"]
    assert torch.equal(_generated(t5, prompts), native)
    assert torch.equal(_generated(t5, prompts, invoke=True), native)
    with torch.no_grad():
        assert torch.equal(t5.generate(prompts, **SETTINGS), native)  # called directly, no trace


def test_t5_a_prompts_decoder_input_ids_are_the_ones_decoded(t5):
    """Beside a prompt, decoder_input_ids reach the decoder (not the shifted prompt the family's default gives)."""
    target = torch.tensor([[0, 5, 9, 13]])
    with torch.no_grad():
        with t5.trace(PROMPTS[0], decoder_input_ids=target):
            decoded = t5.decoder.input_ids.save()
            logits = t5.logits.save()
        plain = t5._module(**t5.tokenizer(PROMPTS[0], return_tensors="pt"), decoder_input_ids=target).logits
    assert torch.equal(decoded, target) and torch.equal(logits, plain)


def test_t5_two_invokes_each_with_its_own_decoder_input_ids(t5):
    targets = [torch.tensor([[0, 5, 9, 13]]), torch.tensor([[0, 7]])]
    with torch.no_grad():
        with t5.trace() as tracer:
            with tracer.invoke(PROMPTS[0], decoder_input_ids=targets[0]):
                first = t5.decoder.input_ids.save()
            with tracer.invoke(PROMPTS[1], decoder_input_ids=targets[1]):
                second = t5.decoder.input_ids.save()
    assert torch.equal(first, targets[0])
    assert torch.equal(second[:, :2], targets[1])  # a target is padded on the right to the longest


# -- whisper: features in ----------------------------------------------------------------------------------------


def _features(model, rows: int = 2):
    from nncanon.parts.encoders.speech import clips

    extractor = model.feature_extractor
    return extractor(clips(model, rows), sampling_rate=extractor.sampling_rate, return_tensors="pt")


def test_whisper_generate_takes_features_every_way_with_its_settings(whisper):
    extracted = _features(whisper)
    features = extracted["input_features"]
    with torch.no_grad():
        native = whisper._module.generate(features, **SETTINGS)
    assert native.shape == (2, SETTINGS["max_new_tokens"])
    assert torch.equal(_generated(whisper, features), native)
    assert torch.equal(_generated(whisper, input_features=features), native)
    assert torch.equal(_generated(whisper, extracted), native)
    assert torch.equal(_generated(whisper, features, invoke=True), native)
    assert torch.equal(_generated(whisper, input_features=features, invoke=True), native)


def _roundings(config, seq: int) -> int:
    """The roundings of a whisper forward, every reduction of both stacks summed (at least its longest chain): the
    convolutions, per block its norms, projections, scores over the head, softmax over the keys and weighted sum,
    output projection and MLP, then the final norm and the head."""
    d, source = config.d_model, config.max_source_positions
    head = d // config.encoder_attention_heads

    def attention(keys: int) -> int:
        return d + head + 2 * keys + d

    encoder = 3 * config.num_mel_bins + 3 * d + config.encoder_layers * (
        2 * d + attention(source) + d + config.encoder_ffn_dim) + d
    decoder = config.decoder_layers * (3 * d + attention(seq) + attention(source) + d + config.decoder_ffn_dim) + 2 * d
    return encoder + decoder


def test_whisper_two_audio_invokes_each_get_their_own_rows(whisper):
    """Each invoke reads its own rows, equal to a plain forward on its input alone; one's edit leaves the other's."""
    from nncanon.parts.encoders.speech import speech_inputs

    _, call = speech_inputs(whisper)
    features, ids = call["input_features"], call["decoder_input_ids"]
    calls = [dict(input_features=features[:1], decoder_input_ids=ids[:1]),
             dict(input_features=features[1:], decoder_input_ids=ids[1:])]
    steer = whisper._module.model.decoder.embed_tokens.weight[7].detach()  # not constant: a LayerNorm keeps it
    with torch.no_grad():
        with whisper.trace() as tracer:
            with tracer.invoke(calls[0]["input_features"], decoder_input_ids=calls[0]["decoder_input_ids"]):
                read_0 = whisper.input_features.save()
                encoded_0 = whisper.encoder.stack_output.save()
                logits_0 = whisper.logits.save()
            with tracer.invoke(**calls[1]):
                read_1 = whisper.input_features.save()
                encoded_1 = whisper.encoder.stack_output.save()
                logits_1 = whisper.logits.save()
        with whisper.trace() as tracer:
            with tracer.invoke(**calls[0]):
                whisper.decoder.layers[0].layer_output[:] += steer
                edited = whisper.logits.save()
            with tracer.invoke(**calls[1]):
                beside = whisper.logits.save()
        alone = [whisper._module(**one) for one in calls]
    config = whisper.text_config
    read, encoded, logits = (read_0, read_1), (encoded_0, encoded_1), (logits_0, logits_1)
    for n, one in enumerate(calls):
        assert torch.equal(read[n], one["input_features"])
        within(encoded[n], alone[n].encoder_last_hidden_state, _roundings(config, ids.shape[1]))
        within(logits[n], alone[n].logits, _roundings(config, ids.shape[1]))
    within(beside, alone[1].logits, _roundings(config, ids.shape[1]))
    assert not torch.allclose(edited, alone[0].logits, atol=1e-2)


def test_whisper_invokes_that_do_not_batch_are_one_line_errors(whisper):
    features = _features(whisper, 1)["input_features"]
    ids = torch.tensor([[401, 402]])
    with pytest.raises(InputError, match="shapes .* run every clip through model.feature_extractor"):
        with whisper.trace() as tracer:
            with tracer.invoke(features, decoder_input_ids=ids):
                pass
            with tracer.invoke(features[..., :50], decoder_input_ids=ids):
                pass
    with pytest.raises(InputError, match="invoke 1: not features"):
        with whisper.trace() as tracer:
            with tracer.invoke(features, decoder_input_ids=ids):
                pass
            with tracer.invoke(ids):
                pass
    with pytest.raises(InputError, match="no decoder_input_ids; pass the transcript so far") as refused:
        with whisper.trace(features):
            pass
    assert "\n" not in str(refused.value)


def test_the_lens_on_each_stack_the_decoders_is_the_models_and_the_encoders_refuses(t5):
    """Issue 49: the lens on both stacks. The decoder's unembed is the model's own (final norm, T5's rescale, the
    tied head), checked on the last block against the logits the forward returns and, on block 0, against a plain
    computation from the module's weights; the encoder has no unembedding and says so in one line."""
    from nncanon.core.values import NotOnHost

    module = t5._module
    with t5.trace("The cat sat on the mat"):
        stream = t5.decoder.layers[0].layer_output.save()
        first = t5.decoder.unembed(stream).save()
        last = t5.decoder.unembed(t5.decoder.layers[-1].layer_output).save()
        logits = t5.logits.save()
    assert torch.equal(last, logits)
    with torch.no_grad():  # T5: the decoder's final RMS norm, then d_model ** -0.5, then the head tied to shared
        normed = module.decoder.final_layer_norm(stream)
        plain = module.lm_head(normed * module.config.d_model ** -0.5)
    assert torch.equal(first, plain)
    with pytest.raises(NotOnHost) as refused:
        with t5.trace("The cat sat on the mat"):
            t5.encoder.unembed(t5.encoder.layers[0].layer_output).save()
    line = str(refused.value)
    assert len(line.splitlines()) == 1 and "no unembedding" in line and "model.decoder.unembed" in line
