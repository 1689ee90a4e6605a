"""The Coverage page: one row per model type the survey covered, from its cached facts alone (no torch).

A row is one of three kinds, and looks it: a model type with a family page links to the page (what it
says was verified there, on a pinned checkpoint); a surveyed one gives what the generic parts measured on
a tiny random model (N of M values resolve, K of L relations hold, the family it looks most like); one
that does not get that far says where it stopped and why, in one line. The filters are the families
index's (site_templates/assets/families-filter.js): facet buttons, OR within a facet, AND across them.
"""

from __future__ import annotations

import re
from pathlib import Path

from generator.site.families_index import facet_terms

#: the shared relations the page names, by the start of their text (nncanon/core/relations.py)
SHARED = (
    ("residual", "residual decomposition",
     ("model.layers[i]: layer_input + {mixer}.attention_output == layer_mid",
      "model.layers[i]: layer_mid + mlp.mlp_output == layer_output")),
    ("stack", "stack", ("model: layers[i].layer_output == layers[i+1].layer_input",)),
    ("final_norm", "final norm", ("model: final_norm_output == norm(",)),
    ("head", "head", ("model: lm_head_output == lm_head(",)),
)

#: the same four, as a family's facts state them (its own relations, checked on every block at its build): a parallel
#: block's sum (gpt_neox: layer_input + attention_output + mlp_output == layer_output) is its residual decomposition
VERIFIED = (
    ("residual decomposition", "model.layers[i]", re.compile(r"layer_(input|mid) \+ .+ == layer_(mid|output)\b")),
    ("stack", "model", re.compile(r"layers\[i\]\.layer_output == layers\[i\+1\]\.layer_input\b")),
    ("final norm", "model", re.compile(r"final_norm_output == norm\(")),
    ("head", "model", re.compile(r"lm_head_output == ")),
)
#: the least share of measured features a model type must have in common with a family for the row to name it as the
#: family to start from: below it the generic parts describe neither (an encoder is not "closest" to mamba2)
ALIKE = 0.5

FACETS = (("status", "Status"), ("mixer", "Mixer"), ("mlp", "MLP"), ("holds", "Relations that hold"),
          ("task", "Task"), ("tl", "TransformerLens"), ("nnterp", "nnterp"))


def _holds(row: dict, starts: tuple[str, ...]) -> bool | None:
    """Whether every relation starting with one of ``starts`` holds on the row; None where none was checked."""
    found = [why for text, why in row["relations"].items() if text.startswith(starts)]
    return None if len(found) < len(starts) else all(why is None for why in found)


#: the shared four on an encoder row (generator/survey/encoders.py): each stack's host and the relation, by VERIFIED's
#: patterns over "host: relation" (BERT's one stack at model.layers[i], an encoder-decoder's two at model.encoder and
#: model.decoder); a post-norm stack has no final norm, so that one is not checked there
STACKED = re.compile(r"^model(\.(encoder|decoder))?(\.layers\[i\])?$")


def _stacks_hold(row: dict) -> list[tuple[str, bool | None]]:
    """Each of the shared four on an encoder row: every relation of the kind on every stack holds (None: none
    checked)."""
    shared = []
    for label, _, regex in VERIFIED:
        found = [why for key, why in row["relations"].items() if ": " in key
                 and STACKED.match(key.split(": ", 1)[0]) and regex.search(key.split(": ", 1)[1])]
        shared.append((label, all(why is None for why in found) if found else None))
    return shared


def _kind(item: str) -> str:
    """A shape word without the model's class name: "norm: LlamaRMSNorm" -> "norm: RMSNorm"."""
    if item.startswith("norm: "):
        name = item[6:].lower()
        return "norm: RMSNorm" if "rms" in name else "norm: LayerNorm" if "layernorm" in name else item
    return item


def features(row: dict) -> set[str]:
    """What the closest-family match compares: the values that resolve, the relations that hold, the shape."""
    return ({f"value {k}" for k, v in row["values"].items() if v is None}
            | {f"relation {k}" for k, v in row["relations"].items() if v is None} | {_kind(i) for i in row["shape"]})


#: the shape words that say how a block computes (where its norms sit, what its MLP and mixer are, one norm for a
#: parallel block): the family to start from is the one that differs from a model type in fewest of these, then
#: shares the most of everything else measured
STRUCTURE = ("norms: ", "mlp: ", "mixer: ", "attention: q/k", "attention: plain", "block: one norm")


def structure(features: set[str]) -> set[str]:
    return {f for f in features if f.startswith(STRUCTURE)}


