"""`load` and `from_config`: a checkpoint (a local directory or a hub id) or a config, as a `StandardModel`.

A hub id (``"org/name"``) resolves through huggingface_hub's cache, as transformers resolves it
(``HF_HOME``, ``HF_HUB_OFFLINE``, ``revision``); the family is read off the config's model_type and
the tokenizer or processor comes from the same snapshot. A model loaded meta-first
(``dispatch=False``, the default for a hub id) is built on the meta device from the config alone:
its tree, `support()`, ``print(model)`` and every shape are there with no weights in memory, and the
weights are read (downloaded if need be) on the first trace or on ``model.dispatch()``, as nnsight's
``LanguageModel(..., dispatch=False)`` does. ``hf_kwargs`` (``dtype``, ``device_map``,
``attn_implementation``, ...) reach ``from_pretrained`` unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ..families import CheckpointError
from ..guards import releases
from .building import Source, build_module, is_hub_id, snapshot
from .model import StandardModel, wrap

#: from_pretrained keywords that shape the module tree (the rest place or load weights)
ARCH_KWARGS = ("attn_implementation", "experts_implementation", "dtype")


def meta_module(family: ModuleType, config: Any, task: str, **hf_kwargs: Any) -> torch.nn.Module:
    """The module ``family.build`` makes for ``task``, built on the meta device from ``config`` (no weights).

    The one path to a weightless model: meta-first loads, `from_config`, and the encyclopedia's full-size
    printouts (generator/facts/configs.py) all come here.
    """
    from ..parts import loading

    loading.check_task(task)
    build = family.build
    arch = {k: v for k, v in hf_kwargs.items() if k in ARCH_KWARGS and v != "auto"}
    causal, wrapper = getattr(build, "causal_lm", None), getattr(build, "wrapper", None)
    if task == "text-generation" and causal is not None:
        return _meta(causal, config.get_text_config(), arch)
    if wrapper is None:
        raise ValueError(f"task={task!r}: {family.FAMILY} is a text-only family; load it with "
                         "task='text-generation' (the default)")
    module = _meta(wrapper, config, arch)
    if task == "text-generation":
        # what the build loads for text: the wrapper without the modules a text prompt never reaches
        for name in getattr(build, "text_drops", ()):
            delattr(module.model, name)
    return module


def _meta(cls: type, config: Any, arch: dict) -> torch.nn.Module:
    import copy

    with torch.device("meta"), no_torch_inits():
        return cls._from_config(copy.deepcopy(config), **arch).eval()


@contextmanager
def no_torch_inits() -> Iterator[None]:
    """torch.nn.init's functions do nothing inside: a meta tensor has no values to fill, but nn.Linear's
    reset_parameters still runs kaiming_uniform_ through torch's decompositions (a fifth of a full-size meta
    build's time). Unlike transformers' no_init_weights, the model's own init_weights still runs: it ties weights."""
    import torch.nn.init as init

    names = [name for name in dir(init) if name.endswith("_") and not name.startswith("_")]
    saved = {name: getattr(init, name) for name in names}
    for name in names:
        setattr(init, name, _keep)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(init, name, function)


def _keep(tensor: Any, *args: Any, **kwargs: Any) -> Any:
    return tensor


def _preprocessors(family: ModuleType, directory: Path, task: str) -> dict:
    from ..parts import loading

    if task == "image-text-to-text":
        from .processing import load_processor

        processor = load_processor(directory)
        return {"tokenizer": processor.tokenizer, "processor": processor}
    return {"tokenizer": loading.tokenizer(directory)}


def load(checkpoint: str | Path, task: str = "text-generation", *, revision: str | None = None,
         dispatch: bool | None = None, **hf_kwargs: Any) -> StandardModel:
    """Load ``checkpoint`` as a `StandardModel`.

    ``checkpoint`` is a local directory or a Hugging Face hub id (``"Qwen/Qwen3.5-35B-A3B"``, at
    ``revision``). ``task`` is ``"text-generation"`` (the text model alone) or ``"image-text-to-text"``
    (the multimodal wrapper with its processor). ``dispatch=False`` builds the model on the meta device
    from its config and loads the weights on the first trace or `StandardModel.dispatch`; the default
    is meta-first for a hub id and loaded at once for a local directory. ``hf_kwargs`` go to
    ``from_pretrained`` unchanged (``dtype``, ``device_map``, ``attn_implementation``,
    ``experts_implementation``, ...).
    """
    from transformers import AutoConfig

    from ..families import family_for

    releases.warn_unverified()
    hub = is_hub_id(checkpoint)
    if revision is not None and not hub:
        raise CheckpointError(f"revision={revision!r} names a version of a hub model; {checkpoint} is a local "
                              "directory (drop revision, or pass the hub id)")
    dispatch = (not hub) if dispatch is None else dispatch
    directory = snapshot(checkpoint, revision, weights=dispatch) if hub else Path(checkpoint)
    family = family_for(directory)
    if dispatch:
        module, preprocessors = build_module(family, directory, task, hf_kwargs)
        model = wrap(family, module, task, **preprocessors)
    else:
        config = AutoConfig.from_pretrained(directory)
        model = wrap(family, meta_module(family, config, task, **hf_kwargs), task,
                     **_preprocessors(family, directory, task), device="meta")
        model.dispatched = False
    model._source = Source(checkpoint if hub else directory, revision, task, hf_kwargs, hub)
    if hub:
        model.repo_id, model.revision = checkpoint, revision
    return model


def from_config(config: Any, task: str = "text-generation", tokenizer: Any = None, **hf_kwargs: Any) -> StandardModel:
    """A `StandardModel` on the meta device built from ``config`` alone (a config.json's dict or a
    ``PretrainedConfig``): `support()`, ``print(model)``, paths and shapes, no weights and nothing to dispatch."""
    from transformers import AutoConfig, PretrainedConfig

    from ..families import family_for_config

    releases.warn_unverified()
    if isinstance(config, dict):
        settings = dict(config)
        model_type = settings.pop("model_type", None)
        if not model_type:
            raise CheckpointError("from_config: the config has no model_type, so nncanon cannot tell the family; "
                                  "pass the checkpoint's config.json as a dict")
        config = AutoConfig.for_model(model_type, **settings)
    elif not isinstance(config, PretrainedConfig):
        raise TypeError(f"from_config takes a config.json's dict or a transformers PretrainedConfig, not "
                        f"{type(config).__name__}")
    family = family_for_config(config.to_dict(), "from_config")
    module = meta_module(family, config, task, **hf_kwargs)
    model = wrap(family, module, task, tokenizer=tokenizer, device="meta")
    model._source, model.dispatched = None, False  # a trace asks for weights it cannot have: load_weights says so
    return model


__all__ = ["load", "from_config", "meta_module"]
