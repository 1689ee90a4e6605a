"""In-place edits of read-only values are refused at the line, as assignment is; a writable value's in-place edit
still lands, equal to the same edit made by a plain PyTorch hook.

Read-only values come in two kinds: derived (a tensor computed for the reader: ``next_token_probs``, the DeltaNet's
``decay_rates``, gpt-oss's ``attention_sink_probability``), whose edit would change nothing, and read-only views of
the call's own inputs (``input_ids``, ``attention_mask``), which nncanon does not offer as edit points."""

from __future__ import annotations

import pickle

import pytest
import torch

import nncanon
from generator.recipe.family import get_family

#: every way Python code writes into a tensor: item assignment, an in-place method, augmented assignment, out=
EDITS = {
    "setitem": lambda t: t.__setitem__(slice(None), 0),
    "method": lambda t: t.zero_(),
    "augmented": lambda t: t.__iadd__(1),
    "out": lambda t: torch.add(t, 1, out=t),
}


def logits(model, prompts):
    with torch.no_grad(), model.trace(prompts):
        out = model.logits.save()
    return out


@pytest.mark.parametrize("how", list(EDITS))
@pytest.mark.parametrize("host,name,kind", [
    ("", "next_token_probs", "derived"),
    ("layers.1.linear_attn", "decay_rates", "derived"),
    ("", "input_ids", "input"),
    ("", "attention_mask", "input"),
])
def test_an_in_place_edit_of_a_read_only_value_is_refused(model, prompts, host, name, kind, how):
    envoy = model.get(host) if host else model
    path = f"model.{host}.{name}".replace("model..", "model.").replace(".layers.1.", ".layers[1].")
    with pytest.raises(nncanon.ReadOnly) as caught:
        with torch.no_grad(), model.trace(prompts):
            value = getattr(envoy, name)
            EDITS[how](value)
    message = str(caught.value)
    assert message.startswith(f"{path} is read-only ("), message
    assert "\n" not in message
    fix = "edit the value it is computed from" if kind == "derived" else "edit a value the forward computes from"
    assert fix in message, message


def test_assignment_says_the_same(model, prompts):
    for name in ("next_token_probs", "input_ids"):
        with pytest.raises(nncanon.ReadOnly) as assigned:
            with model.trace(prompts):
                setattr(model, name, getattr(model, name))
        with pytest.raises(nncanon.ReadOnly) as edited:
            with model.trace(prompts):
                getattr(model, name)[:] = 0
        assert str(assigned.value) == str(edited.value)


def test_the_sink_probability_refuses_an_in_place_edit():
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family("gpt_oss")))
    with pytest.raises(nncanon.ReadOnly, match=r"^model\.layers\[0\]\.self_attn\.attention_sink_probability is "
                                               r"read-only \(.*edit the value it is computed from"):
        with torch.no_grad(), model.trace("The cat sat"):
            model.layers[0].self_attn.attention_sink_probability[:] = 0


def test_reading_and_computing_from_a_read_only_value_is_unchanged(model, prompts):
    with torch.no_grad(), model.trace(prompts):
        ids = model.input_ids.save()
        raw = model.logits.save()
        probs = model.next_token_probs
        top = probs.topk(3).indices.save()  # a computation from it: a plain tensor
        doubled = (probs * 2).save()
        copy = probs.clone()
        copy[:] = 0  # a copy is the reader's own
    assert type(top) is torch.Tensor and type(doubled) is torch.Tensor
    expected = raw[:, -1].softmax(-1)
    torch.testing.assert_close(doubled, 2 * expected, rtol=0, atol=0)
    assert torch.equal(top, expected.topk(3).indices)
    # after the trace the saved value is the user's: editable, and it pickles as a plain tensor
    ids[0, 0] = 7
    back = pickle.loads(pickle.dumps(ids))
    assert type(back) is torch.Tensor and int(back[0, 0]) == 7


def test_a_writable_in_place_edit_still_lands(model, prompts):
    """Zeroing block 1's attention output in place equals a plain forward hook zeroing the module's output."""
    with torch.no_grad(), model.trace(prompts):
        model.layers[1].linear_attn.attention_output[:] = 0
        edited = model.logits.save()

    def zero(module, args, output):
        return torch.zeros_like(output)

    handle = model._module.model.layers[1].linear_attn.register_forward_hook(zero)
    try:
        hooked = logits(model, prompts)  # the edit made by the hook alone
    finally:
        handle.remove()
    assert torch.equal(edited, hooked)  # the same ops on the same numbers: bit-equal
    assert not torch.equal(edited, logits(model, prompts))
