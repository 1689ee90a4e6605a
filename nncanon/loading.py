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

import re
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import torch

from . import releases
from .families import CheckpointError
from .model import StandardModel, _implementation_error, wrap

#: ``org/name``: what huggingface_hub takes as a model repo id
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[A-Za-z0-9][\w.\-]*$")
#: what a meta-first load reads from a hub snapshot: the configs and the tokenizer or processor, no weights
CONFIG_FILES = ["*.json", "*.jinja", "*.txt", "*.model", "*.tiktoken"]
#: from_pretrained keywords that shape the module tree (the rest place or load weights)
ARCH_KWARGS = ("attn_implementation", "experts_implementation", "dtype")


class Source(NamedTuple):
    """Where a model's weights come from, kept on the model for `StandardModel.dispatch` and the remote key."""

    checkpoint: str | Path  #: the hub id, or the local directory
    revision: str | None
    task: str
    hf_kwargs: dict
    hub: bool


def is_hub_id(checkpoint: Any) -> bool:
    """A string shaped ``org/name`` that names no local path (a local directory wins, as in transformers)."""
    return isinstance(checkpoint, str) and bool(HUB_ID.match(checkpoint)) and not Path(checkpoint).exists()


def snapshot(repo_id: str, revision: str | None = None, weights: bool = True) -> Path:
    """The local snapshot of ``repo_id`` at ``revision`` in the Hugging Face cache, downloading what is missing
    (the configs and tokenizer only, unless ``weights``); a `CheckpointError` in one line when it cannot be had."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    at = f" at revision {revision!r}" if revision else ""
    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=None if weights else CONFIG_FILES))
    except (LocalEntryNotFoundError, OfflineModeIsEnabled):
        if constants.HF_HUB_OFFLINE:
            raise CheckpointError(
                f"{repo_id}{at} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and offline mode is on "
                f"(HF_HUB_OFFLINE=1), so nothing is downloaded; unset HF_HUB_OFFLINE, or point HF_HOME at a cache "
                "that has it, or pass a local directory") from None
        raise CheckpointError(f"{repo_id}{at} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and the "
                              "Hub could not be reached to download it; check the connection, or pass a local "
                              "directory") from None
    except GatedRepoError:
        raise CheckpointError(f"{repo_id} is gated on the Hugging Face Hub: accept its terms on its page and log "
                              "in (hf auth login)") from None
    except RevisionNotFoundError:
        raise CheckpointError(f"{repo_id} has no revision {revision!r} on the Hugging Face Hub; pass a branch, tag "
                              "or commit it has") from None
    except RepositoryNotFoundError:
        raise CheckpointError(f"{repo_id}: no such model on the Hugging Face Hub (or it is private: log in with hf "
                              "auth login); a local directory of that name does not exist either") from None


def meta_module(family: ModuleType, config: Any, task: str, **hf_kwargs: Any) -> torch.nn.Module:
    """The module ``family.build`` makes for ``task``, built on the meta device from ``config`` (no weights).

    The one path to a weightless model: meta-first loads, `from_config`, and the encyclopedia's full-size
    printouts (generator/configs.py) all come here.
    """
    from .families import _loading

    _loading.check_task(task)
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
        del module.model.visual  # what wrapper_build loads for text: the wrapper without its vision encoder
    return module


def _meta(cls: type, config: Any, arch: dict) -> torch.nn.Module:
    import copy

    with torch.device("meta"):
        return cls._from_config(copy.deepcopy(config), **arch).eval()


def _preprocessors(family: ModuleType, directory: Path, task: str) -> dict:
    from .families import _loading

    if task == "image-text-to-text":
        from .processing import load_processor

        processor = load_processor(directory)
        return {"tokenizer": processor.tokenizer, "processor": processor}
    return {"tokenizer": _loading.tokenizer(directory)}


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

    from .families import family_for

    releases.warn_unverified()
    hub = is_hub_id(checkpoint)
    if revision is not None and not hub:
        raise CheckpointError(f"revision={revision!r} names a version of a hub model; {checkpoint} is a local "
                              "directory (drop revision, or pass the hub id)")
    dispatch = (not hub) if dispatch is None else dispatch
    directory = snapshot(checkpoint, revision, weights=dispatch) if hub else Path(checkpoint)
    family = family_for(directory)
    if dispatch:
        module, preprocessors = _build(family, directory, task, hf_kwargs)
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


def _build(family: ModuleType, directory: Path, task: str, hf_kwargs: dict) -> tuple[torch.nn.Module, dict]:
    """``family.build``, with transformers' refusal of an implementation as one `ImplementationError` line."""
    from .checkpoint_errors import explain

    try:
        return family.build(directory, task, **hf_kwargs)
    except ValueError as error:
        unsupported = _implementation_error(family, error, hf_kwargs) or explain(directory, error)
        if unsupported is None:
            raise
        raise unsupported from None
    except Exception as error:  # a damaged file, a config.json that does not fit the weights: named (checkpoint_errors)
        explained = explain(directory, error)
        if explained is None:
            raise
        raise explained from None


def load_weights(model: StandardModel) -> torch.nn.Module:
    """The loaded module of a meta-first ``model``, as `load` would have built it (`StandardModel.dispatch`)."""
    from .families import family_for

    source = model.__dict__.get("_source")
    if source is None:
        raise CheckpointError("this model was built from a config alone (nncanon.from_config): it has no weights "
                              "to load; nncanon.load the checkpoint to run it")
    directory = snapshot(source.checkpoint, source.revision, weights=True) if source.hub else Path(source.checkpoint)
    module, _ = _build(family_for(directory), directory, source.task, source.hf_kwargs)
    return module.eval()


def from_config(config: Any, task: str = "text-generation", tokenizer: Any = None, **hf_kwargs: Any) -> StandardModel:
    """A `StandardModel` on the meta device built from ``config`` alone (a config.json's dict or a
    ``PretrainedConfig``): `support()`, ``print(model)``, paths and shapes, no weights and nothing to dispatch."""
    from transformers import AutoConfig, PretrainedConfig

    from .families import family_for_config

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


__all__ = ["load", "from_config", "load_weights", "Source", "snapshot", "meta_module", "is_hub_id", "HUB_ID"]
