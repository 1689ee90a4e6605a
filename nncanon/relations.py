"""Relations: what a value means, stated as an equation the build checks on the model.

A name is a promise: ``layer_mid`` promises "the residual stream after the attention add". The
relation ``layer_input + self_attn.attention_output == layer_mid`` is that promise in a form a
forward can check. Every host class carries ``RELATIONS``; each relation says which values it
proves (their meaning), which terms it reads relative to the host (values, ``child.value``, a
module's ``input``/``output``), and how to compute its two sides from what was read, by the module's
own math (its norm, its projection, its router), never by the value plumbing under test. The
encyclopedia's build reads every term on every block under every load and fails naming the
relation and the block where one does not hold; a value no relation proves fails the build too
(``generator/proof.py``).

A family whose block differs (sandwich norms, a parallel block, a softcap) gives its host class its
own ``RELATIONS``, which the page shows; it cannot inherit a relation that does not hold, because the
build checks it.

Terms: ``{mixer}`` is the block's sequence mixer (``self_attn`` or ``linear_attn``, whichever the
block has); ``model.x`` reads the root's ``x``; ``layers[*].x`` reads ``x`` on every block, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .precision import STEP, SUBBLOCK

Pairs = list[tuple[Any, Any]]


@dataclass(frozen=True)
class Relation:
    #: the equation as the page shows it, in standard names
    text: str
    #: the terms (relative to the host) whose meaning this relation states
    proves: tuple[str, ...]
    #: every term the check reads, relative to the host
    reads: tuple[str, ...]
    #: (host envoy, {term: what was read}) -> [(computed, read), ...]; both sides of each pair must agree
    compute: Callable[[Any, dict[str, Any]], Pairs]
    #: the largest error allowed, relative to the read side's scale (at least 1): a level of the float32 error
    #: model (nncanon/precision.py) for the chain of roundings the check recomputes
    tolerance: float = STEP
    #: (stream in, what is added, stream out[, the stream the branch reads]): a residual add the block
    #: diagram draws; the fourth element, when it is the block's input, marks a parallel branch
    adds: tuple[str, ...] | None = None
    #: False: the check recomputes with other shapes than the forward (a token at a time, a batch at once), so
    #: an error of 0 on one CPU is rounding luck that another's vector kernels do not repeat: the page gives
    #: the tolerance, never "0"
    exact: bool = True

    def on(self, mixer: str | None) -> Relation:
        """This relation with ``{mixer}`` filled in (a block's sequence mixer)."""
        if mixer is None or "{mixer}" not in self.text + "".join(self.reads):
            return self
        fill = lambda s: s.replace("{mixer}", mixer)  # noqa: E731
        return Relation(fill(self.text), tuple(map(fill, self.proves)), tuple(map(fill, self.reads)),
                        lambda host, r: self.compute(host, {k.replace(mixer, "{mixer}", 1): v for k, v in r.items()}),
                        self.tolerance, tuple(map(fill, self.adds)) if self.adds else None, self.exact)


def pick(relations: tuple[Relation, ...], start: str) -> Relation:
    """The one of ``relations`` whose text starts with ``start``: a family keeps a shared relation by name
    while it states its own in place of the others."""
    return next(r for r in relations if r.text.startswith(start))


def relation(text: str, proves: str, reads: str, tolerance: float = STEP, adds: tuple | None = None,
             exact: bool = True):
    """A decorator: ``@relation("a + b == c", proves="c", reads="a b c")`` over the compute function."""
    def wrap(compute):
        return Relation(text, tuple(proves.split()), tuple(reads.split()), compute, tolerance, adds, exact)
    return wrap


def first(x: Any) -> Any:
    """A module's output or input that may be a tuple: its first tensor."""
    while isinstance(x, (tuple, list)):
        x = x[0]
    return x


def rows(x: Any) -> Any:
    """Token rows ``[tokens, last]`` of a ``[..., last]`` tensor: compares token-flattened and
    ``[batch, seq]`` layouts of the same rows."""
    return x.reshape(-1, x.shape[-1])


def error(computed: Any, read: Any) -> float:
    """The largest difference, relative to the read side's scale (at least 1); inf on a shape mismatch."""
    import torch

    computed, read = torch.as_tensor(computed).detach(), torch.as_tensor(read).detach()
    if computed.numel() != read.numel():
        return float("inf")
    computed, read = computed.reshape(-1).double(), read.reshape(-1).double()
    if computed.numel() == 0:
        return 0.0
    finite = torch.isfinite(read)
    if not bool((torch.isfinite(computed) == finite).all()):
        return float("inf")
    scale = max(1.0, float(read[finite].abs().max()) if bool(finite.any()) else 1.0)
    return float((computed[finite] - read[finite]).abs().max()) / scale if bool(finite.any()) else 0.0


# -- the model root ---------------------------------------------------------------------------


@relation("layers[i].layer_output == layers[i+1].layer_input, on every block", proves="layers[*].layer_input",
          reads="layers[*].layer_output layers[*].layer_input")
def _stack(host, r):
    outs, ins = r["layers[*].layer_output"], r["layers[*].layer_input"]
    return [(first(out), inp) for out, inp in zip(outs[:-1], ins[1:])]


@relation("layers[0].layer_input == token_embeddings", proves="token_embeddings",
          reads="token_embeddings layers[0].layer_input")
def _embeddings(host, r):
    return [(r["token_embeddings"], r["layers[0].layer_input"])]


@relation("final_norm_output == norm(layers[-1].layer_output)", proves="final_norm_output",
          reads="layers[-1].layer_output final_norm_output")
def _final_norm(host, r):
    return [(host.norm._module(r["layers[-1].layer_output"]), r["final_norm_output"])]


@relation("lm_head_output == lm_head(final_norm_output)", proves="lm_head_output",
          reads="final_norm_output lm_head_output")
def _head(host, r):
    return [(host.lm_head._module(r["final_norm_output"]), r["lm_head_output"])]


@relation("logits == lm_head_output (nothing past the head)", proves="logits", reads="lm_head_output logits")
def _logits(host, r):
    return [(r["lm_head_output"], r["logits"])]


@relation("next_token_probs == softmax(logits[:, -1])", proves="next_token_probs", reads="logits next_token_probs")
def _probs(host, r):
    return [(r["logits"][:, -1].softmax(-1), r["next_token_probs"])]


@relation("input_ids == what embed_tokens embeds; input_size == input_ids.shape",
          proves="input_ids input_size", reads="embed_tokens.input input_ids input_size")
def _ids(host, r):
    import torch

    ids = r["embed_tokens.input"]
    return [(ids, r["input_ids"]), (torch.tensor(list(ids.shape)), torch.tensor(r["input_size"]))]


@relation("attention_mask == the batch's mask: 0 exactly on the left padding", proves="attention_mask",
          reads="input_ids attention_mask")
def _mask(host, r):
    """Left padding: a row's zeros come first, and every zero sits on the pad token."""
    import torch

    mask, ids = r["attention_mask"], r["input_ids"]
    pad = host.tokenizer.pad_token_id
    expected = torch.ones_like(mask)
    for row in range(mask.shape[0]):
        padding = int((ids[row] == pad).cumprod(0).sum()) if pad is not None else 0
        expected[row, :padding] = 0
    return [(expected, mask)]


ROOT_RELATIONS = (_stack, _embeddings, _final_norm, _head, _logits, _probs, _ids, _mask)

# -- the block ------------------------------------------------------------------------------------


@relation("layer_input + {mixer}.attention_output == layer_mid", proves="layer_mid {mixer}.attention_output",
          reads="layer_input {mixer}.attention_output layer_mid",
          adds=("layer_input", "{mixer}.attention_output", "layer_mid"))
def _mixer_add(host, r):
    return [(r["layer_input"] + r["{mixer}.attention_output"], r["layer_mid"])]


@relation("layer_mid + mlp.mlp_output == layer_output", proves="layer_output mlp.mlp_output",
          reads="layer_mid mlp.mlp_output layer_output", adds=("layer_mid", "mlp.mlp_output", "layer_output"))
def _mlp_add(host, r):
    return [(r["layer_mid"] + r["mlp.mlp_output"], r["layer_output"])]


@relation("attention_norm_output == input_layernorm(layer_input) == what {mixer} is called with",
          proves="attention_norm_output", reads="layer_input attention_norm_output {mixer}.input")
def _attention_norm(host, r):
    return [(host.input_layernorm._module(r["layer_input"]), r["attention_norm_output"]),
            (r["{mixer}.input"], r["attention_norm_output"])]


@relation("mlp_input == mlp_norm_output == post_attention_layernorm(layer_mid)", proves="mlp_norm_output mlp_input",
          reads="layer_mid mlp_norm_output mlp_input")
def _mlp_norm(host, r):
    return [(host.post_attention_layernorm._module(r["layer_mid"]), r["mlp_norm_output"]),
            (r["mlp_norm_output"], r["mlp_input"])]


BLOCK_RELATIONS = (_mixer_add, _mlp_add, _attention_norm, _mlp_norm)

# -- attention ---------------------------------------------------------------------------------


def causal_mask(module: Any, padding: Any, queries: int, keys: int) -> Any:
    """[batch, 1, queries, keys] additive mask: causal (within the module's sliding window, if any)
    and no padded key."""
    import torch

    q = torch.arange(keys - queries, keys)[:, None]
    k = torch.arange(keys)[None, :]
    allowed = k <= q
    window = getattr(module, "sliding_window", None)
    if window:
        allowed = allowed & (k > q - window)
    allowed = allowed[None, None] & padding[:, None, None, -keys:].bool()
    return torch.where(allowed, 0.0, float("-inf"))


def attending(host: Any) -> Any:
    """The attention module as the mask reads it. Its own ``sliding_window`` and ``scaling``, unless its host
    class says which window the forward hands the attention call (``WINDOW``, a function of the module:
    Mistral's passes ``config.sliding_window`` and has no attribute of its own) or which factor scales the
    scores (``SCALING``: GPT-J divides by ``scale_attn``, GPT-Neo does not scale)."""
    window = getattr(type(host), "WINDOW", None)
    scaling = getattr(type(host), "SCALING", None)
    module = host._module
    if window is None and scaling is None:
        return module
    from types import SimpleNamespace

    return SimpleNamespace(scaling=module.scaling if scaling is None else scaling(module),
                           sliding_window=getattr(module, "sliding_window", None) if window is None else window(module))


def pattern(module: Any, queries: Any, keys: Any, padding: Any) -> tuple[Any, Any]:
    """Scores and probabilities ``[batch, heads, query, key]`` by the attention's own scaling, in
    float64, keys repeated over the query groups."""
    queries, keys = queries.double(), keys.double()
    keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], 1)
    scores = queries @ keys.transpose(-1, -2) * module.scaling
    scores = scores + causal_mask(module, padding, queries.shape[2], keys.shape[2]).double()
    return scores, scores.softmax(-1)


