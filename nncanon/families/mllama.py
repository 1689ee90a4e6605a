"""Llama 3.2 Vision (MllamaForConditionalGeneration, model_type mllama): Llama's decoder with gated cross-attention
blocks reading a tiled vision encoder.

The wrapper (``model.model`` an MllamaModel) holds the vision model (``model.vision_model`` -> ``vision``), a
linear projector (``model.multi_modal_projector`` -> ``projector``) and the text model
(``model.language_model``). Unlike LLaVA's line, no image feature enters the prompt: each image is one
``<|image|>`` token, embedded like any other, and the images reach the text stream only through the
cross-attention blocks (``cross_attention_layers``: blocks 3, 8, 13, ... of 40 on the 11B model):

- the processor fits each image to a canvas of up to ``max_image_tiles`` square tiles (its aspect ratio picks the
  canvas: ``aspect_ratio_ids``), pads it and cuts it into tiles; the vision model embeds each tile's patches (a
  stride-patch convolution), adds a tanh-gated embedding of the tile's place in the canvas, prepends a class
  token, adds gated per-patch and per-tile positions (``vision.patch_embeddings``), norms, and runs a local
  transformer within each tile and then a global transformer over all of an image's tiles (its blocks
  tanh-gated); its output is the global transformer's last state with the local transformer's states at
  ``intermediate_layers_indices`` concatenated along the width (``vision.tower_output``, ``vision_output_dim``
  wide);
- the projector maps each row to the text width (``vision.image_features``): the states every cross-attention
  block attends to (``layers[i].cross_attn.cross_attention_states``);
- a self-attention block is Llama's block (its hosts unchanged); a cross-attention block
  (`nncanon.parts.vision.cross_attention`) norms the stream, attends from it to the image rows under the processor's
  ``cross_attention_mask`` (a text token sees the tiles of the images from the last ``<|image|>`` before it on),
  q and k RMS-normed per head, no rotary, and adds the result scaled by ``tanh(cross_attn_attn_gate)``; its MLP's
  add is scaled by ``tanh(cross_attn_mlp_gate)`` and zeroed on a text row that sees no image.

A call with no image skips the cross-attention blocks altogether (transformers' text model leaves them out), so
their values, and the vision model's, exist under ``task="image-text-to-text"`` with images only. The default
load ("text-generation") loads the whole wrapper with the tokenizer alone: every self-attention block is served.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.mllama import modeling_mllama as hf

from ..core.hosts import host
from ..core.layouts import layout
from ..core.locators import child
from ..core.model import StandardModel
from ..core.precision import STEP, SUBBLOCK
from ..core.relations import first, relation
from ..core.values import Value
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, TEXT_PATHS, Block
from ..parts.blocks.mlp import MLP
from ..parts.vision.cross_attention import (
    RUNNING_STACK,
    RunningStack,
    cross_attention_host,
    gated_block,
    runs,
)
from ..parts.vision.vision_line import MASK, AtRoot, image_token_mask_value
from ..parts.vision.vision_towers import TowerAttention, TowerBlock, TowerMLP, _TowerSizes

FAMILY = "mllama"
MODEL_TYPES = ("mllama",)
RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_model": "vision",
    "model.multi_modal_projector": "projector",
    # the vision model's local and global transformers' blocks (component-wise: one does not match the other)
    "transformer.layers": "layers",
    "global_transformer.layers": "global_layers",
    # the vision MLP's CLIP names, as on the other towers (the text MLP's gate/up/down_proj are left alone)
    "fc1": "linear_fc1",
    "activation_fn": "act_fn",
    "fc2": "down_proj",
}

#: the build proves the family under an eager image load too: the cross-attention pattern exists only there
IMAGE_EAGER = True

#: the cross-attention blocks and the vision model run only on a call with images
IMAGES = runs(needs='task="image-text-to-text" and a call with images',
              why="a call with no image skips the cross-attention blocks and the vision model (transformers' text "
                  "model leaves a cross-attention block out when it has no states to attend to)",
              holds=lambda model: model.task == "image-text-to-text")

# -- the local transformer's blocks: CLIP-built, attending over an image's tiles under the padding mask ----------


def _tile_mask(inputs: Any) -> Any:
    args, kwargs = inputs
    return kwargs["attention_mask"] if "attention_mask" in kwargs else args[1]


def _tile_pattern(host: Any, queries: Any, keys: Any, mask: Any) -> tuple[Any, Any]:
    scores = queries.double() @ keys.double().transpose(-1, -2) * host._module.scaling + mask.double()
    return scores, scores.softmax(-1)


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + the tile mask) · "
          "attention_values over all of an image's tiles' rows (the mask: the dtype's minimum where both the query "
          "and the key are padding, a padding tile's or a tile's padding rows)", proves="attention_head_outputs",
          reads="inputs attention_queries attention_keys attention_values attention_head_outputs", tolerance=SUBBLOCK)
def _tile_attention(host, r):
    """A softmax over tiles · padded rows keys (64 on the tiny model) of head_dim products, then a sum over them:
    within SUBBLOCK's 800 roundings."""
    _, probabilities = _tile_pattern(host, r["attention_queries"], r["attention_keys"], _tile_mask(r["inputs"]))
    return [((probabilities @ r["attention_values"].double()).transpose(1, 2), r["attention_head_outputs"])]


