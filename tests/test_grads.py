"""``.grad`` of every differentiable value equals plain autograd's gradient of the native tensor.

The truth: the Hugging Face module run without nnsight, the native tensors caught by plain
forward hooks (and, for a tensor made inside a forward, by wrapping the function that makes
it: the attention function, the softmax, the delta-rule kernel), ``retain_grad()`` on each,
one plain ``loss.backward()``. A value built from one of those by the module's own math (an
add's operand, a sum's summand) takes the gradient that math gives. nncanon's side: the value
read in a trace and ``v.grad`` read inside nnsight's ``with loss.backward():``.

A value that has no gradient (ids, indices, a stack made for the reader) raises `NoGradient`
naming it, and `support()` says so.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import nncanon
from generator.recipe.family import get_family
from nncanon.research.grads import NoGradient
from tests.conftest import PROMPTS

FAMILIES = ["llama", "qwen3_moe", "qwen3_5_moe_text"]


def _loss_weights(model) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(model.vocab_size, generator=generator)


def _first(x):
    return x[0] if isinstance(x, tuple) else x


@contextlib.contextmanager
def _native(hf, block: int):
    """Plain hooks on block ``block`` of the HF module ``hf``: name -> the native tensor."""
    layers = hf.model.layers if hasattr(hf.model, "layers") else hf.model.language_model.layers
    layer = layers[block]
    seen: dict[str, torch.Tensor] = {}
    handles, restore = [], []

    def out(name, module, pick=_first):
        handles.append(module.register_forward_hook(lambda m, a, o: seen.__setitem__(name, pick(o))))

    def inp(name, module, pick=lambda a, k: a[0] if a else next(iter(k.values()))):
        handles.append(module.register_forward_pre_hook(lambda m, a, k: seen.__setitem__(name, pick(a, k)),
                                                        with_kwargs=True))

    out("model.logits", hf, lambda o: o.logits)
    out("model.token_embeddings", hf.model.embed_tokens if hasattr(hf.model, "embed_tokens") else None)
    out("model.final_norm_output", hf.model.norm)
    out("model.lm_head_output", hf.lm_head)
    inp("layer_input", layer)
    out("attention_norm_output", layer.input_layernorm)
    inp("layer_mid", layer.post_attention_layernorm)
    out("mlp_norm_output", layer.post_attention_layernorm)
    inp("mlp_input", layer.mlp)
    out("layer_output", layer)
    mlp = layer.mlp
    if hasattr(mlp, "experts"):
        router = getattr(mlp, "gate", None) or mlp.router
        out("mlp.router_logits", router)
        inp("mlp.expert_weights", mlp.experts, lambda a, k: a[2])
        out("mlp.routed_output", mlp.experts)
        out("mlp.mlp_output", mlp)
        shared = getattr(mlp, "shared_expert", None)
        if shared is not None:
            out("mlp.shared_experts.mlp_activation", shared.act_fn)
            inp("mlp.shared_experts.mlp_neurons", shared.down_proj)
            out("mlp.shared_experts.mlp_output", shared)
    else:
        out("mlp.mlp_activation", mlp.act_fn)
        inp("mlp.mlp_neurons", mlp.down_proj)
        out("mlp.mlp_output", mlp)
    if hasattr(layer, "self_attn"):
        attn = layer.self_attn
        out("self_attn.attention_output", attn)
        inp("self_attn.attention_premix", attn.o_proj)
        restore.append(_wrap_attention(attn, seen))
    else:
        mixer = layer.linear_attn
        out("linear_attn.attention_output", mixer)
        restore.append(_wrap_kernels(mixer, seen))
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()
        for undo in restore:
            undo()


def _wrap_attention(attn, seen):
    """Catch the attention function's arguments and output (and, under eager, its softmax's input and
    output) for this attention module, by wrapping the interface transformers looks the function up in."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    cls = type(ALL_ATTENTION_FUNCTIONS)
    original = cls.get_interface

    def get_interface(self, implementation, default):
        fn = original(self, implementation, default)

        def wrapped(module, query, key, value, *args, **kwargs):
            if module is not attn:
                return fn(module, query, key, value, *args, **kwargs)
            seen["self_attn.attention_queries"], seen["self_attn.attention_keys"] = query, key
            seen["self_attn.attention_values"] = value
            softmax, dropout = torch.nn.functional.softmax, torch.nn.functional.dropout

            def caught_softmax(x, *a, **k):
                seen["self_attn.attention_scores"] = x
                return softmax(x, *a, **k)

            def caught_dropout(x, *a, **k):
                y = dropout(x, *a, **k)
                seen["self_attn.attention_probabilities"] = y
                return y

            torch.nn.functional.softmax, torch.nn.functional.dropout = caught_softmax, caught_dropout
            try:
                result = fn(module, query, key, value, *args, **kwargs)
            finally:
                torch.nn.functional.softmax, torch.nn.functional.dropout = softmax, dropout
            seen["self_attn.attention_head_outputs"] = result[0]
            return result

        return wrapped

    cls.get_interface = get_interface
    return lambda: setattr(cls, "get_interface", original)