def mix(probabilities: Any, values: Any) -> Any:
    """Head outputs ``[batch, seq, heads, head_dim]``: the probabilities over the (repeated) values."""
    values = values.double().repeat_interleave(probabilities.shape[1] // values.shape[1], 1)
    return (probabilities @ values).transpose(1, 2)


def real_queries(padding: Any, x: Any, seq_dim: int) -> Any:
    """``x`` at the query positions that are not padding (a padded row's output is whatever the kernel
    makes of a row with no key)."""
    keep = padding.bool()
    return x.movedim(seq_dim, 1)[keep]


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + causal mask) · "
          "attention_values", proves="attention_queries attention_keys attention_values attention_head_outputs",
          reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _attention(host, r):
    padding = r["model.attention_mask"]
    _, probabilities = pattern(attending(host), r["attention_queries"], r["attention_keys"], padding)
    heads = mix(probabilities, r["attention_values"])
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation("attention_scores == attention_queries · attention_keysᵀ · scaling + causal mask; "
          "attention_probabilities == softmax(attention_scores)",
          proves="attention_scores attention_probabilities",
          reads="model.attention_mask attention_queries attention_keys attention_scores attention_probabilities",
          tolerance=SUBBLOCK)
def _pattern(host, r):
    import torch

    padding = r["model.attention_mask"]
    scores, probabilities = pattern(attending(host), r["attention_queries"], r["attention_keys"], padding)
    read_scores = r["attention_scores"].double()
    # transformers masks with the dtype's minimum, not -inf: compare where a key is allowed
    allowed = torch.isfinite(scores)
    return [(scores[allowed], read_scores[allowed]),
            (real_queries(padding, probabilities, 2), real_queries(padding, r["attention_probabilities"], 2))]


