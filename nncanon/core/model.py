"""StandardModel: a Hugging Face model under nnsight, with standard names and values.

`wrap` puts a built Hugging Face module (loaded, or on the meta device) under the family's root class: an
nnsight `TransformersModel` (so ``trace``, ``generate``, ``.save()`` and ``tracer.iter`` are nnsight's
own) whose tree uses the family's RENAME and host classes. `nncanon.core.loading` builds the module (`load`,
`from_config`); a meta-first model loads its weights in `StandardModel.dispatch`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from nnsight.intervention.envoy import Envoy
from nnsight.modeling.transformers import TransformersModel

from ..guards import releases
from ..research.weights import ROOT as ROOT_WEIGHTS
from . import inputs as given
from .building import ImplementationError
from .hosts import Host, HostKind, Stack, index, pattern, span
from .locators import FamilyMismatch, MissingOp
from .remote import run_on_server, ship_by_value
from .sources import install_sources
from .values import NotOnHost, Unavailable


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
    #: the blocks whose module at ``host`` is a ``host_class`` (None: a host with no index)
    blocks: tuple[int, ...] | None = None
    #: None when ``.grad`` of the value exists inside ``with loss.backward():``, else why it cannot
    gradient: str | None = None

    @property
    def covers(self) -> str:
        """``"blocks 0-2"``; ``""`` for a host with no index."""
        return span(self.blocks) if self.blocks else ""


class Support(list):
    """The rows of `StandardModel.support`, printable as a table; ``release`` says when the installed transformers
    is not one the family was verified on (`nncanon.releases.family_note`), else None."""

    release: str | None = None

    def __str__(self) -> str:
        classes: dict[str, set[str]] = {}
        for row in self:
            classes.setdefault(row.host, set()).add(row.host_class)
        lines, host = ([f"! {self.release}"] if self.release else []), None
        for row in self:
            if (row.host, row.host_class) != host:
                host = (row.host, row.host_class)
                mixed = f", {row.covers}" if len(classes[row.host]) > 1 and row.covers else ""
                lines.append(f"{row.host} ({row.host_class}){mixed}")
            mark = " " if row.available else "!"
            why = "" if row.available else f"   [{row.condition}]"
            lines.append(f"  {mark} {row.name:<26} {row.layout:<48} {row.read_at}{why}")
        return "\n".join(lines)


class StandardModel(Host, TransformersModel):
    """The root of a standardized model. Families subclass it with their root values."""

    HOST = "model"
    family_module: ModuleType | None = None
    #: W_E, W_U, b_U: views of the embedding's and the head's parameters (nncanon.weights)
    locals().update(ROOT_WEIGHTS)

    # -- building ------------------------------------------------------------

    def _standardize(self) -> None:
        """Tie every host to this model, check the family's paths, install what reads need."""
        family = self.family_module
        self._token_shape: tuple[int, ...] | None = None
        self._hosts: list[Host] = []
        self._kinds: list[HostKind] | None = None
        for path, envoy in self._standard_tree():
            if isinstance(envoy, Host) and envoy._std_model is None:
                envoy._std_model = self
                envoy._std_path = path
                self._hosts.append(envoy)
            elif isinstance(envoy, Stack):
                envoy._std_path = path
        self._std_model, self._std_path = self, "model"
        for required in family.required_paths(self):
            try:
                self.get(required)
            except AttributeError:
                raise FamilyMismatch(
                    f"{family.__name__}: the standard path model.{required} does not resolve on "
                    f"{type(self._module).__name__}; check RENAME in {family.__file__}") from None
        self._bind()

    def _bind(self) -> None:
        """What reads need on the modules under the tree: the token-shape hooks, the family's taps and the
        ``.source`` ops. Once per module tree: at load, after `dispatch` swaps the meta modules for loaded
        ones, and on an NDIF server over its own modules (`nncanon.core.remote`)."""
        if self.__dict__.get("_bound") is self._module:
            return
        for envoy in self._hosts:
            if getattr(type(envoy), "TRACKS_TOKENS", False):
                envoy._module.register_forward_pre_hook(self._record_tokens, with_kwargs=True)
        #: (host class, value name) -> why the installed release cannot serve it (an op or an argument it moved;
        #: see nncanon.releases), filled by the family's prepare and the op check
        self._missing_ops: dict[tuple[type, str], str] = {}
        self.family_module.prepare(self)
        self._install_sources()
        self._bound = self._module

    # -- weights, devices and remote runs -------------------------------------------

    def dispatch(self) -> None:
        """Load the weights of a meta-first model (``nncanon.load(..., dispatch=False)``) into its tree, with the
        ``dtype``, ``device_map``, ... it was loaded with; the first trace does it too. A no-op once loaded."""
        if self.dispatched:
            return
        from .building import load_weights

        module = load_weights(self)
        with self._native_tree():
            self._update(module)
        self.pipeline.model = module
        self.dispatched = True
        self._bind()

    def _wrap(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
        if self.tokenizer is None and self.processor is None and self.task == "feature-extraction":
            from transformers import (
                FeatureExtractionPipeline,  # an encoder from_config: as below, no tokenizer
            )

            self.pipeline = FeatureExtractionPipeline(model=module, tokenizer=None, device=kwargs.get("device"),
                                                      task="feature-extraction")
            return self._finalize_pipeline()
        if self.tokenizer is None and self.processor is None and self.task == "text-generation":
            # nncanon.from_config with no tokenizer: the tree, support() and the shapes need none, and
            # transformers' pipeline() refuses to guess one for a module built from a config
            from transformers import TextGenerationPipeline

            self.pipeline = TextGenerationPipeline(model=module, tokenizer=None, device=kwargs.get("device"))
            return self._finalize_pipeline()
        return super(StandardModel, self)._wrap(module, *args, **kwargs)

    def trace(self, *inputs: Any, remote: bool | str = False, **kwargs: Any) -> Any:
        from .inputs import check_inputs

        check_inputs(self, inputs, kwargs)  # trace(123), an empty prompt, an id past the vocabulary: one line
        if remote:
            ship_by_value()
        else:  # a name used after the trace without .save(): one line naming it, not a bare NameError
            from ..guards.unsaved import SavingTracer

            kwargs.setdefault("tracer_cls", SavingTracer)
        return super(StandardModel, self).trace(*inputs, remote=remote, **kwargs)

    def _remote_backend(self, *args: Any, **kwargs: Any) -> Any:
        # NDIF unreachable: one line naming the host, not websocket's DNS error
        from .remote import name_network_errors

        return name_network_errors(super(StandardModel, self)._remote_backend(*args, **kwargs))

    def session(self, *args: Any, remote: bool | str = False, **kwargs: Any) -> Any:
        if remote:
            ship_by_value()
        return super(StandardModel, self).session(*args, remote=remote, **kwargs)

    def interleave(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self.dispatched and self.__dict__.get("_bound") is not self._module:
            # a tree a remote trace shipped, over a server's modules (imported at the top: no nncanon there)
            return run_on_server(self, super(StandardModel, self).interleave, fn, *args, **kwargs)
        return super(StandardModel, self).interleave(fn, *args, **kwargs)

    def _batch_size(self, *inputs: Any, **kwargs: Any) -> int:
        rows = given.feature_rows(self, inputs, kwargs)  # nnsight counts input_features= as one row, any batch
        return super(StandardModel, self)._batch_size(*inputs, **kwargs) if rows is None else rows

    def _batch(self, invokes: list, fn: Any) -> tuple:  # runs on NDIF too: its helpers are module globals, shipped
        piped = getattr(fn, "__name__", None) == "pipe"  # the pipeline's own call: its preprocessing is the point
        # a speech model's invokes (nnsight batches no features); a prompt's keywords (feature-extraction drops them)
        call = None if piped else given.batch_features(self, invokes)
        if call is None:
            kept = invokes if piped else given.settings_beside_text(self, invokes)
            call = super(StandardModel, self)._batch(kept, fn)
        args, kwargs = given.cached_mask_left_to_the_model(invokes, *call)
        # an encoder-decoder whose forward needs decoder ids (T5's): the family's default for a call without them;
        # generate starts the decoder itself (decoder_start_token_id)
        decoder_inputs = getattr(self.family_module, "decoder_inputs", None)
        if piped or "generate" in getattr(fn, "__name__", ""):
            return args, kwargs
        if decoder_inputs is not None:
            args, kwargs = decoder_inputs(self, args, kwargs)
        given.check_decoder_inputs(self, kwargs)
        return args, kwargs

    @contextlib.contextmanager
    def _native_tree(self):
        self._native = True
        try:
            yield
        finally:
            self._native = False

    def _remoteable_persistent_objects(self) -> dict:
        # every native module by its path, as a server's TransformersModel lists them (remote="local" uses these)
        with self._native_tree():
            return super(StandardModel, self)._remoteable_persistent_objects()

    def _remoteable_class(self) -> type:
        # NDIF deploys nnsight's TransformersModel; the standard tree travels in the request (nncanon.core.remote)
        return TransformersModel

    def _remoteable_model_key(self) -> str:
        from .remote import check_remote_key

        check_remote_key(self)
        return super(StandardModel, self)._remoteable_model_key()

    def __getstate__(self) -> dict:
        state = super(StandardModel, self).__getstate__()
        state.pop("_bound", None)  # the far side binds its own modules
        state.pop("_missing_ops", None)  # and finds what its own release lacks
        return state

    def _install_sources(self) -> None:
        install_sources(self)

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
        # a child a dotted alias mounts from (GPT-Neo's attn, whose attn.attention is self_attn) is shown only
        # through the mount, as the root shows its backbone: its host keeps the standard path
        mounted = {native.split(".")[0] for native in envoy._aliases.values() if "." in native}
        children = [(names.get(id(child), name), child) for name, child in envoy._named_children()
                    if name not in mounted]
        children += [(alias, getattr(envoy, alias)) for alias, native in envoy._aliases.items() if "." in native]
        for name, child in children:
            if name == "generator":
                continue
            sub = f"{path}[{name}]" if name.isdigit() else f"{path}.{name}"
            yield from self._standard_tree(child, sub)

    def _named_children(self) -> list:
        # The backbone (`model`) is shown through its mounts (layers, embed_tokens, ...),
        # as print(model) lists the standard tree, not the native one.
        if self.__dict__.get("_native"):
            return super(StandardModel, self)._named_children()  # dispatch and remote ids walk the native tree
        mounted = {native.split(".")[0] for native in self._aliases.values() if "." in native}
        return [(name, child) for name, child in super(StandardModel, self)._named_children() if name not in mounted]

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
        """How the mixture's experts run (``grouped_mm``, ``batched_mm``, ``eager``); None on a model with none."""
        can_set = getattr(type(self._module), "_can_set_experts_implementation", None)
        if can_set is None or not can_set():
            return None
        return getattr(self.text_config, "_experts_implementation", None)

    @property
    def implementations(self) -> dict[str, str]:
        """What this load runs, as ``from_pretrained`` keywords: ``{"attn_implementation": "sdpa",
        "experts_implementation": "grouped_mm"}`` (no experts key on a model without experts).

        What transformers chose, not what was asked: a family that supports only eager attention
        loads eager by default. Passing these back to `load` reproduces the load.
        """
        found = {"attn_implementation": self.attn_implementation}
        if self.experts_implementation is not None:
            found["experts_implementation"] = self.experts_implementation
        return found

    @property
    def num_layers(self) -> int:
        return self.text_config.num_hidden_layers

    def all_blocks(self) -> list[Host]:
        """Every block of every stack, in the forward's order: ``layers``, or an encoder-decoder's encoder blocks
        then its decoder blocks (the family's ``STACKS``, the paths of the hosts holding them)."""
        stacks = getattr(self.family_module, "STACKS", None)
        if not stacks:
            return [self.layers[i] for i in range(len(self.layers))]
        return [stack.layers[i] for stack in (self.get(path) for path in stacks) for i in range(len(stack.layers))]

    @property
    def hidden_size(self) -> int:
        return self.text_config.hidden_size

    @property
    def num_heads(self) -> int:
        config = self.text_config  # a state-space config (Mamba-2) names its heads num_heads
        return getattr(config, "num_attention_heads", None) or config.num_heads

    @property
    def num_kv_heads(self) -> int:
        return getattr(self.text_config, "num_key_value_heads", None) or self.num_heads

    @property
    def head_dim(self) -> int:
        """The width of one value head, what each head's rows of W_O read (a family may say: DeepSeek's
        v_head_dim, where the config's head_dim is the rotated part of a query/key head)."""
        if hasattr(self.family_module, "head_dim"):
            return self.family_module.head_dim(self)
        config = self.text_config
        return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads

    @property
    def qk_head_dim(self) -> int:
        """The width of one query or key head (head_dim unless the family splits it)."""
        return self.family_module.qk_head_dim(self) if hasattr(self.family_module, "qk_head_dim") else self.head_dim

    @property
    def vocab_size(self) -> int:
        return self.text_config.vocab_size

    def dim_sizes(self, block: int | None = None) -> dict[str, int]:
        """The size of every layout dimension name on this model (batch and seq excepted); with ``block``, that
        block's own, where the family's blocks differ in size (its ``block_dim_sizes``: Gemma 4's full-attention
        blocks have another head size)."""
        sizes = {"hidden_size": self.hidden_size, "vocab_size": self.vocab_size, "num_heads": self.num_heads,
                 "num_kv_heads": self.num_kv_heads, "head_dim": self.head_dim, "qk_head_dim": self.qk_head_dim}
        sizes.update(self.family_module.dim_sizes(self))
        if block is not None and not 0 <= block < self.num_layers:
            raise IndexError(f"dim_sizes: block {block} is out of range: the model has {self.num_layers} blocks")
        if block is not None and hasattr(self.family_module, "block_dim_sizes"):
            sizes.update(self.family_module.block_dim_sizes(self, block))
        return sizes

    # -- support and errors -------------------------------------------------------

    def host_kinds(self) -> list[HostKind]:
        """Every kind of host, in tree order: one per (standard path pattern, module class), with the
        blocks it covers. A stack that mixes dense MLPs and mixtures at model.layers[i].mlp has two."""
        if self.__dict__.get("_kinds") is None:
            groups: dict[tuple, list[Host]] = {}
            for envoy in [self, *self._hosts]:
                groups.setdefault((pattern(envoy._std_path), type(envoy._module), type(envoy)), []).append(envoy)
            self._kinds = [
                HostKind(path, cls, native.__name__,
                         tuple(sorted({index(e._std_path) for e in envoys})) if "[i]" in path else None,
                         tuple(e._std_path for e in envoys))
                for (path, native, cls), envoys in groups.items()]
        return self._kinds

    def host_classes(self) -> dict[str, tuple[type[Host], str]]:
        """Standard host path -> (host class, native module class name), the first kind at each path.

        A path with several module classes (a mixed stack) keeps its first: `host_kinds` has them all.
        """
        found: dict[str, tuple[type[Host], str]] = {}
        for kind in self.host_kinds():
            found.setdefault(kind.host, (kind.cls, kind.native))
        return found

    def missing_op(self, host_class: type, name: str) -> str | None:
        """Why the installed release cannot serve ``host_class``'s value ``name`` (an op it moved), or None."""
        return self.__dict__.get("_missing_ops", {}).get((host_class, name))

    def support(self) -> Support:
        """Every value by host kind, with its layout, where it is read, and whether this load serves it;
        each host's values in the order this load's forward produces them (`nncanon.guards.order`, measured)."""
        from ..guards.order import arrange, forward_order

        rows = Support()
        rows.release = releases.family_note(self.family)
        measured = forward_order(self) or {}
        for kind in self.host_kinds():
            declared = {value.name: value for value in kind.cls.values()}
            names = arrange(list(declared), measured.get((kind.host, kind.cls.__name__)))
            for value in (declared[name] for name in names):
                failing = [c for c in value.conditions if not c.holds(self)]
                condition = None
                if value.conditions:
                    first = failing[0] if failing else value.conditions[0]
                    condition = first.why if not first.needs else f"needs {first.needs}: {first.why}"
                moved = self.missing_op(kind.cls, value.name)
                if moved:
                    failing, condition = [moved], moved
                note = value.note(self) if callable(value.note) else value.note
                if note:
                    condition = note if not failing else f"{condition}; {note}"
                rows.append(Row(kind.host, kind.native, value.name, str(value.layout), value.layout.dims,
                                value.description, value.read_at(), bool(value.conditions),
                                not failing, condition, kind.blocks, value.gradient))
        return rows

    def cache(self, names: list[str] | str, *inputs: Any, blocks: Any = None, **kwargs: Any) -> Any:
        """Many values in one forward, keyed by standard path (``layers.3.mlp.router_logits``): with
        ``inputs``, one read-only forward on them; without, inside a trace (`nncanon.core.cache`)."""
        from . import cache

        if inputs or kwargs:
            return cache.run(self, names, inputs, kwargs, blocks)
        return cache.read(self, names, blocks)

    def unembed(self, x: Any) -> Any:
        """Logits from a residual stream: the final norm, the head and what the family does past it (`nncanon.lens`)."""
        from ..research.lens import unembed

        return unembed(self, x)

    def _explain_missing(self, envoy: Host, name: str) -> str | None:
        """Why ``envoy`` has no ``name``, in one line naming what exists instead (`nncanon.guards.missing`)."""
        from ..guards.missing import explain

        return explain(self, envoy, name)


def wrap(family: ModuleType, module: torch.nn.Module, task: str, **preprocessors: Any) -> StandardModel:
    """Wrap an already built Hugging Face ``module`` (also a meta-device one) as ``family``."""
    envoys = {torch.nn.ModuleList: Stack, **family.ENVOYS}
    if hasattr(family, "layout_envoys"):  # one model type, several block layouts: the config picks their hosts
        envoys.update(family.layout_envoys(module.config.get_text_config()))
    if all(isinstance(key, type) for key in envoys):
        # what no class key names is a plain Envoy: said as a class key, nnsight need not spell each module's path
        # under every rename alias looking for path keys (llama4_text's) there are none of (most of a wrap's time)
        envoys[torch.nn.Module] = Envoy
    root = family.layout_root(module.config.get_text_config()) if hasattr(family, "layout_root") else family.ROOT
    # the pipeline a text load runs under: a decoder's text-generation, or the family's own (TEXT_TASK: an encoder's
    # feature-extraction, whose preprocess only tokenizes; fill-mask's refuses a prompt without exactly one mask)
    pipeline_task = getattr(family, "TEXT_TASK", task) if task == "text-generation" else task
    model = root(module.eval(), task=pipeline_task, rename=family.RENAME, envoys=envoys, **preprocessors)
    model._standardize()
    return model


__all__ = ["StandardModel", "wrap", "Support", "Row", "HostKind", "Unavailable", "NotOnHost", "FamilyMismatch",
           "MissingOp", "ImplementationError"]
