"""PaliGemma (PaliGemmaForConditionalGeneration, model_type paligemma): Gemma's text model reading a SigLIP tower
through one linear projector, a prefix-LM: the images and the prompt attend both ways, the suffix causally.

The wrapper (``model.model`` a PaliGemmaModel) holds a SigLIP vision tower (``model.vision_tower`` -> ``vision``, a
SiglipVisionModel), a projector of one Linear (``model.multi_modal_projector`` -> ``projector``:
``linear``, vision_hidden_size -> projection_dim, with a bias) and the text model (``model.language_model``,
Gemma's decoder, whose blocks and MLP are the gemma family's hosts; PaliGemma 2's, Gemma 2's). It is the shared vision line
(`nncanon.parts.vision.vision_line`) with a SigLIP tower (`nncanon.parts.vision.vision_towers.siglip_tower`):

- the tower runs each image on its own row, ``[images, patches, width]``: a stride-patch convolution and a learned
  position per patch, no class token (``vision.patch_embeddings``), pre-norm LayerNorm blocks over the whole
  image, then ``post_layernorm`` on the last block's output (``vision.tower_output``);
- the projector maps each patch to one image token, ``tower_output · linear.weightᵀ + linear.bias``
  (``vision.image_features``, ``(image_size / patch_size)²`` per image; transformers 5 scales nothing here: the
  ``sqrt(hidden_size)`` of Gemma's embedding is inside ``embed_tokens`` and reaches the text tokens only), scattered
  at the prompt's image tokens (``vision.image_token_mask``);
- the processor writes the image tokens first, then ``<bos>``, the prompt and ``\\n`` (the prefix, token_type_ids
  0) and the suffix after it (token_type_ids 1); the wrapper's mask lets every prefix token see every other prefix
  token, the later ones too, and keeps the suffix causal (``self_attn.attention_allowed`` under eager). Without
  token_type_ids (a text prompt) the wrapper's mask is causal, but PaliGemmaConfig sets the text model's
  use_bidirectional_attention, so where sdpa is handed no mask (a text prompt with no padding) it attends both ways
  and eager does not: the two loads differ there (the build's text batches are padded, where both are causal).

PaliGemma 2 is the same wrapper over Gemma 2 (text_config.model_type gemma2: the gemma2 family's sandwich block,
its scores softcapped before the mask, its logits softcapped, ``layout_root``); its sliding blocks OR the prefix over
the sliding causal mask, so a prefix token sees the whole prefix even beyond the window. transformers runs its text
model eager (the softcap) and its tower sdpa: the tower's pattern values ask the tower's own implementation.

transformers counts PaliGemma's positions from 1 (``position_ids`` = 1 + the token's index), not 0; a left-padded
text batch is numbered from 0 by nnsight, which hands the model its own position_ids there.
task="text-generation" (the default) loads the wrapper without its tower and projector; "image-text-to-text" with
its processor, ``trace_inputs`` a prompt with both example images and a suffix.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from transformers import PaliGemmaProcessor
from transformers.models.gemma import modeling_gemma as gemma
from transformers.models.gemma2 import modeling_gemma2 as gemma2
from transformers.models.paligemma import modeling_paligemma as hf
from transformers.models.siglip import modeling_siglip as siglip

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import relation
from ..core.values import Condition
from ..parts.attention.softmax import (
    ATTENTION_RELATIONS,
    EAGER,
    HEAD_RESULTS_RELATION,
    LINK_RELATIONS,
    Attention,
)
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.span_mask import allowed_value, span_relations
from ..parts.vision.vision_line import install_sources, replace
from ..parts.vision.vision_towers import (
    TOWER_RENAME,
    TowerAttention,
    TowerBlock,
    TowerMLP,
    example_images,
    siglip_tower,
    tower_build,
)
from .gemma import ROOT_RELATIONS_GEMMA, GemmaNormBlock
from .gemma2 import ROOT_RELATIONS_GEMMA2, SandwichBlock, SoftcappedAttention, softcap
from .gemma2 import _scaled_embeddings as _text_embeddings
from .gemma3 import FEATURES
from .gemma3 import _scaled_embeddings as _image_embeddings

FAMILY = "paligemma"
#: the build proves the family under an eager image load too: the prefix attending both ways exists only in a call
#: with token_type_ids (the processor's), and only eager hands the attention its mask
IMAGE_EAGER = True
MODEL_TYPES = ("paligemma",)
RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
    **TOWER_RENAME,
}

# -- the projector: one linear layer --------------------------------------------------------------------------


@relation("image_features == tower_output · projector.linear.weightᵀ + projector.linear.bias (nothing scaled), one "
          "image token per patch, the images' tokens one after another", proves="image_features",
          reads="tower_output image_features")
def _linear_projector(host, r):
    """Recomputed in float64 from the projector's own weights; the model's float32 side rounds in a sum of
    vision_hidden_size products and the bias (48 + 1 = 49 roundings on the tiny model), within STEP's 80."""
    linear = host._std_model.projector.linear._module
    out = r["tower_output"].double() @ linear.weight.double().T + linear.bias.double()
    return [(out.reshape(-1, out.shape[-1]), r["image_features"])]


