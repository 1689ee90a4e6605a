"""The families index: one row per family, and the facets its filter offers.

Every facet term comes from the measured traits (generator/facts/traits.py) through one vocabulary defined
here, so two families with the same mechanism carry the same word (qwen3 and qwen3_vl both have
"q/k norms", whatever their block-kind labels say). Terms combine with OR within a facet and AND across
facets (site_templates/assets/families-filter.js).
"""

from __future__ import annotations

import re

#: the config's layer type (the block kind) -> the mixer it runs, in the index's words
MIXERS = {
    "full_attention": "full attention",
    "sliding_attention": "sliding-window attention",
    "linear_attention": "gated DeltaNet",
    "chunked_attention": "chunked attention",
    "mamba": "state space (Mamba-2)",
    "conv": "gated short convolution",
    "mlp": "none (an MLP-only block)",
}

#: traits.mlp_kind -> the MLP facet's word
MLPS = {
    "gated": "gated MLP",
    "plain": "plain MLP",
    "mixture": "mixture of experts",
    "mixture + shared expert": "mixture + shared expert",
    "none": "no MLP",
}

#: a term -> the broader term a family with it also matches (a filter for mixtures keeps the shared-expert ones)
PARENTS = {"mixture + shared expert": "mixture of experts"}

#: traits.norm_gain (how a norm applies its learned parameters) -> the norms facet's word; "weight" is the default
GAINS = {"1 + weight": "gain 1 + weight", "weight + bias": "norm bias", "none": "no norm gain"}

#: the attention quirk (generator/facts/traits.py) the Mixer facet's "sliding-window attention" says
WINDOWED = "sliding window"

#: block mechanics that are about where the norms sit
PLACEMENTS = ("post-norm", "sandwich norms", "norm after each add")

#: the facets, in the order the filter shows them: (key, label)
FACETS = (
    ("mixer", "Mixer"),
    ("mlp", "MLP"),
    ("norms", "Norms"),
    ("attention", "Attention"),
    ("block", "Block"),
    ("vision", "Vision"),
)


def _attention_term(quirk: str) -> str:
    """A measured attention quirk as a facet term: its parameter dropped, so equal mechanisms match."""
    quirk = re.sub(r"\s*\([^)]*\)$", "", quirk)  # "partial rotary (0.25)" -> "partial rotary"
    return "rope scaling" if quirk.endswith("rope scaling") else quirk


#: a recurrent mixer's host class (nncanon/parts/) -> the index's word; a subclass keeps its part's name as a suffix
RECURRENT = {"SelectiveScan": "state space (Mamba-1)", "SSD": "state space (Mamba-2)", "RGLRU": "recurrence (RG-LRU)",
             "ShortConv": "gated short convolution"}


def _mixer_terms(kind: dict, hosts: dict[str, set[str]], classes: dict[str, set[str]] | None = None) -> list[str]:
    """What a block kind's token mixers are, from the values its mixer hosts serve (a DeltaNet's betas, a
    recurrent state's conv window), the part a recurrent mixer's host class is, and, for attention, the config's
    name for the kind (sliding, chunked)."""
    block = "model.layers[i]."
    classes = classes or {}
    mixers = [path for path, names in hosts.items() if path.startswith(block) and path.count(".") == 2
              and names & {"time_steps", "betas", "attention_probabilities", "attention_head_outputs",
                           "conv_state_output"}]
    terms = []
    for path in sorted(mixers, key=lambda p: p != block + kind.get("mixer", "")):
        names = hosts[path]
        part = next((word for cls in sorted(classes.get(path, ())) for name, word in RECURRENT.items()
                     if cls.endswith(name)), None)
        if "betas" in names:  # before time_steps: a DeltaNet serves time steps too (its decay's dt)
            terms.append("gated DeltaNet")
        elif part:
            terms.append(part)
        elif "time_steps" in names:
            terms.append("state space (Mamba-2)")
        elif path == block + kind.get("mixer", ""):
            terms.append(next((w for k, w in MIXERS.items() if k.split("_")[0] in kind["kind"]), "full attention"))
    return list(dict.fromkeys(terms)) or [MIXERS.get(kind["kind"], kind["kind"].replace("_", " "))]


