"""The SAE index: every SAELens release (generator/survey/saelens_releases.json) whose model is a checkpoint a family
page covers, with the standard value its hook point is; and the rest, each saying why it has no row of its own.

A hook point maps when the release's SAE ids are TransformerLens hook names (the kept file maps each through the
table the build checks against TransformerBridge) and the family serves that value (its facts), or when the family
page's Sparse autoencoders section states the release (verified there on the tiny checkpoint). Every other release
says why not in one line: its ids do not name a hook (SAELens reads the hook from each SAE's cfg.json on the hub,
which no build reads), or the family does not serve the value.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

KEPT = Path(__file__).resolve().parents[1] / "survey" / "saelens_releases.json"


@lru_cache(maxsize=4)
def _kept(path: Path) -> dict:
    """The kept releases, read once per build (every family page and the index read them)."""
    return json.loads(path.read_text(encoding="utf-8"))


def _served(facts: dict) -> set[str]:
    return {f"{h['path']}.{v['name']}" for h in facts["hosts"] for v in h["values"]
            if any((v.get("availability") or {}).values())}


def _stated(facts: dict) -> dict[str, str]:
    """The releases the family page's SAE section states (verified at build): SAELens release name -> hook."""
    saes = facts.get("saes") or {}
    return {r["id"].split(" (", 1)[0]: r["hook"] for r in saes.get("releases") or []}


def _layers(layers: list[int]) -> str:
    return ", ".join(str(n) for n in layers) if len(layers) <= 6 else f"{len(layers)} layers, {layers[0]}–{layers[-1]}"


def mapping(release: dict, family: str, facts: dict) -> list[dict]:
    """Each hook point of a release on a family page: {"hook", "value" (or None), "why" (when None), "layers"}."""
    stated = _stated(facts).get(release["release"])
    if stated:
        return [{"hook": "its SAE section", "value": stated, "layers": "", "why": None, "section": True,
                 "example": False}]
    if release["hooks"] is None:
        return [{"hook": release["example"], "value": None, "layers": "", "section": False,
                 "why": "its ids name no hook (each SAE's cfg.json on the hub does; no build reads the hub)",
                 "example": True}]
    served, out = _served(facts), []
    for hook, entry in sorted(release["hooks"].items()):
        value, why = entry["value"], None
        if value is None:
            why = "no standard value is this TransformerLens hook"
        elif value not in served:
            value, why = None, f"{family} does not serve {entry['value']}"
        out.append({"hook": hook, "value": value, "layers": _layers(entry["layers"]), "why": why, "section": False,
                    "example": False})
    return out


def index_rows(families: list[dict], kept: Path = KEPT) -> tuple[list[dict], list[dict], str]:
    """(the releases on a family page's checkpoint, the others, the kept file's source)."""
    data = _kept(kept)
    owner = {s["checkpoint"]: f for f in families for s in f.get("sizes") or []}
    on_pages, others = [], []
    for release in data["releases"]:
        facts = owner.get(release["checkpoint"])
        row = {**release, "family": facts["family"] if facts else None}
        if facts:
            row["hook_points"] = mapping(release, facts["family"], facts)
            on_pages.append(row)
        else:
            others.append(row)
    on_pages.sort(key=lambda r: (r["family"], r["checkpoint"], r["release"]))
    others.sort(key=lambda r: (r["checkpoint"], r["release"]))
    return on_pages, others, data["source"]


def render_sae_index(env, families: list[dict]) -> str:
    on_pages, others, source = index_rows(families)
    mapped = sum(1 for r in on_pages if any(p["value"] for p in r["hook_points"]))
    return env.get_template("sae_index.md.j2").render(rows=on_pages, others=others, source=source, mapped=mapped)