def _wrap_kernels(mixer, seen):
    """Catch the delta-rule kernel's arguments and output by wrapping the modeling module's kernel names."""
    import inspect

    from nncanon.parts.recurrent.deltanet import KERNELS

    modeling = inspect.getmodule(type(mixer))
    saved = {name: getattr(modeling, name) for name in KERNELS}
    running = []  # the kernels are module-level: catch only this mixer's call
    handles = [mixer.register_forward_pre_hook(lambda m, a: running.append(m)),
               mixer.register_forward_hook(lambda m, a, o: running.clear())]

    def wrap(fn):
        def kernel(query, key, value, *args, **kwargs):
            if not running:
                return fn(query, key, value, *args, **kwargs)
            names = ("attention_queries", "attention_keys", "attention_values")
            for name, tensor in zip(names, (query, key, value)):
                seen[f"linear_attn.{name}"] = tensor
            seen["linear_attn.decays"], seen["linear_attn.betas"] = kwargs["g"], kwargs["beta"]
            result = fn(query, key, value, *args, **kwargs)
            seen["linear_attn.attention_head_outputs"] = result[0]
            return result
        return kernel

    softplus = torch.nn.functional.softplus

    def caught_softplus(*args, **kwargs):  # the DeltaNet's dt: softplus(a + dt_bias), inside the mixer only
        y = softplus(*args, **kwargs)
        if running:
            seen["linear_attn.time_steps"] = y
        return y

    for name, fn in saved.items():
        setattr(modeling, name, wrap(fn))
    torch.nn.functional.softplus = caught_softplus

    def restore():
        torch.nn.functional.softplus = softplus
        for name, fn in saved.items():
            setattr(modeling, name, fn)
        for h in handles:
            h.remove()

    return restore


