"""The proof chain: every value a page lists lies on one chain of relations from the inputs to the logits.

``proof.py`` requires each value to be proven by *some* relation; that alone lets two proven halves float apart.
The shared attention once proved queries·keys -> ``attention_head_outputs`` and ``attention_premix`` ->
``attention_output`` with nothing joining the two: on Llama they are one tensor, on differential attention (two
softmax maps subtracted, a per-head norm) they are not, and the page would still have called the premix "every
head's output side by side". So the build draws the graph of what the relations tie and refuses a gap.

The graph, per load, on the tiny model (concrete paths, every block):

- nodes: every value the load serves on every host (``model.layers[3].self_attn.attention_premix``), and every
  module call a relation reads (``model.layers[3].self_attn.input``: the tensor the attention is called with),
  which joins a relation stated at a module's input to one stated at the value that feeds it;
- edges: the pairs of terms one relation ties (``generator/facts/dataflow.ties``: two sides of one ``==``), plus
  each term a relation reads but its text does not place, tied to what the relation proves ("what self_attn is
  called with" reads ``self_attn.input``); ``layers[*].x`` pairs block by block, ``layers[i+1]`` one block on;
  only relations whose terms this load serves (a skipped relation proves nothing here);
- direction: each edge runs from the value the forward produced first (``nncanon.guards.order``, measured): blocks in
  order, the root's values before or after the blocks as the forward produced them; an encoder-decoder's two stacks
  (its family's ``STACKS``) in the order the forward ran them, each stack's own host (``model.encoder``: its
  embeddings, what it returns) before or after that stack's blocks. A module call's input sits
  just before its host's first value, its output just after its last; a node whose place is not measured (a norm
  module's input, the vision tower's values under a text prompt) joins both ways.

The rule:

- a value on the chain (the forward uses it, this call: not derived for the reader, not only handed to the next
  call's cache) is reached from an input (a root value produced before the first block) and reaches an output
  (a root value produced after the last block, the logits among them), along edges in the forward's direction;
- a value off the chain (derived for the reader: attention_head_results; a state handed to the next call, or
  handed in by the last one, None on a prompt; an integer bookkeeping value) is tied, any way round, to a value
  on it: no island.

A gap is one line naming the two values not joined: the last value the input reaches before the gap and the first
value past it that reaches the output (both in the block where it first occurs), as the contributor must state
the relation that computes one from the other. It has no exceptions. The survey (``generator/survey``) draws the same
graph over the relations that held on a surveyed model type, so its row says which link broke.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from generator.facts.dataflow import ties
from generator.facts.proof import RelationError, envoys, mixer_of, pattern, targets, unavailable

#: the root's stage before and after the blocks, in the order key (stage, block, position)
_BEFORE, _AFTER = -1, math.inf
#: ``layers[i+1].name`` (or ``j+1``) in a relation's text: the term ``layers[*].name`` is one block on from the other
#: side
_NEXT = re.compile(r"layers\[[ij]\+1\]\.(\w+)")
_INTEGERS = ("Tokens", "ExpertIndices", "scalar", "ImageTokenMask", "Mask", "Positions")


def _path(envoy: Any) -> str:
    return getattr(envoy, "_std_path", "") or envoy.path


def _chain_ties(relation: Any) -> set[tuple[str, str]]:
    """:func:`ties`, plus each read term the text does not place, tied to what the relation proves."""
    out = ties(relation)
    placed = {t for pair in out for t in pair}
    out |= {(term, proved) for term in relation.reads if term not in placed for proved in relation.proves
            if proved != term}
    return out


def _pairs(relation: Any, a: tuple[list[str], bool], b: tuple[list[str], bool], ta: str, tb: str) -> list:
    """Rows of two tied terms, paired: block by block for two ``layers[*]`` terms (one block on for the one the
    text writes ``layers[i+1]``), else every row of one with every row of the other."""
    (ra, many_a), (rb, many_b) = a, b
    if many_a and many_b:
        later = set(_NEXT.findall(relation.text))
        if tb.rsplit(".", 1)[-1] in later:  # zip stops at the shorter: DeepStack's few blocks against every block
            return list(zip(ra, rb[1:]))
        if ta.rsplit(".", 1)[-1] in later:
            return list(zip(ra[1:], rb))
        return list(zip(ra, rb))
    return [(x, y) for x in ra for y in rb]


class Graph:
    """The ties among one load's values: nodes with their place in the forward, edges, and which values are on the
    chain (the rest must only be tied to it)."""

    def __init__(self) -> None:
        self.place: dict[str, tuple | None] = {}
        self.values: dict[str, bool] = {}  # value row -> on the chain
        self.edges: dict[str, set[str]] = defaultdict(set)  # undirected
        self.forward: dict[str, set[str]] = defaultdict(set)  # in the forward's direction

    def tie(self, a: str, b: str, same: bool = False) -> None:
        """``same``: one tensor, read at two names (a value and the module call it is read at): both ways."""
        if a == b:
            return
        self.edges[a].add(b)
        self.edges[b].add(a)
        pa, pb = self.place.get(a), self.place.get(b)
        if same or pa is None or pb is None or pa == pb:  # one tensor, or not measured: both ways
            self.forward[a].add(b)
            self.forward[b].add(a)
        elif pa < pb:
            self.forward[a].add(b)
        elif pb < pa:
            self.forward[b].add(a)

    def reach(self, start: set[str], edges: dict[str, set[str]]) -> set[str]:
        seen, todo = set(start), list(start)
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen


def _module_io(envoy: Any, locator: Any) -> str | None:
    """The module call a value is read whole at (``model.layers[3].mlp.input``), as a relation's term names it."""
    from nncanon.core.locators import FIRST, Tap

    # its first element (0: the first positional input, the first of a tuple output) is what a relation's
    # ``first(output)`` reads
    if isinstance(locator, Tap) or locator.ops or locator.attr or locator.element not in (None, FIRST, 0):
        return None
    try:
        base = locator.base(envoy)
    except (AttributeError, KeyError):
        return None
    return None if base is None else f"{_path(base)}.{locator.io}"  # None: a module this layout lacks


