"""A model type nncanon has no family module for, mounted on the generic parts: the Llama tree's hosts.

A family module says by hand where its checkpoint's modules are (RENAME) and which host wraps which module
class (ENVOYS). Here both are found on the built model, the way a contributor reads an unknown tree:

- the decoder layers: the ``ModuleList`` of ``num_hidden_layers`` modules outside any tower (vision, audio);
- ``embed_tokens`` and ``lm_head``: what the model itself returns from ``get_input_embeddings`` and
  ``get_output_embeddings``; ``norm``: the first norm its stack registers after the layers;
- in a block, its attention (a child whose class says Attention) as ``self_attn``, its MLP as ``mlp``, its
  first norm as ``input_layernorm``, its second (the one before the MLP) as ``post_attention_layernorm``;
- in the attention its output projection as ``o_proj``, in the MLP its down projection and activation.

Each is then the shared host: Block, Attention, MLP, and the root values. What the guess gets wrong the
survey's measurement says (a value that does not resolve, a relation that does not hold): a name mounted on
the wrong module cannot pass a relation, which computes it by the module's own math.
"""

from __future__ import annotations

import functools
import sys
import types
from dataclasses import dataclass, field
from typing import Any

#: path words of the modules that are not the text stack
TOWERS = ("vision", "visual", "audio", "image", "encoder", "vpm", "tower", "mtp", "speech", "perceiver", "qformer")
#: native names of an attention's output projection, of an MLP's down projection and of its activation
OUT_PROJ = ("o_proj", "out_proj", "c_proj", "dense", "o", "wo", "proj", "output_proj")
DOWN_PROJ = ("down_proj", "c_proj", "fc2", "dense_4h_to_h", "w2", "fc_out", "wo", "proj_out", "out_proj", "fc_2")
ACT = ("act_fn", "act", "activation_fn", "activation", "act_layer", "gelu")
MLP_NAMES = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "moe", "feedforward", "ff")


class NoTree(ValueError):
    """The built model has no part the generic hosts could mount (no decoder layer list): one line why."""


@dataclass
class Tree:
    """Where the generic parts sit on one built model, and what it looks like there."""

    rename: dict[Any, str] = field(default_factory=dict)
    envoys: dict[type, Any] = field(default_factory=dict)
    #: standard paths that resolved (the family module's required_paths)
    paths: list[str] = field(default_factory=list)
    #: the tree's shape in words the closest-family match compares: "norm: RMSNorm", "mlp: gated", ...
    shape: list[str] = field(default_factory=list)
    #: every block as (block, its attention or None, its MLP or None): where its norms sit is measured on these
    #: (generator/facts/norm_placement.py), not read off the norms' names
    blocks: list[tuple[Any, Any, Any]] = field(default_factory=list)


def _path_of(module: Any, target: Any) -> str | None:
    if target is None:
        return None
    return next((path for path, m in module.named_modules() if m is target), None)


def _is_norm(module: Any) -> bool:
    return "norm" in type(module).__name__.lower()


#: the config fields that count a causal LM's decoder layers, in the order they are tried: a seq2seq model's
#: num_hidden_layers is its encoder's (Marian, MBart: its decoder_layers are the stack), LongCat-Flash's counts two
#: sublayers per layer (num_layers are the modules), HRM's every pass through its stacks (num_layers_per_stack)
DEPTHS = ("num_hidden_layers", "decoder_layers", "num_decoder_layers", "num_layers", "num_layers_per_stack")


def _layers(module: Any, config: Any) -> tuple[str, Any]:
    import torch

    counts = {name: getattr(config, name) for name in DEPTHS
              if isinstance(getattr(config, name, None), int) and not isinstance(getattr(config, name), bool)}
    lists = [(path, m) for path, m in module.named_modules() if isinstance(m, torch.nn.ModuleList)]
    lists.sort(key=lambda pm: (any(word in pm[0].lower() for word in TOWERS), pm[0].count("."), pm[0]))
    # the text stack first, then the depth fields in order: a seq2seq text model's encoder (num_hidden_layers long in
    # Florence-2's BART) is not the stack its causal LM runs
    for outside in (True, False):
        for count in counts.values():
            found = [(path, m) for path, m in lists if len(m) == count
                     and outside != any(word in path.lower() for word in TOWERS)]
            if found:
                return found[0]
    stated = ", ".join(f"{name}={count}" for name, count in counts.items()) or "no depth field"
    raise NoTree(f"no ModuleList of decoder layers in {type(module).__name__} as long as its config says ({stated})")


