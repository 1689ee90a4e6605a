"""What a trace is given, checked before the forward: a bad input is one line naming the argument.

Left to the forward, ``trace(123)`` fails deep in transformers' pipeline ("can only concatenate str"),
a token id past the vocabulary as an ``IndexError`` in the embedding, and an empty tensor as a reshape
of 0 elements; and a value read outside a trace as nnsight's ``model.output``. Each becomes an
:class:`InputError` here, in the user's terms.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch
from nnsight.modeling import processing

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
    if feature_input(model) is not None and isinstance(value, torch.Tensor) and value.is_floating_point():
        return  # a speech model's features: the model judges their shape
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


# -- what a feature-extraction pipeline would drop, and inputs that are features ---------------------------------


def settings_beside_text(model: Any, invokes: list) -> list:
    """The invokes with a text prompt tokenized when keywords ride beside it, so none is dropped.

    A model loaded under the feature-extraction pipeline (an encoder, an encoder-decoder: ``TEXT_TASK``) has nnsight
    split a prompt's keywords with that pipeline's ``_sanitize_parameters``, which keeps its tokenizer's
    (``truncation``, ``tokenize_kwargs``) and drops every other: ``generate("...", max_new_tokens=4)`` generated
    to the checkpoint's max_length, and ``trace("...", decoder_input_ids=ids)`` decoded the shifted prompt. Such a
    prompt is tokenized here by the pipeline's own preprocess, one row per prompt, and handed on as an encoding
    beside its keywords, which nnsight batches row by row (``decoder_input_ids``) or passes to the call (settings)."""
    if model.task != "feature-extraction" or model.pipeline is None:
        return invokes
    own = set(inspect.signature(model.pipeline._sanitize_parameters).parameters) - {"kwargs"}
    kept = []
    for inputs, kwargs in invokes:
        data = inputs[0] if inputs else None
        prompts = [data] if isinstance(data, str) else data if isinstance(data, list) and data and all(
            isinstance(prompt, str) for prompt in data) else None
        rest = {key: value for key, value in kwargs.items() if key not in own}
        if prompts is None or not rest:
            kept.append((inputs, kwargs))
            continue
        preprocess, _, _ = model.pipeline._sanitize_parameters(**{k: v for k, v in kwargs.items() if k in own})
        rows = [model.pipeline.preprocess(prompt, **preprocess) for prompt in prompts]
        encoding = {key: [row[key] for row in rows] for key in rows[0] if isinstance(rows[0][key], torch.Tensor)}
        kept.append(((encoding, *inputs[1:]), rest))
    return kept


#: the inputs a speech model reads instead of token ids: log-mel features (Whisper) or the waveform (wav2vec2)
FEATURE_INPUTS = ("input_features", "input_values")


def feature_input(model: Any) -> str | None:
    """The model's input when it reads features (its ``main_input_name``), else None."""
    name = getattr(getattr(model, "_module", None), "main_input_name", None)
    return name if name in FEATURE_INPUTS else None


def as_features(model: Any, inputs: tuple, kwargs: Mapping) -> dict | None:
    """One invoke written in features as the model's keywords, else None: a float tensor (the features, positional
    as a prompt is), the feature extractor's output, or ``input_features=`` itself."""
    name, data = feature_input(model), inputs[0] if inputs else None
    if name is None:
        return None
    if isinstance(data, torch.Tensor) and data.is_floating_point():
        return {name: data, **kwargs}
    if isinstance(data, Mapping) and data.get(name) is not None:
        return {**data, **kwargs}
    if data is None and kwargs.get(name) is not None:
        return dict(kwargs)
    return None


def feature_rows(model: Any, inputs: tuple, kwargs: Mapping) -> int | None:
    """How many rows an invoke written in features gives the batch (its features' first dimension), else None."""
    call = as_features(model, inputs, kwargs)
    return None if call is None else int(call[feature_input(model)].shape[0])


def batch_features(model: Any, invokes: list) -> tuple | None:
    """The call of a trace whose invokes are written in features, each invoke's rows after the last's; None when
    they are not features. Features are stacked as they are (the extractor pads every clip to one window); the
    invokes' per-row text fields (``decoder_input_ids``) are split into rows and padded as nnsight pads a text batch
    (a target on the right); any other keyword is the call's."""
    calls = [as_features(model, inputs, kwargs) for inputs, kwargs in invokes]
    if all(call is None for call in calls):
        return None
    name = feature_input(model)
    if any(call is None for call in calls):
        raise InputError(f"invoke {calls.index(None)}: not features, beside an invoke of {name}; pass {name} (the "
                         "feature extractor's output or its tensor) in every invoke of the trace")
    if len(calls) == 1:
        return (), calls[0]
    shapes = [tuple(call[name].shape[1:]) for call in calls]
    if len(set(shapes)) > 1:
        raise InputError(f"invokes' {name} of shapes {', '.join(map(str, shapes))} per row: run every clip through "
                         "model.feature_extractor, which pads each to one window")
    items, forward = [], {}
    for n, call in enumerate(calls):
        count = call[name].shape[0]
        per_row = [{} for _ in range(count)]
        for key, value in call.items():
            if key not in processing.ROW_FIELDS or value is None:
                continue
            rows, _ = processing.split(key, value, True)
            if len(rows) != count:
                raise InputError(f"invoke {n}: {key} has {len(rows)} rows beside {count} rows of {name}; pass one "
                                 "per row")
            for item, row in zip(per_row, rows):
                item[key] = row
        items += per_row
        forward.update({key: value for key, value in call.items() if key not in processing.ROW_FIELDS and key != name})
    text = processing.collate(model, items) if items[0] else {}
    return (), {name: torch.cat([call[name] for call in calls]), **text, **forward}


def check_decoder_inputs(model: Any, kwargs: Mapping) -> None:
    """A speech encoder-decoder's forward needs the transcript so far: refused in one line when a call has none (given
    neither, transformers' Whisper says "You cannot specify both decoder_input_ids and decoder_inputs_embeds")."""
    name = feature_input(model)
    if name is None or not getattr(model._module.config, "is_encoder_decoder", False) or any(
            kwargs.get(key) is not None for key in ("decoder_input_ids", "decoder_inputs_embeds", "labels")):
        return
    start = getattr(model._module.config, "decoder_start_token_id", None)
    raise InputError(f"trace({name}=...): no decoder_input_ids; pass the transcript so far as decoder_input_ids (from "
                     f"decoder_start_token_id {start}), or call model.generate, which starts the decoder itself")
