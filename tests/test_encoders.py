"""The encoder parts (nncanon/parts/encoders/) on bert's tiny checkpoint: what a decoder's checks would miss.

The build proves every relation (python -m generator verify bert); these check what makes an encoder one, by
effect on the output: a later token's edit moves an earlier token's logits (nothing is causal), the decoder's
causal-mask relation does not hold on it, a text pair's token types reach the model, the lens applies the MLM
head's transform, and a config-only load (meta, no weights) needs no tokenizer.
"""

from __future__ import annotations

import pytest
import torch

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


#: the encoder families the shared tests run on (each builds on nncanon/parts/encoders/)
ENCODERS = ("bert", "roberta")


def _load(family: str):
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    return nncanon.load(checkpoint_dir(get_family(family)), attn_implementation="eager")


@pytest.fixture(scope="module", params=ENCODERS)
def encoder(request):
    return _load(request.param)


@pytest.fixture(scope="module")
def model():
    return _load("bert")


@pytest.fixture(scope="module")
def roberta():
    return _load("roberta")


def test_an_encoder_loads_under_its_own_pipeline_padding_on_the_right(encoder):
    model = encoder
    assert model.task == "feature-extraction" and model.tokenizer.padding_side == "right"
    assert not any(row.name == "next_token_probs" for row in model.support())


def test_a_later_tokens_edit_moves_an_earlier_tokens_logits(encoder):
    """Bidirectional by effect: nudging the last token's stream in block 0 changes the first token's logits."""
    model = encoder
    with torch.no_grad():
        with model.trace(PROMPTS[0]):
            before = model.logits.save()
        with model.trace(PROMPTS[0]):
            model.layers[0].layer_output[:, -1] += 1.0
            after = model.logits.save()
    assert not torch.allclose(before[:, 0], after[:, 0])


def test_the_decoders_causal_pattern_does_not_hold_on_an_encoder(encoder):
    """softmax's recomputation under the causal mask misses the read pattern; under the host's padding mask it holds."""
    model = encoder
    from nncanon.parts.attention.softmax import attending, causal_mask, pattern
    from nncanon.parts.encoders.bidirectional import padding_mask

    attention = model.layers[1].self_attn
    with torch.no_grad(), model.trace(PROMPTS):
        mask = model.attention_mask.save()
        queries, keys = attention.attention_queries.save(), attention.attention_keys.save()
        probabilities = attention.attention_probabilities.save()
    real = mask[0].bool()  # the longer prompt: no padding
    module = attending(attention)
    _, causal = pattern(module, queries, keys, mask, causal_mask)
    _, both_ways = pattern(module, queries, keys, mask, padding_mask)
    assert torch.allclose(both_ways[0][:, real][..., real], probabilities[0].double()[:, real][..., real], atol=1e-5)
    assert not torch.allclose(causal[0], probabilities[0].double(), atol=1e-3)
    assert float(probabilities[1][..., ~mask[1].bool()].abs().max()) == 0.0  # padded keys: nothing, every query


def test_a_text_pair_reaches_the_model_with_its_token_types(model):
    pair = model.tokenizer("the river ran low", "the market fills with voices", return_tensors="pt")
    with torch.no_grad(), model.trace(pair):
        types = model.token_type_ids.save()
        typed = model.token_type_embeddings.save()
    assert types.tolist() == pair["token_type_ids"].tolist() and 1 in types.tolist()[0]
    table = model._module.bert.embeddings.token_type_embeddings.weight
    assert torch.equal(typed, table[types])


def test_the_lens_applies_the_heads_transform(encoder):
    model = encoder
    with torch.no_grad(), model.trace(PROMPTS[0]):
        lens = model.unembed(model.layers[-1].layer_output).save()
        logits = model.logits.save()
    assert torch.allclose(lens, logits, atol=1e-5)


