"""The traits the last name reads decided, measured in one traced forward of the tiny checkpoint (issue 48).

The forward runs a batch of two rows: one token repeated, and distinct tokens. What the standard hosts serve in it
(values their relations prove) and what each attention's modules read and gave (torch hooks, whatever the modules
are called) decide:

- positions added to the residual: the first block of a stack reads, at one repeated token, a different vector at
  each position. Without absolute positions every row is the same token's embedding computed the same way (a rotary
  turns only the queries and keys, inside the attention);
- fused projections: the module whose output holds the attention's values (every column of them) reads the
  attention's input and gives more than the values (the queries and keys beside them, gpt2's c_attn, phi3's
  qkv_proj); a gated MLP whose one projection of the input gives both halves (phi3's gate_up_proj);
- latent attention: the module whose output holds the values reads a tensor narrower than the stream (DeepSeek's
  kv_b_proj reads the kv latent): keys and values rebuilt from a low-rank path;
- a gated attention output: what the output projection reads (attention_premix) is the heads' outputs multiplied,
  element by element, by a factor in [0, 1] that is not one (a sigmoid gate: Qwen3-Next's);
- attention biases: a projection reading the attention's input gives a nonzero output at a zero input;
- renormalised routing: the chosen experts' weights (expert_weights) sum to one (or one constant) on every token.
"""

from __future__ import annotations

from typing import Any

from generator.facts.norm_placement import _is_norm, _same, record

#: float32's unit roundoff
_U = 2.0 ** -24


def _call(tiny: Any, family_module: Any) -> dict:
    """The probe's call: row 0 one token repeated, row 1 distinct tokens (a speech family's features, duplicated)."""
    import torch

    vocab = getattr(tiny._module.config.get_text_config(), "vocab_size", None) or 2
    ids = torch.stack([torch.full((8,), 3 % vocab), (torch.arange(8) * 7 + 1) % min(vocab, 64)])
    if not hasattr(family_module, "speech_inputs"):
        return {"input_ids": ids}
    call = {k: v.repeat(2, *[1] * (v.dim() - 1)) if isinstance(v, torch.Tensor) and v.shape[:1] == (1,) else v
            for k, v in family_module.speech_inputs(tiny)[1].items()}
    return {**call, "decoder_input_ids": ids}


def _wanted(tiny: Any) -> dict:
    """(host path, value) -> envoy for what the probe reads, where the load serves it."""
    from generator.facts.proof import unavailable

    wanted = {}
    for block in tiny.all_blocks():
        path = block._std_path
        hosts = [(path, block)] + [(f"{path}.{name}", envoy) for name in ("self_attn", "mlp")
                                   if (envoy := _envoy(block, name)) is not None]
        for where, envoy in hosts:
            for value in type(envoy).values():
                if value.name in ("layer_input", "attention_values", "attention_premix", "attention_head_outputs",
                                  "expert_weights") and unavailable(tiny, envoy, value.name) is None:
                    wanted[(where, value.name)] = envoy
    return wanted


def _envoy(block: Any, name: str) -> Any:
    try:
        return getattr(block, name)
    except AttributeError:
        return None


def probe(tiny: Any, family_module: Any, attentions: list) -> dict:
    """The measured traits (module docstring): ``{"positions", "fused" (["qkv"] or []), "latent", "gated_output",
    "attention_bias", "renormalised", "projected"}`` (an input embedding narrower than the stream: OPT-350m's);
    ``attentions``: each block's native attention module."""
    import torch

    from generator.facts.proof import read_all

    wanted = _wanted(tiny)
    call = _call(tiny, family_module)
    reads: dict = {}
    with torch.no_grad():
        seen = record([(attn, None, None) for attn in attentions], lambda: reads.update(read_all(tiny, wanted, (), call)))
    width = next((v.shape[-1] for (p, n), v in reads.items() if n == "layer_input" and v is not None), None)
    found = {"positions": _positions(reads, hasattr(family_module, "speech_inputs")),
             "fused_qkv": False, "latent": False, "gated_output": False,
             "attention_bias": any(_biased(attn, seen) for attn in attentions),
             "renormalised": _renormalised([v for (_, n), v in reads.items() if n == "expert_weights"])}
    for (path, name), values in reads.items():
        if name != "attention_values" or values is None:
            continue
        maker = _values_maker(wanted[(path, name)]._module, values, seen)
        if maker is not None:
            x, y = seen[id(maker)]
            found["latent"] |= width is not None and x.shape[-1] < width
            found["fused_qkv"] |= _reads_input(wanted[(path, name)]._module, x, seen) \
                and y.shape[-1] > _columns(values).shape[-1]
    for (path, name), premix in reads.items():
        if name == "attention_premix" and premix is not None:
            found["gated_output"] |= _gated(premix, reads.get((path, "attention_head_outputs")))
    found["fused"] = ["qkv"] if found.pop("fused_qkv") else []
    found["projected"] = width is not None and _embedding_width(tiny) not in (None, width)
    return found


def _embedding_width(tiny: Any) -> int | None:
    try:
        return int(tiny._module.get_input_embeddings().weight.shape[-1])
    except (AttributeError, NotImplementedError):
        return None


