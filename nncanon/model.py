"""StandardModel: a Hugging Face model under nnsight, with standard names and values.

`load` reads a checkpoint's config, picks the family from its text config's model_type,
builds the model for the task, and wraps it in the family's root class: an nnsight
`TransformersModel` (so ``trace``, ``generate``, ``.save()`` and ``tracer.iter`` are
nnsight's own) whose tree uses the family's RENAME and host classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from nnsight.modeling.transformers import TransformersModel

from .hosts import Host
from .values import Unavailable, Value


class FamilyMismatch(ValueError):
    """A declared standard path does not resolve on the loaded model."""


@dataclass(frozen=True)
class Row:
    """One line of `support()`: a value on a host and whether this load serves it."""

    host: str
    host_class: str
    name: str
    layout: str
    dims: tuple[str, ...]
    description: str
    read_at: str
    conditional: bool
    available: bool
    condition: str | None


class Support(list):
    """The rows of `StandardModel.support`, printable as a table."""

    def __str__(self) -> str:
        lines, host = [], None
        for row in self:
            if row.host != host:
                host = row.host
                lines.append(f"{host} ({row.host_class})")
            mark = " " if row.available else "!"
            why = "" if row.available else f"   [{row.condition}]"
            lines.append(f"  {mark} {row.name:<26} {row.layout:<48} {row.read_at}{why}")
        return "\n".join(lines)


class StandardModel(Host, TransformersModel):
    """The root of a standardized model. Families subclass it with their root values."""

    HOST = "model"
    family_module: ModuleType | None = None

    # -- building ------------------------------------------------------------

    def _standardize(self) -> None:
        """Tie every host to this model, check the family's paths, install what reads need."""
        family = self.family_module
        self._token_shape: tuple[int, ...] | None = None
        self._hosts: list[Host] = []
        for path, envoy in self._standard_tree():
            if isinstance(envoy, Host) and envoy._std_model is None:
                envoy._std_model = self
                envoy._std_path = path
                self._hosts.append(envoy)
        self._std_model, self._std_path = self, "model"
        for required in family.required_paths(self):
            try:
                self.get(required)
            except AttributeError:
                raise FamilyMismatch(
                    f"{family.__name__}: the standard path model.{required} does not resolve on "
                    f"{type(self._module).__name__}; check RENAME in {family.__file__}") from None
        for envoy in self._hosts:
            if getattr(type(envoy), "TRACKS_TOKENS", False):
                envoy._module.register_forward_pre_hook(self._record_tokens, with_kwargs=True)
            for value in type(envoy).values():
                for module in value.locator.sourced_modules():
                    self._install_source(envoy, value, module)
        family.prepare(self)

    def _install_source(self, envoy: Host, value: Value, module: str | None) -> None:
        # A `.source` first touched mid-trace is not instrumented for that call, so every
        # op a value reads is installed now, and checked to exist.
        target = envoy if module is None else envoy.get(module)
        try:
            getattr(target.source, value.locator.ops[0])
        except AttributeError as error:
            raise FamilyMismatch(f"{self.family}: {envoy._std_path}.{value.name} reads "
                                 f"{value.locator.ops[0]}, which {type(target._module).__name__}'s forward "
                                 f"does not have ({error})") from None

    def _record_tokens(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        hidden = args[0] if args else kwargs["hidden_states"]
        self._token_shape = tuple(hidden.shape[:-1])

    def token_shape(self) -> tuple[int, ...]:
        """[batch, seq] of the block running now: how token-flattened values unflatten."""
        if self._token_shape is None:
            raise RuntimeError("no decoder block has run yet in this trace")
        return self._token_shape

    def _standard_tree(self, envoy: Host | None = None, path: str = "model"):
        """(standard path, envoy) for the tree under its standard names, mounts included."""
        envoy = self if envoy is None else envoy
        yield path, envoy
        names = {id(child): alias for alias, native in envoy._aliases.items()
                 if "." not in native for child in [getattr(envoy, alias)]}
        children = [(names.get(id(child), name), child) for name, child in envoy._named_children()]
        children += [(alias, getattr(envoy, alias)) for alias, native in envoy._aliases.items() if "." in native]
        for name, child in children:
            if name == "generator":
                continue
            sub = f"{path}[{name}]" if name.isdigit() else f"{path}.{name}"
            yield from self._standard_tree(child, sub)

    def _named_children(self) -> list:
        # The backbone (`model`) is shown through its mounts (layers, embed_tokens, ...),
        # as print(model) lists the standard tree, not the native one.
        mounted = {native.split(".")[0] for native in self._aliases.values() if "." in native}
        return [(name, child) for name, child in super()._named_children() if name not in mounted]

    # -- what the family says ---------------------------------------------------

    @property
    def family(self) -> str:
        return self.family_module.FAMILY

    @property
    def text_config(self) -> Any:
        return self._module.config.get_text_config()

    @property
    def attn_implementation(self) -> str:
        return self.text_config._attn_implementation

    @property
    def experts_implementation(self) -> str | None:
        return getattr(self.text_config, "_experts_implementation", None)

    @property
    def num_layers(self) -> int:
        return self.text_config.num_hidden_layers

    @property
    def hidden_size(self) -> int:
        return self.text_config.hidden_size

    @property
    def num_heads(self) -> int:
        return self.text_config.num_attention_heads

    @property
    def num_kv_heads(self) -> int:
        return self.text_config.num_key_value_heads

    @property
    def head_dim(self) -> int:
        config = self.text_config
        return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads

    @property
    def qk_head_dim(self) -> int:
        """The width of one query or key head (head_dim unless the family splits it)."""
        return self.family_module.qk_head_dim(self) if hasattr(self.family_module, "qk_head_dim") else self.head_dim

    @property
    def vocab_size(self) -> int:
        return self.text_config.vocab_size

    def dim_sizes(self) -> dict[str, int]:
        """The size of every layout dimension name on this model (batch and seq excepted)."""
        sizes = {"hidden_size": self.hidden_size, "vocab_size": self.vocab_size, "num_heads": self.num_heads,
                 "num_kv_heads": self.num_kv_heads, "head_dim": self.head_dim, "qk_head_dim": self.qk_head_dim}
        sizes.update(self.family_module.dim_sizes(self))
        return sizes

    # -- support and errors -------------------------------------------------------

    def host_classes(self) -> dict[str, tuple[type[Host], str]]:
        """Standard host name -> (host class, native module class name), one per kind of host."""
        found: dict[str, tuple[type[Host], str]] = {}
        for envoy in [self, *self._hosts]:
            name = type(envoy).HOST or envoy._std_path
            found.setdefault(name, (type(envoy), type(envoy._module).__name__))
        return found

    def support(self) -> Support:
        """Every value by host, with its layout, where it is read, and whether this load serves it."""
        rows = Support()
        for name, (cls, native) in self.host_classes().items():
            for value in cls.values():
                failing = [c for c in value.conditions if not c.holds(self)]
                condition = None
                if value.conditions:
                    first = failing[0] if failing else value.conditions[0]
                    condition = first.why if not first.needs else f"needs {first.needs}: {first.why}"
                note = value.note(self) if callable(value.note) else value.note
                if note:
                    condition = note if not failing else f"{condition}; {note}"
                rows.append(Row(name, native, value.name, str(value.layout), value.layout.dims,
                                value.description, value.read_at(), bool(value.conditions),
                                not failing, condition))
        return rows

    def _explain_missing(self, envoy: Host, name: str) -> str | None:
        """Why ``envoy`` has no ``name``, when ``name`` is a standard name somewhere else."""
        explain = getattr(self.family_module, "explain_missing", None)
        message = explain(self, envoy, name) if explain else None
        if message:
            return message
        owners = [host for host, (cls, _) in self.host_classes().items()
                  if any(v.name == name for v in cls.values())]
        if owners and type(envoy).HOST not in owners:
            return (f"{envoy._std_path} ({type(envoy._module).__name__}) has no value {name!r}: "
                    f"{name} is served on {', '.join(owners)}")
        return None


def load(checkpoint: str | Path, task: str = "text-generation", **hf_kwargs: Any) -> StandardModel:
    """Load ``checkpoint`` (a local directory) as a `StandardModel`.

    ``task`` is ``"text-generation"`` (the text model alone) or ``"image-text-to-text"``
    (the multimodal wrapper with its processor). ``hf_kwargs`` go to ``from_pretrained``
    (``attn_implementation``, ``experts_implementation``, ``dtype``, ...).
    """
    from .families import family_for

    checkpoint = Path(checkpoint)
    family = family_for(checkpoint)
    module, preprocessors = family.build(checkpoint, task, **hf_kwargs)
    return wrap(family, module, task, **preprocessors)


def wrap(family: ModuleType, module: torch.nn.Module, task: str, **preprocessors: Any) -> StandardModel:
    """Wrap an already built Hugging Face ``module`` (also a meta-device one) as ``family``."""
    model = family.ROOT(module.eval(), task=task, rename=family.RENAME, envoys=family.ENVOYS, **preprocessors)
    model._standardize()
    return model


__all__ = ["StandardModel", "load", "wrap", "Support", "Row", "Unavailable", "FamilyMismatch"]
