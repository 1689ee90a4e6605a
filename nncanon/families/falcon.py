"""Falcon (FalconForCausalLM, model_type falcon): three layouts behind config switches, each with one fused
query_key_value: Falcon-7B's and Falcon-40B's parallel blocks with the rotary, Falcon-RW's sequential block with
ALiBi (``layout_envoys`` picks the hosts; the YAML's ``variants:`` prove each on a tiny checkpoint).

Falcon-7B (``parallel_attn``, ``multi_query``): the attention and the MLP both read ``input_layernorm``'s output,
and the block returns ``layer_input + (mlp_output + attention_output)``, so no tensor is the stream after the
attention add (``parts/parallel.py``). The attention is multi-query: one key head and one value head serve every
query head. ``query_key_value`` is ``hidden_size + 2 · head_dim`` wide, viewed as ``num_heads + 2`` heads: the
query heads, then the key head, then the value head (the module's own ``_split_heads``). FalconConfig keeps
``num_kv_heads`` equal to the heads when ``multi_query`` is set; the attention uses one, and so does the family's
``num_kv_heads``.

Falcon-40B (``new_decoder_architecture``): the same one sum, but each branch reads its own LayerNorm, ``ln_attn``
and ``ln_mlp`` (mounted as ``input_layernorm`` and ``post_attention_layernorm``). ``query_key_value`` holds, for
each of ``num_kv_heads`` groups, the group's query heads, then its key head, then its value head; the forward
broadcasts each group's key and value to every query head of the group before the rotary, so the keys and values
entering the attention have as many heads as the queries (``num_kv_heads`` is the heads), a group's copies equal.
W_K and W_V are the groups' key and value rows (``[num_kv_heads of the config, hidden, head_dim]``, views); W_Q is
each group's query rows in head order, which no stride walks (a key and a value sit between two groups), so it is
served gathered: a copy whose every edit is written back into ``query_key_value`` (nncanon.research.gathered).

Both: LayerNorms with a weight and a bias; every Linear bias-free (``bias`` false); the rotary turns the whole of
every query and key head, in halves (``rotate_half``); the MLP is ``dense_4h_to_h(gelu(dense_h_to_4h(x)))``,
``ffn_hidden_size`` wide; the head is tied to the token embedding. The block adds the attention's output into the
MLP's output tensor in place (``mlp_output += attention_output``): a saved ``mlp_output`` later holds both
branches (the notes). Falcon's attention is written out in its own forward, once for sdpa and once for eager: the
queries and keys are read where the rotary returns them, the values where they are put in heads, the head outputs
where they are permuted to ``[batch, seq, heads, head_dim]``, all common to both; the scores and the pattern exist
on eager only.

Falcon-RW (``alibi``, ``parallel_attn`` and ``multi_query`` false, ``bias``): Llama's sequential block order with
LayerNorms (``parts/decoder.py``'s block), biases on every Linear, and a key and a value head per query head,
``query_key_value`` viewed per head as ``[q | k | v]`` (BLOOM's and GPT-NeoX's interleaving). There is no rotary:
the queries, keys and values are read where they are put in heads. ALiBi (``parts/alibi.py``) is added before the
scores are scaled, ``(q · kᵀ + alibi) · scaling``, so each slope is scaled with them (BLOOM adds it after). Under
eager the bias is added twice: FalconModel also builds the mask as ``alibi / √head_dim`` with the causal and
padding minimum filled in, which the eager attention adds to its own biased scores, while sdpa takes that mask
alone; the relations say so, and eager and sdpa give different logits on this layout (``tests/test_falcon.py``).
The head outputs are read at the output projection's input, the same under both loads; the scores and the pattern
on eager only. Other combinations of the switches (ALiBi in a parallel block, a sequential 7B) are refused: no
released checkpoint has them.

The read points above are those of transformers before 5.25. 5.25 moved FalconAttention onto the shared attention
interface, and the family picks each layout's hosts by the installed release (``attentions``): the queries, keys,
values, scores, pattern and head outputs are read at the attention function's call, as Llama's are (Falcon-RW's head
outputs still at the output projection's input); Falcon-40B's keys and values enter it one per group
(``num_kv_heads`` is the config's), repeated by the attention function; and ALiBi reaches the scores only through
FalconModel's mask, once under eager as under sdpa. Every value is proven by the same relations on both.
"""

