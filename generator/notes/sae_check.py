"""The Sparse autoencoders section: the YAML's ``saes.releases`` checked against the full-size
configs and the tiny checkpoint's values, and a TopK SAE in each release's format verified end to
end on the tiny checkpoint (:func:`verify_sae`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from generator.notes.expressions import ExpressionContext
from generator.notes.sae_jumprelu_check import jumprelu_release, verify_jumprelu
from generator.recipe.family import Family
from generator.recipe.fields import FamilyYamlError

# ---------------------------------------------------------------------------------------------
# the SAE section


_RELEASE_NAME = re.compile(r"-W(?P<width>\d+)K-L0_(?P<k>\d+)$")
RELEASE_FIELDS = ("id", "checkpoint", "features", "k", "layers", "hook")  # kind: topk (the default)
ROW_FIELDS = ("id", "features", "k", "layers", "hook")  # what the page's table shows of each release


def _releases(family: Family, context: ExpressionContext, support: list) -> list[dict[str, Any]]:
    raw = family.saes
    items = raw.get("releases", [])
    if not isinstance(items, list) or not items:
        raise FamilyYamlError(family.path, "saes.releases", "expected a non-empty list of releases")
    hooks = {f"{row.host}.{row.name}" for row in support}
    out = []
    for i, item in enumerate(items):
        where = f"saes.releases[{i}]"
        if not isinstance(item, dict):
            raise FamilyYamlError(family.path, where, f"expected a mapping, got {item!r}")
        if item.get("kind", "topk") == "jumprelu":
            out.append(jumprelu_release(family, context, hooks, item, where))
            continue
        if item.get("kind", "topk") != "topk":
            raise FamilyYamlError(family.path, f"{where}.kind", f"{item['kind']!r} is not topk or jumprelu")
        item = {k: v for k, v in item.items() if k != "kind"}
        unknown = sorted(set(item) - set(RELEASE_FIELDS))
        if unknown:
            raise FamilyYamlError(
                family.path, f"{where}.{unknown[0]}", f"unknown field (allowed: {', '.join(RELEASE_FIELDS)})"
            )
        for name, kind in (("id", str), ("checkpoint", str), ("features", int), ("k", int)):
            if name not in item:
                raise FamilyYamlError(family.path, f"{where}.{name}", "missing (required)")
            if not isinstance(item[name], kind) or isinstance(item[name], bool):
                raise FamilyYamlError(
                    family.path,
                    f"{where}.{name}",
                    f"expected {'a string' if kind is str else 'an integer'}, got {item[name]!r}",
                )
        try:
            checkpoint = context.resolve(item["checkpoint"])
        except KeyError as error:
            raise FamilyYamlError(family.path, f"{where}.checkpoint", str(error.args[0])) from None
        layers = context.text(checkpoint).num_hidden_layers
        span = f"0-{layers - 1}"
        given = item.get("layers", span)
        if str(given) != span:
            raise FamilyYamlError(
                family.path, f"{where}.layers", f"claims {given!r}, but {checkpoint} has blocks {span}"
            )
        named = _RELEASE_NAME.search(item["id"])
        if named and (int(named["width"]) * 1024 != item["features"] or int(named["k"]) != item["k"]):
            raise FamilyYamlError(
                family.path,
                where,
                f"{item['id']} names {int(named['width']) * 1024} features and "
                f"k {named['k']}, but the entry says {item['features']} and {item['k']}",
            )
        hook = item.get("hook", "model.layers[i].layer_output")
        if hook not in hooks:
            raise FamilyYamlError(
                family.path,
                f"{where}.hook",
                f"{hook!r} is not a value of this family "
                "(a host path and a value name, e.g. model.layers[i].layer_output)",
            )
        if item["k"] > item["features"]:
            raise FamilyYamlError(
                family.path, f"{where}.k", f"k = {item['k']} exceeds the {item['features']} features"
            )
        out.append(
            {
                "id": item["id"],
                "checkpoint": checkpoint,
                "features": item["features"],
                "k": item["k"],
                "layers": span,
                "hook": hook,
            }
        )
    return out


def verify_releases(
    model: Any, prompt: str, releases: list[dict[str, Any]], directory: Path, context: ExpressionContext
) -> str:
    """The section's end-to-end check: the first TopK release's (:func:`verify_sae`) and every JumpReLU
    site's (:func:`verify_jumprelu`); says what was checked."""
    said = []
    topk = [r for r in releases if r.get("kind", "topk") == "topk"]
    if topk:
        said.append(verify_sae(model, prompt, topk[0], directory, context))
    jumprelu = [r for r in releases if r.get("kind") == "jumprelu"]
    if jumprelu:
        said.append(verify_jumprelu(model, prompt, jumprelu, directory, context))
    return " ".join(said)


def verify_sae(
    model: Any, prompt: str, release: dict[str, Any], directory: Path, context: ExpressionContext
) -> str:
    """Build a tiny TopK SAE per block of the tiny checkpoint in the release's format, load each, encode
    the block's ``layer_output``, check k nonzeros per token and the decoded shape; say what was checked."""
    import torch

    from nncanon.research.sae import TopKSAE, layer_file

    d = model.hidden_size
    expansion = release["features"] // context.text(release["checkpoint"]).hidden_size
    d_sae = expansion * d
    k = min(release["k"], d_sae // 2)
    reads: list = []  # filled inside the trace (a with body runs as nnsight's own code)
    with model.trace(prompt):
        for layer in model.layers:
            reads.append(layer.layer_output.save())
    for i, resid in enumerate(reads):
        TopKSAE.random(d, d_sae, k, seed=i).save(layer_file(directory, i))
        sae = TopKSAE.load(layer_file(directory, i))
        if (sae.d, sae.d_sae, sae.k) != (d, d_sae, k):
            raise AssertionError(f"block {i}: the SAE loaded as d={sae.d}, d_sae={sae.d_sae}, k={sae.k}")
        features = sae.encode(resid)
        per_token = (features != 0).sum(-1)
        if features.shape != (*resid.shape[:-1], d_sae) or not torch.equal(
            per_token, torch.full_like(per_token, k)
        ):
            raise AssertionError(
                f"block {i}: encode gave {list(features.shape)} with {per_token.tolist()} nonzero "
                f"features per token, not {k}"
            )
        rebuilt = sae.decode(features)
        if rebuilt.shape != resid.shape:
            raise AssertionError(f"block {i}: decode gave {list(rebuilt.shape)}, not {list(resid.shape)}")
        torch.testing.assert_close(rebuilt, features @ sae.W_dec.T + sae.b_dec)
    shape = "[batch, seq, d]"
    return (
        f"Checked at build time on the tiny checkpoint: for each of its {len(reads)} blocks a TopK SAE written "
        f"in this layer<i>.sae.pt format ({expansion} times as wide as the stream, as "
        f"{release['id'].split('/')[-1]} is: d = {d}, d_sae = {d_sae}, k = {k}) loads with "
        f"nncanon.sae.TopKSAE.load, encodes the block's {release['hook']} to exactly k nonzero features "
        f"per token and decodes them back to {shape}."
    )
