"""A relation stated on a subset of the blocks gives its value a "means:" line, like every relation.

DeepStack's relation is stated on ``model.vision`` and proves ``deepstack_layers[*].deepstack_output``: the text blocks
DeepStack adds to, a list the host computes, not a module list of its own. Llama 3.2 Vision's stack over the blocks a
call runs proves ``running_layers[*].layer_input``. Each is the value of ``model.layers[i]`` on those blocks, and its
row on the page says so. No torch: the facts are written here in the shape collect writes them (a relation's host,
class and the terms it proves, from nncanon/parts/vision/qwen_vit/relations.py and parts/vision/cross_attention.py).
"""

from __future__ import annotations

from generator.site.render import _meanings

DEEPSTACK = ("layers[j].deepstack_output == deepstack_projectors[j](vision.layers[deepstack_visual_indexes[j]]"
             ".layer_output)")
RUNNING = "layers[i].layer_output == layers[i+1].layer_input, on every block the call runs"
TOWER = "global_layers[0].layer_input == layernorm_post(layers[-1].layer_output)"


def _relation(host: str, klass: str, proves: list[str], text: str) -> dict:
    return {"host": host, "class": klass, "proves": proves, "text": text, "errors": {"sdpa": "0"}}


def _facts() -> dict:
    def values(*names):
        return [{"name": n} for n in names]

    return {
        "family": "deepstack_like",
        "hosts": [{"path": "model", "class": "Root", "host_class": "Root", "values": values("token_embeddings")},
                  {"path": "model.layers[i]", "class": "Layer", "host_class": "Block",
                   "values": values("layer_input", "deepstack_output")},
                  {"path": "model.vision", "class": "Tower", "host_class": "Vision", "values": values("image_features")},
                  {"path": "model.vision.global_layers[i]", "class": "TowerLayer", "host_class": "TowerBlock",
                   "values": values("layer_input")}],
        "edits": [],
        "relations": [_relation("model.vision", "Vision", ["deepstack_layers[*].deepstack_output"], DEEPSTACK),
                      _relation("model", "Root", ["running_layers[*].layer_input"], RUNNING),
                      _relation("model.vision", "Vision", ["global_layers[*].layer_input"], TOWER)],
    }


def normalize(facts: dict) -> dict:
    """The facts with each value's ``meaning``, as the page's renderer gives them (render.normalize's step)."""
    facts = {**facts, "edits": facts.get("edits", [])}
    _meanings(facts)
    return facts


def _meaning(facts: dict, path: str, name: str) -> list[str]:
    host = next(h for h in facts["hosts"] if h["path"] == path)
    return next(v["meaning"] for v in host["values"] if v["name"] == name)


def test_a_relation_on_a_subset_of_the_blocks_is_its_values_meaning():
    f = normalize(_facts())
    assert _meaning(f, "model.layers[i]", "deepstack_output") == [DEEPSTACK]
    assert _meaning(f, "model.layers[i]", "layer_input") == [RUNNING]


def test_a_module_list_of_the_host_keeps_its_own_path():
    """``global_layers`` is the tower's own module list (a host at that path): its relation means the tower's value,
    not the text blocks' one of the same name."""
    f = normalize(_facts())
    assert _meaning(f, "model.vision.global_layers[i]", "layer_input") == [TOWER]
    assert TOWER not in _meaning(f, "model.layers[i]", "layer_input")


def test_every_served_value_of_every_family_has_a_meaning(all_facts):
    """Every value a load serves is proven by a relation (proof.py refuses one that is not), so its row says what."""
    missing = [f"{family}: {h['path']}.{v['name']}" for family, facts in all_facts.items()
               for h in normalize(facts)["hosts"] for v in h["values"]
               if any((v.get("availability") or {"any": True}).values()) and not v["meaning"]]
    assert not missing, missing
