"""Where a model's module comes from: a local directory or a hub snapshot, built by the family's ``build``.

`nncanon.load` (``loading``) resolves the checkpoint and wraps what is built here; `StandardModel.dispatch`
builds the weights of a meta-first model here too. Both name transformers' refusals in one line: an
attention or experts implementation the model does not support (`ImplementationError`), a damaged file
or a config that does not fit its weights (``checkpoint_errors``). This module does not know the wrapped
model, so the model can call it without a circle.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import torch

from ..families import CheckpointError

#: ``org/name``: what huggingface_hub takes as a model repo id
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[A-Za-z0-9][\w.\-]*$")
#: what a meta-first load reads from a hub snapshot: the configs and the tokenizer or processor, no weights
CONFIG_FILES = ["*.json", "*.jinja", "*.txt", "*.model", "*.tiktoken"]


class ImplementationError(ValueError):
    """The requested attention (or experts) implementation is one the family's model does not support."""



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



def build_module(family: ModuleType, directory: Path, task: str, hf_kwargs: dict) -> tuple[torch.nn.Module, dict]:
    """``family.build``, with transformers' refusal of an implementation as one `ImplementationError` line."""
    from ..guards.checkpoint_errors import explain

    try:
        return family.build(directory, task, **hf_kwargs)
    except ValueError as error:
        unsupported = implementation_error(family, error, hf_kwargs) or explain(directory, error)
        if unsupported is None:
            raise
        raise unsupported from None
    except Exception as error:  # a damaged file, a config.json that does not fit the weights: named (checkpoint_errors)
        explained = explain(directory, error)
        if explained is None:
            raise
        raise explained from None


def load_weights(model: Any) -> torch.nn.Module:
    """The loaded module of a meta-first ``model``, as `load` would have built it (`StandardModel.dispatch`)."""
    from ..families import family_for

    source = model.__dict__.get("_source")
    if source is None:
        raise CheckpointError("this model was built from a config alone (nncanon.from_config): it has no weights "
                              "to load; nncanon.load the checkpoint to run it")
    directory = snapshot(source.checkpoint, source.revision, weights=True) if source.hub else Path(source.checkpoint)
    module, _ = build_module(family_for(directory), directory, source.task, source.hf_kwargs)
    return module.eval()



def implementation_error(family: ModuleType, error: ValueError, hf_kwargs: dict) -> ImplementationError | None:
    """transformers' refusal of an attention or experts implementation, as one line naming the family and
    the implementations its model supports; None for any other error."""
    import transformers

    text = str(error)
    named = getattr(transformers, text.split(" ", 1)[0], None)
    cls = named if isinstance(named, type) else getattr(family.build, "causal_lm", None)
    for key, words in (("attn_implementation", ("attention", "attn_implementation", "Flash Attention")),
                       ("experts_implementation", ("experts implementation", "experts_implementation"))):
        asked = hf_kwargs.get(key)
        if asked is None or not any(word in text for word in words):
            continue
        supported = _supported(cls, key) if cls is not None else []
        model = f" ({cls.__name__})" if cls is not None else ""
        listed = f"; it supports {', '.join(repr(s) for s in supported)}" if supported else (
            "; it has no experts to run another way" if key == "experts_implementation" else "")
        return ImplementationError(f"{family.FAMILY}{model} does not support {key}={asked!r}{listed}")
    return None


def _supported(cls: type, key: str) -> list[str]:
    """The implementations of ``key`` (attn_implementation, experts_implementation) ``cls`` can load with."""
    if key == "experts_implementation":
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

        can_set = getattr(cls, "_can_set_experts_implementation", None)
        return ["eager", *sorted(ALL_EXPERTS_FUNCTIONS.keys())] if can_set is not None and can_set() else []
    flags = (("sdpa", "_supports_sdpa"), ("flash_attention_2", "_supports_flash_attn"),
             ("flex_attention", "_supports_flex_attn"))
    return ["eager", *(name for name, flag in flags if getattr(cls, flag, False))]