def mixer_counts(facts: dict) -> list[dict]:
    """``[{"term", "kind", "count", "label"}]`` for each block kind in the stack, in stack order."""
    blocks = facts["stack"].get("blocks") or []
    out = []
    for k in facts["stack"].get("block_kinds", []):
        # the hosts this kind's forward was measured reading (a hybrid stack's attention blocks have no state-space
        # mixer); every host when the facts have no measured order for the kind
        mine = {path.rsplit(".", 1)[0] for path in k.get("sequence") or []}
        hosts: dict[str, set[str]] = {}
        classes: dict[str, set[str]] = {}
        for h in facts["hosts"]:
            if mine and h["path"] not in mine:
                continue
            hosts.setdefault(h["path"], set()).update(v["name"] for v in h["values"])
            classes.setdefault(h["path"], set()).add(h.get("host_class", ""))
        terms = _mixer_terms(k, hosts, classes)
        out.append({"term": " + ".join(terms), "terms": terms, "kind": k["kind"],
                    "count": sum(1 for b in blocks if b == k["kind"]), "label": k.get("label") or k["kind"]})
    return out


def facets(facts: dict) -> dict[str, list[str]]:
    """The family's terms per facet, from its measured traits."""
    traits = facts.get("traits") or {}
    block = list(traits.get("block", []))
    # measured on the forward (generator/facts/norm_placement.py); facts from before it name only the exceptions
    measured = traits.get("norm_placement")
    placement = [measured] if measured else [m for m in block if m in PLACEMENTS]
    gain = traits.get("norm_gain", "")
    norms = placement + [n for n in traits.get("norm", "").split(" / ") if n]
    norms += [GAINS.get(g, f"gain {g}") for g in gain.split(" / ") if g and g != "weight"]
    vision = facts.get("vision")
    mlps = [MLPS.get(m, m) for m in traits.get("mlp", "").split(" then ") if m]
    quirks = list(dict.fromkeys(_attention_term(q) for q in traits.get("attention", [])))
    mixers = list(dict.fromkeys(t for m in mixer_counts(facts) for t in m["terms"]))
    if WINDOWED in quirks:
        # one word for one mechanism, in the Mixer facet: a config that windows every attention block (Mistral's
        # sliding_window, no sliding block kind) runs sliding-window attention, not full attention
        quirks.remove(WINDOWED)
        if MIXERS["sliding_attention"] not in mixers:  # RecurrentGemma's local attention blocks: named here
            mixers = [MIXERS["sliding_attention"] if t == MIXERS["full_attention"] else t for t in mixers]
            mixers += [MIXERS["sliding_attention"]] if MIXERS["sliding_attention"] not in mixers else []
    return {
        "mixer": mixers,
        "mlp": list(dict.fromkeys(mlps)),
        "norms": norms,
        "attention": quirks,
        "block": [m for m in block if m not in PLACEMENTS],
        "vision": [f"vision: {vision['line']}" if vision.get("line") else "vision encoder"] if vision else ["text only"],
    }