PaliGemmaVision = siglip_tower("PaliGemmaVision", _linear_projector, FEATURES)

#: the tower's own implementation: transformers runs PaliGemma 2's Gemma 2 eager (its softcap) and the tower sdpa, so
#: a tower value only eager serves asks the tower's config, not the text model's (StandardModel.attn_implementation)
TOWER_EAGER = Condition(needs=EAGER.needs, why=EAGER.why,
                        holds=lambda model: model._module.config.vision_config._attn_implementation == "eager")
PaliGemmaTowerAttention = host("PaliGemmaTowerAttention", TowerAttention, values=[
    dataclasses.replace(v, conditions=tuple(TOWER_EAGER if c is EAGER else c for c in v.conditions))
    for v in TowerAttention.values() if EAGER in v.conditions])

# -- the text attention: the prefix both ways, the suffix causal ------------------------------------------------


def prefix_spans(host: Any, r: dict) -> Any:
    """[batch, seq]: 0 on the prefix (token_type_ids 0: the images, <bos>, the prompt), -1 on the suffix; -1
    everywhere when the model was called without token_type_ids (a text prompt: the mask is causal)."""
    import torch

    _, kwargs = r["model.inputs"]
    types, padding = kwargs.get("token_type_ids"), r["model.attention_mask"]
    if types is None:
        return torch.full_like(padding, -1, dtype=torch.long)
    return torch.where(types == 0, 0, -1)


_attention, _pattern, _allowed = span_relations(
    prefix_spans, "model.inputs",
    attention="attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + mask) · "
              "attention_values, the mask causal except that the prefix (token_type_ids 0) sees itself both ways",
    pattern="attention_scores == attention_queries · attention_keysᵀ · scaling + mask (causal; both ways within the "
            "prefix); attention_probabilities == softmax(attention_scores)",
    allowed="attention_allowed == the block's mask: key k is allowed to query q iff k <= q or both are in the "
            "prefix (token_type_ids 0), and k is not padding")

PREFIX_ALLOWED = allowed_value("Which keys each query may attend to under the block's mask (causal, both ways "
                               "within the prefix: the images and the prompt); derived, read-only")

#: PaliGemmaModel numbers positions from 1, so the first token's queries are turned (the weights' relation applies
#: the rotary the attention is called with; nnsight's left-padding correction numbers a padded text batch from 0)
FIRST_POSITION = "position 1: PaliGemma counts positions from 1, except in a left-padded text batch, which nnsight numbers from 0"

PrefixAttention = host("PrefixAttention", Attention, values=[PREFIX_ALLOWED], RELATIONS=(
    *replace(ATTENTION_RELATIONS, attention_queries_attention_keys_attention_values_attention_head_outputs=_attention,
             attention_scores_attention_probabilities=_pattern), _allowed), FIRST_POSITION=FIRST_POSITION)

# PaliGemma 2 (text_config gemma2): Gemma 2's softcapped scores under the same prefix mask; its sliding blocks OR the
# prefix over the sliding causal mask, so a prefix token sees the whole prefix even beyond the window
_capped_attention, _capped_pattern, _capped_allowed = span_relations(
    prefix_spans, "model.inputs", capped=True, window_bounds_spans=False,
    attention="attention_head_outputs == softmax(softcap(attention_queries · attention_keysᵀ · scaling) + mask) · "
              "attention_values, the mask causal (within a sliding block's window) except that the prefix "
              "(token_type_ids 0) sees all of itself both ways",
    pattern="attention_scores_uncapped == attention_queries · attention_keysᵀ · scaling; attention_scores == "
            "softcap(attention_scores_uncapped) + mask (causal within the window; the whole prefix both ways); "
            "attention_probabilities == softmax(attention_scores)",
    allowed="attention_allowed == the block's mask: key k is allowed to query q iff k <= q and k > q - "
            "sliding_window on a sliding block, or both are in the prefix (token_type_ids 0); k is not padding")

PrefixSoftcappedAttention = host(
    "PrefixSoftcappedAttention", SoftcappedAttention, values=[PREFIX_ALLOWED],
    RELATIONS=(_capped_attention, _capped_pattern, HEAD_RESULTS_RELATION, *LINK_RELATIONS,
               ATTENTION_RELATIONS[-1], _capped_allowed),
    FIRST_POSITION=FIRST_POSITION)

# -- the root: Gemma's (Gemma 2's), the embeddings stated off the image tokens ------------------------------------

ROOT_RELATIONS = tuple(_image_embeddings if r is _text_embeddings else r for r in ROOT_RELATIONS_GEMMA)
ROOT_RELATIONS_2 = tuple(_image_embeddings if r is _text_embeddings else r for r in ROOT_RELATIONS_GEMMA2)
assert _image_embeddings in ROOT_RELATIONS and _image_embeddings in ROOT_RELATIONS_2

