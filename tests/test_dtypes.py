"""A bfloat16 and a float16 load of every family (generator/facts/dtypes.py, run by make site as a stage of its own,
generator/facts/dtype_runs.py; here on a sample): the stage's result says every relation was checked
at each dtype within the error model's bound, a plain-torch recomputation in float64 of one relation's read values
stays within that bound (and above float32's: the dtype's rounding is real), and an edit whose write lands in float32
only through an alias a cast breaks is refused in bfloat16."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from generator.checkpoint.checkpoints import checkpoint_dir
from generator.recipe.family import family_path, load_family
from nncanon.core import precision

#: the sample the stage runs on here (make site runs it on every family): llama, plain attention; mamba2, a recurrence
#: with its kernel routes; doge, relations that cannot hold in a half dtype; llava, an image load and its tower; t5,
#: a float16 branch, so bfloat16's edits are made again
SAMPLE = ("llama", "mamba2", "doge", "llava", "t5")


@pytest.fixture(scope="module")
def stage(native_facts, tmp_path_factory):
    """The half-dtype stage (generator/facts/dtype_runs.py) run on :data:`SAMPLE` into a build of its own, from
    copies of the native facts; ``{family: (facts, result)}``."""
    import shutil

    from generator.facts.dtype_runs import cached_dtypes

    build = tmp_path_factory.mktemp("dtype-build")
    (build / "facts").mkdir()
    found = {}
    for name in SAMPLE:
        for suffix in (".json", ".key"):
            shutil.copy(native_facts / f"{name}{suffix}", build / "facts" / f"{name}{suffix}")
        result, ran = cached_dtypes(load_family(family_path(name)), progress=lambda line: None, build=build)
        assert ran and (build / "dtypes" / f"{name}.json").exists()
        found[name] = (json.loads((native_facts / f"{name}.json").read_text(encoding="utf-8")), result)
    return build, found


@pytest.mark.parametrize("family", SAMPLE)
def test_every_relation_is_checked_at_each_dtype(stage, family):
    facts, result = stage[1][family]
    dtypes = result["dtypes"]
    assert dtypes["verified"] == ["float32", "bfloat16", "float16"]
    eager = {(r["host"], r["text"]) for r in facts["relations"] if r["errors"]}  # every relation a float32 load held
    for dtype in ("bfloat16", "float16"):
        held = dtypes[dtype]
        checked = held["relations"] + len(held["cannot_hold"]) + len(held["not_served"])
        # llava's eager image load checks the tower's relation of the scores, which float32's sdpa image load cannot serve
        every = {(r["host"], r["text"]) for r in facts["relations"]}
        assert checked == (len(every) if family == "llava" else len(eager)), dtype
        assert held["not_served"] == held["not_finite"] == []
        assert held["bounds"] == {name: f"{precision.bound(level, dtype):.3g}"
                                  for name, (level, _) in precision.LEVELS.items()}
        if family == "doge":  # the top-k over rounded scores: a discrete choice the error model cannot bound
            assert held["cannot_hold"] and all("dynamic mask" in c["text"] and c["why"] and c["error"].startswith("1e")
                                               for c in held["cannot_hold"])
        else:
            assert held["cannot_hold"] == [], dtype
        # every writable value's edit float32 made, and where float32's image load was sdpa (llava's) the values only
        # eager attention serves, which the dtype's eager image load edits too
        edited, float32 = set(result["dtype_edits"][dtype]), {f"{e['host']}.{e['value']}" for e in facts["edits"]}
        assert float32 <= edited, dtype
        assert {e.rsplit(".", 1)[-1] for e in edited - float32} <= ({"attention_probabilities", "attention_scores"}
                                                                     if family == "llava" else set()), dtype
    # T5's float16 clamp: bfloat16's graph differs, so its edits were made again; the others' were taken from float16
    assert result["dtype_edits"]["graph"] == ({} if family == "t5" else {"bfloat16": "float16"})


@pytest.mark.parametrize("family", ("llama", "mamba2"))
def test_the_edits_bound_is_the_error_model_on_the_forward(stage, family):
    """The two paths' bound: two evaluations of every block (its widest relation's chain and its second norm and
    residual add) and the head, each within gamma_n(2**-24) + gamma_k(u) of the exact forward."""
    facts, result = stage[1][family]
    blocks = facts["tiny"]["num_layers"]
    level = "RECURRENCE" if any(bound == f"≤ {precision.RECURRENCE:g}" for r in facts["relations"]
                                for bound in r["errors"].values()) else "SUBBLOCK"
    for dtype in ("bfloat16", "float16"):
        n = (precision.LEVELS[level][1] + 80) * blocks + 80
        k = (precision.STORED[level] + 4) * blocks + 4
        u = precision.UNIT_ROUNDOFF[dtype]
        expected = 2 * (n * 2.0 ** -24 / (1 - n * 2.0 ** -24) + k * u / (1 - k * u)) if k * u < 1 else None
        assert result["dtype_edits"]["bounds"][dtype] == ("none" if expected is None else f"{expected:.3g}"), dtype


def test_the_stage_runs_nothing_when_current_and_again_when_the_facts_change(stage):
    from generator.facts.dtype_runs import cached_dtypes, kept

    build, found = stage
    llama = load_family(family_path("llama"))
    assert cached_dtypes(llama, progress=lambda line: None, build=build) == (found["llama"][1], False)
    key = (build / "facts" / "llama.key").read_text().strip()
    assert kept(build / "dtypes", "llama", key) == found["llama"][1]
    assert kept(build / "dtypes", "llama", "another facts key") is None  # stale: the page shows no dtype line


def test_verify_without_the_flag_runs_no_dtype_stage(native_facts, monkeypatch):
    """``generator verify`` (make test's prelude) leaves the half dtypes to make site: the facts carry none, and a
    verify of current facts never reaches the stage; ``verify --dtypes`` does."""
    import generator.build as build

    for name in SAMPLE:
        facts = json.loads((native_facts / f"{name}.json").read_text(encoding="utf-8"))
        assert "dtypes" not in facts and "dtype_edits" not in facts, name
    ran = []
    monkeypatch.setattr(build, "cached_dtypes", lambda family, *args: ran.append(family.family))
    build.verify(progress=lambda line: None, names=["llama"])
    assert ran == []
    build.verify(progress=lambda line: None, names=["llama"], dtypes=True)
    assert ran == ["llama"]


def test_the_page_shows_the_stage_result_while_it_is_current(stage, tmp_path):
    """The family page's dtype line and its published facts come from the stage's file, and only under its key."""
    from generator.site.render import render_site

    build, found = stage
    render_site(build / "facts", tmp_path / "docs", families=list(SAMPLE))
    page = (tmp_path / "docs" / "families" / "doge.md").read_text(encoding="utf-8")
    assert "Dtypes verified: float32, bfloat16, float16." in page and "cannot hold in a half dtype" in page
    published = json.loads((tmp_path / "docs" / "facts" / "t5.json").read_text(encoding="utf-8"))
    assert published["dtypes"] == found["t5"][1]["dtypes"]
    assert "again in bfloat16" in (tmp_path / "docs" / "families" / "t5.md").read_text(encoding="utf-8")
    stale = build / "dtypes" / "llama.json"
    saved = stale.read_text(encoding="utf-8")
    stale.write_text(json.dumps({**json.loads(saved), "key": "stale"}), encoding="utf-8")
    try:
        render_site(build / "facts", tmp_path / "again", families=["llama"])
    finally:
        stale.write_text(saved, encoding="utf-8")
    assert "Dtypes verified" not in (tmp_path / "again" / "families" / "llama.md").read_text(encoding="utf-8")


def test_the_bound_is_the_error_model_at_each_unit_roundoff():
    for name, (tolerance, roundings) in precision.LEVELS.items():
        assert precision.bound(tolerance, "float32") == tolerance
        for dtype in ("bfloat16", "float16"):
            u, k = precision.UNIT_ROUNDOFF[dtype], precision.STORED[name]
            assert precision.bound(tolerance, dtype) == pytest.approx(2 * (k * u / (1 - k * u) + precision.reordered(roundings) / 2))
    with pytest.raises(ValueError, match="not a level"):
        precision.bound(3e-5, "bfloat16")


def _hf(family: str, dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = checkpoint_dir(load_family(family_path(family)))
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype, attn_implementation="eager").eval()
    return model, AutoTokenizer.from_pretrained(directory)


def _relative(computed, read) -> float:
    computed, read = computed.detach(), read.detach().double()
    return float((computed - read).abs().max()) / max(1.0, float(read.abs().max()))


def _hooked(family: str, module_of, dtype, compute) -> float:
    """The error of ``compute(inputs, module)`` in float64 against the module's own output on a forward in ``dtype``."""
    model, tokenizer = _hf(family, dtype)
    module, seen = module_of(model), {}
    handle = module.register_forward_hook(lambda m, args, out: seen.update(args=args, out=out))
    with torch.no_grad():
        model(**tokenizer("The cat sat on the mat because it was warm.", return_tensors="pt"))
    handle.remove()
    return _relative(compute(seen["args"], module), seen["out"])


def test_llama_rmsnorm_in_bfloat16_against_float64():
    """``attention_norm_output == rmsnorm(input_layernorm.input)``, a one-step relation: x / sqrt(mean(x²) + eps) · weight
    in float64 from the bfloat16 input, against the bfloat16 forward's output."""
    def rmsnorm(args, module):
        x = args[0].double()
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + module.variance_epsilon) * module.weight.double()

    error = _hooked("llama", lambda m: m.model.layers[0].input_layernorm, torch.bfloat16, rmsnorm)
    assert precision.bound(precision.STEP, "float32") < error <= precision.bound(precision.STEP, "bfloat16")


