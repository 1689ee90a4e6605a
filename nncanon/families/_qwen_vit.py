"""The Qwen ViT: the packed vision encoder of every Qwen vision-language line, and its merger.

The encoder runs on one row, ``[patches, vision_hidden_size]``: the patches of every image of
the call concatenated, image j being the ``t * h * w`` patches its ``image_grid_thw`` row says,
in merge-block order (the ``spatial_merge_size ** 2`` patches the merger folds into one image
token are consecutive rows). Its stream values are served ``[1, patches, vision_hidden_size]``
(`IMAGES_AXIS`: a view with a leading images axis of 1, so in-place edits land), while a
block's ``.input`` and ``.output`` stay native.

The attention computes the queries, keys and values of the whole row, then calls the
attention function once per image (the attention's ``cu_seqlens`` argument holds the split
points) and concatenates the outputs, so no one tensor is the block's pattern under any
implementation: attention_scores and attention_probabilities never exist here.

The merger (the wrapper's ``projector``) runs inside the encoder's forward, before it returns:
in one trace read the last block, then the projector, then ``vision.tower_output``, then
``vision.image_features`` (in the wrapper's forward, where the features are scattered into the
text embeddings), then the text blocks. ``tower_output`` is read-only: nothing reads the
returned stream after the merger has, so an edit belongs on the last block's layer_output.

A family maps its module classes onto these hosts in ENVOYS (`envoys`) and its native names onto
the standard ones in RENAME: `MOUNTS` lifts the wrapper's text stack, encoder and merger to the
root, `RENAME` is the Qwen3-VL / Qwen3.5 spelling inside the encoder and `RENAME_FC` the Qwen2-VL /
Qwen2.5-VL one, both onto the same standard names (so the locators below, which name children by
their standard names, serve every line). Qwen3-VL's DeepStack taps enter the text blocks at
``model.layers[i].deepstack_output`` (`DeepStackBlock`, served by `install_deepstack`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..hosts import host
from ..layouts import HeadOutputs, ImageFeatures, ImageTokenMask, Keys, Neurons, Patches, Queries, Values
from ..locators import Locator, Tap, child, op, own
from ..values import Condition, Unavailable, Value, View, never
from ..views import IMAGES_AXIS
from ._decoder import MLP, Attention, Block

# -- locators ------------------------------------------------------------------------


@dataclass(frozen=True)
class Worded(Locator):
    """A locator whose "read at" sentence is given (``words``) rather than generated.

    For a point whose generated sentence would name plumbing the reader does not need, e.g.
    the ``last_hidden_state`` field of the encoder's output, which is "the module's own output".
    """

    words: str = ""

    def read_at(self) -> str:
        return self.words or super().read_at()


@dataclass(frozen=True)
class AtRoot(Worded):
    """A point of the root model's tree, for a value served on a host below it.

    ``module`` and ``ops`` are resolved from the `StandardModel` itself (``module="model"`` is
    the wrapper's ``model.model``), not from the host. The ``.source`` ops are installed by
    `install_sources` (called from the family's ``prepare``), as the root's installer only
    knows a host's own children.
    """

    def target(self, host: Any) -> Any:
        return super().target(host._std_model)

    def sourced_modules(self) -> tuple[str | None, ...]:
        return ()


def install_sources(model: Any) -> None:
    """Install, before any trace, the ``.source`` ops the `AtRoot` values of ``model`` read."""
    for envoy in model._hosts:
        for value in type(envoy).values():
            locator = value.locator
            if isinstance(locator, AtRoot) and locator.ops:
                base = model if locator.module is None else model.get(locator.module)
                getattr(base.source, locator.ops[0])


# -- views ---------------------------------------------------------------------------


def _heads_read(host: Any, x: Any) -> Any:
    return x.unsqueeze(0).unflatten(-1, (-1, host._module.head_dim))


def _heads_write(host: Any, x: Any, current: Any) -> Any:
    return x.flatten(-2).squeeze(0)


#: [patches, heads*head_dim] -> [1, patches, heads, head_dim] (what the output projection takes)
IMAGES_HEADS = View("images-axis, heads(head_dim)", _heads_read, _heads_write)


def _image_token_mask(host: Any, ids: Any) -> Any:
    return ids == host._std_model._module.config.image_token_id


#: input_ids -> where they are the image token; derived, read-only
IMAGE_TOKENS = View("input_ids == image_token_id", _image_token_mask, None)

#: the encoder's returned stream, [1, patches, width]; read-only, as nothing reads it after the
#: merger has (an edit belongs on the last block's layer_output)
RETURNED = View("images-axis, read-only", lambda host, x: x.unsqueeze(0), None)

# -- the encoder ---------------------------------------------------------------------

NO_PATTERN = never("no one tensor is the block's pattern")

_NO_IMAGE_SIZE = ("the processor cuts each image into its own grid (image_grid_thw: t, h, w patches per image); "
                  "there is no one image size")


class _VisionSizes:
    """The encoder's sizes, read off its own config (``model.vision``'s module's)."""

    @property
    def _vision_config(self) -> Any:
        return self._module.config

    @property
    def num_layers(self) -> int:
        return self._vision_config.depth

    @property
    def vision_hidden_size(self) -> int:
        """The encoder's width (``embed_dim`` on Qwen2-VL, whose ``hidden_size`` is the merger's output)."""
        config = self._vision_config
        return getattr(config, "embed_dim", None) or config.hidden_size

    @property
    def num_heads(self) -> int:
        return self._vision_config.num_heads

    @property
    def head_dim(self) -> int:
        return self.vision_hidden_size // self.num_heads

    @property
    def intermediate_size(self) -> int:
        """The MLP's width (``embed_dim * mlp_ratio`` on Qwen2-VL)."""
        config = self._vision_config
        size = getattr(config, "intermediate_size", None)
        return size if size is not None else int(self.vision_hidden_size * config.mlp_ratio)

    @property
    def patch_size(self) -> int:
        return self._vision_config.patch_size

    @property
    def spatial_merge_size(self) -> int:
        return self._vision_config.spatial_merge_size

    @property
    def window_size(self) -> int | None:
        """Qwen2.5-VL's attention window side in pixels; None on the lines without windows."""
        return getattr(self._vision_config, "window_size", None)

    @property
    def image_size(self) -> int:
        raise Unavailable(f"{self._standard_path()}.image_size is unavailable: {_NO_IMAGE_SIZE}")

    def dim_sizes(self, patches: int | None = None) -> dict[str, int]:
        """The size of every layout dimension name the vision blocks' values use, as they mean it there.

        The vision attention's and MLP's layouts reuse the text ones' names (Queries [batch
        num_heads seq qk_head_dim], Neurons [batch seq intermediate_size]): on a host under
        ``model.vision.layers[i]``, ``batch`` (like ``images``) is 1, ``seq`` (``query``, ``key``)
        is the call's ``patches``, and the head counts and widths are the encoder's. (On
        ``model.vision`` itself image_token_mask is the text's [batch seq] and image_features
        the text's hidden_size.)
        """
        sizes = {
            "images": 1,
            "batch": 1,
            "vision_hidden_size": self.vision_hidden_size,
            "num_heads": self.num_heads,
            "num_kv_heads": self.num_heads,
            "head_dim": self.head_dim,
            "qk_head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
        }
        if patches is not None:
            sizes.update(patches=patches, seq=patches, query=patches, key=patches)
        return sizes


_Vision = host("QwenVision", values=[
    Value("image_token_mask", ImageTokenMask,
          "Which positions hold image tokens: input_ids == the config's image_token_id; read-only",
          AtRoot(io="input", element="input_ids", words="the model's own inputs, at the root"),
          view=IMAGE_TOKENS),
    Value("patch_embeddings", Patches, "The patch embedding's output, one row per patch", child("patch_embed"),
          view=IMAGES_AXIS),
    Value("tower_output", Patches,
          "The last block's stream after the tower's final norm, before any pooling or adapter",
          Worded(io="output", attr="last_hidden_state", words="the module's own output"), view=RETURNED),
    Value("image_features", ImageFeatures,
          "The image features the text model receives at the image tokens, flat over them",
          AtRoot(io="input", module="model", shown="model.model", ops=("inputs_embeds_masked_scatter_0",),
                 element=1)),
], HOST="model.vision")

#: ``model.vision``: the Qwen ViT, packed
Vision = type("QwenVision", (_VisionSizes, _Vision), {"HOST": "model.vision"})

# -- a block ---------------------------------------------------------------------------


def _declared(host_class: type, name: str) -> Any:
    """``host_class``'s own declaration of ``name`` (a shared text host's)."""
    return vars(host_class)[name].value


def _on_patches(host_class: type, name: str, description: str) -> Value:
    """The text host's ``name`` read at the same point, served on the packed row as Patches."""
    return dataclasses.replace(_declared(host_class, name), layout=Patches, description=description,
                               view=IMAGES_AXIS)


# The text block's locators (and whatever else it declares, e.g. how layer_mid is assigned),
# served [1, patches, vision_hidden_size].
VisionBlock = host("QwenVisionBlock", Block, values=[
    _on_patches(Block, "layer_input", "The tower's stream entering the block"),
    _on_patches(Block, "attention_norm_output", "The normed stream entering the attention"),
    _on_patches(Block, "layer_mid", "The tower's stream after the attention add"),
    _on_patches(Block, "mlp_norm_output", "The normed stream entering the MLP"),
    _on_patches(Block, "mlp_input", "What the MLP is called with"),
    _on_patches(Block, "layer_output", "The tower's stream leaving the block"),
], HOST="model.vision.layers[i]")

# print(model) lists a host's values most derived class first, in declaration order; the
# support table lists them in the base class's order (`Host.values`).
VisionAttention = host("QwenVisionAttention", Attention, values=[
    Value("attention_queries", Queries, "The queries entering attention", op("unsqueeze_0")),
    Value("attention_keys", Keys, "The keys entering attention", op("unsqueeze_1")),
    Value("attention_values", Values, "The values entering attention", op("unsqueeze_2")),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
          op("torch_cat_0")),
    # the text attention returns a tuple (element 0); this one returns the tensor
    Value("attention_output", Patches, "What the attention adds to the tower's stream", own("output"),
          view=IMAGES_AXIS),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
          child("o_proj", "input"), view=IMAGES_HEADS),
    dataclasses.replace(_declared(Attention, "attention_scores"), conditions=(NO_PATTERN,)),
    dataclasses.replace(_declared(Attention, "attention_probabilities"), conditions=(NO_PATTERN,)),
], HOST="model.vision.layers[i].self_attn")

