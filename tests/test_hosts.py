"""Hosts by (path, module class): a stack that mixes dense MLPs and mixtures at one path.

transformers' Qwen3-MoE keeps the blocks in ``mlp_only_layers`` dense (Qwen3MoeMLP) and makes the
others mixtures (Qwen3MoeSparseMoeBlock), both at ``model.layers.{i}.mlp``, as DeepSeek-V3 keeps its
first ``first_k_dense_replace`` blocks dense. The built-in qwen3_moe family refuses such a checkpoint
(the released ones are all sparse), so these tests register a variant of it that serves the dense MLP
too, on a tiny random checkpoint saved here. Values are checked against plain PyTorch hooks.
"""

from __future__ import annotations

import re
import sys
import types

import pytest
import torch

from generator.recipe.family import get_family

DENSE, SPARSE = [0, 2], [1, 3]
PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


def mixed_family() -> types.ModuleType:
    """qwen3_moe with the dense MLP as a host too, and no refusal of dense blocks."""
    from transformers.models.qwen3_moe import modeling_qwen3_moe as hf

    from nncanon.core.hosts import host
    from nncanon.core.model import StandardModel
    from nncanon.families import qwen3, qwen3_moe
    from nncanon.parts.blocks import decoder, mixture, mlp

    family = types.ModuleType("mixed_qwen3_moe")
    family.FAMILY = "qwen3_moe_mixed"
    family.MODEL_TYPES = ("qwen3_moe",)
    family.RENAME = qwen3_moe.RENAME
    family.ENVOYS = {**qwen3_moe.ENVOYS, hf.Qwen3MoeMLP: mlp.MLP}
    family.ROOT = host("MixedQwen3MoeStandardModel", StandardModel, values=decoder.ROOT_VALUES,
                       family_module=family)
    family.build = decoder.text_only(hf.Qwen3MoeForCausalLM)
    family.required_paths = qwen3.required_paths
    family.dim_sizes = mixture.moe_dim_sizes
    family.prepare = decoder.nothing_to_prepare
    family.layer_types = decoder.attention_layer_types
    return family


def save_tiny_mixed(directory, **config_kwargs) -> None:
    """A tiny random Qwen3-MoE with dense blocks 0 and 2, and the qwen3_moe tiny checkpoint's tokenizer."""
    from transformers import AutoTokenizer, Qwen3MoeConfig, Qwen3MoeForCausalLM

    from generator.checkpoint.checkpoints import checkpoint_dir

    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir(get_family("qwen3_moe")))
    torch.manual_seed(0)
    settings = dict(hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_experts=4,
                    num_experts_per_tok=2, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=8, vocab_size=len(tokenizer), mlp_only_layers=DENSE)
    settings.update(config_kwargs)
    module = Qwen3MoeForCausalLM(Qwen3MoeConfig(**settings))
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0, 0.5)
    module.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


@pytest.fixture(scope="module")
def family():
    from nncanon.families import register, unregister

    module = register(mixed_family())
    sys.modules[module.__name__] = module
    yield module
    unregister(module)
    sys.modules.pop(module.__name__, None)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mixed_qwen3_moe")
    save_tiny_mixed(directory)
    return directory


@pytest.fixture(scope="module")
def model(family, checkpoint):
    import nncanon

    return nncanon.load(checkpoint)


def test_the_checkpoint_mixes_dense_and_sparse_blocks(model):
    natives = [type(layer.mlp).__name__ for layer in model._module.model.layers]
    assert natives == ["Qwen3MoeMLP", "Qwen3MoeSparseMoeBlock", "Qwen3MoeMLP", "Qwen3MoeSparseMoeBlock"]
    assert model.family == "qwen3_moe_mixed"


