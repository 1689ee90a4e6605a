"""A checkpoint transformers cannot load, said as the file at fault and the fix (`nncanon.load`).

transformers reports a truncated weights file as safetensors' "incomplete metadata" with no file
named, a config.json missing a size as a shape-mismatch report printed elsewhere, and a missing
tokenizer as "Couldn't instantiate the backend tokenizer from one of:". :func:`explain` turns each
into a :class:`CheckpointError` naming the file; anything else is left to propagate as it was.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..families import CheckpointError

#: config.json fields that size the weights; a missing one is filled with transformers' default. Which of them a
#: config has is its model type's own config class's (Falcon's MLP is ffn_hidden_size, GPT-2's width n_embd)
SIZE_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "ffn_hidden_size", "ffn_dim", "num_hidden_layers",
               "num_attention_heads", "n_embd", "n_layer", "n_head")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")


def _broken_weights(directory: Path) -> tuple[Path, str] | None:
    from safetensors import safe_open

    for path in sorted(directory.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="pt") as handle:
                handle.keys()
        except Exception as error:  # noqa: BLE001 - whatever safetensors says is the file's fault
            return path, str(error).splitlines()[0] if str(error) else type(error).__name__
    return None


def _size_fields(model_type: str) -> tuple[str, ...]:
    """The size fields the config class of ``model_type`` declares in its own __init__ (read, not instantiated:
    some classes need sub-configs), else the Llama-style ones."""
    import inspect

    from transformers import CONFIG_MAPPING

    try:
        declared = set(inspect.signature(CONFIG_MAPPING[model_type].__init__).parameters)
    except (KeyError, TypeError, ValueError):
        declared = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}
    return tuple(f for f in SIZE_FIELDS if f in declared)


def _missing_sizes(directory: Path) -> list[str]:
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    model_type = text.get("model_type", config.get("model_type", ""))
    return [f for f in _size_fields(str(model_type)) if f not in text and f not in config]


def explain(directory: Path, error: BaseException) -> CheckpointError | None:
    """A one-line CheckpointError for ``error`` raised loading ``directory``, or None if it is not a checkpoint's."""
    directory = Path(directory)
    text = str(error)
    if type(error).__name__ == "SafetensorError" or "safetensors" in type(error).__module__:
        broken = _broken_weights(directory)
        if broken:
            path, why = broken
            return CheckpointError(f"{path}: not a readable safetensors file ({why}); it is truncated or damaged: "
                                   f"download or build the checkpoint again")
    if "Weights only load failed" in text:  # torch's 6 lines: pickled objects its safe unpickler will not make
        refused = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        held = f" ({refused.group(1)})" if refused else ""
        files = ", ".join(str(p) for p in sorted(directory.glob("*.bin"))) or str(directory)
        return CheckpointError(f"{files}: a pickled weights file holding more than tensors{held}, which nncanon "
                               f"will not unpickle (it could run code): use the checkpoint's .safetensors files, or "
                               f"save its state dict as safetensors from a copy you trust")
    if "ignore_mismatched_sizes" in text or "size mismatch" in text:
        missing = _missing_sizes(directory)
        why = (f"{', '.join(missing)} missing, so transformers used its default" if missing
               else "is it this checkpoint's own config?")
        return CheckpointError(f"{directory / 'config.json'}: the weights' shapes do not match it ({why}); "
                               f"fix config.json")
    if "tokenizer" in text.lower() and not any((directory / f).exists() for f in TOKENIZER_FILES[:3]):
        return CheckpointError(f"{directory}: no tokenizer files (one of {', '.join(TOKENIZER_FILES[:3])}, with "
                               f"tokenizer_config.json); copy the checkpoint's tokenizer files beside config.json")
    return None