@relation("attention_scores == attention_queries · attention_keysᵀ · scaling + the tile mask; attention_probabilities "
          "== softmax(attention_scores)", proves="attention_scores attention_probabilities",
          reads="inputs attention_queries attention_keys attention_scores attention_probabilities", tolerance=SUBBLOCK)
def _tile_scores(host, r):
    mask = _tile_mask(r["inputs"])
    scores, probabilities = _tile_pattern(host, r["attention_queries"], r["attention_keys"], mask)
    allowed = (mask == 0).expand_as(scores)
    return [(scores[allowed], r["attention_scores"].double()[allowed]), (probabilities, r["attention_probabilities"])]


def _with_images(name: str, base: type, **attrs: Any) -> type:
    """``base``'s host with every value conditioned on a call with images (its module runs only then)."""
    import dataclasses

    return host(name, base, values=[dataclasses.replace(v, conditions=(IMAGES, *v.conditions)) for v in base.values()],
                **attrs)


TileAttention = _with_images("TileAttention", TowerAttention, HOST="model.vision.layers[i].self_attn",
                             RELATIONS=(TowerAttention.RELATIONS[0], _tile_attention, _tile_scores,
                                        *TowerAttention.RELATIONS[-2:]))  # per-head results, then o_proj
TileBlock = _with_images("TileBlock", TowerBlock)
TileMLP = _with_images("TileMLP", TowerMLP)


@relation("layers[0].layer_input == layernorm_pre(patch_embeddings), each tile's rows padded to a multiple of 8 with "
          "zeros and an image's tiles one after another; layers[i].layer_output == layers[i+1].layer_input",
          proves="layers[*].layer_input", reads="patch_embeddings layers[*].layer_input layers[*].layer_output")
def _local_stack(host, r):
    import torch.nn.functional as F

    embedded = host._module.layernorm_pre(r["patch_embeddings"])
    pad = (8 - embedded.shape[-2] % 8) % 8
    entering = F.pad(embedded, (0, 0, 0, pad)).flatten(1, 2)
    outs, ins = r["layers[*].layer_output"], r["layers[*].layer_input"]
    return [(entering, ins[0]), *[(first(out), nxt) for out, nxt in zip(outs[:-1], ins[1:])]]


# -- the global transformer's blocks: the same blocks, each add gated by tanh ------------------------------------


@relation("layer_mid == layer_input + tanh(gate_attn) · self_attn's output; attention_norm_output == "
          "input_layernorm(layer_input) == what self_attn is called with", proves="layer_mid attention_norm_output",
          reads="layer_input attention_norm_output self_attn.input self_attn.output layer_mid")
def _global_attention_add(host, r):
    module = host._module
    return [(r["layer_input"] + module.gate_attn.tanh() * first(r["self_attn.output"]), r["layer_mid"]),
            (module.input_layernorm(r["layer_input"]), r["attention_norm_output"]),
            (first(r["self_attn.input"]), r["attention_norm_output"])]


@relation("layer_output == layer_mid + tanh(gate_ffn) · mlp's output; mlp_norm_output == "
          "post_attention_layernorm(layer_mid) == what mlp is called with", proves="layer_output mlp_norm_output",
          reads="layer_mid mlp_norm_output mlp.input mlp.output layer_output")
def _global_mlp_add(host, r):
    module = host._module
    return [(r["layer_mid"] + module.gate_ffn.tanh() * first(r["mlp.output"]), r["layer_output"]),
            (module.post_attention_layernorm(r["layer_mid"]), r["mlp_norm_output"]),
            (first(r["mlp.input"]), r["mlp_norm_output"])]


