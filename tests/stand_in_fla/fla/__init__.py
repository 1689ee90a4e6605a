"""A stand-in for flash-linear-attention (the ``fla`` package), for tests on a CPU.

The real fla kernels are Triton kernels that need a GPU, so the case "flash-linear-attention is
installed" cannot be run here with the real package. transformers binds the delta-rule kernels
at import of a modeling module: ``use_kernel_func_from_hub_with_fallback("chunk_gated_delta_rule",
"fla")`` imports ``fla`` and takes its ``chunk_gated_delta_rule`` /
``fused_recurrent_gated_delta_rule``. Putting this directory on ``sys.path`` before transformers'
qwen3_5_moe modeling module is imported makes transformers bind these two functions exactly as
it would bind fla's: same package name, same function names, fla's keyword names. They run
transformers' own pure-torch reference and count their calls, so a test can tell which
kernel ran.
"""

from __future__ import annotations

import inspect

__version__ = "0.0.0+stand-in"
STAND_IN = True

#: how many times each kernel ran
calls = {"chunk_gated_delta_rule": 0, "fused_recurrent_gated_delta_rule": 0}


def _reference(name: str):
    # Imported at call time: this package is imported while the modeling module is being
    # imported (by its decorators), so the module is not complete yet at our import.
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe

    return inspect.unwrap(getattr(modeling_qwen3_5_moe, name))


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    calls["chunk_gated_delta_rule"] += 1
    return _reference("torch_chunk_gated_delta_rule")(
        q, k, v, g=g, beta=beta, initial_state=initial_state, output_final_state=output_final_state,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                     cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    calls["fused_recurrent_gated_delta_rule"] += 1
    return _reference("torch_recurrent_gated_delta_rule")(
        q, k, v, g=g, beta=beta, initial_state=initial_state, output_final_state=output_final_state,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
