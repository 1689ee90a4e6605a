"""Multi-head latent attention (DeepSeek-V2, V3): keys and values rebuilt per head from one normed latent.

The stream is projected down to a query latent (``q_a_proj``, normed by ``q_a_layernorm``: ``query_latent``; a
checkpoint with no ``q_lora_rank`` has one ``q_proj`` instead) and to one key/value latent (the first
``kv_lora_rank`` columns of ``kv_a_proj_with_mqa``, normed by ``kv_a_layernorm``: ``kv_latent``, what the cache
holds), each projected back up per head (``q_b_proj``, ``kv_b_proj``). A query or key head is a position-free part
(``qk_nope_head_dim``) and a rotated one (``qk_rope_head_dim``; the keys' rotated part is the last columns of
``kv_a_proj_with_mqa``, one for the token, shared by every head) side by side; the values are the rest of
``kv_b_proj``'s head, ``v_head_dim`` wide. V3 hands the attention (cos, sin) and turns interleaved pairs; V2 hands
it complex frequencies; MiniCPM3 (cos, sin) on the two halves of the rope part (``rotate``).
"""

from __future__ import annotations

from ...core.hosts import host
from ...core.layouts import HeadOutputs, Layout, layout
from ...core.locators import call, child, op
from ...core.precision import SUBBLOCK
from ...core.relations import first, relation
from ...core.values import Condition, Value
from ...core.views import View, heads
from ...research.weights import Layout as WeightLayout
from .softmax import ATTENTION_CALL, ATTENTION_RELATIONS, Attention

_CALL = call("attention_interface_1")  # found by what it calls (`Call`)

QueryLatent = layout("QueryLatent", "batch seq q_lora_rank")
KVLatent = layout("KVLatent", "batch seq kv_lora_rank")
QueriesNope = Layout("QueriesNope", ("batch", "num_heads", "seq", "qk_nope_head_dim"))
QueriesRope = Layout("QueriesRope", ("batch", "num_heads", "seq", "qk_rope_head_dim"))
KeysNope = Layout("KeysNope", ("batch", "num_kv_heads", "seq", "qk_nope_head_dim"))
KeysRope = Layout("KeysRope", ("batch", "num_kv_heads", "seq", "qk_rope_head_dim"))

HAS_QUERY_LATENT = Condition(
    needs="", why="the checkpoint sets no q_lora_rank: its queries come straight from q_proj, with no latent",
    holds=lambda model: model.text_config.q_lora_rank is not None)


def part(which: str) -> View:
    """The no-rope (first ``qk_nope_head_dim`` columns) or rope part of a query/key head, as a view; an
    assignment writes it back into the whole head."""
    def span(host):
        nope = host._module.qk_nope_head_dim
        return slice(None, nope) if which == "nope" else slice(nope, None)

    def write(host, new, current):
        whole = current.clone()
        whole[..., span(host)] = new
        return whole

    return View(f"{which} part", lambda host, x: x[..., span(host)], write)


# -- the latents and the two parts of a head, by the module's own projections -----------------------------


def rotate(module, queries, keys, position_embeddings):
    """The module's own rotary on the rope parts: V3's (cos, sin) on interleaved pairs when the config says so (its
    default), (cos, sin) on the two halves when it does not or has no such switch (MiniCPM3), or V2's complex
    frequencies (``freqs_cis``), which turn adjacent pairs as complex numbers."""
    if isinstance(position_embeddings, (tuple, list)):
        from transformers.models.deepseek_v3 import modeling_deepseek_v3 as v3

        interleave = getattr(module.config, "rope_interleave", False)
        rope = v3.apply_rotary_pos_emb_interleave if interleave else v3.apply_rotary_pos_emb
        return rope(queries, keys, *position_embeddings)
    from transformers.models.deepseek_v2 import modeling_deepseek_v2 as v2

    return v2.apply_rotary_emb(queries, keys, position_embeddings)


@relation("query_latent == q_a_layernorm(q_a_proj(input)); kv_latent == kv_a_layernorm(kv_a_proj_with_mqa(input)"
          "[..., :kv_lora_rank])", proves="query_latent kv_latent", reads="input query_latent kv_latent")
def _latents(host, r):
    module, x = host._module, first(r["input"])
    kv = module.kv_a_proj_with_mqa(x)[..., :module.kv_lora_rank]
    return [(module.q_a_layernorm(module.q_a_proj(x)), r["query_latent"]),
            (module.kv_a_layernorm(kv), r["kv_latent"])]


@relation("kv_latent == kv_a_layernorm(kv_a_proj_with_mqa(input)[..., :kv_lora_rank]) (no query latent)",
          proves="kv_latent", reads="input kv_latent")
def _kv_latent(host, r):
    module, x = host._module, first(r["input"])
    return [(module.kv_a_layernorm(module.kv_a_proj_with_mqa(x)[..., :module.kv_lora_rank]), r["kv_latent"])]


@relation("attention_keys_nope, attention_values == kv_b_proj(kv_latent) split per head into qk_nope_head_dim and "
          "v_head_dim columns: the keys' no-rope part and the values are reconstructed from the latent",
          proves="attention_keys_nope attention_values kv_latent",
          reads="kv_latent attention_keys_nope attention_values")
def _reconstruct(host, r):
    module, latent = host._module, r["kv_latent"]
    up = module.kv_b_proj(latent).unflatten(-1, (-1, module.qk_nope_head_dim + module.v_head_dim)).transpose(1, 2)
    return [(up[..., :module.qk_nope_head_dim], r["attention_keys_nope"]),
            (up[..., module.qk_nope_head_dim:], r["attention_values"])]


