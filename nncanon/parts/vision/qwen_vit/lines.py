"""The Qwen ViT lines' names and variants: the wrapper's layout, each line's spelling inside the
encoder, the hosts its module classes map onto, and the variants table read off each line's encoder.

`MOUNTS` lifts the wrapper's text stack, encoder and merger to the root; `RENAME` is the Qwen3-VL /
Qwen3.5 spelling inside the encoder and `RENAME_FC` the Qwen2-VL / Qwen2.5-VL one, both onto the
same standard names (so the hosts' locators and relations, which name children by their standard
names, serve every line).
"""

from __future__ import annotations

from .hosts import Vision, VisionAttention, VisionBlock, VisionMLP

#: the wrapper's text stack, encoder and merger, mounted at the root (every Qwen VL wrapper)
MOUNTS = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.visual": "vision",
    "model.visual.merger": "projector",
}

#: native -> standard names inside the encoder, Qwen3-VL / Qwen3.5 spelling
RENAME = {
    "blocks": "layers",
    "norm1": "input_layernorm",
    "norm2": "post_attention_layernorm",
    "attn": "self_attn",
    # the attention's output projection only: patch_embed.proj keeps its name
    "attn.proj": "attn.o_proj",
    # the MLP's and the merger's second linear
    "linear_fc2": "down_proj",
}

#: the same standard names from the Qwen2-VL / Qwen2.5-VL spelling: Qwen2-VL's MLP is fc1, act, fc2,
#: and on both the merger is ln_q and an nn.Sequential (0: the first linear, 1: GELU, 2: the second)
RENAME_FC = {
    **{k: v for k, v in RENAME.items() if k != "linear_fc2"},
    "fc1": "linear_fc1",
    "act": "act_fn",
    "fc2": "down_proj",
    "ln_q": "norm",
    "mlp.0": "linear_fc1",
    "mlp.1": "act_fn",
    "mlp.2": "down_proj",
}


def envoys(vision: type, block: type, attention: type, mlp: type, vision_host: type | None = None,
           mlp_host: type | None = None) -> dict[type, type]:
    """ENVOYS entries of a line's encoder: its model, block, attention and MLP classes onto the hosts
    (``vision_host``: a subclass of `Vision` with the line's own values or relations; ``mlp_host``: a
    subclass of `VisionMLP`, e.g. `GatedVisionMLP`)."""
    return {vision: vision_host or Vision, block: VisionBlock, attention: VisionAttention, mlp: mlp_host or VisionMLP}


# -- the variants, read off each line's own encoder (built on the meta device) -------------------------

LINES = (
    ("Qwen2-VL", "qwen2_vl", "Qwen2VLVisionConfig", "Qwen2VisionTransformerPretrainedModel"),
    ("Qwen2.5-VL", "qwen2_5_vl", "Qwen2_5_VLVisionConfig", "Qwen2_5_VisionTransformerPretrainedModel"),
    ("Qwen3-VL", "qwen3_vl", "Qwen3VLVisionConfig", "Qwen3VLVisionModel"),
    ("Qwen3-VL-MoE", "qwen3_vl_moe", "Qwen3VLMoeVisionConfig", "Qwen3VLMoeVisionModel"),
    ("Qwen3.5", "qwen3_5", "Qwen3_5VisionConfig", "Qwen3_5VisionModel"),
    ("Qwen3.5-MoE", "qwen3_5_moe", "Qwen3_5MoeVisionConfig", "Qwen3_5MoeVisionModel"),
)

_ACTIVATIONS = {"QuickGELUActivation": "QuickGELU", "GELUTanh": "GELU (tanh)", "SiLUActivation": "SiLU",
                "GELUActivation": "GELU", "PytorchGELUTanh": "GELU (tanh)"}


def _norm_kind(module) -> str:
    return "RMSNorm" if "RMSNorm" in type(module).__name__ else type(module).__name__


def _mlp_kind(mlp) -> str:
    names = [name for name, _ in mlp.named_children()]
    act = getattr(mlp, "act_fn", None) or getattr(mlp, "act", None)
    act = _ACTIVATIONS.get(type(act).__name__, type(act).__name__)
    if "gate_proj" in names:
        return "SwiGLU, biased" if mlp.gate_proj.bias is not None else "SwiGLU"
    first, second = ("fc1", "fc2") if "fc1" in names else ("linear_fc1", "linear_fc2")
    return f"{first}, {act}, {second}"


def _beyond(model, config) -> str:
    extra = []
    window = getattr(config, "window_size", None)
    if window:
        extra.append(f"windows of {window} pixels except on fullatt_block_indexes")
    if hasattr(model, "pos_embed"):
        extra.append("learned pos_embed")
    if getattr(config, "deepstack_visual_indexes", None):
        extra.append("DeepStack taps")
    return "; ".join(extra) or "none"


def variant(module: str, config_name: str, class_name: str) -> list[str]:
    """[block norms, merger norm, MLP, beyond the shared encoder] of one line's encoder."""
    import importlib

    import torch

    configs = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    models = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    config = getattr(configs, config_name)(depth=1)
    with torch.device("meta"):
        model = getattr(models, class_name)._from_config(config)
    merger_norm = getattr(model.merger, "norm", None) or model.merger.ln_q
    return [_norm_kind(model.blocks[0].norm1), _norm_kind(merger_norm), _mlp_kind(model.blocks[0].mlp),
            _beyond(model, config)]


def variants() -> dict:
    """The variants table: one row per line, lines whose encoders agree merged ("Qwen3-VL, -MoE")."""
    rows: list[list[str]] = []
    for line, module, config_name, class_name in LINES:
        cells = variant(module, config_name, class_name)
        if rows and rows[-1][1:] == cells and line.startswith(rows[-1][0].split(",")[0]):
            rows[-1][0] += ", -" + line.rsplit("-", 1)[-1]
            continue
        rows.append([line, *cells])
    columns = ["line", "block norms", "merger norm", "MLP", "beyond the shared encoder"]
    return {"columns": columns, "rows": rows}


#: a family's ``vision_variants`` (the shared notes' table)
vision_variants = variants

__all__ = ["MOUNTS", "RENAME", "RENAME_FC", "envoys", "LINES", "variant", "variants", "vision_variants"]