def closest(row: dict, paged: list[tuple[str, set[str]]]) -> tuple[str, float, list[str]] | None:
    """The family whose model type's survey row has the fewest differences in block structure from ``row``'s, then
    shares the most (Jaccard) with it; a tie goes to llama (the tree the generic parts are), then by name. With it,
    what differs in structure: "norms: sandwich norms here, pre-norm there"."""
    mine = features(row)
    scored = [(-len(structure(mine) ^ structure(theirs)), len(mine & theirs) / len(mine | theirs), family, theirs)
              for family, theirs in paged if mine | theirs]
    if not scored:
        return None
    best = max((apart, share) for apart, share, _, _ in scored)
    family, theirs = min(((f != "llama", f), t) for apart, share, f, t in scored if (apart, share) == best)
    family = family[1]
    differs = []
    for category in dict.fromkeys(f.split(":", 1)[0] for f in structure(mine) ^ structure(theirs)):
        here, there = ([f.split(": ", 1)[1] for f in sorted(structure(side)) if f.split(":", 1)[0] == category]
                       for side in (mine, theirs))
        differs.append(f"{category}: {', '.join(here) or 'none'} here, {', '.join(there) or 'none'} there")
    return family, best[1], differs


def mixers(shape: list[str]) -> list[str]:
    """The facet's words for a tree's sequence mixers: attention, another mixer, or both (a hybrid)."""
    return ((["attention"] if any(item.startswith("attention:") for item in shape) else [])
            + (["another mixer"] if "mixer: not attention" in shape else []))


def verified(facts: dict) -> dict:
    """A family row's numbers from the family's facts, what its page says: the values it serves, the relations its
    build checked on every block, and which of the four shared ones they include."""
    relations = facts.get("relations") or []
    return {"served": sum(len(h["values"]) for h in facts.get("hosts") or []), "checked": len(relations),
            "shared": [(label, any(_on_a_stack(r["host"], host) and pattern.match(r["text"]) for r in relations))
                       for label, host, pattern in VERIFIED]}


def _on_a_stack(host: str, wanted: str) -> bool:
    """``host`` is ``wanted`` or its place on one of an encoder-decoder's stacks (model.encoder.layers[i] is a
    model.layers[i], model.decoder a model, for the relations the shared four name)."""
    return host == wanted or STACKED.match(host) is not None and host.replace(".encoder", "").replace(
        ".decoder", "") == wanted


def spans(text: str | None) -> list[tuple[str, bool]]:
    """A reason's text as (part, is code) pairs: what it quotes in backticks (a package, a field, a source line)
    is set as code in the table's HTML cell, every part escaped by the template."""
    parts = (text or "").split("`")
    return [(part, index % 2 == 1) for index, part in enumerate(parts) if part] if len(parts) % 2 else [(text, False)]


def status(row: dict, page: str | None) -> str:
    if page:
        return "family page"
    for flag, stop in (("builds", "does not build"), ("forwards", "does not run"), ("wraps", "does not wrap")):
        if not row[flag]:
            return stop
    return "does not finish" if row["failure"] else "surveyed"


def entry(row: dict, page: str | None, paged: list[tuple[str, set[str]]], compared: dict,
          facts: dict | None = None, tasks: list[str] | None = None) -> dict:
    """One table row's data and facet terms; ``compared``: its TransformerLens and nnterp columns; ``facts``: the
    family's, for a family row (its numbers are the page's, never the survey's guess); ``tasks``: the lists the
    model type is on (the index's, else the row's)."""
    kind = status(row, page)
    tasks = row.get("tasks", []) if tasks is None else tasks
    values, relations = row["values"], row["relations"]
    shared = [(label, _holds(row, starts)) for _, label, starts in SHARED] if "kind" not in row else _stacks_hold(row)
    own = verified(facts) if page and facts else None
    if own:
        shared = own["shared"]
    shape = dict(item.split(": ", 1) for item in row["shape"] if ": " in item)
    near = closest(row, [(f, feats) for f, feats in paged if f != page]) if row["wraps"] and not page else None
    if near and near[1] < ALIKE:
        near = None
    # the relations that held must also join into one chain (generator/facts/chain.py): where they do not, the
    # row says which link broke instead of reading as if every relation it needs held
    chain = row.get("chain")
    if row["wraps"] and not page:
        shared.append(("chain", chain is None))
    holds = [label for label, ok in shared if ok]
    return {
        "model_type": row["model_type"], "class": row["class"], "kind": kind, "page": page, "verified": own,
        "tasks": tasks, "parts": PARTS.get(row.get("kind"), PARTS[None]),
        "failure": row["failure"], "wraps": row["wraps"],
        # what would move a stopped row on (generator/survey/reasons.py), derived from its failure at the survey
        "reason": spans(row.get("reason")) if row["failure"] and not page else [],
        "resolved": sum(v is None for v in values.values()), "values_of": len(values),
        "held": sum(r is None for r in relations.values()), "relations_of": len(relations),
        "shared": shared, "chain": chain, "closest": near[0] if near else None,
        "closest_share": f"{round(100 * near[1])}%" if near else None, "differs": near[2] if near else [],
        "transformer_lens": compared.get("transformer_lens"), "nnterp": compared.get("nnterp"),
        "facets": {
            "status": [kind],
            "mixer": mixers(row["shape"]) if row["wraps"] else [],
            "mlp": [shape["mlp"]] if row["wraps"] and "mlp" in shape else [],
            "holds": holds,
            "task": tasks,
            "tl": ["bridged" if compared.get("transformer_lens") else "not bridged"],
            "nnterp": [compared["nnterp"]] if compared.get("nnterp") else ["not listed"],
        },
    }