VisionMLP = host("QwenVisionMLP", MLP, values=[
    _on_patches(MLP, "mlp_output", "What the MLP adds to the tower's stream"),
    Value("mlp_activation", Neurons, "The activation function's output", child("act_fn"), view=IMAGES_AXIS),
    Value("mlp_neurons", Neurons, "What the down projection receives", child("down_proj", "input"),
          view=IMAGES_AXIS),
], HOST="model.vision.layers[i].mlp")

# -- the images the encyclopedia measures with ------------------------------------------------


def example_images(processor: Any = None) -> list:
    """A red square (2 x 2 merge blocks: 64 x 64 pixels at patch 16) and a wide image of seeded noise
    (4 x 2 merge blocks: 128 x 64), sides the processor keeps as they are (multiples of
    patch_size * merge_size, ``processor``'s, 16 * 2 when none is given)."""
    import numpy as np
    from PIL import Image

    ip = getattr(processor, "image_processor", None)
    unit = ip.patch_size * ip.merge_size if ip is not None else 32
    red = Image.new("RGB", (2 * unit, 2 * unit), (255, 0, 0))
    noise = np.random.default_rng(0).integers(0, 256, size=(2 * unit, 4 * unit, 3), dtype=np.uint8)
    return [red, Image.fromarray(noise)]


