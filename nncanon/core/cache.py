"""The standard cache: many values, on every block or a slice, in one forward, keyed by standard path.

    cache = model.cache(["layer_input", "mlp.router_logits", "logits"], prompts, blocks=range(2, 4))
    cache["layers.3.mlp.router_logits"]      # [batch, seq, num_experts]
    cache["logits"]                          # a root value: once, by its name

    with model.trace(prompts):               # inside a trace: filled as the forward runs, complete at its end
        cache = model.cache(["layer_input", "mlp.router_logits"])

A name is a root value (``logits``) or a value path from a block (``layer_input``,
``mlp.router_logits``, ``self_attn.attention_premix``), read on every block of ``blocks`` (all
by default) that has its host; a name no chosen block has is an error naming it.

Keys are dotted (``layers.3.mlp.router_logits``): the path ``model.get`` walks plus the value's
name, so a key needs no quoting and splits on dots; ``model.layers[3].mlp.router_logits`` is the
same value.

Inside a trace, every value goes through nnsight, in the order the forward produces them, as
measured by `nncanon.guards.order` (run ``model.support()`` or a cache on its own once before, so the order
is known: a trace cannot measure it), and is kept as a copy taken at its read. So a cache taken in a
trace that edits holds every value as the forward held it at its own point when the cache read it:
after every edit upstream of it and the edits made at that point before the ``model.cache`` call,
never one made after it (an in-place edit later in the trace does not reach back into the cache);
and only this invoke's rows, as any read in an invoke. Plain hooks would see the whole batch and
alias what later edits change, so they are kept for the run on its own, which edits nothing.

Run on its own (inputs given), the cache only reads, so it skips nnsight's per-read machinery:
a value read at a module's boundary (its input or output, a child's) is caught by a plain
PyTorch hook on the native module its locator resolves to, under ``torch.no_grad()``; only a
value read inside a forward (an op, a kernel tap) is read through one nnsight trace, in the
order the forward produces it. Each entry is what reading the value alone returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from nnsight.tracing.tracer import save

from .hosts import Host
from .locators import Tap
from .values import Value


class CacheError(KeyError):
    """A cache asked for a name no chosen block or the root serves."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Entry:
    key: str  #: ``layers.3.mlp.router_logits``
    host: Host
    value: Value
    block: int | None

    @property
    def hooked(self) -> bool:
        """Whether a plain PyTorch hook can catch it: a module's boundary, not an op or a tap."""
        return not self.value.locator.ops and not isinstance(self.value.locator, Tap)


class Cache(dict):
    """Standard path -> tensor, in forward order."""

    def __repr__(self) -> str:
        return f"Cache({len(self)} values: {', '.join(list(self)[:4])}{', ...' if len(self) > 4 else ''})"


def _blocks(model: Any, blocks: Any) -> list[int]:
    count = model.num_layers
    if blocks is None:
        return list(range(count))
    if isinstance(blocks, slice):
        return list(range(count))[blocks]
    chosen = [blocks] if isinstance(blocks, int) else list(blocks)
    for block in chosen:
        if not -count <= block < count:
            raise IndexError(f"cache: block {block} is out of range: model.layers has {count} blocks (0 to {count - 1})")
    return [b % count for b in chosen]