def _serves(envoy: Any, value: Any) -> bool:
    """Whether this load serves the value on this host: its conditions hold and the host has it on this block (the
    host's own check: DeepStack's output exists on the first blocks only)."""
    from nncanon.core.values import Unavailable

    try:
        envoy._require(value)
    except Unavailable:
        return False
    return True


def _on_chain(value: Any) -> bool:
    """Whether the forward uses the value in this call (else it only has to be tied to the chain): this call's
    outputs depend on it (not derived for the reader, not only handed on to the next call), it is not a state handed
    in by the last one (``State | None``: None on a prompt), not integer bookkeeping."""
    # ``gradient``: why this call's outputs cannot depend on it (derived, handed on, integers, a stack made for the
    # reader), as support() says it
    return value.gradient is None and not (value.layout.name in _INTEGERS or "| None" in value.layout.name)


def _node(row: str) -> str:
    """A module call's arguments (``inputs``) and its first input (``input``) are one node: the call's inputs."""
    return row[:-1] if row.endswith(".inputs") else row


def _relations(envoy: Any) -> list[tuple[str, Any]]:
    """(the text as the host states it, the relation on this envoy) of every relation :func:`relations_of` gives:
    the survey keys what held by the first."""
    from nncanon.parts.weights import relations as weight_relations

    mixer = mixer_of(envoy)
    own = [(relation.text, relation.on(mixer)) for relation in getattr(type(envoy), "RELATIONS", ())]
    return own + [(relation.text, relation) for relation in weight_relations(envoy)]


