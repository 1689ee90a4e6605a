"""The order a forward produces each host's values in, measured on the loaded model.

Reads in a trace must follow the forward, and the declared order of a host's values is not
always it (Qwen3.5-MoE runs its shared expert before the router; the token-by-token DeltaNet
kernel serves ``states`` before ``attention_head_outputs``). `forward_order` runs one short
forward with one nnsight worker per value (on the first module of each host kind), each
recording when it is served: the record is the order the model produced them in.

Measured once per load (attention, experts, kernel route), lazily, on a model whose weights
are real; a model on the meta device (a meta-first hub load before its first trace, `from_config`),
or one asked inside a trace, keeps the declared order: measuring needs a forward, which would
dispatch the weights.
A value this load does not serve, or the prompt does not reach (the vision encoder on a
text prompt), keeps its place after the declared value before it.
"""

from __future__ import annotations

from typing import Any

import torch

PROMPT = "The cat sat on the mat."


def _load_key(model: Any) -> tuple:
    from ..core import kernels

    return (model.attn_implementation, model.experts_implementation, kernels.route(model.family))


def _measurable(model: Any) -> bool:
    module = model._module
    on_meta = any(p.is_meta for p in module.parameters())
    return not on_meta and getattr(model, "tokenizer", None) is not None and not model.interleaver.interleaving


def forward_order(model: Any) -> dict[tuple[str, str], list[str]] | None:
    """(host pattern, host class name) -> the served values' names in the order the forward produced them;
    None when the model cannot run a forward here (meta weights, no tokenizer, inside a trace)."""
    cache = model.__dict__.setdefault("_forward_orders", {})
    key = _load_key(model)
    if key in cache:
        return cache[key]
    if not _measurable(model):
        return None
    speech = getattr(model.family_module, "speech_inputs", None)  # a model that takes no text: the family's call
    cache[key] = _measure(model, *speech(model)) if speech is not None else _measure(model)
    return cache[key]


def _signature(model: Any) -> dict[int, tuple]:
    """Block -> the host kinds under it (a DeltaNet block's differ from an attention block's)."""
    from ..core.hosts import index

    kinds: dict[int, list] = {}
    for kind in model.host_kinds():
        for path in kind.paths if kind.blocks is not None else ():
            kinds.setdefault(index(path), []).append((kind.host, kind.cls.__name__))
    return {block: tuple(sorted(found)) for block, found in kinds.items()}


def measure_on(model: Any, args: tuple, kwargs: dict) -> dict[tuple[str, str], list[str]]:
    """:func:`forward_order` measured on ``args``/``kwargs`` instead of the prompt: for a model with no tokenizer
    (the survey's, run on token ids), which :func:`positions` then reads."""
    cache = model.__dict__.setdefault("_forward_orders", {})
    cache[_load_key(model)] = _measure(model, args, kwargs)
    return cache[_load_key(model)]


def _measure(model: Any, args: tuple = (PROMPT,), kwargs: dict | None = None) -> dict[tuple[str, str], list[str]]:
    """One forward, one worker per value: on the root and on the first block of each kind of block."""
    from ..core.hosts import index

    signatures = _signature(model)
    representative: dict[tuple, int] = {}
    for block, signature in sorted(signatures.items()):
        representative.setdefault(signature, block)
    measured_blocks = set(representative.values())
    targets = []
    for kind in model.host_kinds():
        if kind.host.startswith(("model.vision", "model.projector")):
            continue  # a text prompt never runs the vision encoder
        paths = [p for p in kind.paths if index(p) in measured_blocks] if kind.blocks is not None else kind.paths[:1]
        for path in paths:
            relative = "" if path == "model" else path[len("model."):].replace("[", ".").replace("]", "")
            for value in kind.cls.values():
                # a value the release (or the survey's guessed tree) does not serve is not in the forward to order
                if all(condition.holds(model) for condition in value.conditions) and \
                        not model.missing_op(kind.cls, value.name):
                    targets.append(((kind.host, kind.cls.__name__), relative, value.name, index(path)))
    produced = _record(model, targets, args, kwargs or {})
    key = _load_key(model)
    model.__dict__.setdefault("_forward_sequences", {})[key] = (
        [(k[0], n, b) for k, n, b in produced], {b: representative[s] for b, s in signatures.items()})
    order: dict[tuple[str, str], list[str]] = {}
    for kind, name, _ in produced:
        names = order.setdefault(kind, [])
        if name not in names:
            names.append(name)
    return order