from __future__ import annotations

import dataclasses
import sys

from transformers.models.falcon import modeling_falcon as hf

from ..core.hosts import host
from ..core.layouts import HeadOutputs, Keys, Pattern, Queries, Values
from ..core.locators import child, op
from ..core.model import FamilyMismatch, StandardModel
from ..core.relations import first, relation
from ..core.values import Value
from ..core.views import heads
from ..guards import releases
from ..parts.attention import rotary
from ..parts.attention.alibi import alibi_relations
from ..parts.attention.softmax import (
    ATTENTION_RELATIONS,
    EAGER,
    HEAD_RESULTS_RELATION,
    MIXED_RELATION,
    Attention,
)
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, Block, attention_layer_types, text_only
from ..parts.blocks.parallel import parallel_block
from ..parts.blocks.ungated import ungated_mlp
from ..research.weights import Layout as WeightLayout
from ..research.weights import Projection, interleaved_qkv, stacked_qkv

FAMILY = "falcon"
MODEL_TYPES = ("falcon",)
RENAME = {
    "transformer.word_embeddings": "embed_tokens",
    "transformer.h": "layers",
    "transformer.ln_f": "norm",
    "self_attention": "self_attn",
    "self_attention.dense": "self_attention.o_proj",
    "act": "act_fn",
    "dense_4h_to_h": "down_proj",
    # Falcon-40B's block (new_decoder_architecture): a LayerNorm per branch; no 7B block has either name
    "ln_attn": "input_layernorm",
    "ln_mlp": "post_attention_layernorm",
}

# -- the block: parallel, one LayerNorm ----------------------------------------------------------------------------

ParallelBlock = parallel_block("Falcon-7B's block", flag="parallel_attn", one_norm=True)

# -- the attention: multi-query from one fused query_key_value, the rotary on whole heads ---------------------------


#: the relations' clause for FalconAttention's own split of query_key_value (``_split_heads``), which releases before
#: 5.25 have and check against: 5.25 splits inline, and the relations then hold the values to the layout alone
_OWN_SPLIT = "split by the module's own _split_heads == "


def _fused_multi_query(own_split: bool):
    @relation("q, k, v == query_key_value(input) " + (_OWN_SPLIT if own_split else "") + "viewed [batch, seq, "
              "num_heads + 2, head_dim]: the query heads, then one key and one value head shared by every query head "
              "(multi_query); "
              "attention_values == v; attention_queries and attention_keys are q and k in heads, "
              + rotary.describe("head_dim", rotary.HALVES),
              proves="attention_values", reads="input attention_queries attention_keys attention_values")
    def check(host, r):
        module = host._module
        fused = module.query_key_value(first(r["input"]))
        # the layout written independently of the module: num_heads query heads, then the key's, then the value's
        heads = fused.unflatten(-1, (module.num_heads + 2, module.head_dim))
        q, k, v = heads[:, :, :-2], heads[:, :, -2:-1], heads[:, :, -1:]
        own = list(zip((q, k, v), module._split_heads(fused))) if own_split else []
        d = module.head_dim
        return [*own, (v.transpose(1, 2).double(), r["attention_values"].double()),
                *rotary.rotated(q.transpose(1, 2), r["attention_queries"], d, rotary.HALVES),
                *rotary.rotated(k.transpose(1, 2), r["attention_keys"], d, rotary.HALVES)]
    return check


_ROTARY = "apply_rotary_pos_emb_0"
MultiQueryAttention = host("MultiQueryAttention", Attention, values=[
    Value("attention_queries", Queries, "The queries entering attention: the rotary's output",
          op(_ROTARY, element=0)),
    Value("attention_keys", Keys, "The keys entering attention: the rotary's output (one head, multi_query)",
          op(_ROTARY, element=1)),
    Value("attention_values", Values, "The values entering attention, in heads (one head, multi_query)",
          op("reshape_2")),
    Value("attention_scores", Pattern, "The attention scores entering the softmax, scaled and masked",
          op("F_softmax_0", io="input"), conditions=(EAGER,)),
    Value("attention_probabilities", Pattern, "The attention pattern the values are mixed with",
          op("F_softmax_0"), conditions=(EAGER,)),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
          op("attn_output_permute_0")),
], SCALING=staticmethod(lambda module: module.inv_norm_factor), WEIGHTS=stacked_qkv("query_key_value"),
    RELATIONS=(*ATTENTION_RELATIONS, _fused_multi_query(own_split=True)))