def graph(model: Any, held: Callable[[str], bool] | None = None, fallback: Callable | None = None) -> Graph:
    """The tie graph of the values ``model`` serves under the load it was entered in (see the module's docstring);
    ``held("host pattern: relation text")``: only the relations it says held (the survey's), else every one (the
    build's, where one that does not hold has already failed it). ``fallback(host, name, block)``: where another load
    of the same family produced a value this load's forward could not be measured for (the image load's)."""
    from nncanon.core.hosts import index
    from nncanon.guards.order import positions

    position = positions(model)
    g = Graph()
    hosts = envoys(model)
    measured: dict[str, tuple] = {}
    # an encoder-decoder's stacks (the family's STACKS) ordered as the forward ran them; any other model's blocks are
    # one stack, whatever their paths (a vision tower's blocks are placed by their index, as the text blocks are)
    stacks = _stacks(hosts) if getattr(model.family_module, "STACKS", None) else set()
    for envoy in hosts:
        path = _path(envoy)
        block = index(path) if path != "model" else None
        stage = _in_stack(stacks, path, block)
        for value in type(envoy).values():
            if not _serves(envoy, value):
                continue
            row = f"{path}.{value.name}"
            g.values[row] = _on_chain(value)
            at = position(pattern(path), value.name, block)
            if not math.isfinite(at) and fallback is not None:
                at = fallback(pattern(path), value.name, block)
            if math.isfinite(at):
                measured[row] = (stage, at)
    # the stacks in the order the forward ran them (an encoder's before its decoder's), each one's blocks in order
    rank = {"": 0} if not stacks else {stack: i for i, stack in enumerate(sorted(
        stacks, key=lambda s: min((at for (st, at) in measured.values() if st is not None and st[0] == s),
                                  default=math.inf)))}
    # the root's values before the first block's are its inputs, after it its outputs
    first = min((at for (stage, at) in measured.values() if stage is not None), default=math.inf)
    # a stack's own host: its embeddings before its first block, what it returns after its last
    starts = {stack: min((at for (st, at) in measured.values() if st is not None and st[0] == stack and st[1] >= 0),
                         default=math.inf) for stack in stacks}
    measured = {row: ((st[0], math.inf if st[1] == -1 and at > starts[st[0]] else st[1]), at) if st is not None
                else (st, at) for row, (st, at) in measured.items()}
    for row, (stage, at) in measured.items():
        g.place[row] = (0, (rank[stage[0]], stage[1]), at) if stage is not None else \
            (_BEFORE if at < first else _AFTER, (0, 0), at)
    # values read at one point, views of one tensor (the keys and their rotary columns), were produced at once: a
    # relation between them runs both ways
    for envoy in hosts:
        path = _path(envoy)
        at_one: dict[str, list[str]] = defaultdict(list)
        for value in type(envoy).values():
            if f"{path}.{value.name}" in g.place:
                at_one[repr(value.locator)].append(f"{path}.{value.name}")
        for rows_ in at_one.values():
            low = min(g.place[row] for row in rows_)
            g.place.update({row: low for row in rows_})
    # a module call's input just before its host's first value, its output just after its last
    for envoy in hosts:
        path = _path(envoy)
        mine = [g.place[f"{path}.{v.name}"] for v in type(envoy).values() if g.place.get(f"{path}.{v.name}")]
        if mine:
            low, high = min(mine), max(mine)
            g.place[f"{path}.input"] = (*low[:2], low[2] - 0.5)
            g.place[f"{path}.output"] = (*high[:2], high[2] + 0.5)
    # a value read whole at a module's input or output is that module call's tensor: one node with it
    same: list[tuple[str, str]] = []
    for envoy in hosts:
        path = _path(envoy)
        for value in type(envoy).values():
            row, io = f"{path}.{value.name}", _node(_module_io(envoy, value.locator) or "")
            if row in g.values and io:
                if row in g.place:  # the call's tensor is where the first value read at it was produced
                    g.place[io] = min(g.place[row], g.place.get(io, g.place[row]))
                same.append((row, io))
    for row, io in same:
        g.tie(row, io, same=True)
    for envoy in hosts:
        for text, relation in _relations(envoy):
            if held is not None and not held(f"{pattern(_path(envoy))}: {text}"):
                continue
            try:
                found = {term: targets(model, envoy, term) for term in set(relation.reads) | set(relation.proves)}
            except (AttributeError, IndexError):
                continue  # proof.py already refused a term that does not resolve
            if any(unavailable(model, e, attr) for term, (on, attr, _) in found.items() if term in relation.reads
                   for e in on):
                continue  # a relation this load cannot run proves nothing here
            rows = {term: ([f"{_path(e)}.{attr}" for e in on], many) for term, (on, attr, many) in found.items()}
            for a, b in _chain_ties(relation):
                for x, y in _pairs(relation, rows[a], rows[b], a, b):
                    g.tie(_node(x), _node(y))
    return g


def _stacks(hosts: list) -> set[str]:
    """The stacks of blocks, by the path before their ``layers[n]`` (``model.`` for a decoder-only model's one;
    ``model.encoder.`` and ``model.decoder.`` for an encoder-decoder's two)."""
    return {found.group(1) for envoy in hosts if (found := re.match(r"(.*?)layers\[\d+\]", _path(envoy)))}


def _in_stack(stacks: set[str], path: str, block: int | None) -> tuple[str, int] | None:
    """(stack, block) of a host: a block's, or -1 for a host that holds a stack of its own (``model.encoder``: its
    embeddings run before its first block); None for the root, whose values are the inputs and the outputs."""
    if block is not None:
        return (re.match(r"(.*?)layers\[\d+\]", path).group(1) if stacks else ""), block
    own = f"{path}."
    return (own, -1) if path != "model" and own in stacks else None


def _block_order(g: Graph, row: str) -> tuple:
    place = g.place.get(row)
    return place if place is not None else (math.inf, (0, 0), math.inf)