def _record(model: Any, targets: list[tuple], args: tuple, kwargs: dict) -> list[tuple]:
    """One forward on ``args``/``kwargs``, one invoke per target (key, relative path, value name, block), each
    appending (key, name, block) when served: the list is the order the forward produced them in."""
    from nnsight.intervention.interleaver import OutOfOrderError

    from ..core.values import Unavailable

    produced: list[tuple] = []
    try:
        with torch.no_grad(), model.trace() as tracer:
            with tracer.invoke(*args, **kwargs):
                pass
            for target in targets:
                with tracer.invoke():
                    host = model.get(target[1]) if target[1] else model
                    getattr(host, target[2])
                    produced.append((target[0], target[2], target[3]))
    except (OutOfOrderError, Unavailable):
        pass  # a value this input never reaches: the ones it reached are recorded
    return produced


def vision_block_sequence(model: Any, args: tuple, kwargs: dict) -> list[tuple[str, str]]:
    """The values of the vision encoder's first block and its sublayers, (host pattern, name), in the order one
    forward on ``args``/``kwargs`` (a prompt with images: a text prompt never runs the encoder) produced them."""
    from ..core.hosts import index

    targets = []
    for kind in model.host_kinds():
        if not kind.host.startswith("model.vision.layers[i]"):
            continue
        for path in kind.paths:
            if index(path) != 0:
                continue
            relative = path[len("model."):].replace("[", ".").replace("]", "")
            targets += [((kind.host, kind.cls.__name__), relative, value.name, 0) for value in kind.cls.values()
                        if all(condition.holds(model) for condition in value.conditions)]
    return [(key[0], name) for key, name, _ in _record(model, targets, args, kwargs)]


def positions(model: Any) -> Any:
    """``position(host, name, block)``: where the forward produces ``name`` of ``host`` (a pattern) on ``block``
    among its block's values and the root's; comparable within one block and with the root's; infinite when
    not measured. One lookup table per call, so ordering many values costs one measurement's lookups."""
    forward_order(model)
    sequence, representative = model.__dict__.get("_forward_sequences", {}).get(_load_key(model), ([], {}))
    index: dict[tuple, float] = {}
    for i, item in enumerate(sequence):
        index.setdefault(item, float(i))

    def position(host: str, name: str, block: int | None) -> float:
        want = representative.get(block) if block is not None else None
        return index.get((host, name, want), float("inf"))

    return position


def arrange(declared: list[str], measured: list[str] | None) -> list[str]:
    """``declared`` in ``measured``'s order; each value not measured right after the declared one before it."""
    if not measured:
        return list(declared)
    result = [name for name in measured if name in declared]
    for position, name in enumerate(declared):
        if name in result:
            continue
        before = next((declared[i] for i in range(position - 1, -1, -1) if declared[i] in result), None)
        result.insert(0 if before is None else result.index(before) + 1, name)
    return result


def called_block_sequence(model: Any, block: int, args: tuple, kwargs: dict) -> list[tuple[str, str]]:
    """The values of text block ``block``'s hosts, (host pattern, name), in the order one forward on
    ``args``/``kwargs`` produced them: for a block a text prompt never runs (mllama's cross-attention blocks run
    only on a call with images)."""
    from ..core.hosts import index

    targets = []
    for kind in model.host_kinds():
        if kind.blocks is None or kind.host.startswith(("model.vision", "model.projector")):
            continue
        for path in kind.paths:
            if index(path) == block:
                relative = path[len("model."):].replace("[", ".").replace("]", "")
                targets += [((kind.host, kind.cls.__name__), relative, value.name, block) for value in kind.cls.values()
                            if all(condition.holds(model) for condition in value.conditions)]
    return [(key[0], name) for key, name, _ in _record(model, targets, args, kwargs)]


def block_sequence(model: Any, block: int) -> list[tuple[str, str]] | None:
    """The values of ``block``'s hosts, (host pattern, name), in the one order the forward produced them
    (measured on the first block of its kind, across its hosts: the diagram draws it); None when the model
    cannot run a forward here."""
    if forward_order(model) is None:
        return None
    sequence, representative = model.__dict__["_forward_sequences"][_load_key(model)]
    want = representative.get(block)
    return [(host, name) for host, name, at in sequence if want is not None and at == want]
