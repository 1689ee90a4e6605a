"""The Recurrent state page: every mixer that keeps a state across tokens, side by side, from the facts alone.

A family is on the page when one of its hosts serves a recurrent-state value (`STATE_VALUES`: the recurrent
state ``state`` / ``states`` / ``state_input`` / ``state_output``, the conv window ``conv_state_*`` /
``conv_states``); its mixers are grouped by the shared part their host class is a version of (`Mixer`; the facts'
``part``), so a family added with a new mixer gets a row with no change here. Every cell is read off the facts, nothing typed:

- the state's layout: each state value's layout and dimensions, as the support tables give them;
- its full-size shape: those dimensions sized by each full-size checkpoint's config (the facts' ``configs``
  ``dims``, `generator.facts.configs.layout_dims`), ``batch`` 1 and ``seq`` one token, and the numbers that
  make, in float32 bytes; the value's own note, which the family's part computes from the config, follows;
- what one token writes and how the decay is parameterised: the texts of the relations that prove the state
  values and the decays, as proven on every block under every load (a relation the build did not prove is not
  in the facts);
- what the cache holds: the values a call reads the cache through (``*_input``) and the ones whose edit reaches
  the next call (the facts' ``edits``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: the values that are a mixer's state across tokens, in the order the page lists them
STATE_VALUES = ("state_input", "state", "states", "state_output", "conv_state_input", "conv_states",
                "conv_state_output")
#: the values whose relations say how the state decays
DECAY_VALUES = ("decays", "decay_rates", "time_steps")
#: the dimensions a state's full-size shape fixes at one sequence and one token
UNIT_DIMS = {"batch": 1, "seq": 1}


@dataclass
class Mixer:
    """One shared part carrying a recurrent state (a host class and the families' subclasses of it), and what the
    facts of the families having it say about it."""

    host_class: str
    kind: str
    families: list[dict] = field(default_factory=list)


def _state_hosts(facts: dict) -> list[dict]:
    return [h for h in facts.get("hosts") or [] if any(v["name"] in STATE_VALUES for v in h["values"])]


def _full_size(value: dict, configs: list[dict]) -> list[dict]:
    """Per full-size checkpoint: the value's shape at batch 1 and one token, its numbers and their float32 bytes."""
    rows = []
    for config in configs:
        dims = config.get("dims")
        if not dims or any(d not in dims and d not in UNIT_DIMS for d in value["dims"]):
            continue
        shape = [UNIT_DIMS.get(d, dims.get(d)) for d in value["dims"]]
        numbers = math.prod(shape)
        rows.append({"checkpoint": config["checkpoint"], "also": config.get("also") or [],
                     "shape": [f"{d}={s}" for d, s in zip(value["dims"], shape) if d not in UNIT_DIMS],
                     "numbers": numbers, "bytes": numbers * 4})
    return rows


def _relations(facts: dict, host: dict, names: tuple[str, ...]) -> list[dict]:
    """The host's proven relations that prove one of ``names``: their text and the loads they held under."""
    return [{"text": r["text"], "loads": sorted(r.get("errors") or {})}
            for r in facts.get("relations") or []
            if r["host"] == host["path"] and r["class"] == host["host_class"] and set(names) & set(r["proves"])]


def _cache(facts: dict, host: dict) -> list[dict]:
    """The values a call reads the cache through, and those whose edit reaches the next call."""
    reaching = {e["value"] for e in facts.get("edits") or []
                if e["host"] == host["path"] and e["class"] == host["host_class"] and e["reaches"] == "the next call"}
    return [{"name": v["name"], "description": v["description"],
             "role": "reads the cache" if v["name"].endswith("_input") else "what the next call starts from"}
            for v in host["values"] if v["name"].endswith("_input") and v["name"] in STATE_VALUES
            or v["name"] in reaching]


def mixers(families: list[dict]) -> list[Mixer]:
    """Every part with a state value, in the order of its first family (by name), each with its families."""
    found: dict[str, Mixer] = {}
    for facts in sorted(families, key=lambda f: f["family"]):
        for host in _state_hosts(facts):
            # a family's subclass of a shared part (FalconSSD of SSD) joins the part's row; facts collected before
            # hosts named their part group by their own class
            part = host.get("part") or host["host_class"]
            mixer = found.setdefault(part, Mixer(part, host["class"]))
            states = [v for v in host["values"] if v["name"] in STATE_VALUES]
            states.sort(key=lambda v: STATE_VALUES.index(v["name"]))
            mixer.families.append({
                "family": facts["family"], "path": host["path"], "native": host["class"], "host_class": host["host_class"],
                "blocks": host.get("blocks"),
                "states": [{"name": v["name"], "layout": v["layout"], "dims": v["dims"], "note": v.get("note"),
                            "full_size": _full_size(v, facts.get("configs") or [])} for v in states],
                "writes": _relations(facts, host, tuple(v["name"] for v in states)),
                "decay": _relations(facts, host, DECAY_VALUES),
                "cache": _cache(facts, host),
            })
    return list(found.values())


def summary(found: list[Mixer]) -> list[dict]:
    """One row per mixer for the side-by-side table: its families, its state values' layouts (as the first family
    serves them; a family whose layouts differ is named), whether it decays, what the cache holds."""
    rows = []
    for mixer in found:
        first = mixer.families[0]
        layouts = [f"{s['name']}: {s['layout']} [{' '.join(s['dims'])}]" for s in first["states"]]
        rows.append({"mixer": mixer.host_class, "native": sorted({f["native"] for f in mixer.families}),
                     "families": [f["family"] for f in mixer.families], "layouts": layouts,
                     "decays": any(f["decay"] for f in mixer.families),
                     "cache": sorted({c["name"] for f in mixer.families for c in f["cache"]})})
    return rows
