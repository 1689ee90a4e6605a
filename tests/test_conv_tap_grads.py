"""The convolution tap (nncanon/parts/recurrent/conv.py) keeps the gradient where the forward puts it.

The tap serves the conv's own columns at ``{mixer}.conv.input``. The conv must run on the tensor it served: before,
it ran on transformers' own tensor, so LFM2's ``conv_input`` (served from those columns) sat off the autograd graph
and its ``.grad`` never matched the native one. The truth here is the Hugging Face module run without nnsight, the
native tensor caught by a plain hook (the conv function's argument, the mixer's call input: a forward pre-hook), one
plain backward of the same loss; nncanon's side is the value's ``.grad`` read inside ``with loss.backward():``.

Mamba-2's and the DeltaNet's mixers run their conv through the same tap but serve none of its columns: their
gradient at the mixer's input, which reaches it only through the conv (and the gate), must be untouched.
"""

from __future__ import annotations

import contextlib
import inspect

import pytest
import torch

import nncanon
from generator.recipe.family import get_family

pytestmark = pytest.mark.slow

PROMPT = "The cat sat on the mat because it was warm."


def _loss_weights(vocab: int) -> torch.Tensor:
    return torch.randn(vocab, generator=torch.Generator().manual_seed(0))


def _load(family: str):
    from generator.checkpoint.checkpoints import checkpoint_dir

    directory = checkpoint_dir(get_family(family))
    model = nncanon.load(directory)
    # transformers alone, never wrapped (nnsight's .source gives a wrapped forward its own copy of the globals)
    hf = type(model._module).from_pretrained(directory).eval()
    return model, hf


def _native_name(model, module) -> str:
    return next(name for name, m in model._module.named_modules() if m is module)


@contextlib.contextmanager
def _conv_argument(mixer: torch.nn.Module, seen: dict):
    """Catch what the plain mixer hands ``causal_conv1d_fn`` (its modeling module's global, wrapped here)."""
    modeling = inspect.getmodule(type(mixer))
    saved = modeling.causal_conv1d_fn
    running = []
    handles = [mixer.register_forward_pre_hook(lambda m, a: running.append(m)),
               mixer.register_forward_hook(lambda m, a, o: running.clear())]

    def caught(hidden_states, *args, **kwargs):
        if running:
            seen["conv"] = hidden_states
        return saved(hidden_states, *args, **kwargs)

    modeling.causal_conv1d_fn = caught
    try:
        yield
    finally:
        modeling.causal_conv1d_fn = saved
        for h in handles:
            h.remove()


def _plain_grad(model, hf, catch, prompt=PROMPT) -> torch.Tensor:
    """The gradient of the weighted logits at the tensor ``catch(hf, seen)`` catches, by plain autograd."""
    seen: dict[str, torch.Tensor] = {}
    encoded = model.tokenizer(prompt, return_tensors="pt") if isinstance(prompt, str) else {"input_ids": prompt}
    with catch(hf, seen):
        logits = hf(**encoded).logits
    grads = {}
    seen["conv" if "conv" in seen else "input"].register_hook(lambda g: grads.setdefault("g", g))
    (logits * _loss_weights(logits.shape[-1])).sum().backward()
    return grads["g"], seen


def _served_grad(model, get, prompt=PROMPT) -> tuple[torch.Tensor, torch.Tensor]:
    with model.trace(prompt):
        value = get(model)
        loss = (model.logits * _loss_weights(model.vocab_size)).sum()
        with loss.backward():
            grad = value.grad.save()
        value = value.save()
    return value, grad


def _close(got: torch.Tensor, expected: torch.Tensor) -> None:
    # float32 sums taken in another order (nnsight's backward): relative to the largest entry, as tests/test_grads.py
    scale = float(expected.abs().max())
    assert scale > 0
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=2e-6 * scale)


# a prompt longer than the conv's kernel (3), and one shorter: the cache pads its columns on the left, so the conv
# runs on more columns than the call's own
@pytest.mark.parametrize("prompt", [PROMPT, torch.tensor([[1, 7]])], ids=["long", "two-tokens"])
def test_lfm2_conv_input_grad_is_the_native_conv_arguments(prompt):
    """LFM2's ``conv_input`` (B · x) takes the gradient plain autograd gives the conv function's argument, its own
    columns, transposed as the value is laid out."""
    model, hf = _load("lfm2")
    block = list(model.text_config.layer_types).index("conv")
    name = _native_name(model, model.layers[block].conv._module)
    value, grad = _served_grad(model, lambda m: m.layers[block].conv.conv_input, prompt)
    expected, seen = _plain_grad(model, hf, lambda hf, seen: _conv_argument(hf.get_submodule(name), seen), prompt)
    assert isinstance(prompt, str) or seen["conv"].shape[-1] > value.shape[1]  # the short prompt's padded call
    torch.testing.assert_close(value, seen["conv"][..., -value.shape[1]:].transpose(1, 2), rtol=0, atol=0)
    _close(grad, expected[..., -value.shape[1]:].transpose(1, 2))


@contextlib.contextmanager
def _mixer_input(mixer: torch.nn.Module, seen: dict):
    def pre(module, args, kwargs):
        seen["input"] = args[0] if args else kwargs["hidden_states"]

    handle = mixer.register_forward_pre_hook(pre, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


@pytest.mark.parametrize("family,mixer", [("mamba2", "mixer"), ("qwen3_next", "linear_attn")])
def test_the_mixer_input_grad_through_the_tapped_conv_is_native(family, mixer):
    """What the mixer is called with (the block's ``attention_norm_output``) takes plain autograd's gradient: the
    tapped conv stays on the path from it to the logits."""
    model, hf = _load(family)
    block = next(i for i in range(len(model.layers)) if hasattr(model.layers[i]._module, mixer))
    name = _native_name(model, getattr(model.layers[block]._module, mixer))
    value, grad = _served_grad(model, lambda m: m.layers[block].attention_norm_output)
    expected, seen = _plain_grad(model, hf, lambda hf, seen: _mixer_input(hf.get_submodule(name), seen))
    torch.testing.assert_close(value, seen["input"], rtol=0, atol=0)
    _close(grad, expected)
