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
ENCODERS = ("bert", "roberta", "xlm_roberta", "electra")


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


@pytest.fixture(scope="module")
def electra():
    return _load("electra")


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


def _gelu_then_norm(x, norm):
    """The MLM head's transform after its dense, written out: the exact (erf) GELU, then LayerNorm by its formula."""
    x = 0.5 * x * (1 + torch.erf(x / 2 ** 0.5))
    centered = x - x.mean(-1, keepdim=True)
    return centered / torch.sqrt(centered.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight + norm.bias


@pytest.mark.parametrize("family, transform, norm, bias", [
    ("roberta", "lm_head", "layer_norm", "lm_head.bias"),  # RobertaLMHead: dense, gelu, layer_norm, decoder
    ("electra", "generator_predictions", "LayerNorm", "generator_lm_head.bias"),  # back to embedding_size
])
def test_the_head_is_dense_gelu_layernorm_then_the_tied_decoder(family, transform, norm, bias):
    """The head's math in plain torch, against the model's logits, the decoder being the word embeddings."""
    model = _load(family)
    head = model._module.get_submodule(transform)
    with torch.no_grad():
        with model.trace(PROMPTS[0]):
            last = model.layers[-1].layer_output.save()
            logits = model.logits.save()
        x = _gelu_then_norm(head.dense(last), getattr(head, norm))
        word = model._module.get_input_embeddings().weight
        assert x.shape[-1] == word.shape[-1]
        assert torch.allclose(x @ word.T + model._module.get_parameter(bias), logits, atol=1e-5)


def test_xlm_roberta_tokenizer_is_a_unigram_with_fairseqs_ids():
    """Every word starts with ▁; a word the vocabulary holds is one piece, an unseen character <unk>; <s> <pad> </s>
    <unk> at 0-3 and <mask> last; a pair framed <s> A </s></s> B </s>, no token types, padding on the right."""
    model = _load("xlm_roberta")
    tok = model.tokenizer
    assert [tok.convert_ids_to_tokens(i) for i in range(4)] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert tok.mask_token_id == len(tok) - 1 == model._module.config.vocab_size - 1
    assert tok.tokenize("the river") == ["▁the", "▁river"] and tok.unk_token_id in tok("Zq")["input_ids"]
    pair = tok(["the river", "a"], ["ran low", "b"], padding=True)
    assert "token_type_ids" not in pair
    first = pair["input_ids"][0]
    assert first[0] == 0 and first[-1] == 2 and [2, 2] in [first[i:i + 2] for i in range(len(first))]
    assert pair["input_ids"][1][-1] == tok.pad_token_id == 1


def _catch(module, names: list[str], inputs: dict) -> dict:
    """Each named submodule's output (and the first block's input), caught by plain forward hooks."""
    caught, handles = {}, []
    for name in names:
        sub = module.get_submodule(name)
        handles.append(sub.register_forward_hook(lambda mod, args, out, name=name: caught.update({name: out})))
    block = module.electra.encoder.layer[0]
    handles.append(block.register_forward_pre_hook(lambda mod, args: caught.update(block=args[0])))
    try:
        with torch.no_grad():
            caught["logits"] = module(**inputs).logits
    finally:
        for handle in handles:
            handle.remove()
    return caught


def test_electra_projects_its_embeddings_to_the_stream(electra):
    """Plain hooks on the module: the embeddings are embedding_size wide, the projection's output is the first
    block's input, hidden_size wide, and nncanon's values are those tensors."""
    batch = electra.tokenizer(PROMPTS, padding=True, return_tensors="pt")
    caught = _catch(electra._module, ["electra.embeddings", "electra.embeddings_project"], batch)
    config = electra._module.config
    assert config.embedding_size != config.hidden_size
    assert caught["electra.embeddings"].shape[-1] == config.embedding_size
    assert caught["block"].shape[-1] == config.hidden_size
    assert torch.equal(caught["electra.embeddings_project"], caught["block"])
    with torch.no_grad(), electra.trace(batch):
        normed = electra.embedding_norm_output.save()
        projected = electra.embedding_projection_output.save()
    assert torch.equal(normed, caught["electra.embeddings"]) and torch.equal(projected, caught["block"])


def test_electra_an_edit_of_the_projection_is_what_the_first_block_reads(electra):
    """The same edit made by nncanon and by a plain forward hook on embeddings_project gives the same logits."""
    batch = electra.tokenizer(PROMPTS[0], return_tensors="pt")
    project = electra._module.electra.embeddings_project
    handle = project.register_forward_hook(lambda mod, args, out: out * 0.5)
    try:
        with torch.no_grad():
            by_hook = electra._module(**batch).logits
    finally:
        handle.remove()
    with torch.no_grad(), electra.trace(batch):
        electra.embedding_projection_output[:] = electra.embedding_projection_output * 0.5
        edited = electra.logits.save()
    with torch.no_grad(), electra.trace(batch):
        plain = electra.logits.save()
    assert torch.allclose(edited, by_hook, atol=1e-5) and not torch.allclose(edited, plain, atol=1e-3)


def test_a_config_only_electra_sizes_its_embeddings():
    from transformers import ElectraConfig

    import nncanon

    config = ElectraConfig(vocab_size=64, embedding_size=12, hidden_size=16, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=24, max_position_embeddings=32)
    model = nncanon.from_config(config)
    assert model.dim_sizes()["embedding_size"] == 12 and model.dim_sizes()["hidden_size"] == 16
    rows = {(row.host, row.name): row.available for row in model.support()}
    assert rows[("model", "embedding_projection_output")] and not rows[("model", "final_norm_output")]