GlobalTileBlock = _with_images("GlobalTileBlock", host("_GlobalTileBlock", values=[
    v for v in TowerBlock.values() if v.name != "mlp_input"]), HOST="model.vision.global_layers[i]",
    RELATIONS=(_global_attention_add, _global_mlp_add))


@relation("global_layers[0].layer_input == layernorm_post(layers[-1].layer_output) + tanh(gate) · "
          "post_tile_positional_embedding(aspect_ratio_id), per tile; global_layers[i].layer_output == "
          "global_layers[i+1].layer_input", proves="global_layers[*].layer_input",
          reads="inputs layers[*].layer_output global_layers[*].layer_input global_layers[*].layer_output")
def _global_stack(host, r):
    vision = host._module
    _, ratio_ids = _pixels(r["inputs"])
    local = vision.layernorm_post(first(r["layers[*].layer_output"][-1]))
    images, tiles = local.shape[0], vision.max_num_tiles
    post = vision.post_tile_positional_embedding
    tile = post.embedding.weight[ratio_ids.reshape(images)].reshape(images, tiles, 1, -1) * post.gate.tanh()
    entering = (local.reshape(images, tiles, -1, local.shape[-1]) + tile).flatten(1, 2)
    outs, ins = r["global_layers[*].layer_output"], r["global_layers[*].layer_input"]
    return [(entering, ins[0]), *[(first(out), nxt) for out, nxt in zip(outs[:-1], ins[1:])]]


# -- the vision model and the projector ------------------------------------------------------------------------

TileEmbeddings = layout("TileEmbeddings", "image_batch tiles tile_rows vision_hidden_size")
TowerTiles = layout("TowerTiles", "batch images tiles tile_rows vision_output_dim")
ImageTiles = layout("ImageTiles", "batch images tiles tile_rows hidden_size")


def _pixels(inputs: Any) -> tuple[Any, Any]:
    args, kwargs = inputs
    return (kwargs["pixel_values"] if "pixel_values" in kwargs else args[0],
            kwargs["aspect_ratio_ids"] if "aspect_ratio_ids" in kwargs else args[1])


@relation("patch_embeddings == [class_embedding, patch_embedding(pixel_values) per patch + tanh(gate) · "
          "pre_tile_positional_embedding(aspect_ratio_id)] + (1 - tanh(gate)) · position embedding + tanh(gate) · "
          "tile position embedding(aspect_ratio_id), per tile", proves="patch_embeddings",
          reads="inputs patch_embeddings", tolerance=SUBBLOCK)
def _embeddings(host, r):
    """A patch's embedding is a conv of 3·patch² terms (147 on the tiny tower) and three adds, recomputed in float64:
    within SUBBLOCK's 800 roundings."""
    import torch
    import torch.nn.functional as F

    vision = host._module
    pixels, ratio_ids = _pixels(r["inputs"])
    batch, images, tiles = pixels.shape[:3]
    conv = vision.patch_embedding
    x = F.conv2d(pixels.flatten(0, 2).double(), conv.weight.double(), stride=conv.stride).flatten(2).transpose(1, 2)
    x = x.reshape(batch * images, tiles, x.shape[1], x.shape[2])
    ids = ratio_ids.reshape(batch * images)
    pre = vision.pre_tile_positional_embedding
    x = x + (pre.embedding.weight.double()[ids].reshape(-1, tiles, 1, x.shape[-1]) * pre.gate.double().tanh())
    cls = vision.class_embedding.double().expand(*x.shape[:2], 1, -1)
    x = torch.cat([cls, x], dim=2)
    positions = vision.gated_positional_embedding
    gate = positions.gate.double().tanh()
    x = x + (1 - gate) * positions.embedding.double()
    tile = positions.tile_embedding.weight.double()[ids].reshape(x.shape)
    return [(x + gate * tile, r["patch_embeddings"])]


@relation("tower_output == [global_transformer.layers[-1] output, transformer.layers[k] output for k in "
          "intermediate_layers_indices], concatenated along the width (the intermediate states interleaved: column "
          "w · count + j is state j's column w), each tile's padding rows dropped; it is what the projector reads",
          proves="tower_output",
          reads="transformer.layers[*].output global_transformer.layers[*].output tower_output model.projector.input")
