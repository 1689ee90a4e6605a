"""The YAML's claims: every host and value ``support()`` serves is claimed, with its layout and read-at;
identities hold on a block of their kind."""

from __future__ import annotations

import re
from typing import Any

from generator.facts.claim_error import ClaimError
from generator.facts.loads import Models
from generator.facts.measure import concrete, run_inputs
from generator.recipe.family import Family
from generator.recipe.fields import FamilyYamlError

# -- claims of the YAML ----------------------------------------------------------------------------


def claim_key(host: dict, hosts: list[dict]) -> str:
    """A host kind's key in ``claims.values``: its path, and its module class where one path has several."""
    shared = sum(h["path"] == host["path"] for h in hosts) > 1
    return f"{host['path']} ({host['class']})" if shared else host["path"]


def claimed_values(hosts: list[dict]) -> dict[str, dict[str, dict]]:
    """``claims.values`` as the code serves it (what ``python -m generator claims`` writes)."""
    out = {}
    for host in hosts:
        out[claim_key(host, hosts)] = {
            v["name"]: {"layout": f"{v['layout']} [{' '.join(v['dims'])}]" if v["dims"] else v["layout"],
                        "read_at": _read_at(v)} for v in host["values"]}
    return out


def _read_at(value: dict) -> str:
    """Where a value is read, or why no load serves it: a read-at for a value never read would be a claim
    nothing checks (a mixture's ``mlp_activation`` at an ``act_fn`` it does not have)."""
    if any(value["availability"].values()):
        return value["read_at"]
    why = "; ".join(dict.fromkeys(c["why"] for c in value["conditions"] if c["why"])) or "its conditions never hold"
    return f"not served under any load: {why}"


def release_claims(family: Family, release: str | None = None) -> dict | None:
    """``claims.values`` under transformers ``release`` (the installed one by default): each claim of a
    ``claims.releases`` entry whose specifier names the release (a read point it moved) in place of the one
    ``claims.values`` makes, which the locked release reads."""
    from packaging.specifiers import SpecifierSet

    claims = family.get("claims") or {}
    values = claims.get("values")
    if values is None:
        return None
    if release is None:
        import transformers

        release = transformers.__version__
    merged = {host: dict(names) for host, names in values.items()}
    for spec, moved in (claims.get("releases") or {}).items():
        if SpecifierSet(spec).contains(release, prereleases=True):
            for host, names in moved.items():
                merged[host].update(names)
    return merged


def check_value_claims(family: Family, hosts: list[dict]) -> None:
    """The YAML's ``claims.values`` (host -> value -> layout, read_at) equal the code's, one for one:
    every host kind and every value ``support()`` serves is claimed, and nothing else."""
    claims = release_claims(family)
    if claims is None:
        raise FamilyYamlError(family.path, "claims.values", "missing: the page's support tables must be claimed "
                              f"(write them with: python -m generator claims {family.family})")
    ours = claimed_values(hosts)
    for host, values in claims.items():
        if host not in ours:
            raise FamilyYamlError(family.path, f"claims.values.{host}",
                                  f"no such host; the family has {', '.join(ours)}")
        for name, claim in values.items():
            where = f"claims.values.{host}.{name}"
            if name not in ours[host]:
                raise FamilyYamlError(family.path, where, f"{host} has no value {name!r}")
            value = ours[host][name]
            if claim.get("layout") != value["layout"]:
                raise ClaimError(family.family, f"{host}.{name} layout",
                                 f"the YAML says {claim.get('layout')!r}, the code serves {value['layout']!r}")
            if claim.get("read_at") != value["read_at"]:
                raise ClaimError(family.family, f"{host}.{name} read at",
                                 f"the YAML says {claim.get('read_at')!r}, the locator reads "
                                 f"{value['read_at']!r}")
        missing = set(ours[host]) - set(values)
        if missing:
            raise FamilyYamlError(family.path, f"claims.values.{host}",
                                  f"the code serves {', '.join(sorted(missing))} here, which the YAML does not claim")
    unclaimed = [host for host in ours if host not in claims]
    if unclaimed:
        raise FamilyYamlError(family.path, "claims.values",
                              f"the code serves host{'s' if len(unclaimed) > 1 else ''} {', '.join(unclaimed)}, "
                              f"which the YAML does not claim (python -m generator claims {family.family} writes them)")


def read_term(model: Any, path: str, args: tuple, kwargs: dict) -> Any:
    """Read one term of an identity: a concrete path ending in a value, ``input`` or ``output``."""
    import torch

    host, _, name = path.rpartition(".")
    with torch.no_grad(), model.trace(*args, **kwargs):
        envoy = model.get(host)
        read = getattr(envoy, name).save()
    return read