def trace_inputs(model: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of ``model.trace`` for one prompt with both example images."""
    from ..processing import image_placeholder

    pad = image_placeholder(model.processor)
    return (f"Compare {pad} with {pad}. Which one is red?",), {"images": example_images(model.processor)}


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The sizes of the image dimensions for a trace called with ``(args, kwargs)`` (the processor
    alone, no forward): ``images`` is the packed row's axis of 1, ``patches`` every image's
    t * h * w, ``image_tokens`` what the merger folds them into."""
    encoding = model.processor(text=args[0] if args else kwargs["text"], images=kwargs["images"],
                               return_tensors="pt")
    patches = int(encoding["image_grid_thw"].prod(-1).sum())
    return {"images": 1, "patches": patches, "image_tokens": patches // model.vision.spatial_merge_size ** 2,
            "vision_hidden_size": model.vision.vision_hidden_size}


# -- names: the wrapper's layout, and each line's spelling inside the encoder -------------------

#: the wrapper's text stack, encoder and merger, mounted at the root (every Qwen VL wrapper)
MOUNTS = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.visual": "vision",
    "model.visual.merger": "projector",
}

#: native -> standard names inside the encoder, Qwen3-VL / Qwen3.5 spelling
RENAME = {
    "blocks": "layers",
    "norm1": "input_layernorm",
    "norm2": "post_attention_layernorm",
    "attn": "self_attn",
    # the attention's output projection only: patch_embed.proj keeps its name
    "attn.proj": "attn.o_proj",
    # the MLP's and the merger's second linear
    "linear_fc2": "down_proj",
}