# -- Falcon-40B's layout (new_decoder_architecture): the parallel block with two LayerNorms, key/value groups ------


def _grouped_split(own_split: bool):
    """``own_split``: the release's own ``_split_heads``, which broadcasts each group's key and value to its query
    heads before the attention (before 5.25); 5.25 hands the attention one key and one value head per group, and the
    attention function repeats them (``repeat_kv``)."""
    shared = ("the group's key and value broadcast to each of its query heads" if own_split else
              "one key and one value head per group (num_kv_heads), which the attention repeats for each of the "
              "group's query heads")

    @relation("q, k, v == query_key_value(input) " + (_OWN_SPLIT if own_split else "") + "viewed [batch, seq, "
              "num_kv_heads, num_heads / num_kv_heads + 2, head_dim]: each group's query heads, then its key head, "
              f"then its value head (new_decoder_architecture); {shared}; attention_values == v; attention_queries and "
              "attention_keys are q and k in heads, " + rotary.describe("head_dim", rotary.HALVES),
              proves="attention_values", reads="input attention_queries attention_keys attention_values")
    def check(host, r):
        module = host._module
        fused = module.query_key_value(first(r["input"]))
        groups = fused.unflatten(-1, (module.config.num_kv_heads, -1, module.head_dim))  # [b, s, kv, group + 2, d]
        group = groups.shape[-2] - 2
        q, k, v = groups[..., :group, :].flatten(2, 3), groups[..., group, :], groups[..., group + 1, :]
        own = []
        if own_split:  # the group's one head, repeated for each of its query heads, as _split_heads broadcasts it
            k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
            own = list(zip((q, k, v), module._split_heads(fused)))
        d = module.head_dim
        return [*own, (v.transpose(1, 2).double(), r["attention_values"].double()),
                *rotary.rotated(q.transpose(1, 2), r["attention_queries"], d, rotary.HALVES),
                *rotary.rotated(k.transpose(1, 2), r["attention_keys"], d, rotary.HALVES)]
    return check


def _group_part(part: str):
    """query_key_value's outputs as ``[..., num_kv_heads, group + 2, head_dim]`` (the module's own _split_heads):
    "q" each group's query heads ``[..., num_kv_heads, group, head_dim]``, "k" / "v" its key / value head."""
    def pick(host, t):
        module = host._module
        groups = t.unflatten(-1, (module.num_kv_heads, -1, module.head_dim))
        group = groups.shape[-2] - 2
        return groups.narrow(-2, 0, group) if part == "q" else groups.select(-2, group + (part == "v"))
    return pick


#: W_K, W_V: the parameter's key and value heads, one per group (a view; an edit reaches every query head of the
#: group, as the forward broadcasts it); W_Q: each group's query heads, in order, which no stride walks across the
#: groups (a key and a value sit between two groups), so it is served gathered, its edits written back
#: (nncanon.research.gathered)
_GROUPED = WeightLayout(q=Projection("query_key_value", _group_part("q"), grouped=True),
                        k=Projection("query_key_value", _group_part("k")),
                        v=Projection("query_key_value", _group_part("v")), broadcast_kv=True)
GroupedAttention = host("GroupedAttention", MultiQueryAttention, WEIGHTS=_GROUPED,
                        RELATIONS=(*ATTENTION_RELATIONS, _grouped_split(own_split=True)))
TwoNormBlock = parallel_block("Falcon-40B's block", flag="new_decoder_architecture")


# -- Falcon-RW's layout (alibi): the sequential block, multi-head attention with ALiBi, biases ----------------------


