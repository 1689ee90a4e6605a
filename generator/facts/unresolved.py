"""A standard path that does not resolve on the family's model, said in one line a contributor can act on.

A copy of llama pointed at a block shaped otherwise (cohere's and phi's one norm feeding a parallel
attention and MLP, gemma2's sandwich) fails when the library looks for a module the block does not
have. The library's error says which path; this says which module was looked for, what the block has
instead, and which existing family has that structure to start from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from generator.facts.claim_error import ClaimError

#: block structures by the children that give them away -> (what it is, the family to start from)
STRUCTURES = (
    (lambda names: {"pre_feedforward_layernorm", "post_feedforward_layernorm"} <= names,
     "a sandwich block (every sublayer normed before and after)", "gemma2"),
    (lambda names: "post_feedforward_layernorm" in names and not any("input" in n for n in names),
     "a post-norm block (each sublayer's output normed, no norm before it)", "olmo2"),
    (lambda names: "mixer" in names and "self_attn" not in names,
     "a state-space block (one mixer, no attention)", "mamba2"),
    (lambda names: {"mlp", "self_attn"} <= names and len(_norms(names)) == 1,
     "a parallel block (one norm, the attention and the MLP both reading its output)", "gpt_neox"),
)


def _norms(names: set[str]) -> list[str]:
    return [n for n in names if "norm" in n or re.fullmatch(r"ln_?\w*", n)]


def native_block(module: Any, config: Any) -> Any:
    """The first decoder block of a native model: the first module list as long as the stack."""
    import torch

    count = getattr(config.get_text_config(), "num_hidden_layers", None)
    return next((m[0] for m in module.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == count), None)


def explain(family: str, family_module: Any, checkpoint: Path, error: Exception) -> ClaimError:
    """``error`` (a FamilyMismatch naming a standard path) as a ClaimError naming the path, the module looked
    for, what the block has instead, and the closest family with that structure."""
    import torch
    from transformers import AutoConfig

    from nncanon.core.loading import meta_module

    text = str(error)
    required = re.search(r"standard path model\.(\S+) does not resolve", text)
    child = re.search(r"model\.(layers\[\d+\][\w.\[\]]*)\.\w+ \(.*?\) reads inside the child module ([\w.]+),", text)
    if required is None and child is None:  # a missing op: the library's own line names it
        return ClaimError(family, "a value", text.splitlines()[0])
    path = re.sub(r"\[(\d+)\]", r".\1", required[1] if required else f"{child[1]}.{child[2]}")
    config = AutoConfig.from_pretrained(checkpoint)
    module = meta_module(family_module, config, "text-generation")
    block = native_block(module, config)
    if path.startswith("layers."):
        parent, parts, where, standard = block, path.split(".")[2:], "model.layers[i]", "model.layers[i]."
    else:
        parent, parts, where, standard = module.get_decoder(), path.split("."), "model", "model."
    if parent is None:
        return ClaimError(family, f"value model.{path}", text.splitlines()[0])
    # the deepest module of the path the model has, and the name looked for under it
    wanted = parts[-1]
    for part in parts:
        child = getattr(parent, part, None)
        if not isinstance(child, torch.nn.Module):
            wanted = part
            break
        parent, where = child, f"{where}.{part}"
    names = {name for name, _ in parent.named_children()}
    # the block's structure says which family to start from, whichever path failed first (phi's final norm)
    inside = {name for name, _ in block.named_children()} if block is not None else set()
    structure = next(((what, like) for holds, what, like in STRUCTURES if holds(inside)), None)
    rename = f"map RENAME in {Path(family_module.__file__).name} to the module that plays its part"
    advice = (f"it is {structure[0]}: start from {structure[1]} (python -m generator new {family} --like "
              f"{structure[1]}), or {rename}" if structure else rename)
    return ClaimError(family, f"value {standard}{'.'.join(parts)}", f"does not resolve: looked for the module "
                                                                    f"{wanted!r} under {where} ({type(parent).__name__}), "
                                                                    f"which has {', '.join(sorted(names)) or 'nothing'} "
                                                                    f"instead; {advice}")
