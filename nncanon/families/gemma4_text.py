"""Gemma 4, text only (Gemma4ForCausalLM, model_type gemma4_text): Gemma 3's sandwich block with keys and
values shared across blocks, per-layer input embeddings, and full-attention blocks of another head size.

The block norms each sublayer twice, as Gemma 2's and 3's: RMSNorm -> attention -> RMSNorm -> add, RMSNorm ->
gated MLP (GELU, tanh approximation) -> RMSNorm -> add, so what a sublayer adds to the stream is its post-norm's
output (``attention_post_norm_output``, ``mlp_post_norm_output``). Unlike theirs, every Gemma 4 RMSNorm
multiplies by ``weight``, not ``1 + weight``. After the MLP's add the block adds a third branch, the per-layer
input (``nncanon.parts.blocks.per_layer_inputs``): ``per_layer_output``, a gated projection of the block's slice of
the per-layer input embeddings; then it multiplies the stream by its ``layer_scalar`` buffer, so
``layer_output == (per_layer_stream + per_layer_output) · layer_scalar``.

The attention RMS-norms each query and key head by q_norm and k_norm and each value head by v_norm (no gain),
then rotates queries and keys by the rotary of the block's kind: ``sliding_attention`` blocks turn every
dimension at base 10,000, ``full_attention`` blocks use "proportional" rope (a quarter of each head turns, base
1,000,000) on heads of ``global_head_dim``. Scores are not scaled (``scaling`` 1.0: the norms set their size).
A full-attention block of a config with ``attention_k_eq_v`` has no v_proj: its values are its normed keys
before the rotary, and its key heads are ``num_global_key_value_heads``. The last ``num_kv_shared_layers``
blocks compute no keys or values (``nncanon.parts.attention.kv_sharing``): each reads those of the last earlier block of
its kind, and, on configs with ``use_double_wide_mlp``, their MLP is twice as wide. The embedding is scaled by
``sqrt(hidden_size)`` and the logits softcapped by ``final_logit_softcapping``. The mixture-of-experts block
(``enable_moe_block``) is not covered.
"""

from __future__ import annotations

import sys

from transformers.models.gemma4 import modeling_gemma4 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import pick, relation
from ..parts.attention import kv_sharing
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks import per_layer_inputs as ple
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    text_only,
)
from ..parts.blocks.mlp import MLP
from ..parts.blocks.sandwich import SANDWICH_VALUES, sandwich
from ..research.weights import Layout, Projection, heads_of
from .gemma2 import _capped_logits, _scaled_embeddings, past_the_head  # noqa: F401 (past_the_head: the family API)
from .gemma3_text import rotate

FAMILY = "gemma4_text"
MODEL_TYPES = ("gemma4_text",)
RENAME = TEXT_RENAME
rms = ple.rms

# -- the block: sandwich norms (gain weight), then the per-layer input branch and the layer scalar ----------

SANDWICH = sandwich(rms, "{}.weight", mlp_sum="per_layer_stream")


@relation("(per_layer_stream + per_layer_output) · layer_scalar == layer_output", proves="layer_output",
          reads="per_layer_stream per_layer_output layer_output",
          adds=("per_layer_stream", "post_per_layer_input_norm.output", "layer_output"))
def _per_layer_add(host, r):
    scalar = host._module.layer_scalar.double()
    return [((r["per_layer_stream"].double() + r["per_layer_output"].double()) * scalar, r["layer_output"])]


Gemma4Block = host("Gemma4Block", Block, values=[*SANDWICH_VALUES, *ple.PER_LAYER_VALUES],
                   RELATIONS=(*SANDWICH.adds, _per_layer_add, *SANDWICH.norms, *ple.BLOCK_RELATIONS))

# -- the attention: q/k/v norms, the rotary of the block's kind, keys and values maybe another block's ------


def inverse_frequencies(module):
    """The rotary inverse frequencies of the attention ``module``'s block, in float64: ``base ** -(2i / head_dim)``
    for the default rope, transformers' own init function (on the block kind's config, as the rotary module
    builds it) for Gemma 4's proportional one."""
    import torch

    config, kind = module.config, module.layer_type
    params = config.rope_parameters[kind]
    if params.get("rope_type", "default") == "default":
        d = module.head_dim
        return params["rope_theta"] ** -(torch.arange(0, d, 2, dtype=torch.float64) / d), 1.0
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    inv, scaling = ROPE_INIT_FUNCTIONS[params["rope_type"]](config.per_layer_config[kind], None, layer_type=kind)
    return inv.double(), scaling


@relation("attention_queries == rope(rms(q_proj(input)) · q_norm.weight, per head); on a block that computes "
          "its own: attention_keys == rope(rms(k_proj(input)) · k_norm.weight), attention_values == "
          "rms(v_proj(input)) (k_proj(input) when v_proj is None), per head; rope of the block's kind "
          "(rope_parameters[layer_type])",
          proves="attention_queries attention_keys attention_values",
          reads="inputs attention_queries attention_keys attention_values")
