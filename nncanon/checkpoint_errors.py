"""A checkpoint transformers cannot load, said as the file at fault and the fix (`nncanon.load`).

transformers reports a truncated weights file as safetensors' "incomplete metadata" with no file
named, a config.json missing a size as a shape-mismatch report printed elsewhere, and a missing
tokenizer as "Couldn't instantiate the backend tokenizer from one of:". :func:`explain` turns each
into a :class:`CheckpointError` naming the file; anything else is left to propagate as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

from .families import CheckpointError

#: config.json fields that size the weights; a missing one is filled with transformers' default
SIZE_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "head_dim", "n_embd", "n_layer", "n_head", "n_inner")
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


def _missing_sizes(directory: Path) -> list[str]:
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    family_fields = [f for f in SIZE_FIELDS if f in text or f in config]
    style = "gpt2" if any(f.startswith("n_") for f in family_fields) else "llama"
    expected = [f for f in SIZE_FIELDS if f.startswith("n_") == (style == "gpt2") and f not in ("head_dim", "n_inner",
                                                                                                 "num_key_value_heads")]
    return [f for f in expected if f not in text and f not in config]


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