def _tower(host, r):
    import torch

    vision = host._module
    out, local = r["tower_output"], r["transformer.layers[*].output"]
    batch, images, tiles, rows, _ = out.shape
    width = vision.hidden_size

    def unpadded(state):
        return state.reshape(batch, images, tiles, -1, width)[:, :, :, :rows]

    last = unpadded(r["global_transformer.layers[*].output"][-1])
    middle = torch.stack([unpadded(local[k]) for k in vision.intermediate_layers_indices], dim=-1).flatten(-2)
    return [(last, out[..., :width]), (middle, out[..., width:]), (first(r["model.projector.input"]), out)]


@relation("image_features == projector(tower_output) = tower_output · Wᵀ + b, per row",
          proves="image_features", reads="tower_output image_features", tolerance=STEP)
def _projector(host, r):
    """One Linear over vision_output_dim terms (72 on the tiny model) in float64: within STEP's 80 roundings."""
    projector = host._std_model.projector._module
    features = r["tower_output"].double() @ projector.weight.double().T + projector.bias.double()
    return [(features, r["image_features"])]


_MllamaVision = host("_MllamaVision", values=[
    image_token_mask_value(),
    Value("patch_embeddings", TileEmbeddings,
          "Each tile's rows entering the local transformer, before layernorm_pre: the class token and each patch's "
          "embedding, the gated tile, position and tile-position embeddings added", child("layernorm_pre", "input"),
          conditions=(IMAGES,)),
    Value("tower_output", TowerTiles,
          "The vision model's output the projector reads: the global transformer's last state and the local "
          "transformer's intermediate states, concatenated along the width, padding rows dropped",
          AtRoot(io="input", module="model.multi_modal_projector", shown="model.projector", element=0,
                 words="the projector's input, at the root"), conditions=(IMAGES,)),
    Value("image_features", ImageTiles,
          "The projected image rows every cross-attention block attends to (its cross_attention_states)",
          AtRoot(io="output", module="model.multi_modal_projector", shown="model.projector",
                 words="the projector's output, at the root"), conditions=(IMAGES,)),
], HOST="model.vision", RELATIONS=(MASK, _embeddings, _local_stack, _global_stack, _tower, _projector))
#: the vision model's sizes read off its config as a CLIP tower's are (num_layers: the local transformer's blocks)
MllamaVision = type("MllamaVision", (_TowerSizes, _MllamaVision), {"HOST": "model.vision", "class_tokens": 1})

# -- the text stack: Llama's self-attention blocks, gated cross-attention blocks ----------------------------------


@relation("cross_attention_states == vision.image_features, one row of states per image tile (the wrapper's "
          "reshape: [batch · images · tiles, tile_rows, hidden_size]); the keys and values of a batch entry are its "
          "tiles' rows one after another", proves="cross_attention_states",
          reads="cross_attention_states model.vision.image_features")
def _states(host, r):
    features = r["model.vision.image_features"]
    return [(features.reshape(-1, *features.shape[-2:]), r["cross_attention_states"])]


#: the states as the wrapper hands them over: one row of states per image tile
TileStates = layout("TileStates", "image_tiles tile_rows hidden_size")


CrossAttention = cross_attention_host("CrossAttention", IMAGES, extra=(_states,), states=TileStates)
@relation("cross_attention_mask allows state row r of tile t of image i to text token s iff the processor's "
          "cross_attention_mask[s, i, t] is 1 (a token sees the tiles of the images from the last <|image|> before it "
          "on), or token s sees no tile at all (then the whole row is 0)", proves="cross_attention_mask",
          reads="model.inputs cross_attention_mask")
def _mask_from_processor(host, r):
    args, kwargs = r["model.inputs"]
    tiles = kwargs["cross_attention_mask"]  # [batch, seq, images, tiles]
    rows = host._std_model.vision._module.num_patches
    sees = tiles.repeat_interleave(rows, dim=3).flatten(2).bool()
    allowed = sees | ~sees.any(-1, keepdim=True)
    return [(allowed.double(), (r["cross_attention_mask"] == 0).double())]


CrossBlock = gated_block("CrossBlock", IMAGES, "cross_attn_attn_gate", "cross_attn_mlp_gate", Block,
                         extra=(_mask_from_processor,))
#: the MLP of a cross-attention block: runs only when its block does
CrossMLP = _with_images("CrossMLP", MLP, HOST="model.layers[i].mlp")

ENVOYS = {hf.MllamaSelfAttentionDecoderLayer: Block, hf.MllamaTextSelfAttention: Attention,
          hf.MllamaCrossAttentionDecoderLayer: CrossBlock, hf.MllamaTextCrossAttention: CrossAttention,
          hf.MllamaVisionModel: MllamaVision}