def _final_norm(module: Any, layers_path: str) -> str | None:
    parent_path, _, name = layers_path.rpartition(".")
    parent = module.get_submodule(parent_path) if parent_path else module
    names = [n for n, _ in parent.named_children()]
    after = names[names.index(name) + 1:]
    found = next((n for n in after if _is_norm(getattr(parent, n))), None)
    return f"{parent_path}.{found}" if found and parent_path else found


def _child(block: Any, test) -> str | None:
    return next((name for name, child in block.named_children() if test(name, child)), None)


def _named(block: Any, names: tuple[str, ...]) -> str | None:
    children = dict(block.named_children())
    return next((name for name in names if name in children), None)


def discover(module: Any) -> Tree:
    """Where the generic parts sit on ``module`` (a built causal LM or image-text-to-text model)."""
    config = module.config.get_text_config()
    tree = Tree()
    layers_path, layers = _layers(module, config)
    root = {"layers": layers_path, "embed_tokens": _path_of(module, module.get_input_embeddings()),
            "norm": _final_norm(module, layers_path), "lm_head": _path_of(module, module.get_output_embeddings())}
    for standard, native in root.items():
        if native is None or native.startswith(f"{standard}."):
            continue  # a masked-LM head's decoder inside its own lm_head: an alias would shadow the module
        tree.paths.append(standard)
        if native != standard:
            tree.rename[native] = standard
    from nncanon.parts.attention.softmax import Attention
    from nncanon.parts.blocks.decoder import Block
    from nncanon.parts.blocks.mlp import MLP

    firsts = {}
    for layer in layers:  # a hybrid's block kinds are classes of their own, or one class holding other mixers
        firsts.setdefault((type(layer), tuple(type(c).__name__ for _, c in layer.named_children())), layer)
        tree.envoys[type(layer)] = Block
        tree.blocks.append((layer, *_mixer_and_mlp(layer)))
    # a child only some blocks of a class have (RWKV's pre_ln, the stack's own norm, on block 0) is not one of the
    # class's block norms: a rename binds by name on every block of the class, so it is left unmounted
    shared: dict[type, set[str]] = {}
    for layer in layers:
        names = {name for name, _ in layer.named_children()}
        shared[type(layer)] = shared.get(type(layer), names) & names
    for block in firsts.values():
        _block(tree, block, Attention, MLP, shared[type(block)])
    tree.shape = list(dict.fromkeys(tree.shape))
    tree.paths = list(dict.fromkeys(tree.paths))
    tree.shape.append(f"norm: {type(module.get_submodule(root['norm'])).__name__}" if root["norm"] else "norm: none")
    head, embed = module.get_output_embeddings(), module.get_input_embeddings()
    tied = head is not None and embed is not None and getattr(head, "weight", None) is getattr(embed, "weight", 0)
    tree.shape.append("head: tied" if tied else "head: own")
    return tree


def _sublayers(block: Any) -> tuple[str | None, str | None]:
    """The names of the block's attention and MLP children (None where it has none the generic parts know)."""
    attention = _child(block, lambda name, child: "attention" in type(child).__name__.lower()
                       or type(child).__name__.endswith(("Attn", "SelfAttn")))
    mlp = _named(block, MLP_NAMES) or _child(block, lambda name, child: any(
        word in type(child).__name__.lower() for word in ("mlp", "feedforward", "moe", "sparse")))
    return attention, mlp


#: the children a block's other sequence mixers go by (Mamba's mixer, a DeltaNet's linear_attn, LFM2's conv): where
#: its norms sit is measured around them too, though the generic parts mount no attention there
OTHER_MIXERS = ("mixer", "mamba", "linear_attn", "conv", "temporal_block", "mamba_layer")


def _mixer_and_mlp(block: Any) -> tuple[Any, Any]:
    attention, mlp = _sublayers(block)
    mixer = attention or _named(block, OTHER_MIXERS)
    return (getattr(block, mixer) if mixer else None), (getattr(block, mlp) if mlp else None)