#: the same standard names from the Qwen2-VL / Qwen2.5-VL spelling: Qwen2-VL's MLP is fc1, act, fc2,
#: and on both the merger is ln_q and an nn.Sequential (0: the first linear, 1: GELU, 2: the second)
RENAME_FC = {
    **{k: v for k, v in RENAME.items() if k != "linear_fc2"},
    "fc1": "linear_fc1",
    "act": "act_fn",
    "fc2": "down_proj",
    "ln_q": "norm",
    "mlp.0": "linear_fc1",
    "mlp.1": "act_fn",
    "mlp.2": "down_proj",
}


#: Qwen3-VL's DeepStack mergers, mounted at the root beside the projector
DEEPSTACK_MOUNTS = {"model.visual.deepstack_merger_list": "deepstack_projectors"}

#: what a DeepStack line must resolve with the image-text-to-text task
DEEPSTACK_PATHS = ["vision.pos_embed", "deepstack_projectors"]


def envoys(vision: type, block: type, attention: type, mlp: type, vision_host: type | None = None) -> dict[type, type]:
    """ENVOYS entries of a line's encoder: its model, block, attention and MLP classes onto the hosts
    (``vision_host``: a subclass of `Vision` with the line's own values)."""
    return {vision: vision_host or Vision, block: VisionBlock, attention: VisionAttention, mlp: VisionMLP}


# -- loading: every checkpoint of these lines is the wrapper ------------------------------------


def wrapper_build(wrapper: type):
    """A family's ``build`` for a line whose checkpoints are all ``wrapper`` (…ForConditionalGeneration).

    ``task="image-text-to-text"`` loads the wrapper with its processor. ``"text-generation"`` (the
    default) loads the same wrapper and drops its vision encoder (transformers has no text-only class
    for these lines): text prompts run as they do on the whole wrapper, with the text model's names
    and values, and model.vision does not exist.
    """
    from . import _loading

    _quiet_text_pipeline(wrapper)

    def build(checkpoint, task: str, **hf_kwargs: Any) -> tuple[Any, dict]:
        _loading.check_task(task)
        module = wrapper.from_pretrained(checkpoint, **hf_kwargs)
        if task == "text-generation":
            del module.model.visual
            return module, {"tokenizer": _loading.tokenizer(checkpoint)}
        from ..processing import load_processor

        processor = load_processor(checkpoint)
        return module, {"tokenizer": processor.tokenizer, "processor": processor}

    return build


