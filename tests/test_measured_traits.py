"""issue 48: the last traits read off module names (fused projections, positions added to the residual, latent
attention, the gated attention output, attention biases, renormalised routing, the vision norm kind) are measured in
a traced forward of the tiny checkpoint (generator/facts/trait_probe.py). Each is checked against what the
architecture is (its config, its modeling file's math), then every module of the attention and the MLP is renamed,
its class too, and the measurement is the same; a model whose computation differs (a router that stops
renormalising, a position table at zero, biases at zero) measures differently."""

from __future__ import annotations

import importlib

import pytest
from renaming import renamed

pytestmark = pytest.mark.slow


def _rename_all(tiny) -> None:
    from generator.facts.traits import _child

    for block in tiny.all_blocks():
        for name in ("self_attn", "mlp"):
            native = _child(block, name)
            if native is not None and next(native.children(), None) is not None:
                renamed(native, {child: f"part{i}" for i, (child, _) in enumerate(native.named_children())}, classes=True)


@pytest.fixture
def tiny():
    """A family's tiny checkpoint, loaded, with its module and each block's native attention."""
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts.loads import resolve_loads
    from generator.facts.traits import _child
    from generator.recipe.family import get_family

    opened = []

    def load(name: str):
        family = get_family(name)
        module = importlib.import_module(family.module)
        models = resolve_loads(family, module, checkpoint_dir(family))
        opened.append(models)
        model = models.get(models.default)
        return model, module, [a for b in model.all_blocks() if (a := _child(b, "self_attn")) is not None]

    yield load
    for models in opened:
        models.close()


def _probe(load, name):
    from generator.facts.trait_probe import probe

    model, module, attentions = load(name)
    return model, module, attentions, probe(model, module, attentions)


def _truth(name: str, model) -> dict:
    """What the architecture is, read off its config and its modules' own parameters, not measured."""
    config = model._module.config.get_text_config()
    decoder = model._module.get_decoder()
    attention = next(getattr(layer, "self_attn", None) or layer.attn for layer in getattr(decoder, "layers", None)
                     or decoder.h if getattr(layer, "self_attn", None) is not None or hasattr(layer, "attn"))
    return {
        # GPT-2 adds wpe's rows to the token embeddings; the others rotate queries and keys only
        "positions": name == "gpt2",
        # GPT-2's c_attn is one Conv1D 3 · n_embd wide, Phi-3's qkv_proj one Linear of heads + 2 · kv heads
        "fused": ["qkv"] if name in ("gpt2", "phi3") else [],
        "latent": getattr(config, "kv_lora_rank", None) is not None,
        # Qwen3-Next's q_proj is twice the queries' width: its second half gates the heads' outputs
        "gated_output": name == "qwen3_next" and attention.q_proj.out_features == 2 * config.num_attention_heads
        * config.head_dim,
        "attention_bias": any(getattr(p, "bias", None) is not None and bool(p.bias.abs().max() > 0)
                              for p in attention.children()),
        # the config's switch where its router has one; Mixtral's softmax runs over the chosen logits alone
        "renormalised": bool(getattr(config, "norm_topk_prob", False)),
    }


@pytest.mark.parametrize("name", ["gpt2", "phi3", "deepseek_v2", "qwen3_next", "qwen2", "qwen3_moe", "olmoe", "llama"])
def test_probed_traits_are_the_architectures_and_survive_renaming(tiny, name):
    model, module, attentions, found = _probe(tiny, name)
    truth = _truth(name, model)
    assert {k: found[k] for k in truth} == truth, found
    _rename_all(model)
    if name == "gpt2":  # the position table too: wpe, named as no other family's
        renamed(model._module.get_decoder(), {"wpe": "table"})
    from generator.facts.trait_probe import probe

    assert probe(model, module, attentions) == found


def test_a_router_that_stops_renormalising_is_measured_so(tiny):
    """The same modules, the computation changed: Qwen3-MoE's routers with norm_topk_prob off give top-k
    probabilities that sum to less than one, and the trait says so."""
    from generator.facts.trait_probe import probe

    model, module, attentions, found = _probe(tiny, "qwen3_moe")
    assert found["renormalised"]
    routers = [m for m in model._module.modules() if hasattr(m, "norm_topk_prob")]
    assert routers
    for router in routers:
        router.norm_topk_prob = False
    assert not probe(model, module, attentions)["renormalised"]