def _per_head_split(own_split: bool):
    @relation("q, k, v == query_key_value(input) " + (_OWN_SPLIT if own_split else "") + "viewed [batch, seq, "
              "num_heads, 3, head_dim]: each head's query, key and value side by side (multi_query false); "
              "attention_queries, attention_keys and attention_values are q, k and v in heads (no rotary: ALiBi)",
              proves="attention_queries attention_keys attention_values",
              reads="input attention_queries attention_keys attention_values")
    def check(host, r):
        module = host._module
        fused = module.query_key_value(first(r["input"]))
        heads = fused.unflatten(-1, (module.num_heads, 3, module.head_dim))
        q, k, v = heads[..., 0, :], heads[..., 1, :], heads[..., 2, :]
        own = list(zip((q, k, v), module._split_heads(fused))) if own_split else []
        return [*own, (q.transpose(1, 2), r["attention_queries"]), (k.transpose(1, 2), r["attention_keys"]),
                (v.transpose(1, 2), r["attention_values"])]
    return check


AlibiAttention = host("AlibiAttention", Attention, values=[
    Value("attention_queries", Queries, "The queries entering attention, in heads", op("reshape_0")),
    Value("attention_keys", Keys, "The keys entering attention, in heads", op("reshape_1")),
    Value("attention_values", Values, "The values entering attention, in heads", op("reshape_2")),
    Value("attention_scores", Pattern, "The attention scores entering the softmax: (q · kᵀ + ALiBi's bias) scaled, "
          "and masked", op("F_softmax_1", io="input"), conditions=(EAGER,)),
    Value("attention_probabilities", Pattern, "The attention pattern the values are mixed with",
          op("self_attention_dropout_0"), conditions=(EAGER,)),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs, as the output projection takes them",
          child("o_proj", "input"), view=heads()),
], SCALING=staticmethod(lambda module: module.inv_norm_factor), WEIGHTS=interleaved_qkv("query_key_value"),
    RELATIONS=(*alibi_relations(scaled=True, times=lambda host: 2 if host._std_model.attn_implementation == "eager"
                                else 1, why="twice under eager: FalconModel also puts alibi · scaling in the mask the "
                                "eager attention adds"), HEAD_RESULTS_RELATION, MIXED_RELATION,
               ATTENTION_RELATIONS[-1], _per_head_split(own_split=True)))


# -- transformers 5.25: FalconAttention on the shared attention interface --------------------------------------------
# 5.25 rewrote FalconAttention's forward as Llama's: query_key_value split inline (no _split_heads), the queries, keys
# and values handed to the attention function (eager_attention_forward or sdpa's), which repeats the key and value
# heads itself (repeat_kv): Falcon-40B's keys and values enter it one per group, no longer broadcast; and ALiBi
# reaches the scores only through the mask FalconModel builds (alibi · scaling), once under eager as under sdpa. So
# each layout's values are read at the attention call (`Attention`'s read points), proven by the same relations, the
# split held to the layout written out (there is no module split to check it against).

#: Falcon-40B's weights on 5.25: W_K and W_V as before, and the keys and values read have their num_kv_heads too
_GROUPED_INTERFACE = dataclasses.replace(_GROUPED, broadcast_kv=False)
_SCALING = staticmethod(lambda module: module.inv_norm_factor)
INTERFACE = {
    "7b": host("MultiQueryAttention", Attention, SCALING=_SCALING, WEIGHTS=stacked_qkv("query_key_value"),
               RELATIONS=(*ATTENTION_RELATIONS, _fused_multi_query(own_split=False))),
    "rw": host("AlibiAttention", Attention, values=[
        Value("attention_head_outputs", HeadOutputs, "The per-head outputs, as the output projection takes them",
              child("o_proj", "input"), view=heads())], SCALING=_SCALING, WEIGHTS=interleaved_qkv("query_key_value"),
        RELATIONS=(*alibi_relations(scaled=True), HEAD_RESULTS_RELATION, MIXED_RELATION, ATTENTION_RELATIONS[-1],
                   _per_head_split(own_split=False))),
}
INTERFACE["40b"] = host("GroupedAttention", INTERFACE["7b"], WEIGHTS=_GROUPED_INTERFACE,
                        RELATIONS=(*ATTENTION_RELATIONS, _grouped_split(own_split=False)))
#: before 5.25: FalconAttention's own forward (read at its own ops, above)
SPLIT_HEADS = {"7b": MultiQueryAttention, "40b": GroupedAttention, "rw": AlibiAttention}
#: the first release whose FalconAttention calls the shared attention interface
INTERFACE_SINCE = (5, 25)


