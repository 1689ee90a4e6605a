"""Errors in standard names: reads out of forward order, gradients out of reverse order, wrong shapes;
and support() listing each host's values in the order the forward produces them, measured.

The order's truth is plain PyTorch forward hooks: for every value read at a module's boundary
(its input or output, a child's), the order the hooks fire in a plain forward."""

from __future__ import annotations

import pytest
import torch

import nncanon
from generator.recipe.family import get_family
from nncanon.core.locators import Tap
from tests.conftest import PROMPTS


def test_a_read_out_of_order_names_both_values(model):
    # Qwen3.5-MoE runs its shared expert before its router
    with pytest.raises(nncanon.ReadOrderError) as caught:
        with model.trace(PROMPTS):
            model.layers[1].mlp.router_logits.save()
            model.layers[1].mlp.shared_experts.mlp_output.save()
    message = str(caught.value)
    assert message.startswith("model.layers[1].mlp.shared_experts.mlp_output was read after "
                              "model.layers[1].mlp.router_logits, but the forward computes "
                              "model.layers[1].mlp.shared_experts.mlp_output first"), message
    assert "must follow the forward's order" in message
    assert isinstance(caught.value, __import__("nnsight").intervention.interleaver.OutOfOrderError)


def test_a_nested_op_read_out_of_order_names_both_values(eager_model):
    """attention_probabilities is an op inside the attention call's own .source: locating it waits on the
    forward too, so a late read is the same ReadOrderError, not nnsight's op path."""
    with pytest.raises(nncanon.ReadOrderError) as caught:
        with eager_model.trace(PROMPTS):
            eager_model.layers[3].layer_output.save()
            eager_model.layers[3].self_attn.attention_probabilities.save()
    message = str(caught.value)
    assert message.startswith("model.layers[3].self_attn.attention_probabilities was read after "
                              "model.layers[3].layer_output"), message
    assert "source" not in message and "\n" not in message


def test_a_gradient_out_of_order_names_both_values(model):
    with pytest.raises(nncanon.ReadOrderError) as caught:
        with model.trace(PROMPTS):
            early = model.layers[0].layer_output
            late = model.layers[2].layer_output
            with model.logits.sum().backward():
                early.grad.save()
                late.grad.save()
    message = str(caught.value)
    assert message.startswith("model.layers[2].layer_output.grad was requested after "
                              "model.layers[0].layer_output.grad; gradients arrive in reverse forward order"), message


def test_assigning_a_wrong_shape_names_the_value_and_its_layout(model):
    with pytest.raises(nncanon.ShapeMismatch, match=r"^model\.layers\[1\]\.mlp\.router_logits is RouterLogits "
                                                    r"\[batch seq num_experts\], here \[2, \d+, 12\]; the assigned "
                                                    r"tensor is \[2, 3\]"):
        with model.trace(PROMPTS):
            model.layers[1].mlp.router_logits = torch.zeros(2, 3)


def test_dense_and_index_errors_say_what_there_is():
    from generator.checkpoint.checkpoints import checkpoint_dir

    llama = nncanon.load(checkpoint_dir(get_family("llama")))
    with pytest.raises(IndexError, match=r"model\.layers has 4 blocks \(0 to 3\)"):
        llama.layers[10]
    with pytest.raises(nncanon.NotOnHost, match=r"is a dense MLP; router_logits is a value of a mixture MLP"):
        llama.layers[1].mlp.router_logits  # noqa: B018


def _plain_order(model, block: int) -> list[tuple[str, str]]:
    """(host pattern, value) for every boundary value of block ``block`` and the root, in the order plain forward
    hooks fire (a pre-hook for an input, a hook for an output)."""
    fired: list[int] = []
    handles = []
    entries = []
    for kind in model.host_kinds():
        path = next((p for p in kind.paths if p == "model" or p.startswith(f"model.layers[{block}]")), None)
        if path is None:
            continue
        envoy = model if path == "model" else model.get(path[len("model."):].replace("[", ".").replace("]", ""))
        for value in kind.cls.values():
            locator = value.locator
            if locator.ops or isinstance(locator, Tap) or not all(c.holds(model) for c in value.conditions):
                continue
            module = envoy._module if locator.module is None else envoy.get(locator.module)._module
            tag = len(entries)
            entries.append((kind.host, value.name))
            if locator.io == "input":
                handles.append(module.register_forward_pre_hook(lambda m, a, tag=tag: fired.append(tag)))
            else:
                handles.append(module.register_forward_hook(lambda m, a, o, tag=tag: fired.append(tag)))
    try:
        with torch.no_grad():
            model._module(**model.tokenizer(PROMPTS, return_tensors="pt", padding=True))
    finally:
        for handle in handles:
            handle.remove()
    seen = list(dict.fromkeys(fired))
    return [entries[tag] for tag in seen]