def test_zeroed_position_table_and_biases_measure_as_absent(tiny):
    """GPT-2 with its position table at zero adds no positions; its attention projections' biases at zero give zero
    at a zero input: both traits follow the computation, not the modules that remain."""
    import torch

    from generator.facts.trait_probe import probe

    model, module, attentions, found = _probe(tiny, "gpt2")
    assert found["positions"] and found["attention_bias"]
    with torch.no_grad():
        model._module.get_decoder().wpe.weight.zero_()
        for attention in attentions:
            attention.c_attn.bias.zero_()
    after = probe(model, module, attentions)
    assert not after["positions"] and not after["attention_bias"] and after["fused"] == ["qkv"]


@pytest.mark.parametrize("name, kind", [("qwen2_5_vl", "RMSNorm"), ("llava", "LayerNorm")])
def test_the_vision_norm_kind_is_measured_whatever_its_class_is_called(tiny, name, kind):
    """collect.py read the vision block's norm kind off its classes' names; it is measured as the text's."""
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts.collect import PROMPTS
    from generator.facts.loads import resolve_loads
    from generator.facts.traits import vision_norm
    from generator.recipe.family import get_family

    family = get_family(name)
    module = importlib.import_module(family.module)
    models = resolve_loads(family, module, checkpoint_dir(family))
    try:
        image = models.get("image")
        assert vision_norm(image, module, list(PROMPTS)) == kind
        layer = image.get("vision.layers.0")._module
        for norm in [m for m in layer.modules() if "Norm" in type(m).__name__]:
            norm.__class__ = type("Scaler", (type(norm),), {})  # the other kind's name would not fool it either
        assert vision_norm(image, module, list(PROMPTS)) == kind
    finally:
        models.close()


@pytest.mark.parametrize("model_type, extra, qk", [
    ("llama", {}, "attention: plain"),
    ("qwen3_moe", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16}, "attention: q/k norms")])
def test_the_surveys_mlp_kind_is_measured_whatever_the_mlp_calls_its_projections(model_type, extra, qk):
    """The survey's closest family compares block structure (where the norms sit, what the MLP computes, q/k norms):
    its MLP kind was read off gate_proj / up_proj, its q/k norms off q_norm; with every MLP and attention child
    renamed they are the same, measured on the forward."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from generator.survey.measure import structure
    from generator.survey.tree import discover

    config = AutoConfig.for_model(model_type, vocab_size=64, pad_token_id=0, hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                  **extra)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    call = {"input_ids": torch.arange(6)[None]}
    before = structure(discover(model), model, call)
    kind = "mlp: mixture" if extra else "mlp: gated"
    assert {kind, "norms: pre-norm", qk} <= set(before), before
    for layer in model.model.layers:
        for sub in (layer.mlp, layer.self_attn):
            renamed(sub, {name: f"part{i}" for i, (name, _) in enumerate(sub.named_children())}, classes=True)
    after = structure(discover(model), model, call)
    assert {kind, "norms: pre-norm", qk} <= set(after), after


@pytest.mark.parametrize("name, fused", [("phi3", True), ("modernbert", True), ("llama", False)])
def test_a_fused_gate_up_projection_is_measured_whatever_it_is_called(tiny, name, fused):
    """Phi-3's gate_up_proj and ModernBERT's Wi give both halves of a gated MLP from one projection; Llama's
    gate_proj and up_proj are two. Checked against the MLP's own weights (one matrix twice the width of what the
    output projection reads), then every MLP child and class renamed: the same."""
    from generator.facts.mlp_measure import fused_gate_up
    from generator.facts.traits import _child, forward

    model, module, _ = tiny(name)

    def measured() -> list[bool]:
        spec, seen = forward(model, module)
        return [fused_gate_up(mlp, seen) for _, _, mlp in spec if mlp is not None and id(mlp) in seen]

    mlp = next(m for b in model.all_blocks() if (m := _child(b, "mlp")) is not None)
    weights = [m.weight for m in mlp.children() if getattr(m, "weight", None) is not None and m.weight.dim() == 2]
    out = min(weights, key=lambda w: w.shape[0])  # the output projection: back to the stream's width
    assert any(w.shape[0] == 2 * out.shape[1] for w in weights) == fused  # one matrix giving gate and up
    before = measured()
    assert before and all(f == fused for f in before), before
    for block in model.all_blocks():
        native = _child(block, "mlp")
        renamed(native, {child: f"part{i}" for i, (child, _) in enumerate(native.named_children())}, classes=True)
    assert measured() == before