def _normed_rotated(host, r):
    module = host._module
    args, kwargs = r["inputs"]
    x = args[0] if args else kwargs["hidden_states"]
    positions = kwargs["position_ids"]
    d = module.head_dim
    inv_freq, scaling = inverse_frequencies(module)
    heads = lambda proj: proj(x).unflatten(-1, (-1, d)).transpose(1, 2)  # noqa: E731
    checks = [(rotate(rms(module.q_norm, heads(module.q_proj)), positions, inv_freq, scaling), r["attention_queries"])]
    if not module.is_kv_shared_layer:
        keys = heads(module.k_proj)
        values = heads(module.v_proj) if module.v_proj is not None else keys
        checks += [(rotate(rms(module.k_norm, keys), positions, inv_freq, scaling), r["attention_keys"]),
                   (rms(module.v_norm, values), r["attention_values"])]
    return checks


def _own_keys_values(host, kind: str, name: str):
    """A KV-shared block computes no keys or values (no k_proj, v_proj): its W_K, W_V refuse, naming the block whose
    keys and values it attends over (kv_sharing.sources_of), whose weights are the ones an edit must reach; a serving
    view of that block's would claim keys == this block's input · W_K, which the forward never computes. Under
    attention_k_eq_v a full-attention block's values are v_norm(k_proj(input)): its W_V is k_proj's weight."""
    module = host._module
    if kind == "q":
        return None
    if module.is_kv_shared_layer:
        source = kv_sharing.sources_of(host._std_model)[module.layer_idx]
        # the message names no block of its own (the read's path does), so blocks sharing one source share a row
        return (f"a KV-shared block computes no keys or values: it attends over block {source}'s "
                f"(num_kv_shared_layers); read or edit model.layers[{source}].self_attn.{name}")
    if kind == "v" and module.v_proj is None:
        return Projection("k_proj", heads_of("v"))
    return None


#: W_Q, W_K, W_V from q_proj, k_proj, v_proj, proven by the shared relations (q_norm, k_norm, v_norm included);
#: a KV-shared block's W_K, W_V refuse naming their source block; k_eq_v's W_V is k_proj's weight
_WEIGHTS = Layout(choose=_own_keys_values)

Gemma4Attention = host("Gemma4Attention", Attention, RELATIONS=(*ATTENTION_RELATIONS, _normed_rotated),
                       WEIGHTS=_WEIGHTS)

# -- the root: a scaled embedding, per-layer inputs, shared keys and values, a softcapped head ---------------


@relation("final_norm_output == rms(layers[-1].layer_output) · norm.weight", proves="final_norm_output",
          reads="layers[-1].layer_output final_norm_output")
def _final_norm(host, r):
    return [(rms(host.norm._module, r["layers[-1].layer_output"]), r["final_norm_output"])]


ROOT_RELATIONS_GEMMA4 = (pick(ROOT_RELATIONS, "layers[i].layer_output"), _scaled_embeddings, *ple.ROOT_RELATIONS,
                         *kv_sharing.KV_SHARING_RELATIONS, _final_norm, pick(ROOT_RELATIONS, "lm_head_output"),
                         _capped_logits, pick(ROOT_RELATIONS, "unembed("), pick(ROOT_RELATIONS, "next_token_probs"),
                         pick(ROOT_RELATIONS, "input_ids"), pick(ROOT_RELATIONS, "attention_mask"))

ENVOYS = {hf.Gemma4TextDecoderLayer: Gemma4Block, hf.Gemma4TextAttention: Gemma4Attention, hf.Gemma4TextMLP: MLP}
ROOT = host("Gemma4TextStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS_GEMMA4,
            family_module=sys.modules[__name__])

build = text_only(hf.Gemma4ForCausalLM)
layer_types = attention_layer_types


def prepare(model: StandardModel) -> None:
    """transformers 5.23 refuses to read a per-layer attribute (head_dim, num_key_value_heads) from the config
    as a whole; the model-wide sizes (`StandardModel.head_dim`, ``num_kv_heads``) are the config's own, the
    sliding blocks', and every block's own are `block_dim_sizes`', so the global read is allowed."""
    model.text_config.allow_global_per_layer_attribute_access = True


def required_paths(model: StandardModel) -> list[str]:
    paths = [*TEXT_PATHS, "layers.0.pre_feedforward_layernorm", "layers.0.post_feedforward_layernorm",
             "layers.0.self_attn.q_norm"]
    if model.text_config.enable_moe_block:
        raise ValueError("gemma4_text: enable_moe_block is set; the mixture-of-experts block is not covered")
    if not model.text_config.hidden_size_per_layer_input:
        raise ValueError("gemma4_text: hidden_size_per_layer_input is 0; only configs with per-layer inputs are covered")
    return [*paths, "layers.0.per_layer_input_gate", "layers.0.post_per_layer_input_norm"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {"intermediate_size": config.intermediate_size,
            "hidden_size_per_layer_input": config.hidden_size_per_layer_input}


def block_dim_sizes(model: StandardModel, block: int) -> dict[str, int]:
    """Block ``block``'s own sizes where they differ from the config's: a full-attention block's head size
    (global_head_dim) and key heads (num_global_key_value_heads under attention_k_eq_v), a KV-shared block's
    MLP width (doubled under use_double_wide_mlp), as transformers builds them (config.per_layer_config)."""
    config = model.text_config
    own = config.per_layer_config[block]
    shared = block in kv_sharing.sources_of(model)
    return {"head_dim": own.head_dim, "qk_head_dim": own.head_dim, "num_kv_heads": own.num_key_value_heads,
            "intermediate_size": config.intermediate_size * (2 if config.use_double_wide_mlp and shared else 1)}
