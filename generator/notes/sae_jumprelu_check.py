"""The Sparse autoencoders section's ``kind: jumprelu`` releases (Gemma Scope 2's format): each entry
checked against the full-size config and the family's values (:func:`jumprelu_release`), and a tiny
JumpReLU SAE per site written in the release's format and run end to end on the tiny checkpoint
(:func:`verify_jumprelu`).

An entry::

    - id: gemma-scope-2-4b-it-res          # SAELens' release id
      kind: jumprelu
      repo: google/gemma-scope-2-4b-it      # the Hugging Face repository that holds it
      folder: resid_post                    # the site folder (resid_post, attn_out, mlp_out, transcoder; *_all)
      checkpoint: google/gemma-3-4b-it      # one of the family's full-size checkpoints
      layers: [9, 17, 22, 29]               # the blocks it covers; "all" for every block
      widths: [16k, 65k, 262k, 1m]          # the width tokens of its folder names
      l0: {small: [17, 20], medium: [53, 60], big: [131, 150]}   # each L0 target: its range over blocks
      hook: model.layers[i].layer_output    # the standard value the site reads (checked against the site)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from generator.notes.expressions import ExpressionContext
from generator.recipe.family import Family
from generator.recipe.fields import FamilyYamlError

FIELDS = ("id", "kind", "repo", "folder", "checkpoint", "layers", "widths", "l0", "hook", "hook_out")
L0_LABELS = ("small", "medium", "big")


def jumprelu_release(
    family: Family, context: ExpressionContext, hooks: set[str], item: dict, where: str
) -> dict:
    """One ``kind: jumprelu`` entry, checked; the row the page shows (and :func:`verify_jumprelu` reads)."""
    from nncanon.research.sae import SAEFormatError
    from nncanon.research.sae_jumprelu import WIDTHS, site_of

    def fail(field: str | None, message: str) -> FamilyYamlError:
        return FamilyYamlError(family.path, f"{where}.{field}" if field else where, message)

    unknown = sorted(set(item) - set(FIELDS))
    if unknown:
        raise fail(unknown[0], f"unknown field (allowed for kind jumprelu: {', '.join(FIELDS)})")
    for name in ("id", "repo", "folder", "checkpoint", "hook"):
        if not isinstance(item.get(name), str):
            raise fail(name, f"expected a string, got {item.get(name)!r}")
    try:
        site = site_of(item["folder"])
    except SAEFormatError as error:
        raise fail("folder", str(error)) from None
    try:
        checkpoint = context.resolve(item["checkpoint"])
    except KeyError as error:
        raise fail("checkpoint", str(error.args[0])) from None
    text = context.text(checkpoint)
    blocks = text.num_hidden_layers
    layers = item.get("layers")
    if layers == "all":
        layers = list(range(blocks))
    if not isinstance(layers, list) or not layers or not all(type(i) is int for i in layers):
        raise fail("layers", f"expected a list of block indices or 'all', got {item.get('layers')!r}")
    outside = [i for i in layers if not 0 <= i < blocks]
    if outside:
        raise fail("layers", f"block {outside[0]} is not one of {checkpoint}'s blocks 0-{blocks - 1}")
    if item["folder"].endswith("_all") and sorted(layers) != list(range(blocks)):
        raise fail(
            "layers",
            f"the {item['folder']} folder covers every block, 0-{blocks - 1}; the entry says {layers}",
        )
    widths = item.get("widths")
    if not isinstance(widths, list) or not widths or any(w not in WIDTHS for w in widths):
        raise fail("widths", f"expected width tokens from {', '.join(WIDTHS)}, got {widths!r}")
    l0 = item.get("l0")
    if not isinstance(l0, dict) or not l0 or any(label not in L0_LABELS for label in l0):
        raise fail(
            "l0", f"expected a mapping from {', '.join(L0_LABELS)} to an L0 or [lowest, highest], got {l0!r}"
        )
    ranges = {}
    for label, value in l0.items():
        pair = [value, value] if type(value) is int else value
        if not isinstance(pair, list) or len(pair) != 2 or any(type(v) is not int for v in pair):
            raise fail(f"l0.{label}", f"expected a positive integer or [lowest, highest], got {value!r}")
        low, high = pair
        if not 0 < low <= high:
            raise fail(f"l0.{label}", f"expected 0 < lowest <= highest, got {value!r}")
        if high > min(WIDTHS[w] for w in widths):
            raise fail(f"l0.{label}", f"L0 {high} exceeds the narrowest width's features")
        ranges[label] = (low, high)
    order = [ranges[label] for label in L0_LABELS if label in ranges]
    if any(a[1] >= b[0] for a, b in zip(order, order[1:])):
        raise fail("l0", f"the targets must grow small < medium < big without overlap, got {l0!r}")
    for name, standard in (("hook", site.hook), ("hook_out", site.hook_out)):
        given = item.get(name)
        if given != standard and standard is None:
            raise fail(
                name, f"the {item['folder']} folder has no output (only a transcoder's has), got {given!r}"
            )
        if given != standard:
            raise fail(
                name,
                f"the {item['folder']} folder reads {(site.hf_in if name == 'hook' else site.hf_out).format(i='<i>')} "
                f"(Gemma Scope 2's hook point), which is {standard!r} here, not {given!r}",
            )
        if standard is not None and standard not in hooks:
            raise fail(name, f"{standard!r} is not a value of this family")
    d_in = text.num_attention_heads * text.head_dim if site.flatten_heads else text.hidden_size
    return {
        "kind": "jumprelu",
        "id": f"{item['id']} ({item['repo']}, {item['folder']}/)",
        "release": item["id"],
        "repo": item["repo"],
        "folder": item["folder"],
        "checkpoint": checkpoint,
        "site": site.folder,
        "features": ", ".join(f"{w} ({WIDTHS[w]})" for w in widths),
        "k": ", ".join(f"{label} {a}" if a == b else f"{label} {a}-{b}" for label, (a, b) in ranges.items()),
        "layers": _span(layers, blocks),
        "hook": item["hook"] + (f" -> {site.hook_out}" if site.hook_out else ""),
        "d_in": d_in,
        "widths": widths,
    }


def _span(layers: list[int], blocks: int) -> str:
    if sorted(layers) == list(range(blocks)):
        return f"0-{blocks - 1}"
    return ", ".join(str(i) for i in sorted(layers))


# ---------------------------------------------------------------------------------------------
# the end-to-end check on the tiny checkpoint

_FORWARD_ORDER = (
    "model.layers[i].self_attn.attention_premix",
    "model.layers[i].mlp_norm_output",
    "model.layers[i].mlp_post_norm_output",
    "model.layers[i].layer_output",
)


def _module_at(block: Any, hook_point: str, layer: int) -> tuple[Any, str]:
    """The torch module and the end (``input``/``output``) a release hook point names, resolved under the
    tiny checkpoint's decoder block ``layer`` (its text stack may sit under another prefix than
    ``model.layers``: a multimodal Gemma 3 holds it at ``model.language_model.layers``)."""
    prefix = f"model.layers.{layer}"
    if not hook_point.startswith(prefix + "."):
        raise AssertionError(f"{hook_point} does not name block {layer}")
    *path, end = hook_point[len(prefix) + 1 :].split(".")
    module = block
    for name in path:
        module = getattr(module, name)
    return module, end


def _capture(module: Any, end: str, into: list) -> Any:
    if end == "output":
        return module.register_forward_hook(
            lambda _m, _args, out: into.append(out[0] if isinstance(out, tuple) else out)
        )
    if end == "input":
        return module.register_forward_pre_hook(lambda _m, args: into.append(args[0]))
    raise AssertionError(f"a hook point ends in .input or .output, not .{end}")


def _bound(x: Any, w: Any, b: Any) -> Any:
    """A float32 error bound on ``x @ w + b`` against its exact value, in float64: gamma_(n+1) (nncanon's
    error model, nncanon.precision) of the terms' magnitude ``|x| @ |w| + |b|``, n = x's last dimension
    (n products and n additions, the bias's among them, each rounding once, in any summation order). The
    float64 recomputation it is compared with errs by the same bound in 2^-53, under 2^-28 of this one:
    the factor 1 + 2^-20 covers it."""
    from nncanon.core.precision import gamma

    scale = x.double().abs() @ w.double().abs() + b.double().abs()
    return (1 + 2.0**-20) * gamma(x.shape[-1] + 1) * scale


def verify_jumprelu(
    model: Any, prompt: str, releases: list[dict], directory: Path, context: ExpressionContext
) -> str:
    """For each site the releases name (once each), on every block of the tiny checkpoint: the standard
    value is the very tensor the release's hook point names (read by a torch hook on the module it names,
    in the same forward); a tiny JumpReLU SAE written in the release's format (``params.safetensors`` and
    ``config.json`` in ``<site>/layer_<i>_width_<w>_l0_medium``) loads with ``JumpReLUSAE.load``; its
    features are ``relu(pre)`` exactly where ``pre > threshold`` with ``pre`` within a float32 error bound
    of a float64 recomputation; moving the thresholds moves the features (-inf: every positive ``pre``
    fires; +inf: none); the decoding is ``z @ W_dec + b_dec`` within the same bound. Says what was checked."""
    import torch

    from nncanon.research.sae_jumprelu import JumpReLUSAE, release_folder, site_of

    sites: dict[str, dict] = {}
    for release in releases:
        sites.setdefault(release["site"], release)
    blocks = list(model.layers)
    reads: dict[tuple[str, int], Any] = {}
    captured: dict[tuple[str, int, str], list] = {}
    handles = []
    # every standard value the sites read, read once per block in the forward's order (a trace's reads
    # must follow it): attention first, then the MLP's norms, then the block's output
    wanted = {hook for name in sites for hook in (site_of(name).hook, site_of(name).hook_out) if hook}
    ordered = [hook for hook in _FORWARD_ORDER if hook in wanted]
    if len(ordered) != len(wanted):
        raise AssertionError(f"no forward order known for {sorted(wanted - set(ordered))}")
    values: dict[tuple[int, str], Any] = {}
    try:  # torch hooks on the modules the release's hook points name, removed whatever happens
        for name in sites:
            site = site_of(name)
            for i, block in enumerate(blocks):
                for end, point in (("in", site.hf_hook_point_in(i)), ("out", site.hf_hook_point_out(i))):
                    if point is not None:
                        module, which = _module_at(block._module, point, i)
                        captured[(name, i, end)] = []
                        handles.append(_capture(module, which, captured[(name, i, end)]))
        with model.trace(prompt):
            for i, block in enumerate(blocks):
                for hook in ordered:
                    value = block
                    for part in hook.split("[i].")[1].split("."):
                        value = getattr(value, part)
                    values[(i, hook)] = value.save()
    finally:
        for handle in handles:
            handle.remove()
    for name in sites:
        site = site_of(name)
        for i in range(len(blocks)):
            for end, hook in (("in", site.hook), ("out", site.hook_out)):
                if hook is not None:
                    reads[(name, i, end)] = values[(i, hook)]
    for name, release in sites.items():
        site = site_of(name)
        width = release["widths"][0]
        for i in range(len(blocks)):
            for end in ("in", "out") if site.hook_out else ("in",):
                hooked = captured[(name, i, end)]
                standard = reads[(name, i, end)]
                flat = standard.flatten(-2) if site.flatten_heads and end == "in" else standard
                if (
                    len(hooked) != 1
                    or not torch.equal(flat, hooked[0].reshape(flat.shape))
                    or hooked[0].shape != flat.shape
                ):
                    raise AssertionError(
                        f"block {i}: {site.hook if end == 'in' else site.hook_out} is not the tensor at "
                        f"{site.hf_hook_point_in(i) if end == 'in' else site.hf_hook_point_out(i)}"
                    )
            x = reads[(name, i, "in")]
            x = x.flatten(-2) if site.flatten_heads else x
            d_in = x.shape[-1]
            d_out = reads[(name, i, "out")].shape[-1] if site.hook_out else d_in
            config = {"hf_hook_point_in": site.hf_hook_point_in(i)}
            if site.hook_out:
                config["hf_hook_point_out"] = site.hf_hook_point_out(i)
            folder = release_folder(directory, name, i, width, "medium")
            JumpReLUSAE.random(d_in, 4 * d_in, d_out, seed=i, config=config).save(folder)
            sae = JumpReLUSAE.load(folder)
            if sae.config.get("hf_hook_point_in") != site.hf_hook_point_in(i):
                raise AssertionError(f"block {i}: config.json did not round-trip")
            _check_maps(sae, x, f"{name} block {i}")
    names = sorted(sites)
    return (
        f"Checked at build time on the tiny checkpoint, on each of its {len(blocks)} blocks and for each site "
        f"({', '.join(names)}): the standard value is the very tensor at the release's hook point "
        "(read by a torch hook on the module it names, in the same forward); a JumpReLU SAE four times as wide "
        "as its input, written as params.safetensors and config.json, loads with "
        "nncanon.sae_jumprelu.JumpReLUSAE.load, its features are relu(pre) exactly where pre > threshold "
        "(pre within a float32 error bound of a float64 recomputation), a threshold of -inf lets every "
        "positive pre through and +inf none, and it decodes to z @ W_dec + b_dec within the same bound."
    )


def _check_maps(sae: Any, x: Any, where: str) -> None:
    import torch

    pre = sae.pre_activations(x)
    exact = x.double() @ sae.W_enc.double() + sae.b_enc.double()
    if not ((pre.double() - exact).abs() <= _bound(x, sae.W_enc, sae.b_enc)).all():
        raise AssertionError(f"{where}: x @ W_enc + b_enc is off its float32 error bound")
    z = sae.encode(x)
    fires = pre > sae.threshold
    if not torch.equal(z != 0, fires & (pre > 0)) or not torch.equal(z[fires], pre[fires].clamp(min=0)):
        raise AssertionError(f"{where}: the features are not relu(pre) where pre > threshold")
    if not fires.any() or fires.all():
        raise AssertionError(f"{where}: the check needs features on both sides of their thresholds")
    kept = sae.threshold.detach().clone()
    try:
        sae.threshold.fill_(-math.inf)
        if not torch.equal(sae.encode(x), torch.relu(pre)):
            raise AssertionError(f"{where}: with every threshold -inf the features are not relu(pre)")
        sae.threshold.fill_(math.inf)
        if sae.encode(x).count_nonzero():
            raise AssertionError(f"{where}: with every threshold +inf a feature still fires")
    finally:
        sae.threshold.copy_(kept)
    out = sae.decode(z)
    exact = z.double() @ sae.W_dec.double() + sae.b_dec.double()
    bound = _bound(z, sae.W_dec, sae.b_dec)
    if out.shape != (*x.shape[:-1], sae.d_out) or not ((out.double() - exact).abs() <= bound).all():
        raise AssertionError(f"{where}: decode is not z @ W_dec + b_dec ({list(out.shape)})")