@relation("attention_output == o_proj(attention_premix)", proves="attention_premix attention_output",
          reads="attention_premix attention_output")
def _output_projection(host, r):
    premix = r["attention_premix"]
    return [(host.o_proj._module(premix.reshape(*premix.shape[:2], -1)), r["attention_output"])]


ATTENTION_RELATIONS = (_attention, _pattern, _output_projection)

# -- MLPs ---------------------------------------------------------------------------------------


@relation("mlp_output == down_proj(mlp_neurons)", proves="mlp_neurons mlp_output", reads="mlp_neurons mlp_output")
def _down(host, r):
    return [(host.down_proj._module(r["mlp_neurons"]), r["mlp_output"])]


@relation("mlp_activation == act_fn(gate_proj(input)); mlp_neurons == mlp_activation · up_proj(input)",
          proves="mlp_activation", reads="input mlp_activation mlp_neurons")
def _gated(host, r):
    module, x = host._module, rows(first(r["input"]))
    activation = module.act_fn(module.gate_proj(x))
    return [(activation, rows(r["mlp_activation"])), (activation * module.up_proj(x), rows(r["mlp_neurons"]))]


MLP_RELATIONS = (_down, _gated)

# -- mixtures -------------------------------------------------------------------------------------


def _router(host) -> Any:
    module = host._module
    return module.gate if hasattr(module, "gate") else module.router