def test_mamba2_output_projection_in_bfloat16_against_float64():
    """``attention_output == out_proj(gated_norm_output)`` (the mixer's last step; its relation is a sub-block's, with
    the gated norm, which Mamba-2 computes in float32): the float32 gated norm cast to bfloat16, as the forward casts it,
    times out_proj's weight in float64, against the bfloat16 forward's attention_output."""
    def projection(args, module):
        out = args[0].double() @ module.weight.double().T
        return out + module.bias.double() if module.bias is not None else out

    error = _hooked("mamba2", lambda m: m.backbone.layers[0].mixer.out_proj, torch.bfloat16, projection)
    assert precision.bound(precision.SUBBLOCK, "float32") < error <= precision.bound(precision.SUBBLOCK, "bfloat16")


def test_an_edit_that_lands_only_through_a_float32_alias_is_caught_in_bfloat16(monkeypatch):
    """A view that serves ``mlp_output`` through ``.float()``: in float32 that is the tensor itself, so an in-place edit
    lands; in bfloat16 it is a copy the forward never reads, and the dtype load's edit check refuses it."""
    from generator.facts.claim_error import ClaimError
    from generator.facts.collect import PROMPTS
    from generator.facts.dtypes import dtype_loads
    from generator.facts.edits import prove_edits
    from generator.facts.identity import import_module
    from generator.facts.loads import Models, load, resolve_loads
    from nncanon.core.values import ValueProperty, View

    family = load_family(family_path("llama"))
    module = import_module(family)
    directory = checkpoint_dir(family)
    models = resolve_loads(family, module, directory)
    mlp = type(models.get(models.default).layers[0].mlp)
    prop = next(attr for klass in mlp.__mro__ for attr in vars(klass).values()
                if isinstance(attr, ValueProperty) and attr.name == "mlp_output")
    upcast = View("upcast", lambda host, x: x.float(), lambda host, x, current: x.to(current.dtype))
    monkeypatch.setattr(prop, "value", dataclasses.replace(prop.value, view=upcast))

    def edits(dtype):
        half = Models(directory, dtype_loads(models, dtype), lambda **kw: load(family, module, directory, **kw))
        return prove_edits(family, half, module, list(PROMPTS), dtype)

    assert any(e["value"] == "mlp_output" for e in edits("float32"))
    for dtype in ("bfloat16", "float16"):
        with pytest.raises(ClaimError, match=rf"edit of model\.layers\[0\]\.mlp\.mlp_output under {dtype}: an "
                                             r"in-place edit does not reach the logits"):
            edits(dtype)


