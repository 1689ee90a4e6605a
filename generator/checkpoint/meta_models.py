"""The full-size checkpoints of a family's YAML (``checkpoints:``), built on the ``meta`` device: their configs and
models with no weights, for the printout, the sizes and the configs the page shows; a config that cannot be built is
one line naming its field."""

from __future__ import annotations

from typing import Any

from generator.checkpoint.checkpoints import _config_class
from generator.checkpoint.tiny_tokenizer import transformers_class
from generator.recipe.family import Family
from generator.recipe.fields import FamilyYamlError


def meta_config(fam: Family, checkpoint_id: str):
    """The full-size config of a ``checkpoints:`` item and the class it builds: the config's first
    ``architectures`` entry (else ``tiny.class``)."""
    import transformers

    config: dict[str, Any] = fam.checkpoint_config(checkpoint_id)
    index = fam.checkpoint_ids.index(checkpoint_id)
    name = (config.get("architectures") or [fam.tiny["class"]])[0]
    if not hasattr(transformers, name) and config.get("model_type"):
        # a remote-code class (InternLM3ForCausalLM) transformers builds as another model's, the tiny one's
        tiny_cls = transformers_class(fam, fam.tiny["class"], "tiny.class")
        name = tiny_cls.__name__ if _config_class(fam, tiny_cls, config["model_type"]) is not tiny_cls.config_class \
            else name
    model_cls = transformers_class(fam, name, f"checkpoints[{index}].config.architectures")
    built = getattr(_config_class(fam, model_cls, config.get("model_type")), "model_type", None)
    if config.get("model_type") and built and built != config["model_type"]:
        # another model's class would be built from this config: a traceback deep in its __init__, naming no field
        raise FamilyYamlError(fam.path, f"checkpoints[{index}].config.architectures",
                              f"{name} is a {built!r} model, but this config's model_type is {config['model_type']!r}; "
                              "write the class the checkpoint's own config.json names in architectures")
    try:
        return _config_class(fam, model_cls, config.get("model_type"))(**config), model_cls
    except (ValueError, TypeError, KeyError, AttributeError, RuntimeError) as e:
        raise _unbuildable(fam, index, model_cls, e) from None


def meta_model(fam: Family, checkpoint_id: str):
    """The full-size model of a ``checkpoints:`` item built on the ``meta`` device (no weights)."""
    import torch

    from nncanon.core.loading import no_torch_inits

    cfg, model_cls = meta_config(fam, checkpoint_id)
    try:
        with torch.device("meta"), no_torch_inits():
            return model_cls(cfg)
    except (ValueError, TypeError, KeyError, AttributeError, RuntimeError) as e:
        raise _unbuildable(fam, fam.checkpoint_ids.index(checkpoint_id), model_cls, e) from None


def _unbuildable(fam: Family, index: int, model_cls: type, e: Exception) -> FamilyYamlError:
    return FamilyYamlError(fam.path, f"checkpoints[{index}].config", f"{model_cls.__name__} cannot be built "
                                                                    f"from it: {type(e).__name__}: {e}")
