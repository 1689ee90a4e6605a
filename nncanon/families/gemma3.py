"""Gemma 3 with images (Gemma3ForConditionalGeneration, model_type gemma3): Gemma 3's text model reading a
SigLIP tower through an average-pooling projector, the image tokens attending to each other both ways.

The wrapper (``model.model`` a Gemma3Model) holds a SigLIP vision tower (``model.vision_tower`` ->
``vision``, a SiglipVisionModel), a pooling projector (``model.multi_modal_projector`` -> ``projector``)
and the text model (``model.language_model``, gemma3_text's decoder, whose blocks, MLP and attention
math are gemma3_text's hosts). It is the shared vision line (`nncanon.parts.vision.vision_line`) with a SigLIP
tower (`nncanon.parts.vision.vision_towers.siglip_tower`):

- the tower runs each image on its own row, ``[images, patches, width]``: a stride-patch convolution
  and a learned position per patch, no class token (``vision.patch_embeddings``), pre-norm LayerNorm
  blocks over the whole image, then ``post_layernorm`` on the last block's output
  (``vision.tower_output``: what the projector is called with);
- the projector lays each image's rows back on its patch grid, averages kernel x kernel squares
  (``image_size / patch_size`` patches a side pooled to ``sqrt(mm_tokens_per_image)`` tokens a side),
  RMS-norms them with gain ``1 + weight`` (``mm_soft_emb_norm``) and multiplies by
  ``mm_input_projection_weight`` ``[vision_hidden_size, hidden_size]`` (``vision.image_features``,
  ``mm_tokens_per_image`` per image), scattered at the prompt's image tokens (``vision.image_token_mask``);
- in the text model the image tokens of one image attend to each other both ways: the processor marks them
  (``token_type_ids``), and the wrapper's masks let a query see every key of its own image span besides the
  causal ones (a sliding block still keeps only the last ``sliding_window`` keys before the query).

task="text-generation" (the default) loads the wrapper without its tower and projector; "image-text-to-text"
with its processor.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.gemma3 import modeling_gemma3 as hf
from transformers.models.siglip import modeling_siglip as siglip

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.precision import SUBBLOCK
from ..core.relations import pick, relation
from ..parts.attention.softmax import ATTENTION_RELATIONS
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, TEXT_PATHS
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.span_mask import allowed_value, span_relations
from ..parts.vision.vision_line import (
    FLAT,
    image_features_value,
    image_tokens,
    install_sources,
    replace,
)
from ..parts.vision.vision_towers import (  # noqa: F401 (the family API)
    TOWER_RENAME,
    TowerAttention,
    TowerBlock,
    TowerMLP,
    example_images,
    siglip_tower,
    tower_build,
    trace_inputs,
)
from ..parts.vision.vision_towers import image_sizes as _tower_image_sizes
from .gemma2 import SandwichBlock, _final_norm, gemma_rms
from .gemma3_text import ROOT_RELATIONS_GEMMA3, QKNormLocalGlobalAttention, _logits, past_the_head  # noqa: F401

FAMILY = "gemma3"
#: the build proves the family under an eager image load too: an image's tokens attending both ways exist only in
#: a call with images, and only eager hands the attention its mask
IMAGE_EAGER = True
MODEL_TYPES = ("gemma3",)
RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
    **TOWER_RENAME,
}

# -- the projector: average-pool each image's patch grid, RMS-norm, project -------------------------------------


@relation("image_features == rms(avg_pool(tower_output on each image's patch grid, kernel x kernel squares)) · "
          "(1 + mm_soft_emb_norm.weight) · mm_input_projection_weight, mm_tokens_per_image per image, the images' "
          "tokens one after another", proves="image_features", reads="tower_output image_features", tolerance=SUBBLOCK)
def _pooling_projector(host, r):
    """Recomputed in float64 from the projector's own weights; the model's float32 side rounds in a mean of kernel²
    rows, an RMS over the tower's width and a product of vision_hidden_size terms: a chain of
    kernel² + 2 · vision_hidden_size roundings (4 + 96 = 100 on the tiny model), within SUBBLOCK's 800."""
    import torch.nn.functional as F

    model = host._std_model
    projector = model.projector._module
    rows = r["tower_output"].double()
    images, patches, width = rows.shape
    side = model._module.config.vision_config.image_size // model._module.config.vision_config.patch_size
    kernel = side // round(model._module.config.mm_tokens_per_image ** 0.5)
    grid = rows.transpose(1, 2).reshape(images, width, side, side)
    pooled = F.avg_pool2d(grid, kernel, kernel).flatten(2).transpose(1, 2)
    out = gemma_rms(projector.mm_soft_emb_norm, pooled) @ projector.mm_input_projection_weight.double()
    return [(out.reshape(-1, out.shape[-1]), r["image_features"])]


#: the scatter's features come [images, mm_tokens_per_image, hidden]: served flat, one row per image token
FEATURES = image_features_value(view=FLAT)
Gemma3Vision = siglip_tower("Gemma3Vision", _pooling_projector, FEATURES)

# -- the text attention: causal, and both ways within an image's span -----------------------------------------