def _rope_parts(query: str):
    """The relation that joins the queries to what they are projected from, ``query_latent`` through ``q_b_proj``
    (``"latent"``) or the input through ``q_proj`` (``"direct"``, a checkpoint with no q_lora_rank), and proves the
    keys' rotary part, one per token."""
    source = "q_b_proj(query_latent)" if query == "latent" else "q_proj(input)"

    @relation(f"attention_queries == [nope | rotary(rope)] of {source} per head; attention_keys_rope == "
              "rotary(kv_a_proj_with_mqa(input)[..., kv_lora_rank:]), one per token, the same on every head",
              proves="attention_keys_rope" + (" query_latent" if query == "latent" else ""),
              reads="inputs attention_queries attention_keys_rope" + (" query_latent" if query == "latent" else ""),
              tolerance=SUBBLOCK)
    def check(host, r):
        import torch

        module, (args, kwargs) = host._module, r["inputs"]
        x = first(args) if args else kwargs["hidden_states"]
        nope = module.qk_nope_head_dim
        projected = module.q_b_proj(r["query_latent"]) if query == "latent" else module.q_proj(x)
        q = projected.unflatten(-1, (-1, module.qk_head_dim)).transpose(1, 2)
        k_rot = module.kv_a_proj_with_mqa(x)[..., module.kv_lora_rank:][:, None]
        # the rotary the forward was handed (its positions follow the batch's left padding)
        q_rot, k_rot = rotate(module, q[..., nope:], k_rot, kwargs["position_embeddings"])
        rope = r["attention_keys_rope"]
        return [(torch.cat([q[..., :nope], q_rot], -1), r["attention_queries"]),
                (k_rot.expand(-1, rope.shape[1], -1, -1), rope)]

    return check


@relation("attention_keys == [attention_keys_nope | attention_keys_rope] per head; attention_queries == "
          "[attention_queries_nope | attention_queries_rope] per head: the first qk_nope_head_dim and the last "
          "qk_rope_head_dim columns", proves="attention_keys attention_queries_nope attention_queries_rope",
          reads="attention_queries attention_keys attention_queries_nope attention_queries_rope attention_keys_nope "
                "attention_keys_rope")
def _columns(host, r):
    """The keys the scores read are the reconstructed no-rope part and the shared rotary part side by side (the
    link from each to the scores); the same numbers moved, so exact."""
    import torch

    return [(torch.cat([r["attention_keys_nope"], r["attention_keys_rope"]], -1), r["attention_keys"]),
            (torch.cat([r["attention_queries_nope"], r["attention_queries_rope"]], -1), r["attention_queries"])]


_QUERIES, _KEYS = op(_CALL, io="input", element=1), op(_CALL, io="input", element=2)

#: no W_Q/W_K/W_V: multi-head latent attention factors them through low-rank latents with a norm between the
#: factors, so no one matrix maps the input to a head; the refusal (one line, the page's row too) names what is
#: served in standard names instead, and the factors' native weights
_LATENT = WeightLayout(unmapped="multi-head latent attention (MLA) has no per-head query, key or value matrix: keys "
                                "and values are kv_b_proj(kv_a_layernorm(kv_a_proj_with_mqa(x))) and queries "
                                "q_b_proj(q_a_layernorm(q_a_proj(x))) (q_proj(x) without a q_lora_rank, not served), "
                                "a norm between the factors; in standard names read self_attn.query_latent (with a "
                                "q_lora_rank), kv_latent, attention_queries_nope, attention_queries_rope, "
                                "attention_keys_nope, attention_keys_rope and W_O, the factors as the weights of "
                                "q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj")

LatentAttention = host("LatentAttention", Attention, WEIGHTS=_LATENT, values=[
    Value("query_latent", QueryLatent, "The query latent: q_a_proj's output after q_a_layernorm, what q_b_proj reads",
          child("q_a_layernorm"), conditions=(HAS_QUERY_LATENT,)),
    Value("kv_latent", KVLatent,
          "The key/value latent: kv_a_proj_with_mqa's first kv_lora_rank columns after kv_a_layernorm, what "
          "kv_b_proj reads and the cache holds", child("kv_a_layernorm")),
    Value("attention_queries_nope", QueriesNope, "The queries' position-free part: each head's first "
          "qk_nope_head_dim columns", _QUERIES, view=part("nope"), conditions=(ATTENTION_CALL,)),
    Value("attention_queries_rope", QueriesRope, "The queries' rotated part: each head's last qk_rope_head_dim "
          "columns", _QUERIES, view=part("rope"), conditions=(ATTENTION_CALL,)),
    Value("attention_keys_nope", KeysNope, "The keys' position-free part, from kv_b_proj: each head's first "
          "qk_nope_head_dim columns", _KEYS, view=part("nope"), conditions=(ATTENTION_CALL,)),
    Value("attention_keys_rope", KeysRope, "The keys' rotated part, one per token shared by every head: each "
          "head's last qk_rope_head_dim columns", _KEYS, view=part("rope"), conditions=(ATTENTION_CALL,)),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
          child("o_proj", "input"), view=heads("v_head_dim")),
], RELATIONS=(_latents, _reconstruct, _rope_parts("latent"), _columns, *ATTENTION_RELATIONS))

#: the latent attention of a checkpoint with no q_lora_rank (DeepSeek-V2-Lite, Moonlight): one q_proj maps the stream
#: straight to the query heads, so there is no query latent
DirectQueryLatentAttention = host("DirectQueryLatentAttention", LatentAttention, RELATIONS=(
    _kv_latent, _reconstruct, _rope_parts("direct"), _columns, *ATTENTION_RELATIONS))