@pytest.mark.parametrize("block", [1, 3])
def test_support_lists_values_in_the_order_plain_hooks_fire(model, block):
    rows = [(row.host, row.name) for row in model.support()]
    plain = _plain_order(model, block)
    for host in dict.fromkeys(h for h, _ in plain):
        expected = [name for h, name in plain if h == host]
        listed = [name for h, name in rows if h == host and name in expected]
        assert listed == expected, f"{host}: support() lists {listed}, plain hooks fire {expected}"


def test_the_token_route_serves_states_before_the_head_outputs(model):
    with nncanon.route_kernels(model.family, "torch"):
        names = [row.name for row in model.support() if row.host == "model.layers[i].linear_attn"]
    assert names.index("states") < names.index("attention_head_outputs") < names.index("state_output"), names
    # and the order holds in a trace: states is read before attention_head_outputs
    with nncanon.route_kernels(model.family, "torch"), model.trace(PROMPTS):
        states = model.layers[0].linear_attn.states.save()
        heads = model.layers[0].linear_attn.attention_head_outputs.save()
    assert states.shape[1] == heads.shape[1]


def _patch_in_a_loop(model, safe: bool, sliced: bool = False) -> list[float]:
    """Patch block l's last position from a clean invoke into a corrupt one, l = 0, 1, 2; how far the tensor the
    corrupt invoke used is from the clean value of block l. ``sliced``: the clean invoke saves the position's
    slice; and it binds ``ids`` too, which the corrupt invoke never reads."""
    import warnings

    from nncanon.guards.stale import StaleValueWarning

    errors = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StaleValueWarning)
        for layer in range(3):
            if safe and layer:
                del clean  # noqa: F821  (bound by the trace below, pushed back into this frame)
            with torch.no_grad(), model.trace() as tracer:
                if sliced:
                    with tracer.invoke(PROMPTS[0]):
                        ids = model.input_ids.save()  # noqa: F841  (bound again by every trace, read by none)
                        clean = model.layers[layer].layer_output[:, -1].save()
                    with tracer.invoke(PROMPTS[1]):
                        out = model.layers[layer].layer_output
                        used = clean.clone().save()
                        out[:, -1] = used
                else:
                    with tracer.invoke(PROMPTS[0]):
                        clean = model.layers[layer].layer_output.save()
                    with tracer.invoke(PROMPTS[1]):
                        out = model.layers[layer].layer_output
                        used = clean[:, -1].clone().save()
                        out[:, -1] = used
            with torch.no_grad(), model.trace(PROMPTS[0]):
                truth = model.layers[layer].layer_output.save()
            errors.append(float((used - truth[:, -1]).abs().max()))
    return errors, [w for w in caught if issubclass(w.category, StaleValueWarning)]


def test_a_stale_name_from_the_previous_trace_is_warned(model):
    errors, warned = _patch_in_a_loop(model, safe=False)
    # the batch is padded, the truth's run is not: equal to float noise when right, far off when stale
    assert errors[0] < 1e-5 and errors[1] > 0.1 and errors[2] > 0.1, errors  # nnsight 0.8.1 reads the old tensor
    assert len(warned) == 2 and "'clean' in this invoke is the tensor an earlier trace left" in str(warned[0].message)
    errors, warned = _patch_in_a_loop(model, safe=True)
    assert max(errors) < 1e-5 and not warned, errors


def test_a_stale_slice_is_warned_and_a_name_the_invoke_never_reads_is_not(model):
    errors, warned = _patch_in_a_loop(model, safe=False, sliced=True)
    assert errors[0] < 1e-5 and errors[1] > 0.1 and errors[2] > 0.1, errors  # the slice is stale too
    assert len(warned) == 2 and all("'clean' in this invoke" in str(w.message) for w in warned), \
        [str(w.message) for w in warned]
    errors, warned = _patch_in_a_loop(model, safe=True, sliced=True)  # del clean; ids stays, unread
    assert max(errors) < 1e-5 and not warned, [str(w.message) for w in warned]


# -- a name that is not here: what exists instead, and the fix, in one line ------------------------------------------


@pytest.fixture(scope="module")
def llama():
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("llama")))


def _missing(read) -> str:
    with pytest.raises(nncanon.NotOnHost) as caught:
        read()
    message = str(caught.value)
    assert "\n" not in message and isinstance(caught.value, AttributeError)  # hasattr stays False
    return message


def test_another_familys_value_names_the_family_and_its_host(llama):
    assert _missing(lambda: llama.layers[0].self_attn.kv_latent) == (
        "model.layers[0].self_attn has no kv_latent: kv_latent is a value of deepseek_v2, deepseek_v3, glm4_moe_lite "
        "and minicpm3's LatentAttention host; "
        "this llama model's attention (LlamaAttention) does not compute it (model.support() lists what it has)")


