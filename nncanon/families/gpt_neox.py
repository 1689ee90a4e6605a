"""GPT-NeoX (GPTNeoXForCausalLM, model_type gpt_neox): Pythia's parallel block, partial rotary, fused qkv.

The attention and the MLP read the same block input, each through its own LayerNorm (with a bias),
and both outputs are added to the stream in one sum (``use_parallel_residual``, true on every Pythia
and on GPT-NeoX-20B):

    out = x + attention(input_layernorm(x)) + mlp(post_attention_layernorm(x))

So no tensor is "the stream after the attention add": ``layer_mid`` does not exist, and
``post_attention_layernorm``, despite its name, norms ``layer_input``, not the attention's result. The
block's relations state this: ``layer_input + self_attn.attention_output + mlp.mlp_output ==
layer_output``, and ``mlp_norm_output == post_attention_layernorm(layer_input)``. The family refuses a
config with ``use_parallel_residual`` false (the sequential block, whose values sit elsewhere).

The native names map onto the standard ones: ``gpt_neox.embed_in`` is ``embed_tokens``,
``gpt_neox.layers`` ``layers``, ``gpt_neox.final_layer_norm`` ``norm`` (transformers 5 already calls
the untied head, ``embed_out`` in the checkpoints, ``lm_head``); in a block ``attention`` is
``self_attn`` and its output projection ``dense`` is ``o_proj``; in the MLP ``act`` is ``act_fn`` and
``dense_4h_to_h`` is ``down_proj``, while ``dense_h_to_4h`` keeps its name (there is no gate: the MLP
is dense_h_to_4h -> GELU -> dense_4h_to_h, so ``mlp_neurons`` is ``mlp_activation`` itself).

The attention is multi-head (as many key/value heads as query heads). One Linear,
``query_key_value``, computes queries, keys and values; its output is viewed per head as
``[q | k | v]`` (3 · head_size wide, the three interleaved head by head, not three blocks of
hidden_size) and chunked in three. The rotary embedding turns only the first ``rotary_ndims =
head_size · rotary_pct`` dimensions of each query and key head (a quarter on Pythia); the rest pass
through unrotated. ``attention_queries``, ``attention_keys`` and ``attention_values`` are read where
the attention function is called, after the split and the rotation, as on Llama.
"""

from __future__ import annotations

import sys

from transformers.models.gpt_neox import modeling_gpt_neox as hf

from ..core.hosts import host
from ..core.layouts import HeadOutputs
from ..core.locators import child
from ..core.model import FamilyMismatch, StandardModel
from ..core.relations import first, relation
from ..core.values import Value
from ..core.views import heads
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, attention_layer_types, text_only
from ..parts.blocks.parallel import parallel_block
from ..parts.blocks.ungated import ungated_mlp
from ..research.weights import interleaved_qkv

FAMILY = "gpt_neox"
MODEL_TYPES = ("gpt_neox",)
RENAME = {
    # the text stack, mounted at the root
    "gpt_neox.embed_in": "embed_tokens",
    "gpt_neox.layers": "layers",
    "gpt_neox.final_layer_norm": "norm",
    # in a block
    "attention": "self_attn",
    "attention.dense": "attention.o_proj",
    # in the MLP
    "act": "act_fn",
    "dense_4h_to_h": "down_proj",
}

# -- the block: attention and MLP in parallel, from the same input, each through its own norm -------

ParallelBlock = parallel_block("GPT-NeoX's block", flag="use_parallel_residual")

# -- the attention: fused query_key_value, split per head; rotary on the first rotary_ndims dims -------


@relation("q | k | v == query_key_value(input) viewed [batch, seq, heads, 3·head_size] and chunked in 3 per head; "
          "attention_values == v; attention_queries and attention_keys (the call's last seq positions) equal q and k "
          "past rotary_ndims, and on the first rotary_ndims are a rotation of them (each pair (j, j + rotary_ndims/2) "
          "keeps its norm)",
          proves="attention_values", reads="input attention_queries attention_keys attention_values")
def _fused_qkv(host, r):
    module = host._module
    x = first(r["input"])
    qkv = module.query_key_value(x).view(*x.shape[:-1], -1, 3 * module.head_size).transpose(1, 2).double()
    q, k, v = qkv.chunk(3, dim=-1)
    seq, d = x.shape[1], module.rotary_ndims
    queries = r["attention_queries"].double()
    keys = r["attention_keys"][:, :, -seq:].double()
    values = r["attention_values"][:, :, -seq:].double()

    def pair_norms(t):
        return t[..., : d // 2].pow(2) + t[..., d // 2: d].pow(2)

    return [(v, values), (q[..., d:], queries[..., d:]), (k[..., d:], keys[..., d:]),
            (pair_norms(q), pair_norms(queries)), (pair_norms(k), pair_norms(keys))]


#: GPTNeoXAttention names its head width head_size (no head_dim attribute)
FusedAttention = host("FusedAttention", Attention, values=[
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
          child("o_proj", "input"), view=heads("head_size")),
], RELATIONS=(*ATTENTION_RELATIONS, _fused_qkv), WEIGHTS=interleaved_qkv("query_key_value"))

# -- the MLP: dense_h_to_4h -> act -> dense_4h_to_h, no gate -------------------------------------------

UngatedMLP = ungated_mlp("dense_h_to_4h")

ENVOYS = {hf.GPTNeoXLayer: ParallelBlock, hf.GPTNeoXAttention: FusedAttention, hf.GPTNeoXMLP: UngatedMLP}
# GPTNeoXConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("GPTNeoXStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.GPTNeoXForCausalLM)
layer_types = attention_layer_types  # GPTNeoXConfig has no layer_types: full attention on every block


def prepare(model: StandardModel) -> None:
    """Refuse the sequential block: the values and relations here are the parallel block's. The user's
    config is left as it was given."""
    config = model.text_config
    if not config.use_parallel_residual:
        raise FamilyMismatch(f"{FAMILY}: use_parallel_residual is false (the sequential block); nncanon serves "
                             "GPT-NeoX checkpoints with the parallel block, as Pythia and GPT-NeoX-20B are released")


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.self_attn",
            "layers.0.self_attn.query_key_value", "layers.0.self_attn.o_proj", "layers.0.post_attention_layernorm",
            "layers.0.mlp", "layers.0.mlp.dense_h_to_4h", "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size}
