"""The proof chain (issue 47): every value a page lists lies on one chain of relations from the inputs to the logits
(generator/facts/chain.py). A llama whose attention lacks the link from its head outputs to the output projection's
input (a naive differential-attention family copied from llama: something stands between the two) is refused in one
line naming the two values; with the link, llama's chain is whole; and the link is an equation the forward must
satisfy, not a reading of one tensor twice: heads changed between the attention call and o_proj break it."""

from __future__ import annotations

import pytest
import test_meaning

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]

pytestmark = pytest.mark.slow

#: the tiny llama's family, module and checkpoint (test_meaning's fixture)
llama = test_meaning.llama

JOIN = ("model.layers[i].self_attn.attention_head_outputs and model.layers[i].self_attn.attention_premix are not "
        "joined by any relation")


def _prove(llama):
    from generator.facts.chain import check_family_chain
    from generator.facts.loads import resolve_loads
    from generator.facts.measure import run_inputs
    from generator.facts.proof import prove_family

    family, module, checkpoint = llama
    models = resolve_loads(family, module, checkpoint)
    try:
        facts = prove_family(family, models, models.all, lambda m: run_inputs(m, module, PROMPTS))
        check_family_chain(family, models)
        return facts
    finally:
        models.close()


def _attention_host(module):
    from nncanon.parts.attention.softmax import Attention

    assert Attention in module.ENVOYS.values()
    return Attention


def test_llamas_chain_is_whole(llama):
    texts = {fact["text"] for fact in _prove(llama)}
    assert "attention_premix == attention_head_outputs, the heads side by side" in texts


def test_an_attention_without_the_link_is_refused_in_one_line_naming_the_unjoined_values(llama, monkeypatch):
    from generator.facts.proof import RelationError
    from nncanon.parts.attention.softmax import SIDE_BY_SIDE_RELATION

    attention = _attention_host(llama[1])
    monkeypatch.setattr(attention, "RELATIONS", tuple(r for r in attention.RELATIONS if r is not SIDE_BY_SIDE_RELATION))
    with pytest.raises(RelationError) as raised:
        _prove(llama)
    message = str(raised.value)
    assert "\n" not in message, message
    assert JOIN in message and "state the relation that computes one from the other" in message, message


def test_heads_changed_between_the_call_and_o_proj_break_the_link(llama, monkeypatch):
    """What differential attention does there (a subtraction, a per-head norm), here a scale on one head: the link
    does not hold, so a family copied from llama cannot keep it and must state its own."""

    from generator.facts.loads import resolve_loads
    from generator.facts.measure import run_inputs
    from generator.facts.proof import RelationError, prove_family

    family, module, checkpoint = llama
    models = resolve_loads(family, module, checkpoint)
    try:
        for load in models.all:
            model = models.get(load.label)
            for layer in model._module.model.layers:
                def scale_first_head(mod, args, head_dim=layer.self_attn.head_dim):
                    x = args[0].clone()
                    x[..., :head_dim] *= 2.0
                    return (x, *args[1:])
                layer.self_attn.o_proj.register_forward_pre_hook(scale_first_head)
        with pytest.raises(RelationError, match=r"'attention_premix == attention_head_outputs, the heads side by side' "
                                                r"does not hold"):
            prove_family(family, models, models.all, lambda m: run_inputs(m, module, PROMPTS))
    finally:
        models.close()


def test_a_relation_removed_anywhere_breaks_the_chain_there(llama, monkeypatch):
    """The block's link from the MLP's output to the stream: without it the MLP is a branch to nowhere."""
    from generator.facts.proof import RelationError
    from nncanon.parts.blocks.decoder import Block

    monkeypatch.setattr(Block, "RELATIONS", tuple(r for r in Block.RELATIONS if not r.text.startswith("layer_mid + mlp")))
    with pytest.raises(RelationError, match=r"not joined by any relation|no relation stating"):
        _prove(llama)


def test_the_survey_row_of_differential_attention_says_which_link_broke():
    """diffllama's attention subtracts two softmax maps and norms each head between the attention call and o_proj:
    every other shared relation holds there, so the row said they all did; the chain names the link that broke."""
    from generator.survey.measure import survey

    diff, plain = survey("diffllama"), survey("llama")
    assert diff["relations"]["model.layers[i].self_attn: attention_premix == attention_head_outputs, the heads side "
                             "by side"] == "does not hold"
    assert diff["chain"] == JOIN
    assert plain["chain"] is None and all(why is None for why in plain["relations"].values())


def test_a_diffllama_family_copied_from_llama_is_refused_naming_the_unjoined_values(monkeypatch):
    """Issue 47's case as a contributor would make it: diffllama's own classes under llama's parts (its attention on
    llama's ``Attention`` host), with the two relations that do not hold there taken out (the side-by-side link, which
    differential attention breaks, and the weights' ``W_V`` relation, which once refused such a copy by chance). The
    rest hold; the chain check refuses the family in one line naming the two values nothing joins."""
    import importlib

    import nncanon.parts.weights as weights
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts.proof import RelationError
    from generator.recipe.family import get_family
    from nncanon.parts.attention.softmax import SIDE_BY_SIDE_RELATION, Attention

    family = get_family("diffllama")
    module = importlib.import_module(family.module)
    native = next(cls for cls in module.ENVOYS if cls.__name__ == "DiffLlamaAttention")
    copied = type("CopiedAttention", (Attention,), {
        "RELATIONS": tuple(r for r in Attention.RELATIONS if r is not SIDE_BY_SIDE_RELATION)})
    monkeypatch.setitem(module.ENVOYS, native, copied)
    own = weights.relations
    monkeypatch.setattr(weights, "relations", lambda host: [r for r in own(host) if " · W_V" not in r.text])
    with pytest.raises(RelationError) as raised:
        _prove((family, module, checkpoint_dir(family)))
    message = str(raised.value)
    assert "\n" not in message, message
    assert "proof chain" in message and JOIN in message, message