def block_of_kind(model: Any, family_module: Any, kind: str) -> str:
    """The concrete path of the first block of ``kind`` on ``model`` ("vision": the first vision block)."""
    if kind == "vision":
        return "vision.layers.0"
    types = family_module.layer_types(model)
    if kind not in types:
        raise LookupError(f"no {kind} block on this model (kinds: {sorted(set(types))})")
    found = types.index(kind)
    # an encoder-decoder's kinds run over its stacks' blocks in turn (STACKS: the encoder's, then the decoder's)
    for stack in getattr(family_module, "STACKS", ()):
        count = len(model.get(stack).layers)
        if found < count:
            return f"{stack}.layers.{found}"
        found -= count
    return f"layers.{found}"


def resolve_term(term: str, block: str) -> str:
    """``layers[i].input`` -> ``layers.3.input``; ``mlp.mlp_output`` -> ``layers.3.mlp.mlp_output``."""
    term = term.strip()
    index = int(block.rsplit(".", 1)[-1])
    return concrete(term, index) if "[i]" in term else f"{block}.{term}"


def check_identities(family: Family, models: Models, family_module: Any, prompts: list[str]) -> list[dict]:
    """Evaluate each ``claims.identities`` entry on a block of its kind; record its error. Every term of every
    identity under one load is read in one forward (`read_terms`), not one forward per term."""

    claims = []  # (expr, kind, load label, block, lhs terms, rhs term)
    for n, claim in enumerate((family.get("claims") or {}).get("identities", [])):
        field = f"claims.identities[{n}]"
        if not isinstance(claim, dict) or "expr" not in claim or "kind" not in claim:
            raise FamilyYamlError(family.path, field, "expected a mapping with kind and expr")
        expr, kind = claim["expr"], claim["kind"]
        if expr.count("==") != 1:
            raise FamilyYamlError(family.path, f"{field}.expr", f"expected 'a + b + ... == c', got {expr!r}")
        label = claim.get("load") or ("image" if kind == "vision" else models.default)
        block = block_of_kind(models.get(label), family_module, kind)
        lhs, rhs = expr.split("==")
        claims.append((claim, label, block, [resolve_term(t, block) for t in lhs.split("+")], resolve_term(rhs, block)))
    read: dict[str, dict[str, Any]] = {}
    for label in dict.fromkeys(label for _, label, *_ in claims):
        model = models.get(label)
        args, kwargs = run_inputs(model, family_module, prompts)
        read[label] = read_terms(model, [t for c in claims if c[1] == label for t in (*c[3], c[4])], args, kwargs)
    results = []
    for claim, label, block, lhs, rhs in claims:
        expr, kind = claim["expr"], claim["kind"]
        if read[label] is None:  # a term does not resolve: find which, one term per forward as before
            model = models.get(label)
            args, kwargs = run_inputs(model, family_module, prompts)
            try:
                for path in (*lhs, rhs):
                    read_term(model, path, args, kwargs)
            except AttributeError as error:
                raise ClaimError(family.family, f"identity {expr!r}", f"a term does not resolve on {block}: {error}") from None
            raise RuntimeError(f"{family.family}: the terms of {expr!r} read one by one but not together")
        terms = [read[label][path] for path in lhs]
        target = read[label][rhs]
        total = terms[0]
        for term in terms[1:]:
            total = total + term  # left to right, as the block adds them
        error = float((total - target).abs().max())
        tolerance = float(claim.get("tolerance", 0.0))
        if not error <= tolerance:
            raise ClaimError(family.family, f"identity {expr!r}",
                             f"off by {error:.3g} on {block} of the tiny checkpoint (tolerance {tolerance})")
        results.append({"expr": expr, "kind": kind, "where": re.sub(r"\.(\d+)", r"[\1]", block), "error": error})
    return results


def read_terms(model: Any, paths: list[str], args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """Every term of ``paths`` (concrete paths ending in a value, ``input`` or ``output``) in one forward, by the
    relations' reader (an empty invoke per read: no order needed); None when one does not resolve."""
    from generator.facts.proof import read_all

    wanted = {}
    for path in dict.fromkeys(paths):
        host, _, name = path.rpartition(".")
        try:
            wanted[(path, name)] = model.get(host)
        except AttributeError:
            return None
    try:
        read = read_all(model, wanted, args, kwargs)
    except AttributeError:
        return None
    return {path: value for (path, _), value in read.items()}
