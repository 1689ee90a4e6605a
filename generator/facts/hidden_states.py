"""How transformers' ``output_hidden_states`` maps to the standard names, measured on the tiny model.

Researchers come with code written against ``model(..., output_hidden_states=True).hidden_states``. What each entry
is differs by family, and nothing in transformers says so: the last entry is taken after the final norm, Mamba's
tuple has no embedding entry (so ``hidden_states[i]`` is block i's output), Mllama leaves its cross-attention blocks
out. Each entry is matched, bit for bit, to the standard values it could be (every block's ``layer_input`` and
``layer_output``, ``final_norm_output``), read in the same forward, and the mapping is written as a few rows:
``hidden_states[1 … 3] == layers[k-1].layer_output``. An entry no standard value equals is a row that says so.
"""

from __future__ import annotations

from typing import Any

#: the root values an entry may be: the embeddings before the blocks, the final norm's output after them
_BEFORE, _AFTER = ("token_embeddings",), ("final_norm_output",)


def _candidates(model: Any) -> dict[str, Any]:
    """``{standard name: envoy}`` of every value an entry may equal, on this load."""
    support = model.support()
    root = {row.name for row in support if row.host == "model" and row.available}
    # a block this load does not run (Mllama's cross-attention blocks on a prompt with no image) serves nothing
    blocks = {(row.name, i) for row in support if row.host == "model.layers[i]" and row.available
              for i in row.blocks or ()}
    out = {name: (model, name) for name in _BEFORE if name in root}
    for i in range(model.num_layers):
        for name in ("layer_input", "layer_output"):
            if (name, i) in blocks:
                out[f"layers[{i}].{name}"] = (model.layers[i], name)
    out.update({name: (model, name) for name in _AFTER if name in root})
    return out


def _rows(matches: list[list[str]], num_layers: int) -> list[dict]:
    """Runs of entries that follow one rule (``layers[k-1].layer_output`` for k in 1 … L-1), else one row each."""
    def rule(k: int, names: list[str]) -> str | None:
        for name in names:
            if name.startswith("layers["):
                block = int(name[len("layers["):name.index("]")])
                return f"layers[k{block - k:+d}].{name.split('.', 1)[1]}".replace("k+0", "k")
        return None

    rows: list[dict] = []
    for k, names in enumerate(matches):
        pattern = rule(k, names)
        if rows and pattern and rows[-1]["rule"] == pattern and rows[-1]["last"] == k - 1:
            rows[-1]["last"] = k
            continue
        rows.append({"first": k, "last": k, "rule": pattern, "equals": names})
    return [{"entries": [r["first"], r["last"]], "is": r["rule"] if r["first"] != r["last"] else None,
             "equals": r["equals"] if r["first"] == r["last"] else []} for r in rows]


def hidden_states_map(model: Any, args: tuple, kwargs: dict) -> dict:
    """``{"hidden_states": {"count": N, "layers": L, "rows": [...]}}``: each entry of transformers' tuple, on this
    load's prompt, by the standard values equal to it bit for bit; nothing where the model returns no such tuple."""
    import torch

    from generator.facts.proof import read_all

    wanted = {(path, name): envoy for path, (envoy, name) in _candidates(model).items()}
    wanted[("", "output")] = model
    read = read_all(model, wanted, args, {**kwargs, "output_hidden_states": True})
    output = read.pop(("", "output"))  # a ModelOutput, copied as the dict it is
    hidden = output.get("hidden_states") if isinstance(output, dict) else getattr(output, "hidden_states", None)
    if not hidden:
        return {}
    values = {path: tensor for (path, _), tensor in read.items() if isinstance(tensor, torch.Tensor)}
    matches = [[path for path, value in values.items() if value.shape == entry.shape and torch.equal(value, entry)]
               for entry in hidden]
    return {"hidden_states": {"count": len(hidden), "layers": model.num_layers,
                              "rows": _rows(matches, model.num_layers)}}