def test_support_lists_each_host_class_with_its_blocks(model):
    rows = [r for r in model.support() if r.host == "model.layers[i].mlp"]
    kinds = {(r.host_class, r.blocks) for r in rows}
    assert kinds == {("Qwen3MoeMLP", (0, 2)), ("Qwen3MoeSparseMoeBlock", (1, 3))}
    by = {(r.host_class, r.name): r for r in rows}
    assert by[("Qwen3MoeSparseMoeBlock", "router_logits")].available
    assert by[("Qwen3MoeSparseMoeBlock", "router_logits")].covers == "blocks 1, 3"
    assert by[("Qwen3MoeMLP", "mlp_activation")].available
    assert not by[("Qwen3MoeSparseMoeBlock", "mlp_activation")].available
    assert ("Qwen3MoeMLP", "router_logits") not in by
    text = str(model.support())
    assert "model.layers[i].mlp (Qwen3MoeMLP), blocks 0, 2" in text
    assert "model.layers[i].mlp (Qwen3MoeSparseMoeBlock), blocks 1, 3" in text
    assert "model.layers[i].self_attn (Qwen3MoeAttention)\n" in text  # one class there: no blocks shown
    mlp_kinds = [k for k in model.host_kinds() if k.host == "model.layers[i].mlp"]
    assert [(k.cls.kind(), k.covers) for k in mlp_kinds] == [("dense MLP", "blocks 0, 2"),
                                                              ("mixture MLP", "blocks 1, 3")]
    assert mlp_kinds[1].paths == ("model.layers[1].mlp", "model.layers[3].mlp")


def test_values_on_each_kind_equal_plain_hooks(model):
    """router_logits of a sparse block is the gate's logits; mlp_output of a dense block the MLP's output,
    both as plain forward hooks on the native modules see them in the same forward."""
    seen = {}

    def keep(name):
        def hook(module, args, output):
            seen[name] = output

        return hook

    native = model._module  # the hooks see the same traced forward the values are read in
    handles = [native.model.layers[1].mlp.gate.register_forward_hook(keep("gate")),
               native.model.layers[2].mlp.register_forward_hook(keep("mlp"))]
    try:
        with torch.no_grad(), model.trace(PROMPTS):
            ids = model.input_ids.save()
            router = model.layers[1].mlp.router_logits.save()
            dense = model.layers[2].mlp.mlp_output.save()
    finally:
        for handle in handles:
            handle.remove()
    batch, seq = ids.shape
    assert router.shape == (batch, seq, 4)
    torch.testing.assert_close(router, seen["gate"][0].view(batch, seq, -1), rtol=0, atol=0)
    torch.testing.assert_close(dense, seen["mlp"], rtol=0, atol=0)
    assert router.abs().sum() > 0


def test_a_value_of_the_other_kind_names_the_blocks_that_have_it(model):
    import nncanon

    with pytest.raises(nncanon.NotOnHost) as raised:
        _ = model.layers[0].mlp.router_logits
    message = str(raised.value)
    assert ("router_logits is on the mixture MLP (Qwen3MoeSparseMoeBlock) of blocks 1, 3; "
            "block 0's mlp (Qwen3MoeMLP) is a dense MLP") in message
    assert isinstance(raised.value, AttributeError) and isinstance(raised.value, nncanon.Unavailable)
    assert not hasattr(model.layers[2].mlp, "expert_indices")
    assert model.layers[1].mlp.top_k == 2  # the sparse blocks are the mixture host


def test_a_dense_family_says_its_mlp_is_dense():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    llama = nncanon.load(checkpoint_dir(get_family("llama")))
    with pytest.raises(nncanon.NotOnHost, match=r"block 0's mlp \(LlamaMLP\) is a dense MLP; router_logits is a "
                                                r"value of a mixture MLP, which this llama model has on no block"):
        _ = llama.layers[0].mlp.router_logits
    with pytest.raises(AttributeError, match="print\\(model.support\\(\\)\\)"):  # not a standard name anywhere
        _ = llama.layers[0].mlp.no_such_value


def test_an_index_past_the_stack_names_its_size(model):
    with pytest.raises(IndexError, match=r"model.layers\[10\] is out of range: model.layers has 4 blocks \(0 to 3\)"):
        _ = model.layers[10]
    with pytest.raises(IndexError, match="has 4 blocks"):
        _ = model.layers[-5]
    assert model.layers[-1] is model.layers[3]
    assert len(model.layers[1:3]) == 2


# -- every op a value reads is checked at load -------------------------------------------------


def family_reading(op_chain: tuple[str, ...], name: str = "attention_scores") -> types.ModuleType:
    """The mixed family with ``name`` read at ``op_chain`` (a locator the family's forward may not have)."""
    from nncanon.core.hosts import host
    from nncanon.core.locators import op
    from nncanon.core.values import Value
    from nncanon.parts.attention import softmax as shared_attention

    original = next(v for v in shared_attention.Attention.values() if v.name == name)
    moved = Value(name, original.layout, original.description, op(*op_chain, io=original.locator.io),
                  conditions=original.conditions)
    family = mixed_family()
    attention = host("MisreadAttention", shared_attention.Attention, values=[moved])
    family.ENVOYS = {k: (attention if v is shared_attention.Attention else v) for k, v in family.ENVOYS.items()}
    return family


