"""GPT-BigCode (GPTBigCodeForCausalLM, model_type gpt_bigcode): SantaCoder and StarCoder, GPT-2's block with
multi-query attention from one fused ``c_attn``.

The block is GPT-2's: learned absolute positions (``transformer.wpe``, mounted as ``embed_positions``) added to
the token embeddings, LayerNorm -> attention -> add, LayerNorm -> MLP -> add, and a head tied to the token
embedding; every projection is an ``nn.Linear`` (not GPT-2's Conv1D). What differs is the attention: with
``multi_query`` (every released SantaCoder and StarCoder) one key head and one value head serve every query
head. One Linear, ``c_attn``, computes them all, ``hidden_size + 2 · head_dim`` wide, split as ``[queries |
key | value]``: ``attention_keys`` and ``attention_values`` have one head (``num_kv_heads`` is 1), which the
attention repeats over the query heads. The output projection ``c_proj`` is mounted as ``o_proj``; in the MLP,
``c_fc`` keeps its name, ``c_proj`` is mounted as ``down_proj`` and ``act`` as ``act_fn`` (GELU with the tanh
approximation). The family refuses ``multi_query`` false (a fused multi-head ``c_attn`` viewed per head), which
no released checkpoint sets.
"""

from __future__ import annotations

import sys

from transformers.models.gpt_bigcode import modeling_gpt_bigcode as hf

from ..core.hosts import host
from ..core.model import FamilyMismatch, StandardModel
from ..core.relations import first, relation
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks.decoder import Block, attention_layer_types, text_only
from ..parts.blocks.positions import root_relations, root_values
from ..parts.blocks.ungated import n_inner_sizes, ungated_mlp
from ..research.weights import stacked_qkv
from .gpt2 import RENAME as GPT2_RENAME

FAMILY = "gpt_bigcode"
MODEL_TYPES = ("gpt_bigcode",)
#: GPT-2's native names; c_proj is the attention's output projection and the MLP's down projection
RENAME = {**GPT2_RENAME, "attn.c_proj": "attn.o_proj", "mlp.c_proj": "mlp.down_proj", "act": "act_fn"}


@relation("attention_queries, attention_keys, attention_values == c_attn(input) split [hidden_size | head_dim | "
          "head_dim]: one key and one value head shared by every query head (multi_query); the keys and values "
          "are the call's last seq positions",
          proves="attention_queries attention_values", reads="input attention_queries attention_keys attention_values")
def _multi_query(host, r):
    module = host._module
    x = first(r["input"])
    query, key, value = module.c_attn(x).split((module.embed_dim, module.kv_dim, module.kv_dim), dim=-1)
    seq = x.shape[1]
    return [(query.unflatten(-1, (-1, module.head_dim)).transpose(1, 2), r["attention_queries"]),
            (key[:, None], r["attention_keys"][:, :, -seq:]), (value[:, None], r["attention_values"][:, :, -seq:])]


MultiQueryAttention = host("MultiQueryAttention", Attention, RELATIONS=(*ATTENTION_RELATIONS, _multi_query),
                           WEIGHTS=stacked_qkv("c_attn"))

ENVOYS = {hf.GPTBigCodeBlock: Block, hf.GPTBigCodeAttention: MultiQueryAttention, hf.GPTBigCodeMLP: ungated_mlp("c_fc")}


class GPTBigCodeStandardModel(host("GPTBigCodeStandardModel", StandardModel, values=root_values("transformer.wpe"),
                                   RELATIONS=root_relations(), family_module=sys.modules[__name__])):
    @property
    def num_kv_heads(self) -> int:
        """One key and one value head under multi_query (GPTBigCodeConfig has no num_key_value_heads)."""
        return 1 if self.text_config.multi_query else self.text_config.num_attention_heads


ROOT = GPTBigCodeStandardModel

build = text_only(hf.GPTBigCodeForCausalLM)
layer_types = attention_layer_types  # GPTBigCodeConfig has no layer_types: full attention on every block
dim_sizes = n_inner_sizes  # the MLP is n_inner wide, or 4 · hidden_size


def prepare(model: StandardModel) -> None:
    """Refuse multi_query false: the relations here split c_attn as multi-query. The user's config is left as it
    was given."""
    if not model.text_config.multi_query:
        raise FamilyMismatch(f"{FAMILY}: multi_query is false; nncanon serves GPT-BigCode checkpoints with "
                             "multi-query attention, as SantaCoder and StarCoder are released")


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "embed_positions", "layers", "norm", "lm_head", "layers.0.input_layernorm",
            "layers.0.self_attn", "layers.0.self_attn.c_attn", "layers.0.self_attn.o_proj",
            "layers.0.post_attention_layernorm", "layers.0.mlp", "layers.0.mlp.c_fc", "layers.0.mlp.act_fn",
            "layers.0.mlp.down_proj"]
