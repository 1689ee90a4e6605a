"""The names other libraries give the values nncanon names: TransformerLens 4.3's hooks and nnterp's attributes.

Data, for two readers: the errors (a user who writes ``hook_resid_post`` or ``layers_output`` is told the
standard name, `nncanon.guards.missing`) and the build (generator/tl_names.py checks every TransformerLens mapping
against TransformerBridge on each family and shows it on the pages). No torch here: the renderer reads it.
"""

from __future__ import annotations

#: (host pattern, value) -> (TransformerLens hook, ``{i}`` the block, ``a|b``: the first the bridge has; how its
#: tensor is laid out against the value's)
TRANSFORMER_LENS: dict[tuple[str, str], tuple[str, str | None]] = {
    ("model", "token_embeddings"): ("hook_embed", None),
    ("model", "logits"): ("logits", None),  # what run_with_cache returns
    ("model.layers[i]", "layer_input"): ("blocks.{i}.hook_resid_pre", None),
    ("model.layers[i]", "attention_norm_output"): ("blocks.{i}.ln1.hook_out", None),
    ("model.layers[i]", "layer_mid"): ("blocks.{i}.hook_resid_mid", None),
    ("model.layers[i]", "mlp_norm_output"): ("blocks.{i}.ln2.hook_out", None),
    ("model.layers[i]", "layer_output"): ("blocks.{i}.hook_resid_post", None),
    # a rotary model's queries and keys enter attention rotated (hook_rot_*); gpt2's are hook_q, hook_k
    ("model.layers[i].self_attn", "attention_queries"): ("blocks.{i}.attn.hook_rot_q|blocks.{i}.attn.hook_q",
                                                         "seq-first"),
    ("model.layers[i].self_attn", "attention_keys"): ("blocks.{i}.attn.hook_rot_k|blocks.{i}.attn.hook_k",
                                                      "seq-first"),
    ("model.layers[i].self_attn", "attention_values"): ("blocks.{i}.attn.hook_v", "seq-first"),
    ("model.layers[i].self_attn", "attention_scores"): ("blocks.{i}.attn.hook_attn_scores", None),
    ("model.layers[i].self_attn", "attention_probabilities"): ("blocks.{i}.attn.hook_pattern", None),
    ("model.layers[i].self_attn", "attention_head_outputs"): ("blocks.{i}.attn.hook_z", None),
    ("model.layers[i].self_attn", "attention_output"): ("blocks.{i}.hook_attn_out", None),
    ("model.layers[i].mlp", "mlp_neurons"): ("blocks.{i}.mlp.hook_post", None),
    ("model.layers[i].mlp", "mlp_output"): ("blocks.{i}.hook_mlp_out", None),
    # an encoder-decoder's two stacks (TransformerBridge's BART adapter: encoder_blocks, decoder_blocks); the decoder's
    # hook_resid_mid is ln2's input, after the cross-attention's add
    ("model.encoder.layers[i]", "layer_input"): ("encoder_blocks.{i}.hook_resid_pre", None),
    ("model.encoder.layers[i]", "layer_output"): ("encoder_blocks.{i}.hook_resid_post", None),
    ("model.encoder.layers[i]", "mlp_neurons"): ("encoder_blocks.{i}.mlp.hook_post", None),
    ("model.encoder.layers[i]", "mlp_output"): ("encoder_blocks.{i}.hook_mlp_out", None),
    ("model.encoder.layers[i].self_attn", "attention_probabilities"): ("encoder_blocks.{i}.attn.hook_pattern", None),
    ("model.encoder.layers[i].self_attn", "attention_output"): ("encoder_blocks.{i}.hook_attn_out", None),
    ("model.decoder.layers[i]", "layer_input"): ("decoder_blocks.{i}.hook_resid_pre", None),
    # T5's adapter hooks the self-attention's add as hook_resid_mid and the cross-attention's as hook_resid_mid2
    ("model.decoder.layers[i]", "cross_attention_mid"): ("decoder_blocks.{i}.hook_resid_mid2|"
                                                         "decoder_blocks.{i}.hook_resid_mid", None),
    ("model.decoder.layers[i]", "layer_output"): ("decoder_blocks.{i}.hook_resid_post", None),
    ("model.decoder.layers[i]", "mlp_neurons"): ("decoder_blocks.{i}.mlp.hook_post", None),
    ("model.decoder.layers[i]", "mlp_output"): ("decoder_blocks.{i}.hook_mlp_out", None),
    ("model.decoder.layers[i].self_attn", "attention_probabilities"): ("decoder_blocks.{i}.self_attn.hook_pattern",
                                                                       None),
    ("model.decoder.layers[i].self_attn", "attention_output"): ("decoder_blocks.{i}.hook_attn_out", None),
    ("model.decoder.layers[i].cross_attn", "attention_probabilities"): ("decoder_blocks.{i}.cross_attn.hook_pattern",
                                                                        None),
    ("model.decoder.layers[i].cross_attn", "attention_output"): ("decoder_blocks.{i}.cross_attn.hook_out", None),
    # an encoder-decoder whose MLP is a module of its own (T5's DenseReluDense mounted as mlp)
    ("model.encoder.layers[i].mlp", "mlp_neurons"): ("encoder_blocks.{i}.mlp.hook_post", None),
    ("model.encoder.layers[i].mlp", "mlp_output"): ("encoder_blocks.{i}.hook_mlp_out", None),
    ("model.decoder.layers[i].mlp", "mlp_neurons"): ("decoder_blocks.{i}.mlp.hook_post", None),
    ("model.decoder.layers[i].mlp", "mlp_output"): ("decoder_blocks.{i}.hook_mlp_out", None),
}