def resolve(model: Any, names: list[str] | str, blocks: Any = None) -> list[Entry]:
    """Every (key, host, value) the cache reads, in forward order."""
    names = [names] if isinstance(names, str) else list(names)
    root = {v.name: v for v in type(model).values()}
    entries: list[Entry] = []
    chosen = _blocks(model, blocks)
    for name in names:
        if not isinstance(name, str):
            from .inputs import InputError

            raise InputError(f"model.cache(names): {name!r} ({type(name).__name__}) is not a name; name each value by its standard "
                             f"path, e.g. 'layers.0.layer_output'")
        if name.startswith("model."):
            name = name[len("model."):]
        if name in root:
            model._require(root[name])
            entries.append(Entry(name, model, root[name], None))
            continue
        host_path, _, value_name = name.rpartition(".")
        found = False
        for block in chosen:
            envoy = model.layers[block]
            try:
                host = envoy.get(host_path) if host_path else envoy
            except AttributeError:
                continue
            value = next((v for v in type(host).values() if v.name == value_name), None) if isinstance(
                host, Host) else None
            if value is None:
                continue
            host._require(value)
            prefix = f"layers.{block}." + (f"{host_path}." if host_path else "")
            entries.append(Entry(prefix + value_name, host, value, block))
            found = True
        if not found:
            where = f"blocks {chosen}" if blocks is not None else "any block"
            raise CacheError(f"cache: {name!r} is not a value of the root nor of {where} of this "
                             f"{model.family} model; names are root values (logits) or paths from a block "
                             f"(layer_input, mlp.router_logits); model.support() lists them")
    return _in_forward_order(model, entries)


def _in_forward_order(model: Any, entries: list[Entry]) -> list[Entry]:
    from ..guards.order import positions
    from .hosts import pattern

    position = positions(model)
    first_block = min((position("model.layers[i]", "layer_input", b) for b in range(model.num_layers)), default=0.0)

    def key(entry: Entry) -> tuple:
        where = position(pattern(entry.host._standard_path()), entry.value.name, entry.block)
        if entry.block is not None:
            return (entry.block, where)
        return (-1 if where < first_block else math.inf, where)

    return sorted(entries, key=key)


# -- running ---------------------------------------------------------------------------------


def run(model: Any, names: list[str] | str, inputs: tuple, kwargs: dict, blocks: Any = None) -> Cache:
    """One forward on ``inputs`` reading ``names``: plain hooks for boundary values, a trace only for the rest."""
    entries = resolve(model, names, blocks)
    found: dict[str, Any] = {}
    handles = [_hook(entry, found) for entry in entries if entry.hooked]
    traced = [entry for entry in entries if not entry.hooked]
    try:
        with torch.no_grad():
            if traced:
                with model.trace(*inputs, **kwargs):
                    for entry in traced:
                        found[entry.key] = _copy(getattr(entry.host, entry.value.name)).save()
            else:
                args, forward = model._batch([(inputs, kwargs)], model._call)  # what a trace would call
                model._module(*args, **forward)
    finally:
        for handle in handles:
            handle.remove()
    return Cache((entry.key, found[entry.key]) for entry in entries if entry.key in found)


def _hook(entry: Entry, found: dict) -> Any:
    """A plain PyTorch hook on the native module ``entry``'s locator resolves to, keeping the value's first visit."""
    locator, value, host = entry.value.locator, entry.value, entry.host
    module = host._module if locator.module is None else host.get(locator.module)._module

    def keep(raw: Any) -> None:
        if entry.key not in found:  # a copy: the forward may write into this tensor later (Falcon's mlp_output +=)
            found[entry.key] = _copy(value.view.read(host, locator.select(raw)))

    if locator.io == "input":
        return module.register_forward_pre_hook(lambda m, args, kwargs: keep((args, kwargs)), with_kwargs=True)
    return module.register_forward_hook(lambda m, args, output: keep(output))


def _copy(value: Any) -> Any:
    """A tensor as it is at its read: a later in-place write of the forward does not reach it."""
    return value.clone() if isinstance(value, torch.Tensor) else value


def read(model: Any, names: list[str] | str, blocks: Any = None) -> Cache:
    """Inside a trace: every value through nnsight, in forward order, copied at its read and saved (see the module
    docstring for what a trace that edits puts in it)."""
    cache = Cache()
    for entry in resolve(model, names, blocks):
        value = getattr(entry.host, entry.value.name)
        cache[entry.key] = _copy(value)
    return save(cache)  # handed back after the trace, as a saved value is
