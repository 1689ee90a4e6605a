"""The config section's table: one per config (text, vision), a column per full-size checkpoint.

Checkpoints whose fields are equal share a column (collect merged them); a row whose values differ across
columns is marked, since that is what a reader scans for; a cell the YAML says was inferred, not read from
the checkpoint's config.json, carries the mark and the reason is listed under the table.
"""

from __future__ import annotations

import json


def _same(values: list) -> bool:
    return len({json.dumps(v, sort_keys=True) for v in values}) <= 1


def config_matrix(tables: list[dict]) -> dict | None:
    """``{"columns", "sections", "inferred"}`` for the template; None when there is no table."""
    if not tables:
        return None
    columns = []
    for t in tables:
        ids = [t["checkpoint"], *t["also"]]
        whole = {cp for cp, key, _ in t.get("inferred", []) if key in ("config", "same_as")}
        columns.append({"checkpoint": t["checkpoint"], "also": t["also"],
                        "inferred": [cp for cp in ids if cp in whole]})
    sections = []
    for part, title in (("accessors", "nncanon"), ("raw", "config.json")):
        keys = list(dict.fromkeys(k for t in tables for k, _ in t[part]))
        if not keys:
            continue
        rows = []
        for key in keys:
            cells = []
            for t in tables:
                value = dict((k, v) for k, v in t[part]).get(key, None)
                marks = [why for _, field, why in t.get("inferred", []) if part == "raw" and field == key]
                cells.append({"value": value, "present": any(k == key for k, _ in t[part]),
                              "inferred": "; ".join(marks) or None})
            rows.append({"key": key, "cells": cells, "differs": not _same([c["value"] for c in cells])})
        sections.append({"title": title, "kind": part, "rows": rows})
    notes = [{"checkpoint": cp, "field": key, "why": why}
             for t in tables for cp, key, why in t.get("inferred", [])]
    return {"columns": columns, "sections": sections, "inferred": notes}


def tl_summary(found: dict[str, dict] | None) -> str:
    """One layout's TransformerLens agreement in a cell: agree, differ (naming the values), or not checked and why."""
    if not found:
        return "not checked: the build ran without the TransformerLens check"
    entries = list(found.values())
    if any(e["agreed"] is None for e in entries):
        return "not checked: " + next(e["why"] for e in entries if e["agreed"] is None)
    wrong = sorted(key.split("::")[1] for key, e in found.items() if not e["agreed"])
    return f"differ on {', '.join(wrong)}" if wrong else f"agree ({len(entries)} values)"


def _layout_text(layout: dict) -> list[str]:
    """A layout's measured facts as short phrases (generator/facts/variants.py's LAYOUT_TRAITS)."""
    return [*([layout["norm"]] if layout.get("norm") else []), *layout.get("block", []), *layout.get("attention", []),
            *(f"fused {name}" for name in layout.get("fused", [])),
            *(["attention biases"] if layout.get("attention_bias") else [])]


def layouts(facts: dict) -> list[dict] | None:
    """The Layouts table, from the facts alone: the ``tiny:`` recipe's row and one per variant (its overrides,
    the layout measured on its tiny checkpoint, the relations proven on its blocks, the checkpoints it stands
    for); a checkpoint no variant lists is the ``tiny:`` recipe's. None when the family has no variants."""
    variants = facts.get("variants") or []
    if not variants:
        return None
    owned = {cid for v in variants for cid in v["checkpoints"]}
    every = [cid for t in facts["configs"] for cid in (t["checkpoint"], *t["also"])]
    traits = facts.get("traits") or {}
    own = {f"{h['path']}::{v['name']}": v["transformer_lens"] for h in facts.get("hosts") or [] for v in h["values"]
           if v.get("transformer_lens")}
    rows = [{"name": "tiny", "config": {}, "layout": _layout_text(traits),
             "relations": len(facts.get("relations") or []), "edits": len(facts.get("edits") or []),
             "checkpoints": [cid for cid in every if cid not in owned], "transformer_lens": tl_summary(own)}]
    rows += [{"name": v["name"], "config": v["config"], "layout": _layout_text(v["layout"]),
              "relations": len(v["relations"]), "edits": v["edits"], "checkpoints": v["checkpoints"],
              "transformer_lens": tl_summary(v.get("transformer_lens"))}
             for v in variants]
    return rows
