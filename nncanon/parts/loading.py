"""Building a family's Hugging Face model for a task from a local checkpoint."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoTokenizer

TASKS = ("text-generation", "image-text-to-text")


def check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"task={task!r}: nncanon loads {' or '.join(repr(t) for t in TASKS)}")


def borrowed_config_class(model_cls: type, model_type: str) -> type | None:
    """The config class of ``model_type`` when transformers builds that model type with ``model_cls``, another
    model's class (InternLM3: InternLM3Config, built as LlamaForCausalLM); None when ``model_cls``'s own config
    class is ``model_type``'s, or transformers maps ``model_type`` to another class. Built from its own config
    class, ``model_cls`` reads the checkpoint's config.json as its own model type's, renamed fields lost."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    own = getattr(getattr(model_cls, "config_class", None), "model_type", None)
    if own == model_type or MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type) != model_cls.__name__:
        return None
    config_class = CONFIG_MAPPING[model_type]
    # a wrapper's config (a text_config inside) is a multimodal model type, not a config-only one
    if config_class.model_type != model_type or "text_config" in (getattr(config_class, "sub_configs", None) or {}):
        return None
    return config_class


def text_model(checkpoint: Path, causal_cls: type, wrapper_prefix: str, **hf_kwargs: Any) -> torch.nn.Module:
    """The causal LM alone; from a multimodal wrapper's checkpoint, its language-model weights.

    The wrapper stores the text stack under ``wrapper_prefix`` (``model.language_model.``);
    the causal LM wants it under ``model.``, and the vision weights are left unread.
    """
    config = AutoConfig.from_pretrained(checkpoint)
    text_config = config.get_text_config()
    if text_config is config:
        return pretrained(causal_cls, checkpoint, **hf_kwargs)
    mapping = {f"^{wrapper_prefix.replace('.', chr(92) + '.')}": "model."}
    return pretrained(causal_cls, checkpoint, config=text_config, key_mapping=mapping, **hf_kwargs)


def pretrained(cls: type, checkpoint: Path, **hf_kwargs: Any) -> torch.nn.Module:
    """``cls.from_pretrained``, refusing a checkpoint whose weights do not all load into ``cls``: transformers
    only logs a weight it has no place for or a parameter the checkpoint lacks, and leaves that parameter
    random, so a family built on another model's class would run on random weights and say nothing. (A
    wrapper's vision weights, left unread by a text load, transformers does not count as unexpected.)"""
    if "config" not in hf_kwargs and (Path(checkpoint) / "config.json").is_file():
        model_type = json.loads((Path(checkpoint) / "config.json").read_text()).get("model_type")
        if model_type and borrowed_config_class(cls, model_type) is not None:
            hf_kwargs["config"] = AutoConfig.from_pretrained(checkpoint)
    module, info = cls.from_pretrained(checkpoint, output_loading_info=True, **hf_kwargs)
    ignored = [*(getattr(cls, "_keys_to_ignore_on_load_missing", None) or ()),
               *(getattr(cls, "_keys_to_ignore_on_load_unexpected", None) or ())]
    # a mismatched key comes as (key, checkpoint shape, model shape)
    names = {kind: [key if isinstance(key, str) else key[0] for key in info.get(f"{kind}_keys", ())]
             for kind in ("missing", "unexpected", "mismatched")}
    bad = {kind: [key for key in keys if not any(re.search(p, key) for p in ignored)] for kind, keys in names.items()}
    if any(bad.values()):
        from ..families import CheckpointError

        config = AutoConfig.from_pretrained(checkpoint)
        saved = (getattr(config, "architectures", None) or [config.model_type])[0]
        problems = ", ".join(f"{len(keys)} {kind} ({_keys(keys)})" for kind, keys in bad.items() if keys)
        raise CheckpointError(f"{checkpoint}: its weights ({saved}, model_type {config.model_type!r}) do not all "
                              f"load into {cls.__name__}, the class its family builds: {problems}; a family "
                              f"for {config.model_type!r} must build {saved}, not {cls.__name__}")
    return module


def _keys(keys: list) -> str:
    """A few keys, their block indices folded (``model.layers.{i}.mlp.c_fc.weight``)."""
    folded = list(dict.fromkeys(re.sub(r"\.\d+\.", ".{i}.", key) for key in keys))
    folded.sort(key=lambda key: (not key.endswith(".weight"), key))  # a weight says more than its bias
    return ", ".join(folded[:3]) + (", ..." if len(folded) > 3 else "")


def tokenizer(checkpoint: Path) -> Any:
    return AutoTokenizer.from_pretrained(checkpoint)


def meta(model_cls: type, config: Any) -> torch.nn.Module:
    """``model_cls`` built from ``config`` on the meta device: its structure, no weights."""
    with torch.device("meta"):
        return model_cls(config)