def _quiet_text_pipeline(wrapper: type) -> None:
    """Drop transformers' "not supported for text-generation" error for ``wrapper``: its pipeline lists the
    ...ForCausalLM classes only, but the wrapper runs text prompts as they are (nnsight's pipeline works)."""
    import logging

    message = f"The model '{wrapper.__name__}' is not supported for text-generation."
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


# -- DeepStack (Qwen3-VL): vision features added to the first text blocks' output ------------------

#: where DeepStack's addition is served: the text model passes block i's output and the features
#: through ``_deepstack_process`` right after the block returns (`install_deepstack` serves it)
DEEPSTACK = "deepstack"


@dataclass(frozen=True)
class AfterBlock(Tap):
    """A point of the text model's forward right after block i returns, served by this library."""

    def read_at(self) -> str:
        what = "the arguments of" if self.io == "input" else "the output of"
        return f"after the block, inside the text model's forward: {what} {self.described}{self.part()}"


WITH_IMAGES = Condition(
    needs='task="image-text-to-text" and images in the prompt',
    why="DeepStack's features come from the vision encoder",
    holds=lambda model: model.task == "image-text-to-text",
)


def deepstack_blocks(model: Any) -> int:
    """How many text blocks (the first ones) receive DeepStack features: one per deepstack_visual_indexes."""
    return len(getattr(model._module.config.vision_config, "deepstack_visual_indexes", None) or ())


class _DeepStackOnly:
    """deepstack_output exists on the first `deepstack_blocks` blocks only: say so on the others."""

    def _require(self, value: Value) -> None:
        super()._require(value)
        index = int(self.path.rsplit(".", 1)[-1])
        count = deepstack_blocks(self._std_model)
        if value.name == "deepstack_output" and index >= count:
            raise Unavailable(f"{self._standard_path()}.deepstack_output is unavailable: DeepStack adds features "
                              f"after blocks 0 to {count - 1} only, one per vision_config.deepstack_visual_indexes "
                              f"entry ({count})")


_DeepStackBlock = host("QwenDeepStackBlock", Block, values=[
    Value("deepstack_output", ImageFeatures,
          "What DeepStack adds to the stream leaving this block, at the image tokens: the features of the "
          "vision block deepstack_visual_indexes[i], through its own merger (blocks below "
          "len(deepstack_visual_indexes) only)",
          AfterBlock(io="input", element=2, name=DEEPSTACK, described="_deepstack_process"),
          conditions=(WITH_IMAGES,)),
], TRACKS_TOKENS=True)

#: ``model.layers[i]`` of a Qwen3-VL line (a mixture's block records its token shape, so every one does)
DeepStackBlock = type("QwenDeepStackBlock", (_DeepStackOnly, _DeepStackBlock), {"HOST": "model.layers[i]"})


def install_deepstack(model: Any) -> None:
    """Serve DeepStack's addition after each block that gets one (nothing on a line without DeepStack).

    The text model calls ``_deepstack_process(hidden_states, visual_pos_masks, features)`` right after
    block i; it is wrapped here (on this model's instance) so the call's arguments are served at
    ``{layers[i] path}.deepstack.input`` in a trace, read and replaceable like any value.
    """
    text = model._module.model.language_model
    if not hasattr(type(text), "_deepstack_process"):
        return
    layers = list(model.layers)
    state = {"block": -1}
    for index, layer in enumerate(layers):
        layer._module.register_forward_hook(lambda module, args, output, index=index: state.update(block=index))
    process = type(text)._deepstack_process

    def deepstack(hidden_states: Any, visual_pos_masks: Any, features: Any) -> Any:
        args = (hidden_states, visual_pos_masks, features)
        interleaver = model.interleaver
        if interleaver.interleaving:
            location = f"{layers[state['block']].path}.{DEEPSTACK}.input"
            args, _ = interleaver.handle(location, (args, {}))
        return process(text, *args)

    text._deepstack_process = deepstack