def image_spans(model: Any, ids: Any) -> Any:
    """[batch, seq]: the index of the image span a token is in (a run of image tokens), -1 off the image tokens."""
    import torch

    image = image_tokens(model, ids)
    starts = image & ~torch.nn.functional.pad(image, (1, 0))[:, :-1]
    return torch.where(image, starts.long().cumsum(1) - 1, -1)


def _spans(host: Any, r: dict) -> Any:
    return image_spans(host._std_model, r["model.input_ids"])


_attention, _pattern, _allowed = span_relations(
    _spans, "model.input_ids",
    attention="attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + mask) · "
              "attention_values, the mask causal except that the image tokens of one image see each other both ways "
              "(within the block's sliding window)",
    pattern="attention_scores == attention_queries · attention_keysᵀ · scaling + mask (causal; both ways within an "
            "image's span); attention_probabilities == softmax(attention_scores)",
    allowed="attention_allowed == the block's mask: key k is allowed to query q iff k <= q or both are tokens of one "
            "image's span, and k > q - sliding_window on a sliding block, and k is not padding")

#: the mask the block's attention call receives, as a value: where the image spans show
ALLOWED = allowed_value("Which keys each query may attend to under the block's mask (causal, both ways within an "
                        "image's span, within a sliding block's window); derived, read-only")

ImageSpanAttention = host("ImageSpanAttention", QKNormLocalGlobalAttention, values=[ALLOWED], RELATIONS=(
    *replace(ATTENTION_RELATIONS, attention_queries_attention_keys_attention_values_attention_head_outputs=_attention,
             attention_scores_attention_probabilities=_pattern),
    QKNormLocalGlobalAttention.RELATIONS[-1], _allowed))

# -- the root: Gemma 3's, the embeddings stated off the image tokens --------------------------------------------


@relation("token_embeddings == embed_tokens.weight[input_ids] · sqrt(hidden_size); layers[0].layer_input == "
          "token_embeddings off the image tokens (vision.image_features on them)", proves="token_embeddings",
          reads="input_ids token_embeddings layers[0].layer_input")
def _scaled_embeddings(host, r):
    ids, embedded, entering = r["input_ids"], r["token_embeddings"], r["layers[0].layer_input"]
    text = ~image_tokens(host, ids)
    table = host.embed_tokens._module.weight.double()
    return [(table[ids] * host.text_config.hidden_size ** 0.5, embedded), (embedded[text], entering[text])]


ROOT_RELATIONS_IMAGES = tuple(_scaled_embeddings if r.proves == ("token_embeddings",) else r
                              for r in ROOT_RELATIONS_GEMMA3)
assert _final_norm in ROOT_RELATIONS_IMAGES and _logits in ROOT_RELATIONS_IMAGES
assert pick(ROOT_RELATIONS, "lm_head_output") in ROOT_RELATIONS_IMAGES

ENVOYS = {hf.Gemma3DecoderLayer: SandwichBlock, hf.Gemma3Attention: ImageSpanAttention, hf.Gemma3MLP: MLP,
          siglip.SiglipVisionModel: Gemma3Vision, siglip.SiglipEncoderLayer: TowerBlock,
          siglip.SiglipAttention: TowerAttention, siglip.SiglipMLP: TowerMLP}
ROOT = host("Gemma3StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS_IMAGES,
            family_module=sys.modules[__name__])

build = tower_build(hf.Gemma3ForConditionalGeneration)

#: the standard paths of the tower and projector (image-text-to-text only)
VISION_PATHS = ["vision", "projector", "vision.layers.0.input_layernorm", "vision.layers.0.post_attention_layernorm",
                "vision.layers.0.self_attn.o_proj", "vision.layers.0.mlp.linear_fc1", "vision.layers.0.mlp.act_fn",
                "vision.layers.0.mlp.down_proj", "vision.post_layernorm", "projector.mm_soft_emb_norm",
                "projector.avg_pool"]
GEMMA3_PATHS = ["layers.0.pre_feedforward_layernorm", "layers.0.post_feedforward_layernorm",
                "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm"]


def required_paths(model: Any) -> list[str]:
    text = [*TEXT_PATHS, *GEMMA3_PATHS]
    return [*text, *VISION_PATHS] if model.task == "image-text-to-text" else text


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The tower's sizes (`vision_towers.image_sizes`), with ``features`` the rows the projector pools per image:
    every patch (no class token), not the mm_tokens_per_image image tokens it makes of them."""
    sizes = _tower_image_sizes(model, args, kwargs)
    return {**sizes, "features": sizes["patches"]}


def marked_blocks(full: Any) -> list[dict]:
    """The blocks the page's slider marks (`generator.facts.collect`): on every block the mask lets an image's
    tokens attend to each other both ways (``attention_allowed``'s relation, proven on every block), so all of
    them."""
    return [{"label": "Image spans both ways", "verb": "let each image's tokens attend both ways under",
             "value": "model.layers[i].self_attn.attention_allowed", "blocks": list(range(full.num_layers))}]


def prepare(model: Any) -> None:
    """The ``.source`` op image_features reads (the wrapper's masked_scatter)."""
    install_sources(model)