def test_a_mixer_the_block_does_not_have_names_the_one_it_has():
    from generator.checkpoint.checkpoints import checkpoint_dir

    mamba = nncanon.load(checkpoint_dir(get_family("mamba2")))
    assert _missing(lambda: mamba.layers[0].self_attn) == (
        "model.layers[0] has no self_attn: this mamba2 model's blocks mix tokens with mixer (a Mamba-2 mixer); "
        "read model.layers[0].mixer")


@pytest.mark.parametrize("read,theirs,standard", [
    (lambda m: m.layers[2].resid_post, "blocks.2.hook_resid_post", "model.layers[2].layer_output"),
    (lambda m: m.layers[2].hook_resid_post, "blocks.2.hook_resid_post", "model.layers[2].layer_output"),
    (lambda m: m.layers[2].hook_resid_pre, "blocks.2.hook_resid_pre", "model.layers[2].layer_input"),
    (lambda m: m.layers[2].self_attn.hook_z, "blocks.2.attn.hook_z", "model.layers[2].self_attn.attention_head_outputs"),
    (lambda m: m.layers[2].self_attn.hook_pattern, "blocks.2.attn.hook_pattern",
     "model.layers[2].self_attn.attention_probabilities"),
    (lambda m: m.layers[2].mlp.hook_post, "blocks.2.mlp.hook_post", "model.layers[2].mlp.mlp_neurons"),
    (lambda m: m.hook_embed, "hook_embed", "model.token_embeddings"),
    (lambda m: m.blocks, "blocks", "model.layers"),
    (lambda m: m.layers[2].ln1, "ln1", "model.layers[2].attention_norm_output"),
    (lambda m: m.layers[2].self_attn.hook_result, "blocks.2.attn.hook_result",
     "model.layers[2].self_attn.attention_head_results"),
], ids=["resid_post", "hook_resid_post", "hook_resid_pre", "hook_z", "hook_pattern", "hook_post", "hook_embed",
        "blocks", "ln1", "hook_result"])
def test_a_transformer_lens_name_says_the_standard_one(llama, read, theirs, standard):
    message = _missing(lambda: read(llama))
    assert message.endswith(f": {theirs} is TransformerLens's name; the standard name is {standard}"), message


@pytest.mark.parametrize("name,standard", [("layers_output", "model.layers[i].layer_output"),
                                           ("attentions_output", "model.layers[i].self_attn.attention_output"),
                                           ("mlps_output", "model.layers[i].mlp.mlp_output")])
def test_an_nnterp_name_says_the_standard_one(llama, name, standard):
    assert _missing(lambda: getattr(llama, name)) == (
        f"model has no {name}: {name} is nnterp's name; the standard name is {standard} (one per block)")


def test_a_value_the_model_serves_elsewhere_and_a_plain_typo(llama):
    assert _missing(lambda: llama.layers[0].attention_probabilities) == (
        "model.layers[0] (LlamaDecoderLayer) has no value 'attention_probabilities': attention_probabilities is "
        "served on model.layers[i].self_attn")
    # issue 51: a misspelling gets the host's closest names, anything else what the host has and support()
    assert _missing(lambda: llama.layers[0].layer_ouput) == (
        "model.layers[0] has no layer_ouput; did you mean model.layers[0].layer_output or model.layers[0].layer_input? "
        "(print(model.support()) lists every value and where it is read)")
    assert _missing(lambda: llama.logitz).startswith("model has no logitz; did you mean model.logits?")
    unknown = _missing(lambda: llama.layers[0].no_such_value)
    assert unknown.startswith("model.layers[0] (LlamaDecoderLayer) has no 'no_such_value': it is neither a standard "
                              "value nor a child or attribute of the module; it has layer_input, ")
    assert unknown.endswith("(print(model.support()) lists every value)") and "\n" not in unknown
    with pytest.raises(AttributeError) as caught:  # Python's and nnsight's own lookups: the bare error, and fast
        llama.layers[0]._no_such_slot  # noqa: B018
    assert not isinstance(caught.value, nncanon.NotOnHost)
    assert not hasattr(llama.layers[0], "no_such_value")  # still an AttributeError to hasattr


def test_reading_a_module_boundary_outside_a_trace_names_the_standard_value(llama):
    from nncanon.guards.errors import OutsideTrace

    for read, path, standard in [(lambda: llama.layers[0].output, "model.layers[0].output", "model.layers[0].layer_output"),
                                 (lambda: llama.layers[0].input, "model.layers[0].input", "model.layers[0].layer_input"),
                                 (lambda: llama.output, "model.output", "model.logits")]:
        with pytest.raises(OutsideTrace) as caught:
            read()
        assert str(caught.value) == (f"{path} is read inside a `with model.trace(...)` block: outside one no forward "
                                     f"runs to read it from; the standard value there is {standard}")
    with torch.no_grad(), llama.trace("The cat sat"):  # inside one, nnsight's own .output as ever
        out = llama.layers[0].output.save()
        standard = llama.layers[0].layer_output.save()
    assert torch.equal(out, standard)
