"""AFMoE (AfmoeForCausalLM, model_type afmoe): Arcee's Trinity models, a sandwich block with a gated attention, three
sliding-window blocks to every full one with no rotary on the full ones, dense first blocks, then a sigmoid mixture.

The block is a sandwich (nncanon.parts.blocks.sandwich, GLM-4's gain ``weight``): input_layernorm before the
attention and post_attention_layernorm after it, pre_mlp_layernorm before the MLP and post_mlp_layernorm after it;
what each sublayer adds is its post-norm's output. The attention norms each query and key head by itself (q_norm,
k_norm over head_dim), rotates them only on ``sliding_attention`` blocks (``is_local_attention``), whose call gets
``sliding_window``; every ``global_attn_every_n_layers``-th block is ``full_attention``, with no rotary at all (global
NoPE) over the whole prefix. Its heads' outputs, side by side, are gated before o_proj by the sigmoid of a
projection of its own input (``gate_proj``, as wide as the heads). The first ``num_dense_layers`` blocks have a
dense SwiGLU MLP; every later one a mixture (nncanon.parts.blocks.mixture's BiasedSigmoidMoE): the router
(``router``, its linear ``router.gate``) scores every expert by the sigmoid of its logit, the mixture's
``expert_bias`` added for the choice only, and weights the top ``num_experts_per_tok`` by their scores renormalised
and times ``route_scale``; the shared experts (one SwiGLU MLP num_shared_experts · moe_intermediate_size wide) read
the same rows and are added ungated. Under ``mup_enabled`` the model multiplies the token embeddings by
sqrt(hidden_size) before the first block (not in the embedding module), so ``token_embeddings`` is the table's row
and ``layers[0].layer_input`` the scaled one. A block's kind names its attention (``sliding``, ``full``) and its MLP
(``dense``, ``mixture``).
"""

from __future__ import annotations

import sys

from transformers.models.afmoe import modeling_afmoe as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import relation
from ..parts.attention.nope import rotary_or_not
from ..parts.attention.softmax import PROJECTION_GATED_RELATIONS, Attention
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS, TEXT_RENAME, Block, nothing_to_prepare, text_only
from ..parts.blocks.mixture import BiasedSigmoidMoE, attention_and_mlp_kinds, expert_dims
from ..parts.blocks.mlp import MLP, TokenMLP
from ..parts.blocks.per_layer_inputs import rms
from ..parts.blocks.sandwich import sandwich, sandwich_values
from ..parts.blocks.text_family import root_relations

FAMILY = "afmoe"
MODEL_TYPES = ("afmoe",)
RENAME = TEXT_RENAME

#: the attention's post-norm, the MLP's pre-norm and post-norm, by AFMoE's names
NORMS = ("post_attention_layernorm", "pre_mlp_layernorm", "post_mlp_layernorm")

GatedLocalAttention = host("GatedLocalAttention", Attention, RELATIONS=(
    *PROJECTION_GATED_RELATIONS,
    rotary_or_not(hf.apply_rotary_pos_emb, flag="is_local_attention", normed=True,
                  rotated_on="on sliding_attention blocks (is_local_attention)",
                  nope_on="on full_attention blocks (global NoPE)")))

SandwichMoEBlock = host("AfmoeSandwichBlock", Block, values=sandwich_values(NORMS),
                        RELATIONS=sandwich(rms, "{}.weight", norms=NORMS).relations, TRACKS_TOKENS=True)


@relation("layers[0].layer_input == token_embeddings · sqrt(hidden_size) under mup_enabled (· 1 without)",
          proves="token_embeddings", reads="token_embeddings layers[0].layer_input")
def _mup_embeddings(host, r):
    config = host.text_config
    scale = config.hidden_size ** 0.5 if config.mup_enabled else 1.0
    return [(r["token_embeddings"] * scale, r["layers[0].layer_input"])]


# AfmoeMLP is both a dense block's MLP and the mixture's shared experts (called on flattened rows): a path key gives
# the shared experts their token view, the class key of the mixture wins over the path key "mlp"
ENVOYS = {hf.AfmoeDecoderLayer: SandwichMoEBlock, hf.AfmoeAttention: GatedLocalAttention,
          hf.AfmoeSparseMoeBlock: BiasedSigmoidMoE, "shared_experts": TokenMLP, "mlp": MLP}
ROOT = host("AfmoeStandardModel", StandardModel, values=ROOT_VALUES,
            RELATIONS=root_relations({"layers[0].layer_input == token_embeddings": _mup_embeddings}),
            family_module=sys.modules[__name__])

build = text_only(hf.AfmoeForCausalLM)
prepare = nothing_to_prepare


def layer_types(model) -> list[str]:
    """``<attention>_<mlp>`` per block: ``sliding`` or ``full`` from config.layer_types (every
    global_attn_every_n_layers-th full), ``dense`` on the first num_dense_layers blocks and ``mixture`` after."""
    config = model.text_config
    return attention_and_mlp_kinds(config.layer_types,
                                   [i >= config.num_dense_layers for i in range(config.num_hidden_layers)])


dim_sizes = expert_dims()


def required_paths(model: StandardModel) -> list[str]:
    last = model.text_config.num_hidden_layers - 1
    return [*TEXT_PATHS, "layers.0.pre_mlp_layernorm", "layers.0.post_mlp_layernorm", "layers.0.self_attn.q_norm",
            "layers.0.self_attn.k_norm", "layers.0.self_attn.gate_proj", f"layers.{last}.mlp.router",
            f"layers.{last}.mlp.experts", f"layers.{last}.mlp.shared_experts"]