def _block(tree: Tree, block: Any, attention_host: type, mlp_host: type, every: set[str]) -> None:
    """The block's mixer, MLP and norms mounted on the Llama names, and its shape in words; ``every``: the
    children every block of its class has."""
    attention, mlp = _sublayers(block)
    norms = [name for name, child in block.named_children() if _is_norm(child) and name in every]
    if attention is not None:
        cls = type(getattr(block, attention))
        tree.envoys[cls] = attention_host
        twins = [name for name, child in block.named_children() if type(child) is cls]
        if len(twins) == 1:
            tree.rename[cls] = "self_attn"  # by class: a hybrid's blocks name their mixers alike
        elif attention != "self_attn":  # a decoder's cross-attention of the same class (TrOCR's encoder_attn)
            tree.rename[attention] = "self_attn"
        _mount(tree, getattr(block, attention), attention, "o_proj", OUT_PROJ, "attention")
        inside = {name for name, _ in getattr(block, attention).named_children()}
        tree.shape.append("attention: q/k norms" if {"q_norm", "k_norm", "q_layernorm", "k_layernorm", "query_layernorm", "key_layernorm"} & inside else "attention: plain")
        tree.shape.append("attention: fused qkv" if inside & {"qkv_proj", "c_attn", "query_key_value", "Wqkv", "qkv"}
                          else "attention: q, k, v")
    else:
        tree.shape.append("mixer: not attention")
    if mlp is not None:
        cls = type(getattr(block, mlp))
        tree.envoys[cls] = mlp_host
        if mlp != "mlp":
            tree.rename[cls] = "mlp"
        _mount(tree, getattr(block, mlp), mlp, "down_proj", DOWN_PROJ, "mlp")
        _mount(tree, getattr(block, mlp), mlp, "act_fn", ACT, "mlp")
        inside = {name for name, _ in getattr(block, mlp).named_children()}
        kind = ("mixture" if inside & {"experts", "router", "gate"} and "gate_proj" not in inside else
                "gated" if {"gate_proj", "up_proj"} <= inside or {"w1", "w3"} <= inside or "gate_up_proj" in inside
                else "plain")
        tree.shape.append(f"mlp: {kind}")
    else:
        tree.shape.append("mlp: none")
    tree.shape.append(f"block norms: {len(norms)}")
    wanted = ["input_layernorm", "post_attention_layernorm"]
    for standard, native in zip(wanted, [n for n in norms if n not in wanted] if not set(wanted) & set(norms) else []):
        tree.rename[native] = standard
    if len(norms) == 1 and attention is not None and mlp is not None:
        tree.shape.append("block: one norm (parallel attention and MLP)")


def _mount(tree: Tree, module: Any, native: str, standard: str, names: tuple[str, ...], prefix: str) -> None:
    """Mount ``module``'s child spelled one of ``names`` as ``standard`` (by a dotted alias on the block:
    GPT-2 spells an attention's and an MLP's projection alike)."""
    children = dict(module.named_children())
    if standard in children:
        return
    found = next((name for name in names if name in children), None)
    if found is not None:
        tree.rename[f"{native}.{found}"] = f"{native}.{standard}"


def family_module(model_type: str, tree: Tree) -> types.ModuleType:
    """A family module (nncanon.families' contract) for ``model_type`` over the generic parts at ``tree``."""
    from nncanon.core.hosts import host
    from nncanon.core.model import StandardModel
    from nncanon.parts.blocks.decoder import (
        ROOT_RELATIONS,
        ROOT_VALUES,
        attention_layer_types,
        nothing_to_prepare,
    )

    name = f"nncanon_survey_{model_type.replace('-', '_')}"
    module = types.ModuleType(name, f"the survey's generic parts on {model_type}")
    module.FAMILY, module.MODEL_TYPES = f"{model_type} (survey)", (model_type,)
    module.RENAME, module.ENVOYS = tree.rename, tree.envoys
    module.ROOT = host("SurveyStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
                       family_module=module)
    module.required_paths = lambda model: list(tree.paths)
    module.dim_sizes = lambda model: {}
    module.layer_types = attention_layer_types
    module.prepare = nothing_to_prepare
    sys.modules[name] = module  # nnsight pickles nothing here, but a host's family_module must be importable by name
    return module


@functools.cache
def generic_hosts() -> list[tuple[str, type]]:
    """(host path pattern, host class) of the generic parts, the root first."""
    from nncanon.core.hosts import host
    from nncanon.core.model import StandardModel
    from nncanon.parts.attention.softmax import Attention
    from nncanon.parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, Block
    from nncanon.parts.blocks.mlp import MLP

    root = host("SurveyRoot", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS)
    return [("model", root), (Block.HOST, Block), (Attention.HOST, Attention), (MLP.HOST, MLP)]


def generic_values(hosts: list | None = None) -> list[str]:
    """Every ``"host.value"`` the generic parts (or ``hosts``) declare: the survey's M."""
    return [f"{path}.{value.name}" for path, cls in hosts or generic_hosts() for value in cls.values()]


def generic_relations(skipped: tuple[str, ...], hosts: list | None = None) -> list[str]:
    """Every ``"host: relation"`` the generic parts (or ``hosts``) state (but ``skipped``): the survey's L."""
    return [f"{path}: {relation.text}" for path, cls in hosts or generic_hosts()
            for relation in getattr(cls, "RELATIONS", ()) if not relation.text.startswith(skipped)]