def _graphs(family_name: str) -> dict:
    from generator.facts.collect import PROMPTS
    from generator.facts.dtypes import dtype_loads
    from generator.facts.identity import import_module
    from generator.facts.loads import Models, load, resolve_loads
    from generator.facts.measure import run_inputs
    from generator.facts.op_graph import op_graph

    family = load_family(family_path(family_name))
    module = import_module(family)
    directory = checkpoint_dir(family)
    models = resolve_loads(family, module, directory)
    graphs = {}
    for dtype in ("bfloat16", "float16"):
        half = Models(directory, dtype_loads(models, dtype), lambda **kw: load(family, module, directory, **kw))
        model = half.get(half.default)
        graphs[dtype] = op_graph(model, *run_inputs(model, module, list(PROMPTS)))
        half.close()
    return graphs


def test_the_operator_graph_tells_a_dtype_branch():
    """Llama's modeling code never branches on float16: its bfloat16 and float16 forwards dispatch one graph. T5's
    layers clamp their hidden states only ``if hidden_states.dtype == torch.float16`` (modeling_t5.py): its float16
    graph has clamps its bfloat16 one has not, so bfloat16's edits cannot be taken from float16's."""
    llama = _graphs("llama")
    assert llama["bfloat16"] == llama["float16"]
    t5 = _graphs("t5")
    clamps = {dtype: sum(name.startswith("aten.clamp") for name, _ in graph) for dtype, graph in t5.items()}
    assert clamps["bfloat16"] == 0 < clamps["float16"]
    assert t5["bfloat16"] != t5["float16"]
