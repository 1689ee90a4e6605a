"""Mamba-2 (Mamba2ForCausalLM, model_type mamba2): a stack of state-space mixers, no attention and no MLP.

The stack is ``backbone``: ``embeddings``, ``layers``, ``norm_f`` (standard names ``embed_tokens``,
``layers``, ``norm``), then an untied or tied ``lm_head``. A block is one RMSNorm and one Mamba-2
``mixer`` added to the residual stream (kept in float32, ``residual_in_fp32``); there is no MLP. The
mixer projects the normed stream to z (the gate), x, B, C and dt; x, B and C go through a short
causal depthwise convolution (``conv_kernel``) and silu; the scan keeps a state per head, decays it
by ``exp(dt · A)`` and writes ``dt · x Bᵀ`` into it each token, reads it with C and adds ``D · x``; a
gated RMSNorm (``rms(y · silu(z))``, per group) and ``out_proj`` give what the block adds.

The scan's values are served at the kernel the call runs (`nncanon.parts.recurrent.ssd`): the chunked scan on a prompt
(chunks of ``chunk_size`` tokens), the one-token update on a cached decode step. Their names are
DeltaNet's: B is ``attention_keys``, C ``attention_queries``, x ``attention_values``, and the state
is ``State [batch heads key_dim value_dim]`` with ``key_dim = state_size`` and ``value_dim =
head_dim`` (transformers' ``[heads, head_dim, state_size]``, transposed); ``state`` and ``states``
(every token's state) exist under ``nncanon.route_kernels(model.family, "torch")``, which runs every
call token by token. dt is ``time_steps`` and A ``decay_rates`` (``decays`` = their product), as on a DeltaNet.
What the cache keeps of the convolution is ``conv_state_input`` / ``conv_state_output`` (`nncanon.parts.recurrent.conv`):
``[batch, conv_dim, conv_kernel]``, the x, B, C channels at the last ``conv_kernel`` positions, shared with
the DeltaNet families.
"""

from __future__ import annotations

import sys

from transformers.models.mamba2 import modeling_mamba2 as hf

from ..core.hosts import host
from ..core.layouts import Residual
from ..core.locators import FIRST, child, own
from ..core.model import StandardModel
from ..core.relations import relation
from ..core.values import Value
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, text_only
from ..parts.recurrent import ssd
from ..parts.recurrent.ssd import KERNELS, SSD  # noqa: F401 (the family API, shared)

FAMILY = "mamba2"
MODEL_TYPES = ("mamba2",)
RENAME = {"backbone.embeddings": "embed_tokens", "backbone.layers": "layers", "backbone.norm_f": "norm"}
#: the library whose fused kernels transformers would bind instead of its torch scan (the loads' label)
KERNEL_LIBRARY = "mamba_ssm"


@relation("layer_input + mixer.attention_output == layer_output", proves="layer_output mixer.attention_output",
          reads="layer_input mixer.attention_output layer_output",
          adds=("layer_input", "mixer.attention_output", "layer_output"))
def _add(host, r):
    return [(r["layer_input"] + r["mixer.attention_output"], r["layer_output"])]


@relation("attention_norm_output == norm(layer_input) == what mixer is called with",
          proves="attention_norm_output layer_input", reads="layer_input attention_norm_output mixer.input")
def _norm(host, r):
    return [(host.norm._module(r["layer_input"]), r["attention_norm_output"]),
            (r["mixer.input"], r["attention_norm_output"])]


MambaBlock = host("MambaBlock", values=[
    Value("layer_input", Residual, "The residual stream entering the block", own("input")),
    Value("attention_norm_output", Residual, "The normed stream entering the mixer", child("norm")),
    Value("layer_output", Residual, "The residual stream leaving the block: the input plus the mixer's output",
          own("output", element=FIRST)),
], HOST="model.layers[i]", KIND="block", RELATIONS=(_add, _norm), MIXERS=("mixer",))

ENVOYS = {hf.Mamba2Block: MambaBlock, hf.Mamba2Mixer: SSD}
ROOT = host("Mamba2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Mamba2ForCausalLM)


def before_the_head(model: StandardModel, normed):
    """The lens's step between the final norm and the head (`nncanon.lens`): Mamba2ForCausalLM casts the normed
    stream (float32 under residual_in_fp32) to the head's dtype."""
    return normed.to(model.lm_head._module.weight.dtype)


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head: Mamba2ForCausalLM returns float32 logits."""
    return logits.float()


def prepare(model: StandardModel) -> None:
    ssd.prepare(model, hf)


def layer_types(model) -> list[str]:
    return ["mamba2"] * model.text_config.num_hidden_layers


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.norm", "layers.0.mixer", "layers.0.mixer.norm"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    inner = int(config.expand * config.hidden_size)
    return {"key_heads": config.n_groups, "heads": config.num_heads, "key_dim": config.state_size,
            "value_dim": config.head_dim, "intermediate_size": inner,
            "conv_dim": inner + 2 * config.n_groups * config.state_size, "conv_kernel": config.conv_kernel}