def encode(model, prompts) -> dict:
    """The prompts padded together, with the positions nnsight passes a padded batch: each row's real
    tokens counted from 0 (nnsight/modeling/processing.py)."""
    encoded = dict(model.tokenizer(prompts, return_tensors="pt", padding=True))
    encoded["position_ids"] = (encoded["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    return encoded


def plain_module(model, directory):
    """The same checkpoint loaded by transformers alone, never wrapped: nnsight's ``.source`` rewrites a wrapped
    module's forward with a copy of its modeling module's globals, where the kernels wrapped here would not be seen."""
    config = model._module.config
    hf = type(model._module).from_pretrained(directory, attn_implementation=config._attn_implementation)
    return hf.eval()


def plain_grads(model, hf, block: int) -> dict[str, torch.Tensor]:
    """Every caught native tensor's gradient, by one plain backward of the HF module ``hf`` (no nnsight)."""
    encoded = encode(model, PROMPTS)
    with _native(hf, block) as seen:
        output = hf(**encoded)
    grads: dict[str, torch.Tensor] = {}
    for name, tensor in seen.items():
        if tensor.requires_grad:
            # a hook, not retain_grad: retain_grad on a view made by a multi-output op (the DeltaNet's
            # queries, a torch.split of one projection) reports a gradient that is not the view's
            tensor.register_hook(lambda grad, name=name: grads.__setitem__(name, grad))
    (output.logits * _loss_weights(model)).sum().backward()
    hf.zero_grad(set_to_none=True)
    if "linear_attn.decays" in grads and "linear_attn.time_steps" in seen:
        # decays = time_steps · A with A = -exp(A_log) per head (the module's own math): A's gradient sums the
        # decays' gradient times the time steps over batch and tokens
        grads["linear_attn.decay_rates"] = (grads["linear_attn.decays"] * seen["linear_attn.time_steps"]).sum((0, 1))
    return grads


def _by_math(name: str, grads: dict, shape) -> torch.Tensor | None:
    """Gradients the module's own math gives from a caught one: the mixture sums its slots' outputs
    (expert_outputs) and adds the gated shared expert (shared_expert_output) to the routed output."""
    if name == "mlp.expert_outputs":
        return grads["mlp.routed_output"].reshape(shape[0], shape[1], 1, shape[3]).expand(shape)
    if name == "mlp.shared_expert_output":
        return grads["mlp.mlp_output"].reshape(shape)
    return None


def nncanon_grad(model, host_path: str, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(value, value.grad) read in a trace of the two prompts, the loss the plain run uses."""
    weights = _loss_weights(model)
    with model.trace(PROMPTS):
        host = model.get(host_path) if host_path else model
        value = getattr(host, name)
        loss = (model.logits * weights).sum()
        with loss.backward():
            grad = value.grad.save()
        value = value.save()
    model._module.zero_grad(set_to_none=True)
    return value, grad


def _values(model):
    """(host path for model.get, key in the plain run, value) for every value served on block 1 and the root."""
    rows = {(row.host, row.name): row for row in model.support()}
    for kind in model.host_kinds():
        path = next((p for p in kind.paths if p == "model" or p.startswith(("model.layers[1]", "model.layers[3]"))),
                    None)
        if path is None:
            continue
        rel = path[len("model."):] if path != "model" else ""
        block = 3 if "layers[3]" in path else 1
        for value in kind.cls.values():
            if not rows[(kind.host, value.name)].available:
                continue
            tail = rel.split("]", 1)[1].lstrip(".") if "]" in rel else ""
            key = f"{tail}.{value.name}" if tail else (value.name if rel else f"model.{value.name}")
            yield rel.replace("[", ".").replace("]", ""), block, key, value


@pytest.mark.parametrize("family,load", [("llama", {}), ("llama", {"attn_implementation": "eager"}),
                                         ("qwen3_moe", {}), ("qwen3_5_moe_text", {})])
def test_grad_of_every_value_equals_plain_autograd(family, load):
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family(family)), **load)
    hf = plain_module(model, checkpoint_dir(get_family(family)))
    plain = {1: plain_grads(model, hf, 1), 3: plain_grads(model, hf, 3)}
    checked, no_grad = [], []
    for path, block, key, value in _values(model):
        if value.gradient is not None:
            no_grad.append(key)
            continue
        got, grad = nncanon_grad(model, path, value.name)
        grads = plain[block]
        expected = _by_math(key, grads, got.shape)
        if expected is None:
            assert key in grads, f"{family}: no plain reference for {path}.{value.name} ({key})"
            expected = grads[key].reshape(got.shape)  # as the value is laid out
        assert grad.shape == got.shape, f"{path}.{value.name}: grad {tuple(grad.shape)} vs value {tuple(got.shape)}"
        # float32 sums in another order (nnsight runs the backward single-threaded): relative to the largest entry
        scale = float(expected.abs().max()) or 1.0
        torch.testing.assert_close(grad, expected, rtol=1e-5, atol=2e-6 * scale,
                                   msg=lambda m, where=f"{path}.{value.name}": f"{where}: {m}")
        checked.append(key)
    assert len(checked) >= 12, checked
    assert "model.input_ids" in no_grad


def test_a_value_without_gradient_says_so(model):
    rows = {(row.host, row.name): row for row in model.support()}
    assert rows[("model.layers[i].mlp", "expert_indices")].gradient.startswith("it holds integers")
    assert rows[("model.layers[i].mlp", "router_logits")].gradient is None
    with pytest.raises(NoGradient, match=r"model\.layers\[1\]\.mlp\.expert_indices has no gradient: it holds integers"):
        with model.trace(PROMPTS):
            indices = model.layers[1].mlp.expert_indices
            loss = model.logits.sum()
            with loss.backward():
                indices.grad.save()


def _invoke_grad(model, weights, row: int) -> torch.Tensor:
    """router_logits.grad of invoke ``row`` of two, the loss on that invoke's own logits (nnsight narrows
    every read in an invoke, the logits too, to its rows)."""
    with model.trace() as tracer:
        with tracer.invoke(PROMPTS[0]):
            value = model.layers[1].mlp.router_logits
            if row == 0:
                with (model.logits * weights).sum().backward():
                    grad = value.grad.save()
        with tracer.invoke(PROMPTS[1]):
            value = model.layers[1].mlp.router_logits
            if row == 1:
                with (model.logits * weights).sum().backward():
                    grad = value.grad.save()
    return grad


def test_grad_of_one_invoke_of_two(model):
    """A view read in one of two invokes (nnsight narrows the batch to its rows): the gradient of its rows."""
    weights = _loss_weights(model)
    for row in (0, 1):
        grad = _invoke_grad(model, weights, row)
        # the plain run on the batch nnsight ran (the two prompts padded together), the loss on this row
        with _native(model._module, 1) as seen:
            out = model._module(**encode(model, PROMPTS))
        logits = seen["mlp.router_logits"]
        logits.retain_grad()
        (out.logits[row:row + 1] * weights).sum().backward()
        model._module.zero_grad(set_to_none=True)
        expected = logits.grad.reshape(len(PROMPTS), -1, logits.shape[-1])[row:row + 1]
        # the backward through the router's projection on another batch layout: one step (STEP)
        torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-5)