def on_interface(release: str | None = None) -> bool:
    """Whether transformers ``release`` (the installed one by default) runs FalconAttention through the shared
    attention interface (5.25 and later), which moved where every attention value is read."""
    from packaging.version import Version

    return Version(releases.installed() if release is None else release).release >= INTERFACE_SINCE


def attentions(release: str | None = None) -> dict[str, type]:
    """Each layout's attention host ("7b", "40b", "rw") under transformers ``release`` (the installed one by
    default): the read points of its forward, each proven by the layout's relations."""
    return INTERFACE if on_interface(release) else SPLIT_HEADS


def layout_envoys(config) -> dict:
    """The hosts of the layout ``config`` selects, over ``ENVOYS`` (Falcon-7B's), under the installed release."""
    if config.new_decoder_architecture:
        return {hf.FalconDecoderLayer: TwoNormBlock, hf.FalconAttention: attentions()["40b"]}
    if config.alibi:
        return {hf.FalconDecoderLayer: Block, hf.FalconAttention: attentions()["rw"]}
    return {}


ENVOYS = {hf.FalconDecoderLayer: ParallelBlock, hf.FalconAttention: attentions()["7b"],
          hf.FalconMLP: ungated_mlp("dense_h_to_4h")}


def kv_heads(config, num_heads: int, release: str | None = None) -> int:
    """The key and value heads entering the attention under ``release`` (the installed one by default): one under
    multi_query (FalconConfig sets num_kv_heads to the heads, which the 7B attention does not use); under
    new_decoder_architecture as many as the query heads before 5.25 (the forward broadcasts each group's key and
    value to its query heads), the config's num_kv_heads from 5.25 (the attention function repeats them); a key and
    a value head per query head on Falcon-RW (multi_query false)."""
    if config.multi_query and not config.new_decoder_architecture:
        return 1
    if config.new_decoder_architecture and on_interface(release):
        return config.num_kv_heads
    return num_heads


class FalconStandardModel(host("FalconStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
                               family_module=sys.modules[__name__])):
    @property
    def num_kv_heads(self) -> int:
        return kv_heads(self.text_config, self.num_heads)


ROOT = FalconStandardModel

build = text_only(hf.FalconForCausalLM)
layer_types = attention_layer_types  # FalconConfig has no layer_types: full attention on every block


def prepare(model: StandardModel) -> None:
    """Refuse every layout but Falcon-7B's: the values and relations here are its block's. The user's config is
    left as it was given."""
    config = model.text_config
    if config.new_decoder_architecture:
        if config.alibi or getattr(config, "num_ln_in_parallel_attn", None) not in (None, 2):
            raise FamilyMismatch(f"{FAMILY}: new_decoder_architecture with alibi or one LayerNorm; nncanon serves "
                                 "Falcon-40B's layout with the rotary embedding and two LayerNorms, as it is released")
        return
    if config.alibi:
        if config.parallel_attn or config.multi_query:
            raise FamilyMismatch(f"{FAMILY}: alibi with parallel_attn or multi_query; nncanon serves ALiBi with "
                                 "Falcon-RW's layout (the sequential block, multi-head attention), as it is released")
        return
    if not config.parallel_attn or not config.multi_query:
        raise FamilyMismatch(f"{FAMILY}: parallel_attn false or multi_query false; nncanon serves Falcon with "
                             "Falcon-7B's layout (the parallel block with one LayerNorm, multi-query attention, the "
                             "rotary embedding), Falcon-40B's (new_decoder_architecture) or Falcon-RW's (alibi)")


def required_paths(model: StandardModel) -> list[str]:
    config = model.text_config
    # a second LayerNorm: 40B's ln_mlp, or the sequential block's (RW); prepare refuses the other combinations
    second = config.new_decoder_architecture or not config.parallel_attn
    norms = ["layers.0.post_attention_layernorm"] if second else []
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", *norms, "layers.0.self_attn",
            "layers.0.self_attn.query_key_value", "layers.0.self_attn.o_proj", "layers.0.mlp",
            "layers.0.mlp.dense_h_to_4h", "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.ffn_hidden_size}