def coverage_context(index: dict, rows: list[dict], families: set[str] | None = None,
                     facts: dict[str, dict] | None = None) -> dict:
    """The Coverage template's context: every row, the facets with their counts, and the totals. A family page
    is linked, and is a closest family, only where this render writes it (``families``; None: every one); a family
    row states what its facts (``facts``, by family) say was verified."""
    pages = index.get("pages", {})
    facts = facts or {}
    rendered = set(pages.values()) if families is None else set(families)
    paged = [(pages[r["model_type"]], features(r)) for r in rows
             if r["model_type"] in pages and r["wraps"] and pages[r["model_type"]] in rendered]
    compared = index.get("comparison", {})
    tasks = index.get("tasks", {})
    entries = [entry(row, pages.get(row["model_type"]), paged, compared.get(row["model_type"], {}),
                     facts.get(pages.get(row["model_type"], "")), tasks.get(row["model_type"])) for row in rows]
    for e in entries:
        e["linked"] = e["page"] in rendered
    facets = facet_terms(entries, FACETS)
    wrapped = [e for e in entries if e["wraps"]]
    # the mean is over one vocabulary: the decoder parts' values (each encoder kind's line has its own parts)
    decoders = [e for e in wrapped if e["parts"] == PARTS[None]]
    return {
        "entries": entries, "facets": facets, "index": index,
        "totals": {"types": len(entries), "pages": sum(e["kind"] == "family page" for e in entries),
                   # a family page's model type builds and runs (its page was verified), whatever its survey row says
                   "builds": sum(r["builds"] or bool(e["page"]) for r, e in zip(rows, entries)),
                   "forwards": sum(r["forwards"] or bool(e["page"]) for r, e in zip(rows, entries)),
                   "wraps": len(wrapped),
                   "values_of": max((e["values_of"] for e in decoders), default=0),
                   "mean_values": f"{sum(e['resolved'] for e in decoders) / len(decoders):.1f}" if decoders else "0",
                   "decoders": len(decoders)},
        "nnterp": index.get("nnterp", {}), "kinds": per_kind(entries, rows),
    }


#: the parts a row's survey mounted, by the kind it was surveyed as (None: a decoder's, generator/survey/tree.py)
PARTS = {None: "the Llama tree's", "masked LM": "BERT's", "seq2seq": "BART's", "speech-to-text": "Whisper's",
         "CTC": "BART's encoder's"}


def per_kind(entries: list[dict], rows: list[dict]) -> list[dict]:
    """One line per kind: its model types (a type on two lists counts in both), how many have a family page, how
    many build, run, take the parts and have every relation that held join into one chain."""
    from generator.survey.kinds import KINDS

    out = []
    for kind, _ in KINDS:
        mine = [(e, r) for e, r in zip(entries, rows) if kind in e["tasks"]]
        if not mine:
            continue
        out.append({"kind": kind, "types": len(mine), "pages": sum(bool(e["page"]) for e, _ in mine),
                    "builds": sum(r["builds"] or bool(e["page"]) for e, r in mine),
                    "forwards": sum(r["forwards"] or bool(e["page"]) for e, r in mine),
                    "wraps": sum(e["wraps"] and not e["page"] for e, _ in mine),
                    "whole": sum(e["wraps"] and not e["page"] and e["chain"] is None and not e["failure"]
                                 for e, _ in mine),
                    "parts": sorted({e["parts"] for e, _ in mine if not e["page"]})})
    return out


def render_coverage(env, survey: Path | None, families: set[str] | None = None,
                    facts: dict[str, dict] | None = None) -> str:
    """The Coverage page's markdown, from the survey directory's index and rows (an empty page before the
    first whole survey has run); ``families``: the family pages this render writes, ``facts`` theirs by family."""
    from generator.survey.run import load_rows

    index, rows = load_rows(survey) if survey is not None else ({}, [])
    return env.get_template("coverage.md.j2").render(**coverage_context(index, rows, families, facts))
