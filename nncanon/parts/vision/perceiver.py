"""The perceiver resampler connector (Idefics2's): a fixed set of learned latents reads each image's patches.

The connector (``model.projector``) maps the tower's output ``[images, patches, vision_hidden_size]`` to the text
model's width with a gated MLP (``modality_projection``: down(act(gate(x)) · up(x))), the **context**, then runs a
few perceiver layers over ``resampler_n_latents`` learned latents (``perceiver_resampler.latents``, the same start
for every image). Each layer is a pre-norm block on the latents:

- the latents and the context are RMS-normed apart (``input_latents_norm``, ``input_context_norm``);
- queries come from the normed latents only; keys and values from the normed context and the normed latents laid
  end to end ([context, latents]), grouped-query heads (``num_key_value_heads``), no rotary, no causal mask; the
  context's padding patches (the tower's ``patch_attention_mask``) are masked out as keys;
- the attention's output projection is added to the latents, then a gated MLP of 4 x the width on the
  RMS-normed sum (``post_attention_layernorm``) is added in turn.

A final RMSNorm (``perceiver_resampler.norm``) gives ``resampler_n_latents`` rows per image: the image's tokens,
whatever its size. `PERCEIVER` proves ``vision.image_features`` from ``vision.tower_output`` one step at a time, each
step recomputed in float64 from what the step before handed it: the projection, every layer (from its own call),
the hand-overs between them (the learned latents into the first layer, each layer's output into the next, the
projected context into every layer) and the final norm.
"""

from __future__ import annotations

from typing import Any

from ...core.precision import SUBBLOCK
from ...core.relations import first, relation
from .padded_patches import real_patches


def rms_norm(module: Any, x: Any) -> Any:
    """An RMSNorm (weight · x / sqrt(mean(x²) + eps)) in float64."""
    x = x.double()
    return module.weight.double() * x / (x.pow(2).mean(-1, keepdim=True) + module.variance_epsilon).sqrt()


def gated_mlp(mlp: Any, x: Any) -> Any:
    """down_proj(act_fn(gate_proj(x)) · up_proj(x)) in float64, no biases."""
    x = x.double()
    gate, up = x @ mlp.gate_proj.weight.double().T, x @ mlp.up_proj.weight.double().T
    return (mlp.act_fn(gate) * up) @ mlp.down_proj.weight.double().T


def perceiver_layer(layer: Any, latents: Any, context: Any, real: Any) -> Any:
    """One perceiver layer in float64: ``latents [images, n_latents, width]`` reading ``context [images, patches,
    width]`` whose rows ``real [images, patches]`` marks (a padding patch is no key)."""
    import torch

    attention = layer.self_attn
    normed_latents, normed_context = rms_norm(layer.input_latents_norm, latents), rms_norm(layer.input_context_norm,
                                                                                           context)
    both = torch.cat([normed_context, normed_latents], dim=1)
    heads = lambda t, n: t.unflatten(-1, (n, attention.head_dim)).transpose(1, 2)  # noqa: E731
    queries = heads(normed_latents @ attention.q_proj.weight.double().T, attention.num_heads)
    keys = heads(both @ attention.k_proj.weight.double().T, attention.num_key_value_heads)
    values = heads(both @ attention.v_proj.weight.double().T, attention.num_key_value_heads)
    groups = attention.num_heads // attention.num_key_value_heads
    keys, values = keys.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1)
    scores = queries @ keys.transpose(-1, -2) * attention.scaling
    is_key = torch.cat([real, torch.ones(real.shape[0], latents.shape[1], dtype=torch.bool)], dim=1)
    probabilities = scores.masked_fill(~is_key[:, None, None, :], float("-inf")).softmax(-1)
    mixed = (probabilities @ values).transpose(1, 2).flatten(2) @ attention.o_proj.weight.double().T
    latents = latents.double() + mixed
    return latents + gated_mlp(layer.mlp, rms_norm(layer.post_attention_layernorm, latents))


def _layer_call(call: Any) -> tuple[Any, Any]:
    """(latents, context) of a perceiver layer's call ``(args, kwargs)``."""
    args, kwargs = call
    return (args[0] if args else kwargs["latents"]), (args[1] if len(args) > 1 else kwargs["context"])


_LAYERS = "model.projector.perceiver_resampler.layers[*]"


@relation("image_features == norm(perceiver layers(latents, context = modality_projection(tower_output))): each "
          "layer adds to the latents attention(queries from its RMS-normed latents; keys and values from the "
          "RMS-normed context and latents end to end, the padding patches no keys) and then a gated MLP of the "
          "RMS-normed sum; the final RMSNorm's resampler_n_latents rows per image are its image tokens",
          proves="image_features",
          reads=f"model.vision.inputs tower_output model.projector.modality_projection.output {_LAYERS}.inputs "
                f"{_LAYERS}.output image_features", tolerance=SUBBLOCK)
def PERCEIVER(host, r):
    """Each pair is one step (the projection, one layer, the final norm) recomputed from the values the forward handed
    that step, so each is one sub-block of roundings: SUBBLOCK."""
    connector = host._std_model.projector._module
    resampler = connector.perceiver_resampler
    tower_output, context = r["tower_output"], r["model.projector.modality_projection.output"]
    real = real_patches(r["model.vision.inputs"], tower_output.shape[0], tower_output.shape[1])
    calls, outs = r[f"{_LAYERS}.inputs"], [first(out) for out in r[f"{_LAYERS}.output"]]
    pairs = [(gated_mlp(connector.modality_projection, tower_output), context),
             (resampler.latents.double().expand(tower_output.shape[0], -1, -1), _layer_call(calls[0])[0])]
    for i, (layer, call, out) in enumerate(zip(resampler.layers, calls, outs)):
        latents, layer_context = _layer_call(call)
        pairs.append((context, layer_context))
        if i:
            pairs.append((outs[i - 1], latents))
        pairs.append((perceiver_layer(layer, latents, layer_context, real), out))
    final = rms_norm(resampler.norm, outs[-1])
    return [*pairs, (final.reshape(-1, final.shape[-1]), r["image_features"])]


__all__ = ["rms_norm", "gated_mlp", "perceiver_layer", "PERCEIVER"]
