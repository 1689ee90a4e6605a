"""GPT-J's and CodeGen's read points per transformers release (issue 50): 5.24 moved both attentions off their own
``_attn`` onto the shared attention interface, so each family picks its attention host by the installed release
(``release_attention``: whether the release's class has ``_attn``). These run under the locked release: the choice
is tested on a class without ``_attn`` (as 5.24's), its read points against the YAML's claims for 5.24 and later, the
rotary-at-zero relation on the (sin, cos) pair 5.24's rotary hands the attention, and a tag qualified by releases.
``python -m generator verify gptj codegen`` under 5.24 and 5.25 proves them on their forwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nncanon.families import codegen, gptj
from nncanon.parts.attention.method_attention import release_attention

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = {"gptj": (gptj, "GPTJAttention"), "codegen": (codegen, "CodeGenAttention")}


def _read_at(host_class) -> dict[str, str]:
    return {value.name: value.read_at() for value in host_class.values()}


def _interface_host(family: str):
    """The family's attention host as a release whose class has no ``_attn`` (5.24 and later) builds it."""
    module, name = FAMILIES[family]
    locked = module.ENVOYS[next(c for c in module.ENVOYS if c.__name__ == name)]
    attrs = {k: getattr(locked, k) for k in ("WEIGHTS", "SIN_FIRST") if k in vars(locked)}
    return release_attention(name, type("Without_attn", (), {}), locked.SCALING, locked.RELATIONS, **attrs)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_yaml_claims_each_releases_read_points(family):
    """claims.values are _attn's read points (the locked 5.23); claims.releases' '>=5.24' the interface's, and the
    relations are the same on both."""
    from generator.facts.claims import release_claims
    from generator.recipe.family import load_family

    module, name = FAMILIES[family]
    locked = next(host for cls, host in module.ENVOYS.items() if cls.__name__ == name)
    yaml_family = load_family(ROOT / "families" / f"{family}.yaml")
    assert yaml_family.get("releases") is None  # no narrowing: verified on every release of the range
    interface = _interface_host(family)
    assert interface.RELATIONS == locked.RELATIONS and interface.SIN_FIRST
    for release, host in (("5.23.0", locked), ("5.24.0", interface), ("5.25.0", interface)):
        claims = release_claims(yaml_family, release)["model.layers[i].self_attn"]
        for value, read_at in _read_at(host).items():
            assert claims[value]["read_at"] == read_at, (release, value)
    moved = ("attention_queries", "attention_keys", "attention_values", "attention_scores",
             "attention_probabilities", "attention_head_outputs")
    assert all("self__attn_0" in _read_at(locked)[v] for v in moved)
    assert all("attention_interface_1" in _read_at(interface)[v] for v in moved)


def test_rotary_at_zero_reads_the_cos_of_a_sin_first_pair():
    """5.24's GPT-J and CodeGen rotary returns (sin, cos): read as cos, the sin (0 at position 0) would put every query
    at 0 and the weights relation off by the whole value."""
    from nncanon.parts.weights import _rotary_at_zero

    sin, cos = torch.zeros(2, 3, 4), torch.full((2, 3, 4), 0.5)
    keep = torch.tensor([True, True])

    class CosFirst:
        pass

    class SinFirst:
        SIN_FIRST = True

    assert _rotary_at_zero(CosFirst(), ((), {"position_embeddings": (cos, sin)}), keep).eq(0.5).all()
    assert _rotary_at_zero(SinFirst(), ((), {"position_embeddings": (sin, cos)}), keep).eq(0.5).all()


def test_a_tag_qualified_by_releases_is_checked_under_those_only(tmp_path, monkeypatch):
    """'Eager attention only (transformers <5.24)' holds under 5.23 and says nothing of 5.24 (sdpa loads there); a
    release qualifier that is no specifier is refused in one line."""
    import transformers
    from test_meaning import pseudo_facts, with_yaml

    from generator.facts.claim_error import ClaimError
    from generator.facts.traits import check_tags

    family, facts = pseudo_facts("llama")  # llama loads under sdpa: eager is not its only load
    tagged = with_yaml(family, tmp_path, tags=["Eager attention only (transformers <5.24)"])
    monkeypatch.setattr(transformers, "__version__", "5.23.0")
    with pytest.raises(ClaimError, match="needs eager attention as the only load"):
        check_tags(tagged, facts)
    monkeypatch.setattr(transformers, "__version__", "5.24.0")
    check_tags(tagged, facts)
    with pytest.raises(ClaimError, match="'<five' is not a version specifier"):
        check_tags(with_yaml(family, tmp_path, tags=["Eager attention only (transformers <five)"]), facts)
