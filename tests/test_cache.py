"""The standard cache equals reading each value on its own, in its own trace, on several families: run on
its own (plain hooks, a trace only for values read inside a forward) and inside a trace."""

from __future__ import annotations

import pytest
import torch

import nncanon
from generator.recipe.family import get_family
from nncanon.core.cache import CacheError
from tests.conftest import PROMPTS


def _names(model) -> list[str]:
    """Every value this load serves, as the cache names them: root values by name, block values by their path
    from the block."""
    names = []
    for row in model.support():
        if not row.available or row.host.startswith("model.vision"):
            continue
        tail = row.host[len("model.layers[i]"):].lstrip(".") if row.host.startswith("model.layers[i]") else None
        if row.host == "model":
            names.append(row.name)
        elif tail is not None:
            names.append(f"{tail}.{row.name}" if tail else row.name)
    return list(dict.fromkeys(names))


def _alone(model, key: str):
    """The value at ``key`` read on its own in a trace of the prompts."""
    *path, name = key.split(".")
    with torch.no_grad(), model.trace(PROMPTS):
        host = model.get(".".join(path)) if path else model
        value = getattr(host, name).save()
    return value


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    return a == b


@pytest.mark.parametrize("family", ["llama", "qwen3_moe", "qwen3_5_moe_text"])
def test_cache_equals_reading_each_value(family):
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family(family)))
    names = _names(model)
    blocks = [1, 3]
    cache = model.cache(names, PROMPTS, blocks=blocks)
    with torch.no_grad(), model.trace(PROMPTS):
        inside = model.cache(names, blocks=blocks)
    assert list(inside) == list(cache)
    keys = list(cache)
    assert any(k.startswith("layers.3.") for k in keys) and not any(k.startswith("layers.0.") for k in keys)
    for key in keys:
        alone = _alone(model, key)
        assert _same(cache[key], alone), f"{family}: cache[{key!r}] differs from reading it alone"
        assert _same(inside[key], alone), f"{family}: the in-trace cache's {key!r} differs from reading it alone"


def test_cache_names_what_is_missing(model):
    with pytest.raises(CacheError, match=r"'mlp\.router_logit' is not a value of the root nor of any block"):
        model.cache(["mlp.router_logit"], PROMPTS)
    with pytest.raises(IndexError, match=r"block 9 is out of range: model.layers has 8 blocks"):
        model.cache(["layer_input"], PROMPTS, blocks=[9])
    cache = model.cache(["self_attn.attention_output", "linear_attn.attention_output"], PROMPTS, blocks=slice(2, 4))
    assert list(cache) == ["layers.2.linear_attn.attention_output", "layers.3.self_attn.attention_output"]


def test_a_cache_in_a_trace_that_patches_holds_what_the_forward_saw():
    """One trace, the same prompt in two invokes: the first takes a cache of block 1 and then zeroes block 1's
    output, the second zeroes block 0's output (upstream) and then takes its cache. Each cache holds its own
    invoke's row as the forward held it at each value's point: the patch upstream in, the edit made after the
    cache out. The truth is plain PyTorch hooks on the same batch, run by a trace that reads nothing: the
    probabilities are eager attention's own (output_attentions), the rest hooks' copies taken before the patch
    hooks, registered after them, edit."""
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family("llama")), attn_implementation="eager")
    names = ["layer_input", "self_attn.attention_probabilities", "self_attn.attention_output", "layer_output"]
    prompt = PROMPTS[0]
    with torch.no_grad(), model.trace(output_attentions=True) as tracer:
        with tracer.invoke(prompt):
            first = model.cache(names, blocks=[1])
            model.layers[1].layer_output[:] = 0  # after the cache was taken: not in it
        with tracer.invoke(prompt):
            model.layers[0].layer_output[:] = 0  # upstream of every cached value: in all of them
            second = model.cache(names, blocks=[1])

    layers = model._module.model.layers
    seen: dict[str, torch.Tensor] = {}

    def keep(key, pick):
        def hook(module, args, output):
            seen.setdefault(key, pick(args, output).clone())  # returns None: the output goes on unreplaced
        return hook

    def zero_row(row):
        def hook(module, args, output):
            output[row] = 0
        return hook

    handles = [layers[1].register_forward_hook(keep("layer_input", lambda a, o: a[0])),
               layers[1].self_attn.register_forward_hook(keep("self_attn.attention_output", lambda a, o: o[0])),
               layers[1].register_forward_hook(keep("layer_output", lambda a, o: o)),
               model._module.register_forward_hook(
                   keep("self_attn.attention_probabilities", lambda a, o: o.attentions[1])),
               layers[0].register_forward_hook(zero_row(1)), layers[1].register_forward_hook(zero_row(0))]
    try:
        with torch.no_grad(), model.trace([prompt, prompt], output_attentions=True):
            pass
    finally:
        for handle in handles:
            handle.remove()
    assert list(first) == list(second) == [f"layers.1.{name}" for name in names]
    for name in names:
        truth = seen[name]
        # the same batch through the same kernels: bit-equal
        assert torch.equal(first[f"layers.1.{name}"], truth[0:1]), f"the first invoke's cache of {name}"
        assert torch.equal(second[f"layers.1.{name}"], truth[1:2]), f"the patched invoke's cache of {name}"
    assert not torch.equal(truth[0:1], truth[1:2])  # the patch reached block 1