#: TransformerLens hooks the build does not compare (the bridge computes them only when asked) -> the standard path
TRANSFORMER_LENS_UNCHECKED = {"hook_result": "model.layers[i].self_attn.attention_head_results"}

#: TransformerLens module names -> the standard path they stand for
TRANSFORMER_LENS_MODULES = {"blocks": "model.layers", "attn": "model.layers[i].self_attn",
                            "ln1": "model.layers[i].attention_norm_output", "ln2": "model.layers[i].mlp_norm_output",
                            "ln_final": "model.final_norm_output", "unembed": "model.lm_head_output",
                            "embed": "model.token_embeddings"}

#: TransformerLens parameter names -> the standard weight (nncanon.weights): its ``blocks.{i}.ln1.w`` is the gain of
#: the norm whose output is attention_norm_output (a name, not a claim of equal values: TransformerLens folds the
#: gains into the next weights by default)
TRANSFORMER_LENS_WEIGHTS = {
    "blocks.{i}.ln1.w": "model.layers[i].attention_norm_w", "blocks.{i}.ln1.b": "model.layers[i].attention_norm_b",
    "blocks.{i}.ln2.w": "model.layers[i].mlp_norm_w", "blocks.{i}.ln2.b": "model.layers[i].mlp_norm_b",
    "blocks.{i}.ln1_post.w": "model.layers[i].attention_post_norm_w",
    "blocks.{i}.ln2_post.w": "model.layers[i].mlp_post_norm_w",
    "ln_final.w": "model.final_norm_w", "ln_final.b": "model.final_norm_b",
}

#: nnterp's StandardizedTransformer attributes -> the standard path (``[i]``: one per block)
NNTERP = {
    "layers_input": "model.layers[i].layer_input",
    "layers_output": "model.layers[i].layer_output",
    "attentions_input": "model.layers[i].attention_norm_output",
    "attentions_output": "model.layers[i].self_attn.attention_output",
    "mlps_input": "model.layers[i].mlp_input",
    "mlps_output": "model.layers[i].mlp.mlp_output",
    "attentions": "model.layers[i].self_attn",
    "mlps": "model.layers[i].mlp",
    "ln_final": "model.final_norm_output",
    "project_on_vocab": "model.unembed(x)",
}


def _transformer_lens_index() -> dict[str, tuple[str, str]]:
    """The last part of every TransformerLens hook, with and without ``hook_`` -> (hook, standard path)."""
    found: dict[str, tuple[str, str]] = {}
    for (host, value), (hooks, _) in TRANSFORMER_LENS.items():
        for hook in hooks.split("|"):
            last = hook.rsplit(".", 1)[-1]
            if last == "hook_out":  # ln1.hook_out: the module name says which
                continue
            for name in (last, last.removeprefix("hook_")):
                found.setdefault(name, (hook, f"{host}.{value}"))
    return found


_TL = _transformer_lens_index()


def standard_name(name: str) -> tuple[str, str, str] | None:
    """(library, its name as it writes it, the standard path) for a TransformerLens or nnterp name, else None."""
    if name in NNTERP:
        return "nnterp", name, NNTERP[name]
    if name in _TL:
        hook, path = _TL[name]
        return "TransformerLens", hook, path
    for hook, path in TRANSFORMER_LENS_UNCHECKED.items():
        if name in (hook, hook.removeprefix("hook_")):
            return "TransformerLens", f"blocks.{{i}}.attn.{hook}", path
    if name in TRANSFORMER_LENS_WEIGHTS:
        return "TransformerLens", name, TRANSFORMER_LENS_WEIGHTS[name]
    if name in TRANSFORMER_LENS_MODULES:
        return "TransformerLens", name, TRANSFORMER_LENS_MODULES[name]
    return None