# the decoder's stack relation reads every block, so a text prompt (which skips the cross-attention blocks) skips it
# too; the stack over the blocks the call runs joins the self-attention blocks there
ROOT = host("MllamaStandardModel", RunningStack, StandardModel, values=ROOT_VALUES,
            RELATIONS=(*ROOT_RELATIONS, RUNNING_STACK),
            family_module=sys.modules[__name__])


def layout_envoys(config: Any) -> dict:
    """Each block's MLP by its path: a cross-attention block's runs only with images (the class is the same); the
    local and global transformers' blocks by theirs (the same class, the global one's adds gated)."""
    cross = set(config.cross_attention_layers)
    text = {f"language_model.layers.{i}.mlp": CrossMLP if i in cross else MLP for i in range(config.num_hidden_layers)}
    return {**text, "vision_model.transformer.layers.*": TileBlock,
            "vision_model.transformer.layers.*.self_attn": TileAttention,
            "vision_model.transformer.layers.*.mlp": TileMLP, "vision_model.global_transformer.layers.*": GlobalTileBlock}


def _build():
    from ..parts import loading
    from ..parts.vision.qwen_vit.loading import _quiet_text_pipeline

    wrapper = hf.MllamaForConditionalGeneration
    _quiet_text_pipeline(wrapper)  # nnsight's text pipeline would warn that the wrapper is no causal LM

    def build(checkpoint, task: str, **hf_kwargs: Any) -> tuple[Any, dict]:
        """The whole wrapper either way: "text-generation" with the tokenizer (a text prompt never runs the vision
        model or a cross-attention block), "image-text-to-text" with the processor."""
        loading.check_task(task)
        module = loading.pretrained(wrapper, checkpoint, **hf_kwargs)
        if task == "text-generation":
            return module, {"tokenizer": loading.tokenizer(checkpoint)}
        from ..core.processing import load_processor

        processor = load_processor(checkpoint)
        return module, {"tokenizer": processor.tokenizer, "processor": processor}

    build.wrapper = wrapper
    return build


build = _build()


def layer_types(model: Any) -> list[str]:
    cross = set(model.text_config.cross_attention_layers)
    return ["cross_attention" if i in cross else "full_attention" for i in range(model.text_config.num_hidden_layers)]


def required_paths(model: Any) -> list[str]:
    first = model.text_config.cross_attention_layers[0]
    return [*TEXT_PATHS, "vision", "projector", f"layers.{first}.cross_attn", f"layers.{first}.cross_attn.q_norm"]


def dim_sizes(model: Any) -> dict[str, int]:
    vision = model._module.config.vision_config
    return {"intermediate_size": model.text_config.intermediate_size, "vision_hidden_size": vision.hidden_size,
            "vision_output_dim": vision.vision_output_dim, "tiles": vision.max_num_tiles,
            "tile_rows": (vision.image_size // vision.patch_size) ** 2 + 1}


def example_images(processor: Any = None) -> list:
    """A red square (32 x 32) and a wide image of seeded noise (64 x 32): two aspect ratios, so the processor fits
    them to canvases of different tile counts."""
    from ..parts.vision.vision_towers import example_images as two

    return two(processor)


def trace_inputs(model: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of ``model.trace`` for one prompt with both example images, one ``<|image|>`` each."""
    image = model.processor.image_token
    return (f"{image}{image}Compare the two. Which one is red?",), {"images": [example_images(model.processor)]}


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The image dimensions of a call (the processor alone, no forward): ``images`` a prompt's, ``tiles`` the padded
    tile count (max_image_tiles), ``vision_tokens`` the rows each cross-attention attends over."""
    encoding = model.processor(text=args[0] if args else kwargs["text"], images=kwargs["images"], return_tensors="pt")
    batch, images, tiles = encoding["pixel_values"].shape[:3]
    rows = dim_sizes(model)["tile_rows"]
    model.vision._images_of_call = batch * images  # the local transformer runs each image's tiles as one row
    return {"images": images, "image_batch": batch * images, "tiles": tiles, "vision_tokens": images * tiles * rows,
            "image_tiles": batch * images * tiles, "patches": tiles * (rows + (8 - rows % 8) % 8)}


def prepare(model: Any) -> None:
    """Nothing to install: every value is read at a module's input or output, or the attention call (installed by
    the hosts)."""
