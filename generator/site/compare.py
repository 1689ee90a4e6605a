"""The Compare page: any two families side by side — their block diagrams, the values and relations they share
and those only one has, their mechanics and their checkpoints' numbers.

Every pair cannot be written out (n² pages), so the page is one form and a script
(site_templates/assets/nncanon-compare.js) that fetches two small files this module writes per family,
``compare/<family>.json``: a projection of the family's facts and nothing else (the standard path and dims of every
value, every relation's host and text, the families index's facet terms, the full-size checkpoints' numbers).
The diagrams are the family pages' own, fetched from them, so they cannot drift from the pages.
"""

from __future__ import annotations

import json

from generator.site.families_index import FACETS
from generator.site.properties import COLUMNS

#: the pairs the page offers first: the comparisons readers ask for (only those whose two families are built)
SUGGESTED = (("gemma2", "gemma3_text"), ("llama", "mistral"), ("qwen3", "qwen3_moe"), ("mamba", "mamba2"),
             ("qwen3_next", "qwen3_5_moe_text"), ("gpt2", "gpt_neox"))


def _value_key(host: dict, value: dict) -> str:
    return f"{host['path']}.{value['name']}"


def comparable(facts: dict, entry: dict) -> dict:
    """What the Compare page compares for one family: its facts' values, relations, mechanics and checkpoints.

    ``entry`` is the family's families-index entry (``families_index.index_entry``): its facet terms are the
    index's words, so "the same mechanism" reads the same here as in the filter."""
    values = []
    for host in facts["hosts"]:
        for value in host["values"]:
            available = any((value.get("availability") or {}).values())
            values.append({"path": _value_key(host, value), "dims": value.get("dims") or [],
                           "available": available})
    relations = [{"host": r["host"], "text": r["text"]} for r in facts["relations"]]
    checkpoints = [{"checkpoint": s["checkpoint"], **{key: s.get(key) for key, _, _ in COLUMNS}}
                   for s in facts.get("sizes") or []]
    return {"family": facts["family"], "tagline": facts.get("tagline") or "", "group": facts.get("group") or "",
            "values": values, "relations": relations,
            "mechanics": [[label, entry["facets"].get(key) or []] for key, label in FACETS],
            "checkpoints": checkpoints}


def _traits(facts: dict) -> set:
    return ({("value", f"{h['path']}.{v['name']}", tuple(v.get("dims") or [])) for h in facts["hosts"] for v in h["values"]}
            | {("relation", r["host"], r["text"]) for r in facts["relations"]})


def closest(families: list[dict]) -> dict[str, str]:
    """Each family's nearest other family: the most values (with their dims) and relations in common, as a share of
    the two families' together (Jaccard); the family page links its Compare view with it. Ties go by name."""
    own = {f["family"]: _traits(f) for f in families}
    out = {}
    for name, mine in own.items():
        scores = [(len(mine & theirs) / max(len(mine | theirs), 1), other) for other, theirs in own.items()
                  if other != name]
        if scores:
            out[name] = min(scores, key=lambda s: (-s[0], s[1]))[1]
    return out


def suggested(families: list[str]) -> list[tuple[str, str]]:
    built = set(families)
    return [pair for pair in SUGGESTED if set(pair) <= built]


def write_compare(env, out_dir, families: list[dict], entries: list[dict]) -> None:
    """The page (``compare.md``) and one ``compare/<family>.json`` per family, into the docs tree ``out_dir``."""
    by_family = {e["family"]: e for e in entries}
    (out_dir / "compare").mkdir()
    for facts in families:
        data = comparable(facts, by_family[facts["family"]])
        (out_dir / "compare" / f"{facts['family']}.json").write_text(
            json.dumps(data, sort_keys=True, separators=(",", ":")), encoding="utf-8")
    names = sorted(by_family)
    pairs = suggested(names)
    if pairs:
        first = pairs[0]
    else:  # a site of one family compares it with itself
        first = (names[0], names[1] if len(names) > 1 else names[0]) if names else ("", "")
    (out_dir / "compare.md").write_text(
        env.get_template("compare.md.j2").render(families=names, pairs=pairs, first=first,
                                                 columns=COLUMNS), encoding="utf-8")