def _columns(values: Any) -> Any:
    """The values [batch, heads, seq, head_dim] as the distinct tokens' rows [seq, heads · head_dim]."""
    return values[-1].transpose(0, 1).reshape(values.shape[-2], -1)


def _values_maker(attention: Any, values: Any, seen: dict) -> Any:
    """The module of ``attention`` whose output, on the distinct tokens, holds every column of the values."""
    import torch

    wanted = _columns(values).double()
    scale = max(float(wanted.abs().max()), 1e-30)
    for module in attention.modules():
        x, y = seen.get(id(module), (None, None))
        if module is attention or x is None or not isinstance(y, torch.Tensor) or y.shape[0] != 2 \
                or next(module.parameters(recurse=False), None) is None:
            continue
        given = y[-1].double().reshape(-1, y.shape[-1])  # DeepSeek's kv_b_proj runs on [batch, 1, seq, rank]
        if given.shape[0] != wanted.shape[0]:
            continue
        # the values are the module's output viewed in heads and split: its own numbers, up to no rounding at all;
        # 2^-20 of the scale leaves room for a copy through another dtype and nothing more
        gap = torch.cdist(wanted.T, given.T, p=float("inf")).min(dim=1).values
        if bool((gap <= 2.0 ** -20 * scale).all()):
            return module
    return None


def _positions(reads: dict, speech: bool) -> bool:
    """Some stack's first block reads a different vector at each position of the repeated token (row 0; position 0
    left out: a decoder's shifted ids put the start token there). A speech family's encoder reads the audio: only its
    decoder is measured."""
    firsts = [v for (path, name), v in reads.items() if name == "layer_input" and path.endswith("layers[0]")
              and v is not None]
    if speech:
        firsts = firsts[1:]
    for x in firsts:
        rows = x[0, 1:].double()
        # one token's embedding computed row by row: equal rows up to the roundings of the d-wide sums a projected
        # embedding (OPT-350m's project_in) takes, d · u of the scale
        scale = max(float(rows.abs().max()), 1e-30)
        if not _close(rows, rows[:1].expand_as(rows), rows.shape[-1] * _U * scale):
            return True
    return False


def _close(a: Any, b: Any, atol: float) -> bool:
    import torch

    return bool(torch.allclose(a, b, rtol=0, atol=atol))


def _gated(premix: Any, heads: Any) -> bool:
    """What the output projection reads is the heads' outputs times a factor in [0, 1] that is not one everywhere."""

    if heads is None or heads.numel() != premix.numel():
        return False
    p = premix[-1].double().reshape(-1)
    h = heads[-1].double().reshape(premix[-1].shape).reshape(-1)
    scale = max(float(h.abs().max()), 1e-30)
    # the same tensor viewed side by side: equal to the last bit; a sigmoid gate moves it by order one
    if _close(p, h, 4 * _U * scale):
        return False
    big = h.abs() > 1e-3 * scale
    ratio = p[big] / h[big]
    return bool(((ratio >= -1e-4) & (ratio <= 1 + 1e-4)).all())


def _reads_input(attention: Any, x: Any, seen: dict) -> bool:
    """``x`` is the attention's input, or that input normed by a norm of the attention's own (RoBERTa-PreLayerNorm's
    and XLM-R XL's attention norms its input before its projections read it)."""
    given = seen.get(id(attention), [None])[0]
    if given is None or x is None:
        return False
    return _same(x, given) or any(_same(x, y) and _same(n_in, given) and _is_norm(m, n_in) for m in attention.modules()
                                  if m is not attention for n_in, y in [seen.get(id(m), (None, None))] if n_in is not None)


def _biased(attention: Any, seen: dict) -> bool:
    """A projection reading the attention's input gives a nonzero output at a zero input."""
    import torch

    for module in attention.modules():
        got, _ = seen.get(id(module), (None, None))
        if module is attention or got is None or next(module.parameters(recurse=False), None) is None \
                or _is_norm(module, got) or not _reads_input(attention, got, seen):
            continue
        with torch.no_grad():
            out = module(torch.zeros_like(got))
        out = out[0] if isinstance(out, (tuple, list)) else out
        if isinstance(out, torch.Tensor) and bool(out.abs().max() > 0):
            return True
    return False


def _renormalised(weights: list) -> bool:
    """The chosen experts' weights sum to one on every token (of both rows), in every mixture block, or to one
    constant (DeepSeek-V3's renormalised weights times routed_scaling_factor): unrenormalised top-k probabilities
    sum to what the token's routing leaves them, which the distinct tokens vary."""
    import torch

    weights = [w for w in weights if w is not None and w.dim() >= 1]
    if not weights:
        return False
    for w in weights:
        sums = w.double().reshape(-1, w.shape[-1]).sum(-1)
        # k weights rounded once each, once in the division and once in a scaling: (k + 2) · u of the sum, twice
        unit = torch.finfo(w.dtype).eps / 2
        if not _close(sums, sums[:1].expand_as(sums), 2 * (w.shape[-1] + 2) * unit * float(sums.abs().max())):
            return False
    return True