def matches(terms: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each facet's terms with the broader terms they imply (`PARENTS`): what a filter matches a family by."""
    return {key: list(dict.fromkeys([*found, *(PARENTS[t] for t in found if t in PARENTS)]))
            for key, found in terms.items()}


def facet_terms(entries: list[dict], facets: tuple[tuple[str, str], ...] = FACETS) -> list[dict]:
    """``[{"key", "label", "terms": [(term, count)]}]``: every term some row matches, most common first (the
    families index's facets, or another page's: the Coverage page's)."""
    out = []
    for key, label in facets:
        counts: dict[str, int] = {}
        for e in entries:
            for term in matches(e["facets"])[key]:
                counts[term] = counts.get(term, 0) + 1
        if counts:
            out.append({"key": key, "label": label,
                        "terms": sorted(counts.items(), key=lambda item: (-item[1], item[0]))})
    return out


def mlp_kind(facts: dict) -> str:
    """The MLP as the support table names it (llms.txt and facts/index.json keep this older field)."""
    names = {v["name"] for h in facts["hosts"] if h.get("section", "text") == "text" for v in h["values"]}
    if "router_logits" in names:
        return "mixture of experts + shared expert" if "shared_expert_output" in names else "mixture of experts"
    return "dense" if "mlp_output" in names else "none"


def _count(n: int) -> str:
    """A parameter count as model cards write it: 124M, 1.2B, 671B."""
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            value = n / scale
            return f"{value:.0f}{unit}" if value >= 100 else f"{value:.3g}{unit}"
    return str(n)


def _span(values: list, show=str) -> str:
    """The range a family's checkpoints span, "—" where none has the number."""
    found = sorted({v for v in values if v is not None})
    if not found:
        return "—"
    return show(found[0]) if len(found) == 1 else f"{show(found[0])}–{show(found[-1])}"


def numbers(sizes: list[dict]) -> dict:
    """The index's numeric columns over a family's full-size checkpoints (`generator.facts.configs.sizes`): each
    cell the range its checkpoints span, with the largest checkpoint's value to sort by."""
    if not sizes:
        return {}
    heads = sorted({(s["heads"], s["kv_heads"]) for s in sizes if s["heads"] is not None})
    experts = sorted({(s["experts"], s["top_k"]) for s in sizes if s["experts"] is not None})
    return {
        "blocks": (_span([s["blocks"] for s in sizes]), max(s["blocks"] for s in sizes)),
        "width": (_span([s["width"] for s in sizes], lambda w: f"{w:,}"), max(s["width"] for s in sizes)),
        "heads": (", ".join(f"{h}/{kv}" for h, kv in heads) or "—", max((h for h, _ in heads), default=0)),
        "experts": (", ".join(f"{e}/{k}" for e, k in experts) or "—", max((e for e, _ in experts), default=0)),
        "parameters": (_span([s["parameters"] for s in sizes], _count), max(s["parameters"] for s in sizes)),
        "context": (_span([s["context"] for s in sizes], lambda c: f"{c:,}"),
                    max((s["context"] or 0 for s in sizes), default=0)),
    }


#: the numeric columns: (key, heading, what the heading's title says)
NUMBERS = (
    ("blocks", "blocks", "decoder blocks"),
    ("width", "width", "hidden size (the residual stream's width)"),
    ("heads", "heads", "query heads / key-value heads"),
    ("experts", "experts", "routed experts / experts each token uses"),
    ("parameters", "params", "parameters of the full-size model, each shared tensor once, counted on its meta model"),
    ("context", "context", "max_position_embeddings as the config declares it"),
)


def index_entry(facts: dict, block_kinds: list[dict]) -> dict:
    """One family's row of the index (and of facts/index.json)."""
    vision = facts.get("vision")
    return {
        "family": facts["family"],
        "module": facts["module"],
        "lines": facts["lines"],
        "group": facts.get("group") or facts["lines"][0],
        "tagline": facts["tagline"],
        "tags": facts["tags"],
        "page": f"families/{facts['family']}/",
        "facts": f"facts/{facts['family']}.json",
        "block_kinds": block_kinds,
        "mixers": mixer_counts(facts),
        "mlp": mlp_kind(facts),
        "vision": vision.get("line") if vision else None,
        "traits": facts.get("traits"),
        "facets": facets(facts),
        "num_values": sum(len(h["values"]) for h in facts["hosts"]),
        "numbers": numbers(facts.get("sizes") or []),
        "sizes": facts.get("sizes") or [],
        "versions": facts["versions"],
    }
