"""What a trace is given, checked before the forward: a bad input is one line naming the argument.

Left to the forward, ``trace(123)`` fails deep in transformers' pipeline ("can only concatenate str"),
a token id past the vocabulary as an ``IndexError`` in the embedding, and an empty tensor as a reshape
of 0 elements; and a value read outside a trace as nnsight's ``model.output``. Each becomes an
:class:`InputError` here, in the user's terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

_ACCEPTS = ("a prompt (str), a list of prompts, token ids (a list of ints, a list of such lists, or an integer "
            "tensor [batch, seq]) or the tokenizer's output")


class InputError(ValueError):
    """An input a trace or a cache call cannot run; the message names the argument and what it takes."""


def _positions(model: Any) -> int | None:
    """How many positions a learned absolute position embedding holds (gpt2's wpe), else None: rotary has no limit."""
    cached = model.__dict__.get("_nncanon_positions", False)
    if cached is not False:
        return cached
    found = None
    for name, module in model._module.named_modules():
        if isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in ("wpe", "embed_positions") \
                and "vision" not in name and "visual" not in name:
            found = module.num_embeddings
            break
    model.__dict__["_nncanon_positions"] = found
    return found


def _check_length(model: Any, length: int, where: str) -> None:
    limit = _positions(model)
    if limit is not None and length > limit:
        raise InputError(f"{where}: {length} tokens, over the {limit} positions the model's position embedding "
                         f"holds; shorten the prompt to {limit} tokens")


def _vocab(model: Any) -> int | None:
    try:
        return int(model._module.get_input_embeddings().num_embeddings)
    except (AttributeError, TypeError, NotImplementedError):
        return None


def _check_ids(ids: torch.Tensor, where: str, model: Any) -> None:
    if ids.numel() == 0:
        raise InputError(f"{where}: no tokens; pass at least one token id")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise InputError(f"{where}: token ids of dtype {ids.dtype}; pass integer ids (torch.long)")
    if ids.device.type == "meta":
        return
    _check_length(model, ids.shape[-1], where)
    vocab, low, high = _vocab(model), int(ids.min()), int(ids.max())
    if low < 0:
        raise InputError(f"{where}: token id {low} is negative; ids run from 0 to the vocabulary's size - 1")
    if vocab is not None and high >= vocab:
        raise InputError(f"{where}: token id {high} is outside the vocabulary (vocab_size {vocab}); ids run from 0 "
                         f"to {vocab - 1}")


def _as_ids(value: list) -> torch.Tensor | None:
    """A list of ints (or of equal-length lists of ints) as a tensor; None if it is not token ids."""
    def ints(row: Any) -> bool:
        return isinstance(row, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in row)

    if ints(value):
        return torch.tensor([value])
    if all(ints(row) for row in value) and len({len(row) for row in value}) == 1:
        return torch.tensor(value)
    return None


def check_input(model: Any, value: Any, where: str = "trace(input)") -> None:
    """Raise :class:`InputError` if ``value`` (one positional input of a trace or invoke) cannot run."""
    if isinstance(value, str):
        if _positions(model) is not None and getattr(model, "tokenizer", None) is not None:
            _check_length(model, len(model.tokenizer(value)["input_ids"]), where)
        return
    if isinstance(value, torch.Tensor):
        _check_ids(value, where, model)
        return
    if isinstance(value, Mapping):
        if isinstance(value.get("input_ids"), torch.Tensor):
            _check_ids(value["input_ids"], f"{where}['input_ids']", model)
        return
    if isinstance(value, list):
        if not value:
            raise InputError(f"{where}: an empty list; pass {_ACCEPTS}")
        if all(isinstance(p, str) for p in value):
            for n, prompt in enumerate(value):
                check_input(model, prompt, f"{where}[{n}]")
            return
        ids = _as_ids(value)
        if ids is not None:
            _check_ids(ids, where, model)
            return
        if all(isinstance(p, (str, dict, Mapping)) for p in value):  # chat messages, images with text
            return
    if type(value).__module__.startswith(("PIL", "numpy", "transformers")):
        return  # images and processor outputs: the processor judges them
    raise InputError(f"{where}: got {type(value).__name__} {_short(value)}; pass {_ACCEPTS}")


def check_inputs(model: Any, inputs: tuple, kwargs: Mapping) -> None:
    for n, value in enumerate(inputs):
        check_input(model, value, "trace(input)" if len(inputs) == 1 else f"trace(input {n})")
    if isinstance(kwargs.get("input_ids"), torch.Tensor):
        _check_ids(kwargs["input_ids"], "trace(input_ids=...)", model)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def cached_mask_left_to_the_model(invokes: list, args: tuple, kwargs: dict) -> tuple:
    """nnsight's batch of one invoke, without the attention mask it made when a cache is passed by another name.

    nnsight 0.8.1 adds an all-ones attention mask unless an invoke passes ``past_key_values``; a cache passed as
    ``cache`` (5.24's name) or ``cache_params`` then got a mask over the new tokens only, which moves a continued
    prompt's logits (falcon_h1: by 0.087) with no error. The model builds the cached mask itself."""
    if len(invokes) == 1:
        inputs, given = invokes[0]
        data = inputs[0] if inputs and hasattr(inputs[0], "keys") else {}
        if any(given.get(name) is not None for name in ("cache", "cache_params")) and not (
                "attention_mask" in given or "attention_mask" in data):
            kwargs = {k: v for k, v in kwargs.items() if k != "attention_mask"}
    return args, kwargs
