"""NanoChat (NanoChatForCausalLM, model_type nanochat): Karpathy's nanochat, a pre-norm block of norms with no gain.

Every RMSNorm (the block's two, the per-head query and key norms and the final one) is parameter-free:
``x / sqrt(mean(x²) + eps)``, no weight. The embedding is normed before the first block by the model's one
``norm`` module, the same module that norms the last block's output: ``norm`` runs twice in every forward, so
``final_norm_output`` is read at its second call and ``layers[0].layer_input`` is ``norm(token_embeddings)``.
The attention is Llama's with the rotary turned before the query/key norms (``q_norm`` after
``apply_rotary_pos_emb``); the MLP has no gate, ``fc2(relu(fc1(x))²)`` (the shared ``ungated_mlp``); the
logits are softcapped past the head (``15 · tanh(x / 15)``), as Gemma 2's are, so ``logits`` is not
``lm_head_output`` and the lens applies the cap (`past_the_head`).
"""

from __future__ import annotations

import sys

from transformers.models.nanochat import modeling_nanochat as hf

from ..core.hosts import host
from ..core.layouts import Residual
from ..core.locators import call, op
from ..core.model import StandardModel
from ..core.relations import relation
from ..core.values import Value
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.text_family import intermediate_dims, root_relations
from ..parts.blocks.ungated import ungated_mlp
from ..research.norm_forms import norm_epsilon
from .gemma2 import _capped_logits, softcap

FAMILY = "nanochat"
MODEL_TYPES = ("nanochat",)
RENAME = {**TEXT_RENAME, "mlp.fc2": "mlp.down_proj", "mlp.activation_fn": "mlp.act_fn"}


def bare_rms(norm, x):
    """A parameter-free RMSNorm, ``x / sqrt(mean(x²) + eps)``, in float64 with the module's own eps (held as
    ``eps``, or ``variance_epsilon`` from 5.25)."""
    x = x.double()
    return x * (x.pow(2).mean(-1, keepdim=True) + norm_epsilon(norm)).rsqrt()


@relation("layers[0].layer_input == norm(token_embeddings) == token_embeddings / rms(token_embeddings) (no weight): "
          "the final norm's module, called first on the embedding", proves="token_embeddings",
          reads="input_ids token_embeddings layers[0].layer_input")
def _normed_embeddings(host, r):
    table = host.embed_tokens._module.weight.double()
    return [(table[r["input_ids"]], r["token_embeddings"]),
            (bare_rms(host.norm._module, r["token_embeddings"]), r["layers[0].layer_input"])]


@relation("final_norm_output == norm(layers[-1].layer_output) == layers[-1].layer_output / rms(layers[-1].layer_output)"
          " (no weight), norm's second call", proves="final_norm_output",
          reads="layers[-1].layer_output final_norm_output")
def _final_norm(host, r):
    return [(bare_rms(host.norm._module, r["layers[-1].layer_output"]), r["final_norm_output"])]


# the model's forward calls self.norm twice: on the embedding, then on the last block's output
FINAL_NORM = op(call("self_norm_1", 1), module="model", shown="model")
ROOT_VALUES_NANOCHAT = [Value("final_norm_output", Residual,
                              "The residual stream after the final norm (norm's second call), what lm_head reads",
                              FINAL_NORM) if v.name == "final_norm_output" else v for v in ROOT_VALUES]

ENVOYS = {hf.NanoChatDecoderLayer: Block, hf.NanoChatAttention: Attention, hf.NanoChatMLP: ungated_mlp("fc1")}
ROOT = host("NanoChatStandardModel", StandardModel, values=ROOT_VALUES_NANOCHAT,
            RELATIONS=root_relations({"layers[0].layer_input": _normed_embeddings, "final_norm_output": _final_norm,
                                      "logits": _capped_logits}),
            family_module=sys.modules[__name__])

build = text_only(hf.NanoChatForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
dim_sizes = intermediate_dims


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): the final logit softcap, as NanoChatForCausalLM applies it."""
    return softcap(logits, model.text_config.final_logit_softcapping)


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm", "layers.0.mlp.fc1",
            "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]
