"""GPT-Neo (GPTNeoForCausalLM, model_type gpt_neo): GPT-2's block with local and global attention alternating,
and no 1/√d scaling of the scores.

The block is GPT-2's: LayerNorm -> attention -> add, LayerNorm -> MLP -> add, with learned absolute positions
(``transformer.wpe``, mounted as ``embed_positions``) added to the token embeddings before the first block. What
differs is the attention. The blocks alternate (``attention_types``, ``[[["global", "local"], 12]]`` on
GPT-Neo 125M): a global block attends causally to every earlier key, a local block only to the last
``window_size`` keys (256 on the released checkpoints; each query sees itself and the 255 keys before it).
``layer_types`` names them ``full_attention`` and ``sliding_attention``. The scores are not divided by
√head_dim: ``attention_scores`` is ``queries · keysᵀ`` itself, plus the mask.

The attention module is nested: the block's ``attn`` (GPTNeoAttention) only forwards to ``attn.attention``
(GPTNeoSelfAttention), which is mounted as ``self_attn``. It computes the pattern in a method of its own
(``_attn``), eager only (transformers ships no sdpa for GPT-Neo). Queries, keys and values come from separate
bias-free ``q_proj``, ``k_proj``, ``v_proj``; the output projection ``out_proj`` (mounted as ``o_proj``) has a
bias. There is no rotary embedding. The MLP is not gated: ``c_proj(act(c_fc(x)))`` (``c_proj`` mounted as
``down_proj``, ``act`` as ``act_fn``), GELU with the tanh approximation; every projection is an ``nn.Linear``
(not GPT-2's Conv1D). The head is tied to the token embedding.
"""

from __future__ import annotations

import sys

from transformers.models.gpt_neo import modeling_gpt_neo as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import relation
from ..parts.attention.method_attention import method_attention
from ..parts.attention.softmax import ATTENTION_RELATIONS, attending, causal_mask
from ..parts.blocks.decoder import Block, nothing_to_prepare, text_only
from ..parts.blocks.positions import root_relations, root_values
from ..parts.blocks.ungated import ungated_mlp
from .gpt2 import RENAME as GPT2_RENAME

FAMILY = "gpt_neo"
MODEL_TYPES = ("gpt_neo",)
#: GPT-2's native names (transformer.wte, wpe, h, ln_f; ln_1, ln_2 in a block), but for the attention: the block's
#: attn only forwards to attn.attention, which is mounted as self_attn
RENAME = {**{native: name for native, name in GPT2_RENAME.items() if native != "attn"},
          "attn.attention": "self_attn", "out_proj": "o_proj", "act": "act_fn", "c_proj": "down_proj"}


def _window(module) -> int | None:
    """The keys a query sees: window_size on a local block, every earlier one on a global block."""
    return module.config.window_size if module.attention_type == "local" else None


@relation("on a local block (attention_type local) attention_probabilities == 0 on every key more than "
          "window_size - 1 before the query, and each query's probabilities over the last window_size keys sum to 1; "
          "on a global block no causal key is left out",
          proves="attention_probabilities", reads="model.attention_mask attention_probabilities")
def _window_of_keys(host, r):
    import torch

    probabilities = r["attention_probabilities"].double()
    queries, keys = probabilities.shape[-2:]
    allowed = torch.isfinite(causal_mask(attending(host), r["model.attention_mask"], queries, keys))
    inside = torch.where(allowed, probabilities, 0.0)
    # a padding query sees no real key: its row is whatever the kernel makes of that, so only real queries count
    rows = r["model.attention_mask"][:, -queries:].bool()[:, None, :].expand(-1, probabilities.shape[1], -1)
    outside = torch.where(allowed, 0.0, probabilities)
    return [(outside[rows], torch.zeros_like(outside)[rows]), (inside.sum(-1)[rows], torch.ones_like(inside.sum(-1))[rows])]


#: GPT-Neo does not scale the scores (no 1/√head_dim); a local block's window is its config's window_size
GPTNeoAttention = method_attention(lambda module: 1.0, WINDOW=staticmethod(_window),
                                   RELATIONS=(*ATTENTION_RELATIONS, _window_of_keys))

ENVOYS = {hf.GPTNeoBlock: Block, hf.GPTNeoSelfAttention: GPTNeoAttention, hf.GPTNeoMLP: ungated_mlp("c_fc")}

ROOT = host("GPTNeoStandardModel", StandardModel, values=root_values("transformer.wpe"),
            RELATIONS=root_relations(), family_module=sys.modules[__name__])

build = text_only(hf.GPTNeoForCausalLM)
prepare = nothing_to_prepare
_KINDS = {"global": "full_attention", "local": "sliding_attention"}


def layer_types(model) -> list[str]:
    """config.attention_layers (global / local per block) as layer types: full_attention, sliding_attention."""
    return [_KINDS[kind] for kind in model.text_config.attention_layers]


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "embed_positions", "layers", "norm", "lm_head", "layers.0.input_layernorm",
            "layers.0.self_attn", "layers.0.self_attn.q_proj", "layers.0.self_attn.k_proj",
            "layers.0.self_attn.v_proj", "layers.0.self_attn.o_proj", "layers.0.post_attention_layernorm",
            "layers.0.mlp", "layers.0.mlp.c_fc", "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {"intermediate_size": config.intermediate_size or 4 * config.hidden_size}