def test_a_config_only_encoder_needs_no_tokenizer():
    from transformers import BertConfig

    import nncanon

    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=24, max_position_embeddings=32)
    model = nncanon.from_config(config)
    assert model.task == "feature-extraction" and model.dim_sizes()["intermediate_size"] == 24
    rows = {(row.host, row.name): row.available for row in model.support()}
    assert rows[("model.layers[i]", "layer_mid")] and not rows[("model.layers[i]", "attention_norm_output")]


def _positions_fed_to_the_table(module, inputs) -> tuple:
    """The ids the position table is called with and its output, caught by a plain forward hook."""
    caught = {}
    table = module.roberta.embeddings.position_embeddings
    handle = table.register_forward_hook(lambda mod, args, out: caught.update(ids=args[0].clone(), out=out.clone()))
    try:
        with torch.no_grad():
            module(**inputs)
    finally:
        handle.remove()
    return caught["ids"], caught["out"]


def test_roberta_positions_start_past_the_padding_row(roberta):
    """Counted by hand: a real token at column j of its row reads row pad + 1 + j (padding is on the right), a
    padding token row pad; position_embeddings is the table's output at those rows, per token."""
    batch = roberta.tokenizer(PROMPTS, padding=True, return_tensors="pt")
    pad = roberta._module.config.pad_token_id
    fed, out = _positions_fed_to_the_table(roberta._module, batch)
    lengths = batch["attention_mask"].sum(1).tolist()
    expected = [[pad + 1 + j if j < n else pad for j in range(batch["input_ids"].shape[1])] for n in lengths]
    assert fed.tolist() == expected and expected[0][0] == 2 and expected[1][-1] == 1
    with torch.no_grad(), roberta.trace(batch):
        positions = roberta.position_embeddings.save()
    assert positions.shape == out.shape and torch.equal(positions, out)


def test_roberta_padding_changes_nothing_a_real_token_reads(roberta):
    """By effect: the shorter prompt right-padded in a batch gives the logits it gives alone, at every real token
    (positions numbered from the row's own start, padded keys masked)."""
    with torch.no_grad():
        with roberta.trace(PROMPTS):
            mask = roberta.attention_mask.save()
            batched = roberta.logits.save()
        with roberta.trace(PROMPTS[1]):
            alone = roberta.logits.save()
    real = int(mask[1].sum())
    assert real < mask.shape[1] and torch.allclose(batched[1, :real], alone[0], atol=1e-4)


def test_roberta_passes_no_token_types_and_embeds_its_one_row(roberta):
    pair = roberta.tokenizer("the river ran low", "the market fills with voices", return_tensors="pt")
    assert "token_type_ids" not in pair and roberta._module.config.type_vocab_size == 1
    ids = pair["input_ids"][0].tolist()
    sep = roberta.tokenizer.sep_token_id
    assert ids[0] == roberta.tokenizer.cls_token_id and ids[-1] == sep and [sep, sep] in [ids[i:i + 2] for i in range(len(ids))]
    with torch.no_grad(), roberta.trace(pair):
        types = roberta.token_type_ids.save()
        typed = roberta.token_type_embeddings.save()
    row = roberta._module.roberta.embeddings.token_type_embeddings.weight[0]
    assert not types.any() and torch.equal(typed, row.expand_as(typed))


def test_roberta_head_is_gelu_layernorm_then_the_tied_decoder(roberta):
    """The head's math written out in plain torch, against the model's logits."""
    head = roberta._module.lm_head
    with torch.no_grad():
        with roberta.trace(PROMPTS[0]):
            last = roberta.layers[-1].layer_output.save()
            logits = roberta.logits.save()
        x = head.dense(last)
        x = 0.5 * x * (1 + torch.erf(x / 2 ** 0.5))
        x = torch.nn.functional.layer_norm(x, x.shape[-1:], head.layer_norm.weight, head.layer_norm.bias,
                                           head.layer_norm.eps)
        word = roberta._module.roberta.embeddings.word_embeddings.weight
        assert torch.allclose(x @ word.T + head.bias, logits, atol=1e-5)
