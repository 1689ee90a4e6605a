"""transformers' output_hidden_states in standard names (generator/facts/hidden_states.py), against plain forward
hooks on the native modules: what the embedding, each decoder layer and the final norm hand on, matched to each entry
of the tuple the same native forward returns. Llama's tuple starts at the embeddings and ends after the final norm;
Mamba's has no embedding entry."""

from __future__ import annotations

import pytest
import torch

import nncanon
from generator.checkpoint.checkpoints import checkpoint_dir
from generator.facts.hidden_states import hidden_states_map
from generator.recipe.family import get_family

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


def _native(model) -> list[list[str]]:
    """Each entry of the native forward's hidden_states, by the native tensors equal to it (plain hooks)."""
    inner = model._module.base_model if hasattr(model._module, "base_model") else model._module.model
    seen: dict[str, torch.Tensor] = {}
    embeddings = getattr(inner, "embed_tokens", None) or getattr(inner, "embeddings", None)
    hooks = [embeddings.register_forward_hook(lambda m, a, out: seen.__setitem__("embeddings", out))]
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(
            lambda m, a, out, i=i: seen.__setitem__(f"layer {i} output", out[0] if isinstance(out, tuple) else out)))
    norm = getattr(inner, "norm", None) or getattr(inner, "norm_f", None)
    hooks.append(norm.register_forward_hook(lambda m, a, out: seen.__setitem__("final norm output", out)))
    batch = model.tokenizer(PROMPTS, return_tensors="pt", padding=True)
    try:
        with torch.no_grad():
            hidden = model._module(**batch, output_hidden_states=True).hidden_states
    finally:
        for hook in hooks:
            hook.remove()
    return [[name for name, t in seen.items() if t.shape == entry.shape and torch.equal(t, entry)] for entry in hidden]


@pytest.mark.parametrize("family", ["llama", "mamba"])
def test_each_entry_is_what_plain_hooks_say(family):
    fam = get_family(family)
    model = nncanon.load(checkpoint_dir(fam))
    native = _native(model)
    facts = hidden_states_map(model, (PROMPTS,), {})["hidden_states"]
    layers = model.num_layers
    assert facts["count"] == len(native) and facts["layers"] == layers
    # the standard rows, unrolled entry by entry, say what the hooks saw
    said: dict[int, str] = {}
    for row in facts["rows"]:
        first, last = row["entries"]
        for k in range(first, last + 1):
            said[k] = row["is"].replace("k-1", str(k - 1)).replace("[k]", f"[{k}]") if row["is"] else row["equals"][0]
    for k, names in enumerate(native):
        if "final norm output" in names:
            assert said[k] == "final_norm_output", (family, k, said[k])
        elif "embeddings" in names:
            assert said[k] in ("token_embeddings", "layers[0].layer_input"), (family, k, said[k])
        else:
            block = next(int(n.split()[1]) for n in names if n.startswith("layer "))
            assert said[k] == f"layers[{block}].layer_output", (family, k, said[k])
    if family == "mamba":  # no embedding entry: entry i is block i's output
        assert "embeddings" not in native[0] and said[0] == "layers[0].layer_output"
    else:
        assert "embeddings" in native[0] and len(native) == layers + 1
    assert native[-1] == ["final norm output"]


def test_the_page_lists_the_rows():
    """The family page's table, from a facts file given Mamba's rows (tests/fixtures/facts: the flagship's)."""
    import json
    from pathlib import Path

    from generator.site.render import render_family

    facts = json.loads((Path(__file__).parent / "fixtures" / "facts" / "qwen3_5_moe_text.json").read_text("utf-8"))
    facts["hidden_states"] = {"count": 4, "layers": 3, "rows": [
        {"entries": [0, 2], "is": "layers[k].layer_output", "equals": []},
        {"entries": [3, 3], "is": None, "equals": ["final_norm_output"]}]}
    html = render_family(facts)
    section = html.split("{ #hidden-states }", 1)[1].split("## Printout", 1)[0]
    assert "<code>hidden_states[0] … hidden_states[2]</code>" in section
    assert "<code>layers[k].layer_output</code>" in section and "3 blocks, 4 entries" in section
    assert '<code>hidden_states[3]</code> <span class="nc-also">(hidden_states[-1])</span>' in section
    assert "<code>final_norm_output</code>" in section
