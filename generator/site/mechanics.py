"""The Mechanics page: each mechanic a family can have, the relation that proves it, and the families that have it.

Generated from the facts alone (no torch): a family has a mechanic when one of its proven relations (the facts'
``relations``, each checked on every block under every load) states it, recognised by the words that relation's
text carries (``Mechanic.marker``). The page shows, per family, the relation as proven there, the host it is
proven on and the loads it held under, so a row cannot claim a mechanic the build did not prove. A mechanic no
family's facts prove is left off the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from generator.site.diagrams import Links
from generator.site.escaping import slug
from generator.site.interiors import interior

#: the kinds of mechanism, in the page's order, each with the folder of nncanon/parts/ its shared parts live in: the
#: page and the library group mechanisms alike, so a new one's place is the same in both
KINDS = {"Text blocks": "blocks", "Attention variants": "attention", "Recurrent mixers": "recurrent",
         "Vision lines": "vision", "Encoders": "encoders"}


@dataclass(frozen=True)
class Mechanic:
    name: str
    #: what it is, in one sentence, for a reader who knows Llama's block
    what: str
    #: a regex a proving relation's text matches (the words the shared part's relation writes)
    marker: str
    #: its kind (a key of KINDS)
    kind: str


MECHANICS = (
    Mechanic("Parallel attention and MLP", "The attention and the MLP read the same block input and both outputs are "
             "added to the stream in one sum: no tensor is the stream after the attention add.",
             r"one sum, both sublayers reading layer_input", kind="Text blocks"),
    Mechanic("One LayerNorm per block", "The MLP reads the attention's own normed input: the block has no second norm.",
             r"\(one norm\)", kind="Text blocks"),
    Mechanic("Learned absolute positions", "A learned table of position vectors added to the token embeddings before "
             "the first block.", r"position_embeddings == embed_positions\.weight\[p\]", kind="Text blocks"),
    Mechanic("Learned positions offset by 2", "The position table starts two rows in: position p reads row p + 2.",
             r"embed_positions\.weight\[p \+ 2\]", kind="Text blocks"),
    Mechanic("ALiBi", "No position embedding: each head adds to its scores a bias linear in the key's position, "
             "with a slope of its own.", r"alibi\[h, k\] == slopes\[h\]", kind="Attention variants"),
    Mechanic("LayerNorm on the embeddings", "The token embedding is normed before the first block reads it.",
             r"embedding_norm_output == embed_layernorm\(token_embeddings\)", kind="Text blocks"),
    Mechanic("Partial rotary, adjacent pairs", "The rotary embedding turns the first dimensions of each head in "
             "adjacent pairs (2j with 2j+1, rotate_every_two); the rest pass through.", r"rotate_every_two", kind="Attention variants"),
    Mechanic("Partial rotary, halves", "The rotary embedding turns the first dimensions of each head in halves "
             "(j with j + d/2, rotate_half); the rest pass through.",
             r"rotate_half|\(j, j \+ rotary_ndims/2\)", kind="Attention variants"),
    Mechanic("Multi-query attention", "One key head and one value head serve every query head.",
             r"one key and one value head shared by every query head", kind="Attention variants"),
    Mechanic("Local attention windows", "Some blocks attend only to the last window_size keys.",
             r"on a local block .* window_size", kind="Attention variants"),
    Mechanic("Queries scaled before the call", "The queries are multiplied by head_dim^-0.5 before the attention, "
             "which then does not scale the scores.", r"OPT scales the queries", kind="Attention variants"),
    Mechanic("Fused query_key_value", "One projection computes queries, keys and values, split in the forward.",
             r"== (query_key_value|c_attn|qkv_proj)\(input\)", kind="Attention variants"),
    Mechanic("Mixture of experts", "A router picks the top-k experts per token; their weighted outputs are summed.",
             r"expert_indices == top_k", kind="Text blocks"),
    Mechanic("Shared expert", "An always-on expert added to the routed ones, scaled by a sigmoid gate per token.",
             r"shared_expert_output == sigmoid", kind="Text blocks"),
    Mechanic("Multiplied residual branches (µP)", "Multipliers on the embedding, the branches or the logits.",
             r"multiplier", kind="Text blocks"),
    Mechanic("Keys and values shared across blocks", "The last blocks compute no keys or values: each attends over "
             "those of an earlier block of its kind.", r"layers\[kv_source\(i\)\]", kind="Attention variants"),
    Mechanic("Image features scattered at the image tokens", "A vision encoder's output, one row per image token, "
             "replaces the token embedding at each image placeholder before the first block (the shared vision line).",
             r"image_features at the image tokens", kind="Vision lines"),
    Mechanic("Tower read at a feature layer", "The projector reads a chosen block's output of the vision tower "
             "(vision_feature_layer), not its last, with or without the class token.",
             r"hidden state vision_feature_layer", kind="Vision lines"),
    Mechanic("Average-pooling projector", "Each image's patch grid is averaged in squares, normed and projected: "
             "fewer image tokens than patches.", r"avg_pool\(tower_output", kind="Vision lines"),
    Mechanic("Pixel-shuffle connector", "Each square of neighbouring patches is folded into one wider row, then "
             "projected: one image token per square.", r"pixel_shuffle\(tower_output", kind="Vision lines"),
    Mechanic("Spatial patch merger", "Each merge block of neighbouring patches is folded into one row and passed "
             "through an MLP: one image token per merge block.", r"merge block's spatial_merge_size² patches folded into one row|merge blocks put back in the processor's order", kind="Vision lines"),
    Mechanic("AnyRes tiles", "An image is read as a base tile of the whole image plus a grid of tiles at the best "
             "resolution, the grid's features unpadded and closed by a newline per row.",
             r"tile_features of its base tile", kind="Vision lines"),
    Mechanic("DeepStack", "Vision blocks' intermediate outputs are projected and added to the first text blocks' "
             "stream at the image tokens.", r"deepstack_projectors\[j\]", kind="Vision lines"),
    Mechanic("Bidirectional image spans", "In a causal text model, the tokens of one image attend to each other "
             "both ways.", r"both are tokens of one image's span", kind="Vision lines"),
    Mechanic("Gated cross-attention to the image", "Some blocks attend from the text stream to the vision states "
             "instead of to the text, each add scaled by tanh of a learned gate.",
             r"layer_input \+ tanh\(\w+\) · cross_attn\.attention_output", kind="Vision lines"),
    Mechanic("Per-layer input embeddings", "Each block is called with a small embedding of its own, from a second "
             "table and a projection of the token embeddings, and adds a gated projection of it to the stream.",
             r"embed_tokens_per_layer\.weight\[input_ids\]", kind="Text blocks"),
)


def mechanics_table(families: list[dict]) -> list[dict]:
    """One entry per mechanic some family proves, kind by kind (KINDS' order): its name, what it is, its kind, per
    family (sorted) the first relation of that family whose text states it, with the host and the loads it held
    under, and ``chain``: its chain (:func:`chain`) in the first family whose block kinds hold it, else None."""
    rows = []
    for mechanic in MECHANICS:
        having = []
        for facts in sorted(families, key=lambda f: f["family"]):
            proving = [r for r in facts.get("relations") or [] if re.search(mechanic.marker, r["text"])]
            if proving:
                first = proving[0]
                having.append({"family": facts["family"], "host": first["host"], "text": first["text"],
                               "loads": sorted(first.get("errors") or {}), "facts": facts})
        if having:
            drawn = next(filter(None, (chain(f["facts"], f["host"], f["text"], f"nc-mech-{slug(mechanic.name)}")
                                       for f in having)), None)
            for f in having:
                del f["facts"]
            rows.append({"name": mechanic.name, "what": mechanic.what, "kind": mechanic.kind, "families": having,
                         "chain": drawn})
    order = list(KINDS)
    return sorted(rows, key=lambda row: order.index(row["kind"]))  # stable: each kind's in MECHANICS order


def _inside(row: str, host: str) -> bool:
    return row.rpartition(".")[0] == host or row.startswith(host + ".")


def chain(facts: dict, host: str, text: str, prefix: str) -> dict | None:
    """The chain of the values a mechanic serves, in one family: every value of the host its relation holds on (and
    of that host's children), in the order one forward of the first block kind that proves the relation produced
    them (the facts' ``sequence``), a solid edge for each pair of them one of the block's relations ties (the facts'
    ``dataflow``, collected from the relations the build proved, the ties generator/facts/chain.py joins), drawn
    from the value produced first, and a dashed edge into a value no relation ties to an earlier one, from the value
    produced just before it: the forward feeds it, nothing proves how. A relation no block kind holds (the root's,
    the vision tower's) is drawn from the proof chain's graph (:func:`_outside_blocks`); None where the facts hold
    none."""
    kinds = facts.get("stack", {}).get("block_kinds", [])
    kind = next((k for k in kinds if any(r["text"] == text for r in k.get("relations") or [])), None)
    sequence = [row for row in (kind or {}).get("sequence") or [] if _inside(row, host)]
    if not sequence:
        return _outside_blocks(facts, host, prefix)
    flow = [pair for pair in kind.get("dataflow") or [] if _inside(pair[0], host) and _inside(pair[1], host)]
    where = f"{facts['family']}'s {kind.get('label') or kind['kind']} block"
    return _drawn(sequence, flow, prefix, facts["family"], kind["kind"], where,
                  f"every value of {host.removeprefix('model.')}")


def _outside_blocks(facts: dict, host: str, prefix: str) -> dict | None:
    """A mechanic of the root or the vision tower: its host's own values and the values one relation ties them to,
    in the order the forward first produced them, and those ties: the proof chain's graph the build checked
    (generator/facts/chain.py, the facts' ``proof_chain``, under the load that serves most of them)."""
    graphs = (facts.get("proof_chain") or {}).values()
    # the load serving most of the host's values (an image-text line's vision tower: its image load's)
    graph = max(graphs, key=lambda g: sum(row.rpartition(".")[0] == host for row in g["order"]),
                default={"order": [], "edges": []})
    own = {row for row in graph["order"] if row.rpartition(".")[0] == host}
    edges = [pair for pair in graph["edges"] if own & set(pair)]
    near = {row for pair in edges for row in pair}
    sequence = [row for row in graph["order"] if row in own | near]
    if not own:
        return None
    name = "the root" if host == "model" else host.removeprefix("model.")
    return _drawn(sequence, edges, prefix, facts["family"], None, facts["family"],
                  f"every value of {name} and the values a relation ties them to")


def _drawn(sequence: list[str], flow: list, prefix: str, family: str, kind: str | None, where: str,
           what: str) -> dict:
    lookup = {(row.rpartition(".")[0], row.rpartition(".")[2]): {} for row in sequence}
    drawing = interior({"sequence": sequence, "dataflow": flow}, lookup, Links(), prefix)
    path = {b.id: b.path.replace("layers[i]", "block", 1) for b in drawing["boxes"]}
    edges = [{"source": path[a["from"]], "target": path[a["to"]], "how": a["how"],
              "why": "a relation ties them" if a["how"] == "flow" else "the forward feeds it; no relation ties it to an "
                                                                        "earlier value"} for a in drawing["arcs"]]
    solid = sum(e["how"] == "flow" for e in edges)
    return {"drawing": drawing, "edges": edges, "family": family, "kind": kind,
            "title": f"The chain in {where}: {what}",
            "head": f"Its chain in {where}: {what}, top to bottom in the order one forward produced them (measured)",
            "desc": f"{len(drawing['boxes'])} values, {solid} edges a relation proves, {len(edges) - solid} the "
                    "forward feeds with no relation: " + "; ".join(f"{e['source']} to {e['target']}"
                                                                 + ("" if e["how"] == "flow" else " (fed)")
                                                                 for e in edges)}
