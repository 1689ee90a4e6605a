"""A page's tags, its tagline and the routing words of its notes, checked against what the build measured.

Every tag comes from one vocabulary (:data:`TAGS`): each entry is a pattern and the check, over the
facts (the measured traits, the proven relations' texts, the full-size configs' settings), that must
hold for the page to say it. A tag outside the vocabulary is refused, listing it: a tag nothing can
check is a word nothing proves. A parenthesised qualifier (``Tied embeddings (3.2)``) says the
property holds on some of the family's checkpoints, not all.

The tagline is scanned for phrases that name a checkable property, by meaning in every wording
(generator/facts/prose_phrases.py); a phrase the facts contradict fails the build naming the phrase and
what was measured. The notes' prose is held to the same phrases, each sentence to what it describes
(generator/facts/prose_scope.py: another family, a backend, the vision tower), and to the numbers it says of a
named checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from generator.facts.claim_error import ClaimError
from generator.facts.prose_numbers import check_numbers
from generator.facts.prose_phrases import NORM_PHRASES, PHRASES, ROUTING_PHRASES, _gelu, check_phrases
from generator.facts.prose_scope import prose, scope, sentences
from generator.recipe.family import Family

#: the full-size config settings a tag may be checked against, per checkpoint (text config, defaults filled)
CONFIG_FIELDS = ("tie_word_embeddings", "sliding_window", "use_sliding_window", "hidden_act", "hidden_activation",
                 "activation_function", "activation", "dense_act_fn",
                 "num_experts_per_tok", "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts",
                 "interleave_moe_layer_step", "attn_temperature_tuning", "use_qk_norm", "v_head_dim",
                 "qk_nope_head_dim", "qk_rope_head_dim", "norm_topk_prob", "attention_bias")


def _per_block(value: Any) -> Any:
    """A setting a config gives once per block (Hunyuan-A13B's moe_topk), every entry the same, is that one value."""
    if isinstance(value, (list, tuple)) and value and all(v == value[0] for v in value):
        return value[0]
    return value


def checkpoint_settings(family: Family) -> dict[str, dict]:
    """Per full-size checkpoint, the settings tags are checked against, read through transformers' config
    class (so a field the file leaves out has the default the model gets)."""
    from transformers import AutoConfig

    out = {}
    for checkpoint_id in family.checkpoint_ids:
        raw = family.checkpoint_config(checkpoint_id)
        settings = dict(raw)
        model_type = settings.pop("model_type", None)
        try:
            config = AutoConfig.for_model(model_type, **settings) if model_type else None
        except (ValueError, TypeError, KeyError):
            config = None
        if config is None:
            continue
        text = config.get_text_config()
        row = {name: _per_block(getattr(text, name)) for name in CONFIG_FIELDS if getattr(text, name, None) is not None}
        tied = getattr(config, "tie_word_embeddings", None)
        row["tie_word_embeddings"] = bool(tied if tied is not None else getattr(text, "tie_word_embeddings", False))
        layer_types = list(getattr(text, "layer_types", None) or [])
        row["layers"] = len(layer_types)
        row["full_at"] = [i for i, kind in enumerate(layer_types) if kind == "full_attention"]
        row["sliding_layers"] = sum("sliding" in kind for kind in layer_types)
        rope = getattr(text, "rope_parameters", None) or {}
        nested = [v for v in rope.values() if isinstance(v, dict)]
        row["rope_types"] = sorted({str(r.get("rope_type") or "default") for r in (nested or [rope])})
        row["rope_bases"] = len({r.get("rope_theta") for r in (nested or [rope])})
        out[checkpoint_id] = row
    return out


@dataclass
class Evidence:
    """What a tag or phrase is checked against: the facts, read once."""

    facts: dict

    @property
    def traits(self) -> dict:
        return self.facts["traits"]

    @property
    def relations(self) -> str:
        return "\n".join(r["text"] for r in self.facts.get("relations") or [])

    @property
    def checkpoints(self) -> list[dict]:
        return list((self.traits.get("checkpoints") or {}).values())

    def on(self, qualified: bool, holds: Callable[[dict], Any]) -> bool:
        """``holds`` on every checkpoint, or on some with a qualifier (``(3.2)``, ``(small sizes)``)."""
        rows = self.checkpoints
        return any(holds(c) for c in rows) if qualified else bool(rows) and all(holds(c) for c in rows)

    @property
    def activations(self) -> set[str]:
        return {str(c.get("hidden_activation") or c.get("hidden_act") or c.get("activation_function")
                    or c.get("activation") or c.get("dense_act_fn")) for c in self.checkpoints}  # Falcon: activation,
        # T5's: dense_act_fn

    @property
    def windowed(self) -> Callable[[dict], bool]:
        return lambda c: bool(c.get("sliding_window")) and c.get("use_sliding_window", True) is not False

    def renormalised(self) -> bool | None:
        """Whether the router's weights are renormalised over the chosen experts, as its proven relation says."""
        text = self.relations
        if "renormalised over the chosen experts" in text:
            return True
        if "not renormalised" in text or "softmax over the chosen logits" in text:
            return "softmax over the chosen logits" in text  # a softmax over the chosen ones sums to one
        if "renormalised when norm_topk_prob" in text:  # measured: the chosen weights sum to one on every token
            return bool(self.traits.get("renormalised"))
        return None

    @property
    def text_relations(self) -> str:
        """The proven relations of the text model's hosts (a vision encoder's windowed blocks are no text window)."""
        return "\n".join(r["text"] for r in self.facts.get("relations") or []
                         if not str(r.get("host", "")).startswith("model.vision"))

    def norms(self) -> str:
        """Every kind of norm measured in the blocks (q/k norms and a mixer's gated norm too) and the vision's."""
        t = self.traits
        return " / ".join(filter(None, (t.get("norm"), t.get("norm_kinds"), t.get("vision_norm"))))


class VisionEvidence(Evidence):
    """What a sentence about the vision tower is held to: the norm kind measured in its blocks."""

    def norms(self) -> str:
        return self.traits.get("vision_norm") or ""


def _ratio(e: Evidence, q: bool, sliding: int, full: int) -> bool:
    """``sliding`` sliding-window blocks to every ``full`` full-attention one, in that repeating pattern."""
    period = sliding + full
    return e.on(q, lambda c: c["sliding_layers"] and c["full_at"] == [
        i for i in range(c["layers"]) if i % period >= sliding])


def _pre_norm(e: Evidence) -> bool:
    """A relation normalises the block's input, and no sublayer's output is normed."""
    return bool(re.search(r"\w*norm\w*\(layer_input\)", e.relations)) and not {
        "post-norm", "sandwich norms"} & set(e.traits["block"])


Check = Callable[[Evidence, bool, re.Match], bool]

#: the tag vocabulary: pattern (the tag without its qualifier) -> (what it needs, the check)
TAGS: dict[str, tuple[str, Check]] = {
    "Hybrid": ("more than one kind of block", lambda e, q, m: len(e.traits["block_kinds"]) > 1),
    "Pre-norm": ("a norm before each sublayer, none after", lambda e, q, m: _pre_norm(e)),
    "Pre-norm \\(LayerNorm with bias\\)": ("a LayerNorm with a bias before each sublayer", lambda e, q, m:
                                           _pre_norm(e) and e.traits["norm_gain"] == "weight + bias"),
    "LayerNorm with bias": ("a LayerNorm with a bias", lambda e, q, m: e.traits["norm_gain"] == "weight + bias"),
    "LayerNorm without weight": ("a LayerNorm with no learned gain, its relation saying so", lambda e, q, m:
                                 e.traits["norm_gain"] == "none" and "no weight, no bias" in e.relations),
    "Post-norm inside the residual branch": ("post-norms", lambda e, q, m: "post-norm" in e.traits["block"]),
    "Sandwich norms": ("sandwich norms", lambda e, q, m: "sandwich norms" in e.traits["block"]),
    "1 \\+ weight norm gain": ("a 1 + weight norm gain", lambda e, q, m: e.traits["norm_gain"] == "1 + weight"),
    "Gated norm": ("a gated norm relation", lambda e, q, m: "gated_norm_output" in e.relations),
    "Grouped-query attention": ("fewer kv heads than heads", lambda e, q, m: "grouped-query" in e.traits["attention"]),
    "Multi-head attention": ("as many kv heads as heads", lambda e, q, m: not {"grouped-query", "latent attention"}
                             & set(e.traits["attention"])),
    "Multi-head latent attention": ("a latent attention", lambda e, q, m: "latent attention" in e.traits["attention"]),
    "Decoupled rotary keys": ("a rotary key part of its own", lambda e, q, m: "attention_keys_rope" in e.relations),
    "Value head narrower than query head": ("v_head_dim below the query head's", lambda e, q, m: e.on(q, lambda c: c.get(
        "v_head_dim", 0) < c.get("qk_nope_head_dim", 0) + c.get("qk_rope_head_dim", 0))),
    "Query/key norms": ("q/k norms", lambda e, q, m: "q/k norms" in e.traits["attention"]),
    "L2 query/key norm": ("L2-normed queries and keys", lambda e, q, m: e.on(q, lambda c: c.get("use_qk_norm"))),
    "Gated query": ("a gated attention output", lambda e, q, m: "gated output" in e.traits["attention"]),
    "(?:Q/K/V|QKV) bias|Attention bias(?:es)?": ("biased attention projections",
                                                 lambda e, q, m: e.traits.get("attention_bias")),
    "Attention sinks": ("a sink logit in the attention's relation", lambda e, q, m: "sink" in e.relations),
    "Chunked attention": ("chunked attention blocks", lambda e, q, m: "chunked_attention" in e.relations),
    "NoPE blocks": ("blocks without the rotary", lambda e, q, m: "not rotated" in e.relations),
    "Attention temperature tuning": ("attn_temperature_tuning", lambda e, q, m: e.on(
        q, lambda c: c.get("attn_temperature_tuning"))),
    "Attention softcap": ("softcapped scores", lambda e, q, m: "softcapped scores" in e.traits["block"]),
    "Final logit softcap": ("a final logit softcap", lambda e, q, m: "final logit softcap" in e.traits["block"]),
    "Eager attention only": ("eager attention as the only load", lambda e, q, m: not {"sdpa", "flash_attention_2"}
                             & set(e.facts.get("loads") or {})),
    "Partial rotary": ("a partial rotary", lambda e, q, m: any(
        x.startswith("partial rotary") for x in e.traits["attention"])),
    "Multi-query attention": ("one key and value head for every query head", lambda e, q, m:
                              "one key and one value head shared by every query head" in e.relations),
    "ALiBi": ("an ALiBi bias in the attention's relation", lambda e, q, m: "alibi[h, k] == slopes[h]" in e.relations),
    "LayerNorm on the embeddings": ("a norm between the embedding and the first block", lambda e, q, m:
                                    # BLOOM's norms the token embeddings, BERT's their sum with the other tables
                                    bool(re.search(r"embedding_norm_output == \w*layernorm\(token_embeddings",
                                                   e.relations))),
    "Interleaved rotary": ("a rotary in adjacent pairs", lambda e, q, m: "rotate_every_two" in e.relations),
    "One LayerNorm per block": ("the MLP reading the attention's normed input", lambda e, q, m:
                                "(one norm)" in e.relations),
    "Multimodal rotary": ("a multimodal rotary", lambda e, q, m: "multimodal rotary" in e.traits["attention"]),
    "YaRN rotary": ("yarn rope scaling", lambda e, q, m: e.on(q, lambda c: "yarn" in c["rope_types"])),
    "Scaled rotary \\((\\w+)\\)": ("that rope scaling", lambda e, q, m: e.on(False, lambda c: m[1] in c["rope_types"])),
    "Local and global rope bases": ("two rope bases", lambda e, q, m: e.on(q, lambda c: c["rope_bases"] > 1)),
    "Sliding-window attention": ("a sliding window", lambda e, q, m: e.on(q, e.windowed)),
    "Alternating sliding window": ("sliding and full blocks alternating", lambda e, q, m: _ratio(e, q, 1, 1)),
    "(\\d+):(\\d+) sliding window": ("that ratio of sliding to full blocks",
                                     lambda e, q, m: _ratio(e, q, int(m[1]), int(m[2]))),
    "Windowed attention": ("a windowed attention relation", lambda e, q, m: "window" in e.relations),
    "Scaled embedding": ("the embedding scaled", lambda e, q, m: "sqrt(hidden_size)" in e.relations),
    "Tied embeddings": ("tie_word_embeddings", lambda e, q, m: e.on(q, lambda c: c["tie_word_embeddings"])),
    "Learned absolute positions": ("positions added to the residual", lambda e, q, m: "absolute positions" in
                                   e.traits["block"]),
    "Fused (?:QKV|query_key_value).*": ("a fused qkv projection", lambda e, q, m: "qkv" in e.traits.get("fused", ())),
    "Fused gate/up projection": ("a fused gate/up projection", lambda e, q, m: "gate/up" in e.traits.get("fused", ())),
    "Parallel attention and MLP": ("a parallel block", lambda e, q, m: "parallel block" in e.traits["block"]),
    "Parallel attention and state-space mixer": ("attention and mixer added in one relation", lambda e, q, m: re.search(
        r"mamba\.attention_output.*self_attn\.attention_output", e.relations)),
    "(?:muP|µP) multipliers": ("multipliers", lambda e, q, m: "multipliers" in e.traits["block"]),
    "Scaled residual branches": ("residual_multiplier", lambda e, q, m: "residual_multiplier" in e.relations),
    "SwiGLU MLP": ("a gated MLP with silu", lambda e, q, m: "gated" in e.traits["mlp"] and "silu" in e.activations),
    "Clamped SwiGLU": ("a clamped SwiGLU relation", lambda e, q, m: "clamped_swiglu" in e.relations),
    "Gated MLP": ("a gated MLP", lambda e, q, m: "gated" in e.traits["mlp"]),
    "GELU MLP(?: \\(not gated\\))?": ("a plain MLP with a GELU", lambda e, q, m: e.traits["mlp"] == "plain" and _gelu(e)),
    "xIELU MLP(?: \\(not gated\\))?": ("a plain MLP whose activation's relation is xIELU's formula",
                                      lambda e, q, m: e.traits["mlp"] == "plain" and "xielu(" in e.relations),
    "No MLP": ("no MLP", lambda e, q, m: e.traits["mlp"] == "none"),
    "State-space model|Selective scan|Recurrent state": ("a state-space mixer's relations",
                                                         lambda e, q, m: "decay_rates" in e.relations),
    "Causal convolution": ("a conv1d relation", lambda e, q, m: "conv1d" in e.relations),
    "Mixture of experts": ("a mixture MLP", lambda e, q, m: "mixture" in e.traits["mlp"]),
    "Shared expert": ("a shared expert", lambda e, q, m: "shared expert" in e.traits["mlp"]),
    "Sigmoid-gated shared expert": ("a sigmoid gate on the shared expert", lambda e, q, m:
                                    "sigmoid(shared_expert_gate" in e.relations),
    "Sigmoid router": ("a sigmoid of the router logits", lambda e, q, m: "sigmoid(router_logits)" in e.relations),
    "Grouped top-k": ("top-k within groups", lambda e, q, m: "topk_group" in e.relations),
    "Dense then mixture": ("dense blocks, then mixture blocks", lambda e, q, m: re.fullmatch(
        r"(gated|plain) then mixture.*", e.traits["mlp"])),
    "Interleaved dense and mixture": ("interleave_moe_layer_step above 1", lambda e, q, m: e.on(
        q, lambda c: c.get("interleave_moe_layer_step", 1) > 1)),
    "Top-(\\d+) of (\\d+) experts": ("that many experts", lambda e, q, m: e.on(q, lambda c: c.get(
        "num_experts_per_tok") == int(m[1]) and int(m[2]) in {c.get(k) for k in (
            "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")})),
    "Top-k renormalized": ("a routing relation that renormalises", lambda e, q, m: e.renormalised() is True),
    "Top-k not renormalized": ("a routing relation that does not renormalise",
                               lambda e, q, m: e.renormalised() is False),
    "Softmax over the chosen experts": ("a softmax over the chosen logits",
                                        lambda e, q, m: "softmax over the chosen" in e.relations),
    "Vision-language": ("a vision encoder", lambda e, q, m: e.facts.get("vision") is not None),
    "Packed vision encoder|Variable resolution|Pooled projector": (
        "a vision encoder", lambda e, q, m: e.facts.get("vision") is not None),
    "DeepStack": ("a DeepStack relation", lambda e, q, m: "deepstack" in e.relations.lower()),
}

_QUALIFIER = re.compile(r"^(?P<tag>.*?)(?: \((?P<qualifier>[^()]*)\))?$")


def _entry(tag: str) -> tuple[str, re.Match, bool] | None:
    """The vocabulary entry a tag is, its match, and whether it carries a qualifier."""
    for pattern in TAGS:
        if found := re.fullmatch(pattern, tag):
            return pattern, found, False
    parts = _QUALIFIER.match(tag)
    if parts["qualifier"] is not None:
        for pattern in TAGS:
            if found := re.fullmatch(pattern, parts["tag"]):
                return pattern, found, True
    return None


#: a qualifier naming transformers releases (``Eager attention only (transformers <5.24)``): the tag holds on those,
#: where the page's locked release is, and is checked only under them (5.24 moved GPT-J onto sdpa too)
_RELEASES = re.compile(r"^transformers (?P<spec>[<>=!~].*)$")


def _on_release(family: Family, tag: str) -> bool:
    """Whether ``tag`` is checked under the installed release: always, unless its qualifier names releases
    (``transformers <spec>``) the installed one is not in; a qualifier that is no version specifier is refused."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    qualifier = _QUALIFIER.match(tag)["qualifier"]
    named = _RELEASES.match(qualifier or "")
    if named is None:
        return True
    try:
        releases = SpecifierSet(named["spec"])
    except InvalidSpecifier:
        raise ClaimError(family.family, f"tag {tag!r}", f"{named['spec']!r} is not a version specifier "
                                                        "(write e.g. 'transformers <5.24')") from None
    import transformers

    return releases.contains(transformers.__version__, prereleases=True)


#: how the vocabulary's patterns read in an error
SPELLED = {"(?:Q/K/V|QKV) bias|Attention bias(?:es)?": "Q/K/V bias, QKV bias, Attention bias(es)",
           "Scaled rotary \\((\\w+)\\)": "Scaled rotary (<rope_type>)",
           "(\\d+):(\\d+) sliding window": "<sliding>:<full> sliding window",
           "Fused (?:QKV|query_key_value).*": "Fused QKV ..., Fused query_key_value ...",
           "GELU MLP(?: \\(not gated\\))?": "GELU MLP", "(?:muP|µP) multipliers": "µP multipliers",
           "Top-(\\d+) of (\\d+) experts": "Top-<k> of <n> experts",
           "xIELU MLP(?: \\(not gated\\))?": "xIELU MLP"}


def vocabulary_table() -> str:
    """The tag vocabulary as the contributing page lists it (tests/test_meaning.py keeps the page's copy equal)."""
    rows = [f"| `{_spelled(p)}` | {needs} |" for p, (needs, _) in TAGS.items()]
    return "\n".join(["| tag | holds when the facts show |", "|---|---|", *rows])


def _spelled(pattern: str) -> str:
    return SPELLED.get(pattern) or re.sub(r"\\(.)", r"\1", pattern).replace("|", ", ")


def vocabulary() -> str:
    return ", ".join(_spelled(p) for p in TAGS)


def check_tags(family: Family, facts: dict) -> None:
    """Every tag is in the vocabulary and holds on the facts; every checkable tagline phrase holds; the
    notes' routing words agree with the routing relation."""
    evidence = Evidence(facts)
    layouts = [evidence, *variant_evidence(facts)]
    for index, tag in enumerate(family.tags):
        entry = _entry(tag)
        if entry is None:
            raise ClaimError(family.family, f"tag {tag!r}", f"tags[{index}] is not a tag the build can check; use one "
                                                            f"of: {vocabulary()} (a '(qualifier)' may follow one)")
        pattern, found, qualified = entry
        needs, holds = TAGS[pattern]
        if not _on_release(family, tag):  # a release-qualified tag says nothing of the installed release
            continue
        # a tag holds on every layout the page covers (the tiny: recipe's and each variant's), a qualified one on some
        if not (any if qualified else all)(holds(layout, qualified, found) for layout in layouts):
            raise ClaimError(family.family, f"tag {tag!r}", f"needs {needs}, which the measured traits "
                                                            f"{_shown(facts['traits'])} do not show")
    check_phrases(family.family, "tagline", " ".join(family.tagline.split()), evidence, PHRASES + ROUTING_PHRASES)
    check_numbers(family, "tagline", family.tagline)
    vision = VisionEvidence(facts) if facts["traits"].get("vision_norm") else None
    for field, text in notes_prose(family):
        # each sentence held to what it describes (generator/facts/prose_scope.py)
        for sentence in sentences(text):
            where = scope(family.family, family.path.parent, field, sentence)
            if where == "text":
                check_phrases(family.family, field, sentence, evidence, PHRASES + ROUTING_PHRASES)
            elif where == "vision" and vision is not None:
                check_phrases(family.family, field, sentence, vision, NORM_PHRASES)
        check_numbers(family, field, text)


def variant_evidence(facts: dict) -> list[Evidence]:
    """Each variant's facts as evidence (generator/facts/variants.py): its measured layout over the family's traits,
    its own proven relations; the full-size checkpoints' settings are the family's."""
    return [Evidence({**facts, "traits": {**facts["traits"], **v["layout"]}, "relations": v["relations"]})
            for v in facts.get("variants") or []]


def _shown(traits: dict) -> dict:
    return {k: v for k, v in traits.items() if k != "checkpoints"}


def notes_prose(family: Family) -> list[tuple[str, str]]:
    """The notes' prose, per file: what is outside code blocks and ``{{ }}`` expressions."""
    out = []
    for key, default in (("notes", f"{family.family}.notes.md"), ("vision_notes", f"{family.family}.vision.md")):
        name = family.get(key, default)  # the files the notes default to when the YAML names none
        if not isinstance(name, str):
            continue
        path = family.path.parent / name
        if not path.is_file():
            continue
        out.append((name, prose(path.read_text(encoding="utf-8"))))
    return out
