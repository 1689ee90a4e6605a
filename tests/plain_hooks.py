"""Plain PyTorch hooks the tests take their truth from (no nnsight, no nncanon)."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def mixer_calls(model, layer):
    """Every call's (hidden_states, attention_mask, output) of the block's DeltaNet, by a forward hook."""
    seen = []

    def hook(module, args, kwargs, output):
        hidden = args[0] if args else kwargs["hidden_states"]
        seen.append((hidden.detach(), kwargs.get("attention_mask"), output.detach()))

    handle = model._module.model.layers[layer].linear_attn.register_forward_hook(hook, with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()