#: both text models' hosts (their module classes differ, so one map serves both layouts)
ENVOYS = {gemma.GemmaDecoderLayer: GemmaNormBlock, gemma.GemmaAttention: PrefixAttention, gemma.GemmaMLP: MLP,
          gemma2.Gemma2DecoderLayer: SandwichBlock, gemma2.Gemma2Attention: PrefixSoftcappedAttention,
          gemma2.Gemma2MLP: MLP,
          siglip.SiglipVisionModel: PaliGemmaVision, siglip.SiglipEncoderLayer: TowerBlock,
          siglip.SiglipAttention: PaliGemmaTowerAttention, siglip.SiglipMLP: TowerMLP}
ROOT = host("PaliGemmaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])
ROOT_2 = host("PaliGemma2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS_2,
              family_module=sys.modules[__name__])


def layout_root(text_config: Any) -> type:
    """PaliGemma 2's root (Gemma 2's: the final logits softcapped) when its text model is gemma2, else Gemma's."""
    return ROOT_2 if text_config.model_type == "gemma2" else ROOT


def past_the_head(model: Any, logits: Any) -> Any:
    """The lens's step past the head (`nncanon.lens`): PaliGemma 2's final logit softcap; nothing on PaliGemma 1."""
    return softcap(logits, getattr(model.text_config, "final_logit_softcapping", None))

_build = tower_build(hf.PaliGemmaForConditionalGeneration)


class PaliGemmaTextOrImages(PaliGemmaProcessor):
    """PaliGemmaProcessor that also takes a prompt with no image, which PaliGemmaProcessor refuses: the tokenizer's
    encoding with <bos> first (the processor turned the tokenizer's own BOS off) and no token_type_ids, the input a
    text-generation load gets; with images, PaliGemmaProcessor's own call."""

    def __call__(self, images: Any = None, text: Any = None, **kwargs: Any) -> Any:
        if images is not None:
            return super(PaliGemmaTextOrImages, self).__call__(images=images, text=text, **kwargs)
        from transformers import BatchFeature

        prompts = [text] if isinstance(text, str) else list(text)
        encoding = self.tokenizer([self.tokenizer.bos_token + p for p in prompts], padding=True)
        return BatchFeature(data=dict(encoding), tensor_type=kwargs.get("return_tensors"))


def build(checkpoint: Any, task: str, **hf_kwargs: Any) -> tuple[Any, dict]:
    """`vision_towers.tower_build`'s, the processor taking text prompts too (`PaliGemmaTextOrImages`): a text
    prompt traced on the image load reaches the text model, as on every other vision-language family."""
    module, extras = _build(checkpoint, task, **hf_kwargs)
    if "processor" in extras:
        extras["processor"].__class__ = PaliGemmaTextOrImages
    return module, extras


build.wrapper = _build.wrapper

#: the standard paths of the tower and projector (image-text-to-text only)
VISION_PATHS = ["vision", "projector", "vision.layers.0.input_layernorm", "vision.layers.0.post_attention_layernorm",
                "vision.layers.0.self_attn.o_proj", "vision.layers.0.mlp.linear_fc1", "vision.layers.0.mlp.act_fn",
                "vision.layers.0.mlp.down_proj", "vision.post_layernorm", "projector.linear"]


def required_paths(model: Any) -> list[str]:
    text = [*TEXT_PATHS, *(GEMMA2_PATHS if model.text_config.model_type == "gemma2" else [])]
    return [*text, *VISION_PATHS] if model.task == "image-text-to-text" else text


#: PaliGemma 2's sandwich norms
GEMMA2_PATHS = ["layers.0.pre_feedforward_layernorm", "layers.0.post_feedforward_layernorm"]


#: the suffix the example trace carries, so the mask has a causal part after the prefix
SUFFIX = "a red square"


def trace_inputs(model: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of ``model.trace``: the processor's encoding of one prompt with both example images and a
    suffix (nnsight hands a processor only text and images, so the suffix is encoded here); ``labels`` dropped."""
    image = model.processor.image_token
    encoding = model.processor(text=f"{image}{image}Which one is red?", images=example_images(model.processor),
                               suffix=SUFFIX, return_tensors="pt")
    return ({k: v for k, v in encoding.items() if k != "labels"},), {}


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The image dimensions of a trace called with the processor's encoding (`trace_inputs`): ``patches`` each
    image's rows (no class token), ``features`` the same (one image token per patch)."""
    encoding = args[0]
    images, _, height, width = encoding["pixel_values"].shape
    vision = model.vision
    vision._images_of_call = images
    patches = (height // vision.patch_size) * (width // vision.patch_size)
    tokens = int((encoding["input_ids"] == model._module.config.image_token_id).sum())
    return {"images": images, "patches": patches, "image_tokens": tokens, "features": patches,
            "vision_hidden_size": vision.vision_hidden_size}


def marked_blocks(full: Any) -> list[dict]:
    """The blocks the page's slider marks (`generator.facts.collect`): every block's mask lets the prefix attend both
    ways (``attention_allowed``), so all of them."""
    return [{"label": "Prefix both ways", "verb": "let the prefix attend both ways under",
             "value": "model.layers[i].self_attn.attention_allowed", "blocks": list(range(full.num_layers))}]


def prepare(model: Any) -> None:
    """The ``.source`` op image_features reads (the wrapper's masked_scatter)."""
    install_sources(model)
