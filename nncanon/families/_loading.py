"""Building a family's Hugging Face model for a task from a local checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoTokenizer

TASKS = ("text-generation", "image-text-to-text")


def check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"task={task!r}: nncanon loads {' or '.join(repr(t) for t in TASKS)}")


def text_model(checkpoint: Path, causal_cls: type, wrapper_prefix: str, **hf_kwargs: Any) -> torch.nn.Module:
    """The causal LM alone; from a multimodal wrapper's checkpoint, its language-model weights.

    The wrapper stores the text stack under ``wrapper_prefix`` (``model.language_model.``);
    the causal LM wants it under ``model.``, and the vision weights are left unread.
    """
    config = AutoConfig.from_pretrained(checkpoint)
    text_config = config.get_text_config()
    if text_config is config:
        return causal_cls.from_pretrained(checkpoint, **hf_kwargs)
    mapping = {f"^{wrapper_prefix.replace('.', chr(92) + '.')}": "model."}
    return causal_cls.from_pretrained(checkpoint, config=text_config, key_mapping=mapping, **hf_kwargs)


def tokenizer(checkpoint: Path) -> Any:
    return AutoTokenizer.from_pretrained(checkpoint)


def meta(model_cls: type, config: Any) -> torch.nn.Module:
    """``model_cls`` built from ``config`` on the meta device: its structure, no weights."""
    with torch.device("meta"):
        return model_cls(config)