def routing(renormalised: bool | None) -> Relation:
    """The router's meaning: logits by its weight, the top-k of their softmax, and those probabilities
    as the weights, renormalised over the chosen experts (``True``), not (``False``), or as the router's
    ``norm_topk_prob`` says (``None``)."""
    how = {True: "renormalised over the chosen experts", False: "not renormalised",
           None: "renormalised when norm_topk_prob"}[renormalised]

    @relation("router_logits == router.weight · input; expert_indices == top_k(softmax(router_logits)); "
              f"expert_weights == those probabilities, {how}", proves="router_logits expert_indices expert_weights",
              reads="input router_logits expert_indices expert_weights")
    def check(host, r):
        import torch

        router = _router(host)
        logits = rows(first(r["input"])) @ router.weight.T
        probs = logits.float().softmax(-1)
        top, indices = torch.topk(probs, router.top_k, dim=-1)
        if renormalised or (renormalised is None and getattr(router, "norm_topk_prob", False)):
            top = top / top.sum(-1, keepdim=True)
        read_indices = rows(r["expert_indices"]).long()
        # equal probabilities may be ordered either way: compare sets of experts, and weights by expert
        weight_by_expert = torch.zeros_like(probs).scatter(-1, indices, top)
        read_by_expert = torch.zeros_like(probs).scatter(-1, read_indices, rows(r["expert_weights"]).float())
        return [(logits, rows(r["router_logits"])),
                (indices.sort(-1).values, read_indices.sort(-1).values),
                (weight_by_expert, read_by_expert)]

    return check


@relation("routed_output == Σ over routing slots of expert_outputs", proves="expert_outputs routed_output",
          reads="expert_outputs routed_output")
def _slots(host, r):
    outputs = r["expert_outputs"]
    return [(rows(outputs.sum(-2)), rows(r["routed_output"]))]


@relation("mlp_output == routed_output (no shared expert)", proves="routed_output", reads="routed_output mlp_output")
def _routed_is_all(host, r):
    return [(rows(r["routed_output"]), rows(r["mlp_output"]))]


@relation("mlp_output == routed_output + shared_expert_output; shared_expert_output == "
          "sigmoid(shared_expert_gate(input)) · shared_experts.mlp_output", proves="routed_output shared_expert_output",
          reads="input routed_output shared_experts.mlp_output shared_expert_output mlp_output")
def _routed_plus_shared(host, r):
    import torch

    gate = torch.sigmoid(host._module.shared_expert_gate(rows(first(r["input"]))))
    return [(rows(r["routed_output"]) + rows(r["shared_expert_output"]), rows(r["mlp_output"])),
            (gate * rows(r["shared_experts.mlp_output"]), rows(r["shared_expert_output"]))]


MOE_RELATIONS = (routing(None), _slots, _routed_is_all)
SHARED_MOE_RELATIONS = (routing(None), _slots, _routed_plus_shared)
