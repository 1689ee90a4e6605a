"""Mamba (MambaForCausalLM, model_type mamba): Mamba-1's stack of selective-scan mixers, no attention and no MLP.

The stack is ``backbone``: ``embeddings``, ``layers``, ``norm_f`` (standard names ``embed_tokens``,
``layers``, ``norm``), then a tied or untied ``lm_head``. A block is Mamba-2's: one RMSNorm and one ``mixer``
added to the residual stream (kept in float32, ``residual_in_fp32``). The mixer projects the normed stream to
x and the gate z; x goes through a short causal depthwise convolution (``conv_kernel``) and silu; ``x_proj``
makes each token's dt (``time_step_rank`` wide, widened by ``dt_proj``), B and C from it; the scan keeps a state
of ``state_size`` numbers per channel, decays it by ``exp(dt · A)`` (A per channel and state dimension), writes
``dt · x · B`` into it, reads it with C and adds ``D · x``; ``y · silu(z)`` goes through ``out_proj``.

The scan's values (`nncanon.parts.recurrent.selective_scan`) take Mamba-2's and DeltaNet's names: a channel is a head
of ``value_dim`` 1, B and C one group (``key_heads`` 1), the state ``State [batch heads key_dim value_dim]`` =
transformers' ``[batch, intermediate_size, state_size]`` with a trailing 1; ``state`` and ``states`` exist under
``nncanon.route_kernels(model.family, "torch")``. The conv window is ``conv_state_input`` /
``conv_state_output`` (`nncanon.parts.recurrent.conv`), over the x channels.
"""

from __future__ import annotations

import sys

from transformers.models.mamba import modeling_mamba as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, text_only
from ..parts.recurrent import selective_scan
from ..parts.recurrent.selective_scan import KERNELS, SelectiveScan  # noqa: F401 (the family API, shared)
from .mamba2 import MambaBlock, before_the_head, past_the_head  # noqa: F401 (Mamba-2's block and head, the same)

FAMILY = "mamba"
MODEL_TYPES = ("mamba",)
RENAME = {"backbone.embeddings": "embed_tokens", "backbone.layers": "layers", "backbone.norm_f": "norm"}
#: the library whose fused kernels transformers would bind instead of its torch scan (the loads' label)
KERNEL_LIBRARY = "mamba_ssm"

ENVOYS = {hf.MambaBlock: MambaBlock, hf.MambaMixer: SelectiveScan}
ROOT = host("MambaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            **selective_scan.ROOT_SIZES, family_module=sys.modules[__name__])

build = text_only(hf.MambaForCausalLM)


def prepare(model: StandardModel) -> None:
    selective_scan.prepare(model, hf, SelectiveScan)


def layer_types(model) -> list[str]:
    return ["mamba"] * model.text_config.num_hidden_layers


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.norm", "layers.0.mixer"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {**selective_scan.dim_sizes(config.intermediate_size, config.state_size, config.conv_kernel),
            "intermediate_size": config.intermediate_size}
