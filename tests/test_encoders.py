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


@pytest.fixture(scope="module")
def model():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    return nncanon.load(checkpoint_dir(get_family("bert")), attn_implementation="eager")


def test_an_encoder_loads_under_its_own_pipeline_padding_on_the_right(model):
    assert model.task == "feature-extraction" and model.tokenizer.padding_side == "right"
    assert not any(row.name == "next_token_probs" for row in model.support())


def test_a_later_tokens_edit_moves_an_earlier_tokens_logits(model):
    """Bidirectional by effect: nudging the last token's stream in block 0 changes the first token's logits."""
    with torch.no_grad():
        with model.trace(PROMPTS[0]):
            before = model.logits.save()
        with model.trace(PROMPTS[0]):
            model.layers[0].layer_output[:, -1] += 1.0
            after = model.logits.save()
    assert not torch.allclose(before[:, 0], after[:, 0])


def test_the_decoders_causal_pattern_does_not_hold_on_an_encoder(model):
    """softmax's recomputation under the causal mask misses the read pattern; under the host's padding mask it holds."""
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


def test_the_lens_applies_the_heads_transform(model):
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
