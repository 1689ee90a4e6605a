"""A family's variants proven as the family is: each variant's tiny checkpoint (``variants:`` in the YAML,
generator/recipe/variants.py) under every load, every value's layout measured, every relation on every block,
every writable value's edit; stored beside the family's own facts (``facts["variants"]``) for the page's
Layouts table, which says which published checkpoint has which layout.

A variant's values are its own (Stable LM 2 12B's per-head q/k norms add values 1.6B lacks), so the YAML's
``claims.values`` (the page's support tables, the ``tiny:`` recipe's) are not checked on it; every value a
variant serves must still be stated by a relation that holds (generator/facts/proof.py's coverage check).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from generator.facts.claim_error import ClaimError
from generator.facts.loads import resolve_loads
from generator.facts.measure import host_rows, run_inputs
from generator.facts.traits import traits
from generator.recipe.family import Family

#: the measured layout facts the Layouts table shows (generator/facts/traits.py)
LAYOUT_TRAITS = ("norm", "block", "attention", "fused", "attention_bias")


def check_switches(family: Family) -> None:
    """Each variant's overrides that are layout switches (booleans and strings, not sizes) agree with the
    config.json of every checkpoint it lists, and the ``tiny:`` recipe's with every checkpoint no variant lists:
    the table's "which checkpoint has which layout" is then read from the configs, not typed."""
    owned = {cid: spec for spec in family.variants for cid in spec["checkpoints"]}
    switches = {key for spec in family.variants for key, value in spec["config"].items()
                if isinstance(value, (bool, str))}
    for cid in family.checkpoint_ids:
        config = family.checkpoint_config(cid)
        config = {**config, **(config.get("text_config") or {})}
        spec = owned.get(cid)
        recipe = family.variant(spec["name"]).tiny["config"] if spec else family.tiny["config"]
        for key in sorted(switches):
            if key in config and key in recipe and config[key] != recipe[key]:
                layout = f"variant {spec['name']!r}" if spec else "the tiny: recipe"
                raise ClaimError(family.family, f"variants: {cid}", f"its config.json sets {key}: {config[key]!r} but "
                                                                   f"{layout} (which it is listed under) has {recipe[key]!r}")


def collect_variants(family: Family, family_module: Any, prompts: list[str],
                     progress: Callable[[str], None] = print, kernels_only: bool = False) -> list[dict]:
    """Every variant proven on its own tiny checkpoint; its facts, in the YAML's order (``kernels_only``: no
    edits, as :func:`generator.facts.collect.collect`)."""
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts.chain import check_family_chain
    from generator.facts.edits import prove_edits
    from generator.facts.proof import prove_family

    check_switches(family)
    out = []
    for spec in family.variants:
        variant = family.variant(spec["name"])
        progress(f"{variant.family}: checkpoint, values, relations on every block, edits")
        models = resolve_loads(variant, family_module, checkpoint_dir(variant))
        try:
            hosts = host_rows(models, variant, family_module, prompts)
            relations = prove_family(variant, models, models.all, lambda m: run_inputs(m, family_module, prompts))
            check_family_chain(variant, models)
            edits = None if kernels_only else prove_edits(variant, models, family_module, prompts)
            tiny = models.get(models.default)
            measured = traits(family_module, tiny, tiny)  # the tiny config is the layout's: its switches are set
        finally:
            models.close()
        out.append({
            "name": spec["name"], "checkpoints": list(spec["checkpoints"]), "config": spec["config"],
            "sha256": spec["sha256"], "num_layers": len(family_module.layer_types(tiny)),
            "layout": {key: measured[key] for key in LAYOUT_TRAITS},
            "values": {h["path"]: [v["name"] for v in h["values"]] for h in hosts},
            "relations": [{"text": r["text"], "host": r["host"], "blocks": r["blocks"], "errors": r["errors"]}
                          for r in relations],
            **({} if edits is None else {"edits": len(edits)}), "loads": list(models.loads),
        })
    return out