def gap(g: Graph) -> tuple[str, str] | None:
    """The first two values not joined (in the forward's order), or None when every value lies on the chain."""
    sources = {row for row, on in g.values.items() if (g.place.get(row) or (0,))[0] == _BEFORE}
    sinks = {row for row, on in g.values.items() if (g.place.get(row) or (0,))[0] == _AFTER}
    backward: dict[str, set[str]] = defaultdict(set)
    for a, targets_ in g.forward.items():
        for b in targets_:
            backward[b].add(a)
    fed, feeding = g.reach(sources, g.forward), g.reach(sinks, backward)
    chain = {row for row in fed & feeding}
    tied = g.reach({row for row in chain if row in g.values}, g.edges)
    ordered = sorted(g.values, key=lambda row: _block_order(g, row))
    dead = [row for row in ordered if g.values[row] and row in fed and row not in feeding]
    unfed = [row for row in ordered if g.values[row] and row not in fed]
    island = [row for row in ordered if not g.values[row] and row not in tied]
    first = min((row for row in (dead[:1] + unfed[:1] + island[:1])), key=lambda row: _block_order(g, row),
                default=None)
    if first is None:
        return None
    block = _block_order(g, first)[:2]
    here = [row for row in ordered if _block_order(g, row)[:2] == block]
    unfed, dead = [r for r in unfed if r in here], [r for r in dead if r in here]
    at = {row: i for i, row in enumerate(here)}
    if unfed:  # the break: the last value the inputs reach before it, and the first one past it
        after = unfed[0]
        before = next((r for r in reversed(here[:at[after]]) if r in dead),
                      next((r for r in reversed(here[:at[after]]) if g.values[r] and r in fed), "the inputs"))
        return before, after
    if dead:  # a branch that stops: its last value, and the next value on the chain
        stop = dead[-1]
        return stop, next((r for r in here[at[stop] + 1:] if r in chain), "the logits")
    row = island[0]
    return next((r for r in reversed(here[:at[row]]) if r in chain), "the inputs"), row


def names(found: tuple[str, str]) -> tuple[str, str]:
    """A gap's two values by their standard names, or by their blocks where those are one name."""
    a, b = (pattern(row) for row in found)
    return (a, b) if a != b else found


def joined(found: tuple[str, str]) -> str:
    """The line naming a gap's two values."""
    a, b = names(found)
    return f"{a} and {b} are not joined by any relation"


def survey_gap(model: Any, args: tuple, kwargs: dict, held: Callable[[str], bool]) -> str | None:
    """The survey's row: where the chain of the relations that held breaks (None: it is whole), on the forward
    order measured on the survey's own token ids (its models have no tokenizer)."""
    from nncanon.guards.order import measure_on

    measure_on(model, args, kwargs)
    found = gap(graph(model, held))
    return None if found is None else joined(found)


def drawn(g: Graph) -> dict:
    """The graph as a page draws it (the Mechanics page's chains): ``order``, each value by its standard name in the
    order the forward first produced it, and ``edges``, each pair of values one relation ties directly (a tie to a
    module call's tensor, which is no value, is left out), from the one produced first, by their standard names."""
    order = list(dict.fromkeys(pattern(row) for row in sorted(g.values, key=lambda row: _block_order(g, row))))
    at = {name: i for i, name in enumerate(order)}
    edges = {(pattern(a), pattern(b)) for a in g.values for b in g.forward.get(a, ())
             if b in g.values and at[pattern(a)] < at[pattern(b)]}
    return {"order": order, "edges": sorted([list(e) for e in edges])}


def check_chain(family: Any, model: Any, label: str, fallback: Callable | None = None) -> Graph:
    """Refuse, in one line, a load whose values do not lie on one chain of relations; else its graph."""
    g = graph(model, fallback=fallback)
    found = gap(g)
    if found is None:
        return g
    raise RelationError(family.family, "proof chain", f"{joined(found)} (under {label}): state the relation that "
                                                       f"computes one from the other")


def check_family_chain(family: Any, models: Any) -> dict:
    """After the relations hold and every value has one (``proof.prove_family``): the chain under every load, each
    value placed where its load's forward produced it, else where the default load's did (the text blocks' order
    does not change with the load; a model with a processor and no tokenizer cannot be measured on the prompt).
    Returns each load's graph as pages draw it (:func:`drawn`), by the load's label."""
    from nncanon.guards.order import positions

    default = models.loads[models.default]
    with default.within(models.get(models.default)):
        fallback = positions(models.get(models.default))
    shown = {}
    for load in models.all:
        model = models.get(load.label)
        with load.within(model):
            shown[load.label] = drawn(check_chain(family, model, load.label, fallback))
    return shown