@pytest.fixture
def registered():
    from nncanon.families import register, unregister

    added = []

    def add(module):
        added.append(register(module))
        return module

    yield add
    for module in added:
        unregister(module)


def test_a_nested_op_the_forward_lacks_fails_the_load(registered, checkpoint):
    import nncanon

    registered(family_reading(("attention_interface_1", "torch_softmax_0")))
    with pytest.raises(nncanon.MissingOp) as raised:
        nncanon.load(checkpoint, attn_implementation="eager")
    message = str(raised.value)
    assert "model.layers[0].self_attn.attention_scores" in message
    assert "MisreadAttention on Qwen3MoeAttention" in message
    assert "eager_attention_forward (called at attention_interface_1) has no op torch_softmax_0" in message
    assert "the ops there with 'softmax': nn_functional_softmax_0" in message
    assert "\n" not in message
    # under sdpa the value is not served, so its nested op is not looked for
    model = nncanon.load(checkpoint)
    assert not next(r for r in model.support() if r.name == "attention_scores").available


def test_an_op_a_release_outside_the_verified_range_lacks_is_unavailable_naming_it(registered, checkpoint,
                                                                                    monkeypatch):
    """Outside the verified releases a missing op is the release's, not the family's: the load goes on and the
    one value is Unavailable, naming the release, in a read and in support()."""
    import nncanon
    from nncanon.guards import releases

    real = releases.installed
    monkeypatch.setattr(releases, "installed",
                        lambda package="transformers": "5.0.0" if package == "transformers" else real(package))
    monkeypatch.setattr(releases, "_warned", set())
    registered(family_reading(("attention_interface_1", "torch_softmax_0")))
    verified = re.escape(releases.RANGES["transformers"])  # the declared range, whatever it is today
    with pytest.warns(releases.UnverifiedRelease, match=rf"verified on transformers {verified}; transformers "
                                                         r"5\.0\.0 is installed"):
        model = nncanon.load(checkpoint, attn_implementation="eager")
    with pytest.raises(nncanon.Unavailable, match=r"model.layers\[1\].self_attn.attention_scores is unavailable: "
                                                  rf"transformers 5\.0\.0 \(outside the verified {verified}\) "
                                                  r"has no op .*torch_softmax_0"):
        _ = model.layers[1].self_attn.attention_scores
    row = next(r for r in model.support() if r.name == "attention_scores")
    assert not row.available and "transformers 5.0.0" in row.condition
    with model.trace(PROMPTS):  # the rest of the attention still reads
        model.layers[1].self_attn.attention_output.save()


def test_a_first_level_op_the_forward_lacks_fails_the_load(registered, checkpoint):
    import nncanon

    registered(family_reading(("attention_interfaces_1",), name="attention_head_outputs"))
    with pytest.raises(nncanon.MissingOp, match=r"attention_head_outputs \(MisreadAttention on Qwen3MoeAttention\) "
                                                r"reads the op attention_interfaces_1, but "
                                                r"Qwen3MoeAttention.forward has no op attention_interfaces_1 "
                                                r"\(the ops there spelled like it: attention_interface_1"):
        nncanon.load(checkpoint)


def test_a_missing_op_read_in_a_trace_names_the_value(registered, checkpoint, monkeypatch):
    """An op the load could not check (resolved only at run time) fails the read with the same message."""
    import nncanon
    from nncanon.core import sources

    registered(family_reading(("attention_interface_1", "torch_softmax_0")))
    monkeypatch.setattr(sources, "check_ops", lambda envoy, ops: None)  # where the wrap checks the ops
    model = nncanon.load(checkpoint, attn_implementation="eager")
    with pytest.raises(nncanon.MissingOp, match=r"model.layers\[1\].self_attn.attention_scores .*has no op "
                                                r"torch_softmax_0 \(the ops there with 'softmax': "
                                                r"nn_functional_softmax_0"):
        with model.trace(PROMPTS):
            model.layers[1].self_attn.attention_scores.save()
