"""The standard cache equals reading each value on its own, in its own trace, on several families: run on
its own (plain hooks, a trace only for values read inside a forward) and inside a trace."""

from __future__ import annotations

import pytest
import torch

import nncanon
from nncanon.cache import CacheError
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

    model = nncanon.load(checkpoint_dir(family))
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
