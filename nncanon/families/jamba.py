"""Jamba (JambaForCausalLM, model_type jamba): attention and Mamba-1 blocks interleaved, a mixture every other block.

The stack is ``model``: ``embed_tokens``, ``layers``, ``final_layernorm`` (standard name ``norm``), then
``lm_head``. Block i is an attention block when ``i % attn_layer_period == attn_layer_offset`` (one in eight on
the released checkpoints) and a Mamba block otherwise (``config.layers_block_type``); its MLP (native name
``feed_forward``) is a mixture of ``num_experts`` SwiGLU experts when ``i % expert_layer_period ==
expert_layer_offset`` (every other block) and a dense SwiGLU MLP otherwise. Both kinds are pre-norm blocks
(``input_layernorm`` before the mixer, ``pre_ff_layernorm``, standard name ``post_attention_layernorm``, before
the MLP). The attention is grouped-query with no positions at all: no rotary, no learned positions (the Mamba
blocks carry the order). The Mamba mixer (``mamba``) is Mamba-1's (`nncanon.parts.recurrent.selective_scan`) with
RMSNorms, with a gain, on dt, B and C after ``x_proj``, as Falcon-Mamba's without a gain. The router takes the
top ``num_experts_per_tok`` of a softmax over the experts and does not renormalise them.
"""

from __future__ import annotations

import sys

from transformers.models.jamba import modeling_jamba as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import first, relation
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, text_only
from ..parts.blocks.mixture import MOE_RELATIONS, MoE, MoEBlock, moe_dim_sizes, routing
from ..parts.blocks.mlp import MLP
from ..parts.recurrent import selective_scan
from ..parts.recurrent.selective_scan import KERNELS, SelectiveScan  # noqa: F401 (the family API, shared)

FAMILY = "jamba"
MODEL_TYPES = ("jamba",)
RENAME = {"model.embed_tokens": "embed_tokens", "model.layers": "layers", "model.final_layernorm": "norm",
          "feed_forward": "mlp", "pre_ff_layernorm": "post_attention_layernorm"}
KERNEL_LIBRARY = "mamba_ssm"

#: a block's mixer is self_attn on an attention block, mamba on a Mamba block (Llama's block relations name either)
JambaBlock = host("JambaBlock", MoEBlock, MIXERS=("self_attn", "mamba"))


@relation("attention_queries, attention_keys == q_proj(input), k_proj(input) split into heads, not rotated: Jamba's "
          "attention has no position signal at all", proves="attention_queries attention_keys",
          reads="inputs attention_queries attention_keys")
def _no_positions(host, r):
    module, (args, kwargs) = host._module, r["inputs"]
    x = first(args) if args else kwargs["hidden_states"]
    q = module.q_proj(x).unflatten(-1, (-1, module.head_dim)).transpose(1, 2)
    k = module.k_proj(x).unflatten(-1, (-1, module.head_dim)).transpose(1, 2)
    return [(q, r["attention_queries"]), (k, r["attention_keys"][:, :, -x.shape[1]:])]


NoPositionAttention = host("NoPositionAttention", Attention, RELATIONS=(*ATTENTION_RELATIONS, _no_positions))
#: the router takes the top-k of the softmax and leaves them as they are (JambaTopKRouter has no renormalisation)
Mixture = host("Mixture", MoE, RELATIONS=(routing(False), *MOE_RELATIONS[1:]))
#: Mamba-1's mixer at model.layers[i].mamba, its dt, B and C through RMSNorms with a gain
JambaMamba = host("JambaMamba", SelectiveScan, HOST="model.layers[i].mamba", KIND="Mamba-1 mixer (Jamba)",
                  RELATIONS=selective_scan.relations(True, gain=True))

ENVOYS = {hf.JambaAttentionDecoderLayer: JambaBlock, hf.JambaMambaDecoderLayer: JambaBlock,
          hf.JambaAttention: NoPositionAttention, hf.JambaMambaMixer: JambaMamba, hf.JambaMLP: MLP,
          hf.JambaSparseMoeBlock: Mixture}
ROOT = host("JambaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.JambaForCausalLM)

MIXERS = {"mamba": "mamba", "attention": "self_attn"}


def layer_types(model) -> list[str]:
    return list(model.text_config.layers_block_type)


def explain_missing(model, envoy, name: str) -> str | None:
    """A block has self_attn or mamba, never both: say which this one has."""
    from ..parts.blocks.decoder import Block

    if isinstance(envoy, Block) and name in MIXERS.values():
        types = layer_types(model)
        index = int(envoy.path.rsplit(".", 1)[-1])
        blocks = [i for i, t in enumerate(types) if MIXERS[t] == name]
        return (f"{envoy._std_path} is a {types[index]} block: it has {MIXERS[types[index]]}, not {name}; "
                f"the blocks with {name} are {blocks}")
    return None


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.mamba",
            "layers.0.post_attention_layernorm", "layers.0.mlp"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {**moe_dim_sizes(model), "intermediate_size": config.intermediate_size,
            **selective_scan.dim_sizes(config.mamba_expand * config.hidden_size, config.mamba_d_state,
                                       config.mamba_d_conv)}


def prepare(model: StandardModel) -> None:
    selective_scan.prepare(model, hf, JambaMamba)