__all__ = ["Vision", "VisionBlock", "VisionAttention", "VisionMLP", "RENAME", "RENAME_FC", "MOUNTS", "DEEPSTACK_MOUNTS", "DEEPSTACK_PATHS", "AtRoot",
           "Worded", "AfterBlock", "install_sources", "install_deepstack", "prepare", "NO_PATTERN", "IMAGES_HEADS",
           "IMAGE_TOKENS", "RETURNED", "WITH_IMAGES", "DeepStackBlock", "deepstack_blocks", "example_images",
           "trace_inputs", "image_sizes", "envoys", "wrapper_build", "required_paths", "dense_dim_sizes", "VISION_PATHS", "variants",
           "vision_variants"]


# -- the Qwen ViT line's variants, read off each line's own encoder (built on the meta device) ----

LINES = (
    ("Qwen2-VL", "qwen2_vl", "Qwen2VLVisionConfig", "Qwen2VisionTransformerPretrainedModel"),
    ("Qwen2.5-VL", "qwen2_5_vl", "Qwen2_5_VLVisionConfig", "Qwen2_5_VisionTransformerPretrainedModel"),
    ("Qwen3-VL", "qwen3_vl", "Qwen3VLVisionConfig", "Qwen3VLVisionModel"),
    ("Qwen3-VL-MoE", "qwen3_vl_moe", "Qwen3VLMoeVisionConfig", "Qwen3VLMoeVisionModel"),
    ("Qwen3.5", "qwen3_5", "Qwen3_5VisionConfig", "Qwen3_5VisionModel"),
    ("Qwen3.5-MoE", "qwen3_5_moe", "Qwen3_5MoeVisionConfig", "Qwen3_5MoeVisionModel"),
)

_ACTIVATIONS = {"QuickGELUActivation": "QuickGELU", "GELUTanh": "GELU (tanh)", "SiLUActivation": "SiLU",
                "GELUActivation": "GELU", "PytorchGELUTanh": "GELU (tanh)"}


def _norm_kind(module) -> str:
    return "RMSNorm" if "RMSNorm" in type(module).__name__ else type(module).__name__


def _mlp_kind(mlp) -> str:
    names = [name for name, _ in mlp.named_children()]
    act = getattr(mlp, "act_fn", None) or getattr(mlp, "act", None)
    act = _ACTIVATIONS.get(type(act).__name__, type(act).__name__)
    if "gate_proj" in names:
        return "SwiGLU, biased" if mlp.gate_proj.bias is not None else "SwiGLU"
    first, second = ("fc1", "fc2") if "fc1" in names else ("linear_fc1", "linear_fc2")
    return f"{first}, {act}, {second}"


def _beyond(model, config) -> str:
    extra = []
    window = getattr(config, "window_size", None)
    if window:
        extra.append(f"windows of {window} pixels except on fullatt_block_indexes")
    if hasattr(model, "pos_embed"):
        extra.append("learned pos_embed")
    if getattr(config, "deepstack_visual_indexes", None):
        extra.append("DeepStack taps")
    return "; ".join(extra) or "none"


def variant(module: str, config_name: str, class_name: str) -> list[str]:
    """[block norms, merger norm, MLP, beyond the shared encoder] of one line's encoder."""
    import importlib

    import torch

    configs = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    models = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    config = getattr(configs, config_name)(depth=1)
    with torch.device("meta"):
        model = getattr(models, class_name)._from_config(config)
    merger_norm = getattr(model.merger, "norm", None) or model.merger.ln_q
    return [_norm_kind(model.blocks[0].norm1), _norm_kind(merger_norm), _mlp_kind(model.blocks[0].mlp),
            _beyond(model, config)]


def variants() -> dict:
    """The variants table: one row per line, lines whose encoders agree merged ("Qwen3-VL, -MoE")."""
    rows: list[list[str]] = []
    for line, module, config_name, class_name in LINES:
        cells = variant(module, config_name, class_name)
        if rows and rows[-1][1:] == cells and line.startswith(rows[-1][0].split(",")[0]):
            rows[-1][0] += ", -" + line.rsplit("-", 1)[-1]
            continue
        rows.append([line, *cells])
    columns = ["line", "block norms", "merger norm", "MLP", "beyond the shared encoder"]
    return {"columns": columns, "rows": rows}


#: a family's ``vision_variants`` (the shared notes' table)
vision_variants = variants
