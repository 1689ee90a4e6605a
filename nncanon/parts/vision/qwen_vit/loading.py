"""Loading a Qwen VL line: every checkpoint is the wrapper (…ForConditionalGeneration), with or without
its vision encoder, and what a family's ``required_paths``, ``dim_sizes`` and ``prepare`` share."""

from __future__ import annotations

from typing import Any

from .deepstack import install_deepstack
from .hosts import install_sources


def wrapper_build(wrapper: type):
    """A family's ``build`` for a line whose checkpoints are all ``wrapper`` (…ForConditionalGeneration).

    ``task="image-text-to-text"`` loads the wrapper with its processor. ``"text-generation"`` (the
    default) loads the same wrapper and drops its vision encoder (transformers has no text-only class
    for these lines): text prompts run as they do on the whole wrapper, with the text model's names
    and values, and model.vision does not exist.
    """
    from ... import loading

    _quiet_text_pipeline(wrapper)

    def build(checkpoint, task: str, **hf_kwargs: Any) -> tuple[Any, dict]:
        loading.check_task(task)
        module = loading.pretrained(wrapper, checkpoint, **hf_kwargs)
        if task == "text-generation":
            del module.model.visual
            return module, {"tokenizer": loading.tokenizer(checkpoint)}
        from ....core.processing import load_processor

        processor = load_processor(checkpoint)
        return module, {"tokenizer": processor.tokenizer, "processor": processor}

    build.wrapper = wrapper  # what nncanon.core.loading.meta_module builds on meta
    build.text_drops = ("visual",)
    return build


def _quiet_text_pipeline(wrapper: type) -> None:
    """Drop transformers' "not supported for text-generation" error for ``wrapper``: its pipeline lists the
    ...ForCausalLM classes only, but the wrapper runs text prompts as they are (nnsight's pipeline works)."""
    import logging

    message = f"The model '{wrapper.__name__}' is not supported for "  # the task is "" on a meta-first load
    logging.getLogger("transformers.pipelines.base").addFilter(
        lambda record: not record.getMessage().startswith(message))


#: the standard paths of the encoder every line must resolve (with the image-text-to-text task)
VISION_PATHS = ["vision", "projector", "vision.layers.0.input_layernorm", "vision.layers.0.post_attention_layernorm",
                "vision.layers.0.self_attn.o_proj", "vision.layers.0.mlp.act_fn", "vision.layers.0.mlp.down_proj",
                "projector.norm", "projector.down_proj"]


def required_paths(text: list[str], vision: list[str] = ()):
    """A family's ``required_paths``: ``text`` always, the encoder's (and ``vision``) when it is loaded."""

    def paths(model: Any) -> list[str]:
        return [*text, *VISION_PATHS, *vision] if model.task == "image-text-to-text" else list(text)

    return paths


def dense_dim_sizes(model: Any) -> dict[str, int]:
    """A family's ``dim_sizes`` when the text MLP is dense: its width."""
    return {"intermediate_size": model.text_config.intermediate_size}


def prepare(model: Any) -> None:
    """A family's ``prepare``: the ``.source`` ops the image values read, and DeepStack's taps."""
    install_sources(model)
    install_deepstack(model)


__all__ = ["wrapper_build", "VISION_PATHS", "required_paths", "dense_dim_sizes", "prepare"]
