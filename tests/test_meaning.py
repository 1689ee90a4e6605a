"""The build proves what each value means, and refuses a page that would say something untrue:
contributing.md's steps add a family that verifies; a copy of llama pointed at Gemma-2's sandwich block
fails listing the relations that do not hold, one per line; an unedited new --like is refused for its
identity and its markers; a parallel block copied from llama names the module looked for and the family
to start from; weights that do not load into the built class are refused; a contradicting tag, tagline
phrase or notes routing word fails naming it; a host missing from the claims, a tuple served as a
residual, a value no relation states, and a write that does not land each fail naming it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from renaming import renamed
from warm_generator import run_generator

REPO = Path(__file__).resolve().parent.parent
MARKER = "CHANGE ME (copied by new --like"
PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]

pytestmark = pytest.mark.slow


# -- a family added in a copy of the repository, as contributing.md says ------------------------------


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """The library, generator and families copied, so new families land outside the repository."""
    root = tmp_path_factory.mktemp("repo")
    for name in ("nncanon", "generator", "families", "site_templates", "docs_src"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    # the families these tests add anew are not in the copy (the real gemma2 is the truthful version;
    # gemma3_text and gemma build on it; cohere2 builds on cohere; starcoder2 would serve the model type the
    # unedited copy claims)
    for name in ("gemma2", "gemma3_text", "gemma", "olmo", "cohere", "cohere2", "starcoder2"):
        for path in [root / "nncanon" / "families" / f"{name}.py", *(root / "families").glob(f"{name}.*")]:
            path.unlink(missing_ok=True)
    return root


def run(copy: Path, command: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NNCANON_")}
    env.update(PYTHONPATH=str(copy), NNCANON_BUILD=str(copy / "build"), NNCANON_CACHE=str(copy / "checkpoints"))
    argv = command.split()
    assert argv[:3] == ["python", "-m", "generator"], command
    return run_generator(argv[3:], copy, env)


def contributing_steps() -> list[str]:
    """The commands of contributing.md's "add a family" block, in order."""
    text = (REPO / "docs_src" / "contributing.md").read_text(encoding="utf-8")
    block = re.search(r'```bash title="add a family"\n(.*?)```', text, re.S).group(1)
    return [line for line in block.splitlines() if line.startswith("python -m generator")]


def point_at(copy: Path, family: str, like_class: str, new_class: str, model_type: str) -> None:
    """The edits the comment in contributing.md describes: the module at transformers' classes of the
    family, the recipe and the full-size configs at its model class and model_type."""
    module = copy / "nncanon" / "families" / f"{family}.py"
    text = module.read_text()
    text = text.replace(f"modeling_{like_class.lower()}", f"modeling_{model_type}")
    text = text.replace(f"models.{like_class.lower()}", f"models.{model_type}").replace(f"hf.{like_class}", f"hf.{new_class}")
    module.write_text(text)
    for path in (copy / "families" / f"{family}.yaml", copy / "families" / f"{family}.notes.md"):
        text = path.read_text().replace(f"{like_class}ForCausalLM", f"{new_class}ForCausalLM")
        path.write_text(re.sub(r"model_type: \w+", f"model_type: {model_type}", text))
    unmark(copy, family)


def unmark(copy: Path, family: str) -> None:
    """Delete the marker lines new --like left on what must change (the edits above changed it)."""
    for path in (copy / "nncanon" / "families" / f"{family}.py", *(copy / "families").glob(f"{family}.*")):
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(line for line in lines if MARKER not in line))


def test_contributing_steps_add_a_family_that_verifies(copy):
    def kept():
        """The repository's own olmo files (a family of its own since issue 24), to see the steps leave them be."""
        return {p.name: p.read_bytes() for p in [REPO / "nncanon" / "families" / "olmo.py",
                                                 *(REPO / "families").glob("olmo.*")] if p.exists()}

    before = kept()
    steps = contributing_steps()
    assert [s.split()[3] for s in steps] == ["new", "pin", "claims", "verify", "releases"]
    done = run(copy, steps[0])
    assert done.returncode == 0, done.stderr
    point_at(copy, "olmo", "Llama", "Olmo", "olmo")
    (copy / "families" / "olmo.notes.md").write_text(OLMO_NOTES)  # llama's notes, rewritten for OLMo
    path = copy / "families" / "olmo.yaml"  # llama's tagline says RMSNorm: OLMo's norms are LayerNorms
    data = yaml.safe_load(path.read_text())
    data.update(lines=["OLMo"], group="OLMo", tags=["Pre-norm", "SwiGLU MLP"],
                tagline="Llama's block with LayerNorms that have no gain: a LayerNorm, attention, an add, a "
                        "LayerNorm, a SwiGLU MLP, an add.")
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    for step in steps[1:]:
        done = run(copy, step)
        assert done.returncode == 0, f"{step}: {done.stderr[-1500:]}"
    facts = yaml.safe_load((copy / "build" / "facts" / "olmo.json").read_text())
    assert facts["relations"] and facts["edits"] and facts["traits"]["norm_gain"] == "none"
    assert kept() == before, "the steps ran in the copy"  # the repository's own olmo page is untouched


OLMO_NOTES = """## The block, in order

OLMo's norms have no gain; every block adds what the attention and the MLP give to the stream:

```python
with model.trace(prompt):
    x = model.layers[1].input.save()
    attn = model.layers[1].self_attn.attention_output.save()
    mlp = model.layers[1].mlp.mlp_output.save()
    out = model.layers[1].layer_output.save()

torch.equal(x + attn + mlp, out)        # True
```
"""


def test_a_copy_of_llama_on_a_sandwich_norm_block_fails_naming_the_relations(copy):
    assert run(copy, "python -m generator new gemma2 --like llama --model-type gemma2").returncode == 0
    point_at(copy, "gemma2", "Llama", "Gemma2", "gemma2")
    path = copy / "families" / "gemma2.yaml"
    data = yaml.safe_load(path.read_text())
    data["tiny"]["config"] = {
        "vocab_size": 384, "hidden_size": 40, "intermediate_size": 56, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 24, "max_position_embeddings": 512,
        "bos_token_id": 360, "eos_token_id": 361, "pad_token_id": 364, "sliding_window": 16,
        "query_pre_attn_scalar": 24, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    for step in ("pin", "claims"):
        done = run(copy, f"python -m generator {step} gemma2")
        assert done.returncode == 0, done.stderr[-1500:]
    done = run(copy, "python -m generator verify gemma2")
    assert done.returncode == 1
    heading, listed = error_lines(done)
    assert heading.startswith("error: gemma2: claim relations: ") and heading.endswith("do not hold:"), heading
    assert len(listed) == int(heading.split()[4]) > 1, listed  # every failing relation, one per line
    for relation in ("'layer_input + self_attn.attention_output == layer_mid'",  # layer_mid is the raw attention
                     "'mlp_input == mlp_norm_output == post_attention_layernorm(layer_mid)'",
                     "'logits == lm_head_output (nothing past the head)'"):  # the final softcap
        assert [line for line in listed if line.startswith(relation + " does not hold on model")], relation


def error_lines(done: subprocess.CompletedProcess) -> tuple[str, list[str]]:
    """A failed command's ``error:`` line and the detail lines under it, with no traceback."""
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.rstrip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("error: "))
    return lines[start], [line.strip() for line in lines[start + 1:]]


def test_an_unedited_new_like_family_is_refused_naming_what_to_change(copy):
    """llama's files renamed to claim starcoder2, nothing edited: pin refuses the identity (the build, the
    tiny checkpoint and the configs are Llama's), verify lists every line new --like marked."""
    assert run(copy, "python -m generator new unedited --like llama --model-type starcoder2").returncode == 0
    done = run(copy, "python -m generator pin unedited")
    heading, _ = error_lines(done)
    # the YAML's own check comes first: a full-size config of another model type, at its field
    assert done.returncode == 1 and heading.startswith(
        "error: families/unedited.yaml: field 'checkpoints[0].config.model_type': 'llama' is not a model type "
        "nncanon.families.unedited serves (starcoder2)"), heading
    # a contributor who renames the configs' model type only: the identity check names every disagreement
    yaml = copy / "families" / "unedited.yaml"
    yaml.write_text(yaml.read_text(encoding="utf-8").replace("model_type: llama", "model_type: starcoder2"),
                    encoding="utf-8")
    done = run(copy, "python -m generator pin unedited")
    heading, _ = error_lines(done)
    assert done.returncode == 1 and heading.startswith("error: unedited: claim identity: MODEL_TYPES is "
                                                       "('starcoder2',) but build loads LlamaForCausalLM"), heading
    assert "tiny.class LlamaForCausalLM builds a 'llama' checkpoint" in heading
    done = run(copy, "python -m generator verify unedited")
    heading, listed = error_lines(done)
    assert done.returncode == 1 and "claim new --like's markers" in heading, heading
    marked = {line.split(":")[0] for line in listed}
    assert marked == {"nncanon/families/unedited.py", "families/unedited.yaml", "families/unedited.notes.md"}
    for what in ("tagline", "tags", "tiny.class", "import the family's own transformers"):
        assert [line for line in listed if what in line], what
    assert all(re.match(r"^\S+:\d+: ", line) for line in listed), listed  # each names its file and line


def test_a_parallel_block_copied_from_llama_names_the_module_and_the_family_to_start_from(copy):
    """Cohere's block has one norm feeding the attention and the MLP side by side: llama's
    post_attention_layernorm is not there, and both claims and verify say so in one line."""
    assert run(copy, "python -m generator new cohere --like llama").returncode == 0
    point_at(copy, "cohere", "Llama", "Cohere", "cohere")
    assert run(copy, "python -m generator pin cohere").returncode == 0
    for step in ("claims", "verify"):
        done = run(copy, f"python -m generator {step} cohere")
        heading, listed = error_lines(done)
        assert done.returncode == 1 and not listed, done.stderr[-2000:]
        assert heading.startswith("error: cohere: claim value model.layers[i].post_attention_layernorm: does not "
                                  "resolve: looked for the module 'post_attention_layernorm' under model.layers[i] "
                                  "(CohereDecoderLayer), which has input_layernorm, mlp, self_attn instead"), heading
        assert "a parallel block" in heading and "start from gpt_neox" in heading, heading


def test_a_checkpoint_whose_weights_do_not_load_into_the_built_class_is_refused(tmp_path):
    """A family registered for starcoder2 that builds Llama's class: transformers would load the attention
    and leave the MLP random; nncanon.load refuses in one line naming both classes."""
    import types

    import transformers

    import nncanon
    from nncanon.families import CheckpointError, llama, register, unregister

    config = transformers.Starcoder2Config(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                           num_attention_heads=4, num_key_value_heads=2)
    transformers.Starcoder2ForCausalLM(config).save_pretrained(tmp_path)
    wrong = types.ModuleType("wrong_starcoder2")
    wrong.__dict__.update({k: v for k, v in vars(llama).items() if not k.startswith("__")}, MODEL_TYPES=("starcoder2",))
    register(wrong)
    try:
        with pytest.raises(CheckpointError) as caught:
            nncanon.load(tmp_path)
    finally:
        unregister(wrong)
    message = str(caught.value)
    assert "\n" not in message and "(Starcoder2ForCausalLM, model_type 'starcoder2')" in message
    assert "do not all load into LlamaForCausalLM" in message and "mlp.gate_proj.weight" in message
    assert "mlp.c_fc.weight" in message


# -- tags, tagline and notes against the facts ---------------------------------------------------------


def pseudo_facts(name: str) -> tuple:
    """What the tag checks read of a family's facts (traits, relation texts, loads), measured without the
    proofs: the family and the facts."""
    import importlib

    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts.configs import full_size
    from generator.facts.loads import resolve_loads
    from generator.facts.tags import checkpoint_settings
    from generator.facts.traits import traits
    from generator.recipe.family import get_family

    family = get_family(name)
    module = importlib.import_module(family.module)
    models = resolve_loads(family, module, checkpoint_dir(get_family(family)))
    tiny = models.get(models.default)
    measured = traits(module, tiny, full_size(family, module, family.printout_checkpoint, "text-generation",
                                              type(tiny._module)))
    measured["checkpoints"] = checkpoint_settings(family)
    relations = [{"text": r.text} for host in {*module.ENVOYS.values(), module.ROOT} for r in host.RELATIONS]
    return family, {"traits": measured, "relations": relations, "loads": dict.fromkeys(models.loads), "vision": None}


def with_yaml(family, tmp_path: Path, **fields):
    """The family's YAML with ``fields`` replaced, loaded from a copy."""
    from generator.recipe.family import load_family

    data = yaml.safe_load(family.path.read_text())
    data.update(fields)
    path = tmp_path / family.path.name
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    for notes in family.path.parent.glob(f"{family.family}.*.md"):
        shutil.copy(notes, tmp_path / notes.name)
    return load_family(path)


def test_a_tag_or_tagline_phrase_the_facts_contradict_fails_naming_it(tmp_path):
    from generator.facts.claim_error import ClaimError
    from generator.facts.traits import check_tags

    family, facts = pseudo_facts("llama")
    check_tags(family, facts)  # llama's own words hold
    for tags, error in ((["Sliding-window attention"], r"tag 'Sliding-window attention': needs a sliding window"),
                        (["Scaled rotary (yarn)"], r"tag 'Scaled rotary \(yarn\)': needs that rope scaling"),
                        (["GELU MLP"], r"tag 'GELU MLP': needs a plain MLP with a GELU"),
                        (["RMSNorm everywhere"], r"tags\[0\] is not a tag the build can check; use one of: Hybrid, ")):
        with pytest.raises(ClaimError, match=error):
            check_tags(with_yaml(family, tmp_path, tags=tags), facts)
    for tagline, phrase in (("A LayerNorm, attention, an add.", "LayerNorm"),
                            ("Its logits are softcapped.", "softcapped"),
                            ("A GeGLU MLP.", "GeGLU")):
        with pytest.raises(ClaimError, match=f"tagline phrase '{phrase}': says"):
            check_tags(with_yaml(family, tmp_path, tagline=tagline), facts)
    check_tags(with_yaml(family, tmp_path, tagline="Nothing is softcapped; the 3.2 sizes tie the head."), facts)


def test_llamas_words_on_a_layernorm_plain_mlp_family_fail(tmp_path):
    """Llama's tags and tagline copied onto gpt_neox (LayerNorm, a plain GELU MLP, a partial rotary without
    llama3 scaling), as a naive copy left them on starcoder2: each contradicted word fails, naming it."""
    from generator.facts.claim_error import ClaimError
    from generator.facts.traits import check_tags
    from generator.recipe.family import get_family

    family, facts = pseudo_facts("gpt_neox")
    llama = get_family("llama")
    check_tags(family, facts)
    for tag, error in (("SwiGLU MLP", "needs a gated MLP with silu"), ("Scaled rotary (llama3)", "needs that rope"),
                       ("Grouped-query attention", "needs fewer kv heads than heads")):
        assert tag in llama.tags
        with pytest.raises(ClaimError, match=re.escape(f"tag {tag!r}: {error}")):
            check_tags(with_yaml(family, tmp_path, tags=[tag]), facts)
    with pytest.raises(ClaimError, match="tagline phrase 'RMSNorm': says an RMSNorm"):
        check_tags(with_yaml(family, tmp_path, tags=[], tagline=llama.tagline), facts)


def test_renormalisation_words_must_match_the_routing_relation(tmp_path):
    """qwen3_moe's routing relation renormalises the top-k weights: a tag, the tagline or the notes saying
    they are not fails naming the phrase."""
    from generator.facts.claim_error import ClaimError
    from generator.facts.traits import check_tags

    family, facts = pseudo_facts("qwen3_moe")
    check_tags(family, facts)
    with pytest.raises(ClaimError, match="tag 'Top-k not renormalized': needs a routing relation that does not"):
        check_tags(with_yaml(family, tmp_path, tags=["Top-k not renormalized"]), facts)
    with pytest.raises(ClaimError, match="tagline phrase 'renormalized': says no top-k weights renormalised"):
        check_tags(with_yaml(family, tmp_path, tagline="A softmax router's top k, not renormalized."), facts)
    mutated = with_yaml(family, tmp_path)
    notes = mutated.path.parent / mutated.get("notes")
    notes.write_text(notes.read_text() + "\nThe chosen weights are not renormalized.\n")
    with pytest.raises(ClaimError, match="qwen3_moe.notes.md phrase 'renormalized': says no top-k"):
        check_tags(mutated, facts)


# -- mutations on llama, in process -------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama():
    import importlib

    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    family = get_family("llama")
    return family, importlib.import_module(family.module), checkpoint_dir(get_family(family))


def _hosts(llama):
    from generator.facts.loads import resolve_loads
    from generator.facts.measure import host_rows

    family, module, checkpoint = llama
    return host_rows(resolve_loads(family, module, checkpoint), family, module, PROMPTS)


def _mlp_with(monkeypatch, llama, view):
    """llama's MLP host serving ``mlp_output`` through ``view``."""
    from nncanon.core.hosts import host
    from nncanon.core.values import Value
    from nncanon.parts.blocks.mlp import MLP

    _, module, _ = llama
    old = next(v for v in MLP.values() if v.name == "mlp_output")
    bad = host("BadMLP", MLP, values=[Value("mlp_output", old.layout, old.description, old.locator, view=view)])
    native = next(cls for cls, h in module.ENVOYS.items() if h is MLP)
    monkeypatch.setitem(module.ENVOYS, native, bad)


def test_a_host_missing_from_the_claims_fails_naming_it(llama, tmp_path):
    from generator.facts.claims import check_value_claims
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    family = llama[0]
    hosts = _hosts(llama)
    check_value_claims(family, hosts)  # the real claims hold
    data = yaml.safe_load(family.path.read_text())
    del data["claims"]["values"]["model.layers[i].mlp"]
    path = tmp_path / "llama.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    shutil.copy(family.path.with_name("llama.notes.md"), tmp_path / "llama.notes.md")
    with pytest.raises(FamilyYamlError, match=r"claims\.values.*model\.layers\[i\]\.mlp, which the YAML does not claim"):
        check_value_claims(load_family(path), hosts)
    del data["claims"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(FamilyYamlError, match=r"claims\.values.*missing"):
        check_value_claims(load_family(path), hosts)


def test_a_tuple_served_as_a_residual_fails_naming_it(llama, monkeypatch):
    from generator.facts.claim_error import ClaimError
    from nncanon.core.values import View

    _mlp_with(monkeypatch, llama, View("tuple", lambda host, x: (x,), None))
    with pytest.raises(ClaimError, match=r"model\.layers\[i\]\.mlp\.mlp_output.*promises a tensor.*tuple"):
        _hosts(llama)


def test_a_value_no_relation_states_fails_naming_it(llama, monkeypatch):
    from generator.facts.loads import resolve_loads
    from generator.facts.measure import run_inputs
    from generator.facts.proof import RelationError, prove_family
    from nncanon.parts.blocks.decoder import Block

    family, module, checkpoint = llama
    dropped = tuple(r for r in Block.RELATIONS if "mlp_norm_output" not in r.proves)
    monkeypatch.setattr(Block, "RELATIONS", dropped)
    models = resolve_loads(family, module, checkpoint)
    with pytest.raises(RelationError, match=r"no relation stating what (it|they) means?[^\n]*:\n(.*\n)*model\.layers\[i\]\.mlp_input \(served under"):
        prove_family(family, models, models.all, lambda m: run_inputs(m, module, PROMPTS))


def test_a_write_that_does_not_land_fails_naming_it(llama, monkeypatch):
    from generator.facts.claim_error import ClaimError
    from generator.facts.edits import prove_edits
    from generator.facts.loads import resolve_loads
    from nncanon.core.values import View

    # reads a copy, and an assignment keeps the model's own tensor: neither edit reaches the forward
    _mlp_with(monkeypatch, llama, View("copy", lambda host, x: x.clone(), lambda host, x, current: current))
    family, module, checkpoint = llama
    models = resolve_loads(family, module, checkpoint)
    with pytest.raises(ClaimError, match=r"edit of model\.layers\[0\]\.mlp\.mlp_output.*does not reach the logits"):
        prove_edits(family, models, module, PROMPTS)


@pytest.mark.parametrize("name, copy_name", [("llama", "llama_copy"), ("seed_oss", "seed2")])
def test_a_second_family_claiming_a_model_type_is_refused_naming_both_files(name, copy_name):
    """issue 48: a copy of a family under another name (seed2, serving seed_oss), verified green and then took over
    every checkpoint of the model type in `nncanon.load` (the registry picks one module per model type)."""
    import importlib
    import types

    from generator.facts.claim_error import ClaimError
    from generator.facts.identity import check_identity
    from generator.recipe.family import get_family

    original = importlib.import_module(f"nncanon.families.{name}")
    copy = types.ModuleType(f"nncanon.families.{copy_name}")
    copy.__dict__.update({k: v for k, v in vars(original).items() if not k.startswith("__")})
    copy.__file__ = str(Path(original.__file__).with_name(f"{copy_name}.py"))
    with pytest.raises(ClaimError, match=rf"MODEL_TYPES claims '{name}', which nncanon/families/{name}\.py serves "
                                         rf"already \(nncanon/families/{copy_name}\.py\); a model type has one family"
                       ) as caught:
        check_identity(get_family(name), copy)
    assert "\n" not in str(caught.value)
    check_identity(get_family(name), original)  # its own module is the one owner


@pytest.mark.parametrize("model_type, placement", [
    ("glm4", "sandwich norms"),  # post_self_attn_layernorm / post_mlp_layernorm: named unlike Gemma's
    ("gemma2", "sandwich norms"),
    ("olmo2", "post-norm"),  # post_attention_layernorm normalises the attention's output, not its input
    ("llama", "pre-norm"),
    ("bloom", "pre-norm"),  # its attention adds the residual itself: the MLP's norm takes the sum
])
def test_norm_placement_is_measured_on_the_forward_not_read_off_names(model_type, placement):
    """issue 48: glm4 read as pre-norm because sandwich norms were recognised by Gemma's module names."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from generator.facts.norm_placement import block_placement, placements

    config = AutoConfig.for_model(model_type, vocab_size=64, pad_token_id=0, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, head_dim=8, n_embed=32, n_layer=2,
                                  n_head=4)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    for p in model.parameters():  # off their init (norm gains at one, biases at zero): every module does something
        p.data += 0.1 * torch.randn_like(p)
    layers = model.base_model.h if hasattr(model.base_model, "h") else model.base_model.layers
    blocks = [(b, getattr(b, "self_attn", None) or b.self_attention, b.mlp) for b in layers]
    with torch.no_grad():
        found = placements(blocks, lambda: model(input_ids=torch.arange(6)[None]))
    assert block_placement(found) == placement, found


@pytest.mark.parametrize("name, renormalises", [("olmoe", False), ("qwen3_moe", True)])
@pytest.mark.parametrize("phrase", ["renormalised", "re-normalized to sum to one", "normalized to sum to one",
                                    "rescaled so that they sum to 1", "normalised so the chosen weights sum to one"])
def test_renormalisation_is_checked_by_meaning_in_both_directions(tmp_path, name, renormalises, phrase):
    """issue 48: OLMoE, which does not renormalise, was accepted with "re-normalized to sum to one"; each paraphrase
    is held to the routing relation, said and negated."""
    from generator.facts.claim_error import ClaimError
    from generator.facts.traits import check_tags

    family, facts = pseudo_facts(name)
    said, negated = f"A softmax router's top k weights, {phrase}.", f"A softmax router's top k weights, not {phrase}."
    for tagline, true in ((said, renormalises), (negated, not renormalises)):
        mutated = with_yaml(family, tmp_path, tagline=tagline)
        if true:
            check_tags(mutated, facts)
        else:
            with pytest.raises(ClaimError, match="tagline phrase .*top-k weights renormalised"):
                check_tags(mutated, facts)


TRUE_30B = ("Qwen3-30B-A3B has 48 layers, 32 query heads over 4 key-value heads, 128 experts with the top-8 chosen, a "
            "hidden size of 2048, a 40960-token context and a 151,936-token vocabulary.")


@pytest.mark.parametrize("wrong, says", [
    ("Qwen3-30B-A3B has 32 layers.", "says Qwen/Qwen3-30B-A3B has 32 layers .*num_hidden_layers is 48"),
    ("Qwen3-30B-A3B has 48 layers and 40 query heads.", "has 40 heads .*num_attention_heads is 32"),
    ("Qwen3-30B-A3B shares 8 key-value heads.", "has 8 kv heads .*num_key_value_heads is 4"),
    ("Qwen/Qwen3-30B-A3B routes to the top-2 of 128 experts.", "has 2 top-k .*num_experts_per_tok is 8"),
    ("Qwen3-30B-A3B has 64 experts.", "has 64 experts .*num_experts is 128"),
    ("Qwen3-30B-A3B reads a 32K-token context.", "has 32,768 context .*max_position_embeddings is 40,960"),
    ("Qwen3-30B-A3B has a vocabulary of 152,064.", "has 152,064 vocabulary .*vocab_size is 151,936"),
])
def test_a_number_in_prose_is_checked_against_the_checkpoint_it_names(tmp_path, wrong, says):
    """issue 48: "Seed-OSS-36B has 32 layers and 40 query heads" built green in a tagline and notes; the config says
    64 and 80. A sentence naming a full-size checkpoint is held to its config, in the tagline and in the notes."""
    from generator.facts.claim_error import ClaimError
    from generator.facts.prose_numbers import check_numbers
    from generator.recipe.family import get_family

    family = get_family("qwen3_moe")
    check_numbers(family, "tagline", TRUE_30B)
    check_numbers(family, "tagline", "The tiny checkpoint has 2 layers and 4 experts.")  # names no checkpoint
    with pytest.raises(ClaimError, match=f"tagline number .*{says}"):
        check_numbers(family, "tagline", wrong)
    mutated = with_yaml(family, tmp_path)
    notes = mutated.path.parent / mutated.get("notes")
    notes.write_text(notes.read_text() + f"\nWhat it is at full size. {wrong}\n")
    from generator.facts.tags import notes_prose

    with pytest.raises(ClaimError, match=f"qwen3_moe.notes.md number .*{says}"):
        for field, text in notes_prose(mutated):
            check_numbers(mutated, field, text)


def test_the_contributing_page_lists_the_tag_vocabulary_as_the_build_checks_it():
    """issue 48: the vocabulary was documented only in code."""
    from generator.facts.tags import vocabulary_table

    text = (REPO / "docs_src" / "contributing.md").read_text()
    listed = re.search(r"<!-- the tag vocabulary: .*? -->\n(.*?)\n<!-- end of the tag vocabulary -->", text, re.S)
    assert listed, "contributing.md lists no tag vocabulary"
    assert listed.group(1) == vocabulary_table(), ("the page's tag table differs from TAGS: paste "
                                                    "generator.facts.tags.vocabulary_table() into it")


def test_a_read_point_that_does_not_resolve_is_one_claim_line(monkeypatch):
    """issue 48: `claims` (and `verify`) on a llama copy pointed at glm4 ended in a 40-line traceback whose last line
    was the library's own FamilyMismatch (Glm4MLP has no act_fn)."""
    from generator.facts import measure
    from generator.facts.claim_error import ClaimError
    from generator.recipe.family import get_family
    from nncanon.core.locators import FamilyMismatch

    said = ("model.layers[0].mlp.mlp_activation (MLP on Glm4MLP) is read at the child module act_fn's output, which "
            "does not resolve")

    def unresolved(*args):
        raise FamilyMismatch(said)

    monkeypatch.setattr(measure, "_host_rows", unresolved)
    with pytest.raises(ClaimError) as caught:
        measure.host_rows(None, get_family("llama"), None, [])
    assert str(caught.value).startswith(f"llama: claim values: {said}; point the family module's RENAME, ENVOYS")
    assert "\n" not in str(caught.value)


def _measured(model):
    """Norm placement, each MLP's kind and each block norm's form, measured on one forward of ``model``."""
    import torch

    from generator.facts import norm_placement as measure
    from generator.facts.mlp_measure import dense_kind

    layers = model.model.layers
    spec = [(b, getattr(b, "self_attn", None) or getattr(b, "conv", None), b.feed_forward if hasattr(
        b, "feed_forward") else b.mlp) for b in layers]
    with torch.no_grad():
        seen = measure.record(spec, lambda: model(input_ids=torch.arange(6)[None]))
    c = model.config
    widths = {c.head_dim, c.head_dim * c.num_attention_heads, c.head_dim * c.num_key_value_heads}
    return (measure.block_placement(measure.placements_seen(spec, seen)),
            [dense_kind(mlp, set(), seen) for _, _, mlp in spec],
            sorted({measure.norm_form(n, seen[id(n)][0]) for b in layers for n in measure.norms_of(b, seen)}),
            any(measure.has_qk_norms(b.self_attn, seen, widths) for b in layers if hasattr(b, "self_attn")),
            sorted({n for b in layers for n, m in b.named_modules() if m in measure.norms_of(b, seen)}))


@pytest.mark.parametrize("model_type, mlp, names, extra, qk", [
    ("llama", ("gate_proj", "up_proj", "down_proj"), {"input_layernorm": "ln_a", "post_attention_layernorm": "ln_b"},
     {}, False),
    ("lfm2", ("w1", "w3", "w2"), {"operator_norm": "ln_a", "ffn_norm": "ln_b"},  # read as plain by its names
     {"block_auto_adjust_ff_dim": False, "layer_types": ["conv", "full_attention"]}, True),
])
def test_traits_are_measured_so_renaming_a_module_changes_nothing(model_type, mlp, names, extra, qk):
    """issue 48: what the families index and the tags say of a block (where its norms sit, what its MLP computes,
    which norm it is, q/k norms) is measured on the forward, not read off module names: LFM2's w1 / w3 / w2 read as a plain MLP.
    Each is checked against the module's own math first, then the block's modules are renamed and the measurement
    is the same."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, vocab_size=64, pad_token_id=0, hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                  **extra)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    for p in model.parameters():  # off their init (norm gains at one, biases at zero): every module does something
        p.data += 0.1 * torch.randn_like(p)
    block = model.model.layers[0]
    ffn = block.feed_forward if hasattr(block, "feed_forward") else block.mlp
    gate, up, down = (getattr(ffn, name) for name in mlp)
    x = torch.randn(3, 32)
    with torch.no_grad():  # the MLP's own math: a SiLU gate times an up projection, then down
        assert torch.allclose(ffn(x), down(F.silu(gate(x)) * up(x)), atol=1e-6)
    before = _measured(model)
    assert before[:4] == ("pre-norm", ["gated", "gated"], ["RMSNorm"], qk), before
    for layer in model.model.layers:
        if qk and hasattr(layer, "self_attn"):  # LFM2's q_layernorm / k_layernorm, named as no other family's
            renamed(layer.self_attn, {"q_layernorm": "qa", "k_layernorm": "ka"})
        renamed(layer.feed_forward if hasattr(layer, "feed_forward") else layer.mlp,
                 dict(zip(mlp, ("a", "b", "c"))))
        renamed(layer, names)
        for new in names.values():  # and the norm's class renamed: no "Norm" left in its name
            norm = layer._modules[new]
            norm.__class__ = type("Scaler", (type(norm),), {})
    after = _measured(model)
    assert after[:4] == before[:4] and set(names.values()) <= set(after[4]), after  # the renamed norms found


#: (a claim in several wordings, the family it holds on, the family it does not): each wording is accepted on the
#: first and refused on the second, whatever words it uses (issue 48: only one stem of each word was read)
PARAPHRASES = [
    (["Its logits are softcapped.", "Its logits are soft-capped.", "The scores are capped with a tanh.",
      "A tanh cap bounds the logits.", "Neither blocks nor logits lack a softcap."], "gemma2", "llama"),
    (["Nothing is softcapped.", "No soft cap anywhere.", "Its logits are not capped by a tanh."], "llama", "gemma2"),
    (["The head is tied to the embedding.", "It shares its embedding matrix with the output head.",
      "Weight tying joins the embedding and the head.", "The embedding ties to the head."], "gemma", "gptj"),
    (["An untied head.", "A separate output head.", "The head is not tied to the embedding."], "gptj", "gemma"),
    (["Sliding-window attention.", "Windowed attention.", "Local attention in every block.",
      "Each query attends only to the last 4096 keys."], "mistral", "llama"),
    (["No sliding window.", "Attention without a sliding window."], "llama", "mistral"),
    (["The rotary embedding on a quarter of each head.", "The rotary on 25% of each head.",
      "Queries are rotated on the first quarter of each head.", "A partial rotary."], "gpt_neox", "llama"),
    (["The rotary embedding on every dimension.", "A full rotary.", "The rotary on all of the head dimensions."],
     "llama", "gpt_neox"),
    (["RMSNorm before each sublayer.", "Each sublayer's input is RMS-normed.", "A root-mean-square norm.",
      "RMS norms in place of LayerNorms."], "llama", "gpt_neox"),
    (["LayerNorm before each sublayer.", "Layer normalization before each sublayer.", "A layer-norm.",
      "LayerNorms instead of RMSNorms."], "gpt_neox", "llama"),
    (["A gated MLP.", "A gated linear unit.", "The MLP is a GLU.", "A gated feed-forward."], "llama", "gpt_neox"),
    (["A non-gated MLP.", "An MLP with no gate.", "An MLP that is not gated.", "A plain MLP, not a gated MLP."],
     "gpt_neox", "llama"),
]


@pytest.fixture(scope="module")
def facts_of():
    """pseudo_facts per family, measured once."""
    cache = {}
    return lambda name: cache.setdefault(name, pseudo_facts(name))


@pytest.mark.parametrize("wordings, holds_on, fails_on", PARAPHRASES,
                         ids=[f"{w[0][:24]}-{a}-{b}" for w, a, b in PARAPHRASES])
def test_a_checkable_claim_is_checked_by_meaning_in_both_directions(tmp_path, facts_of, wordings, holds_on, fails_on):
    """issue 48: a claim about a checkable property (softcap, tied head, window, rotary fraction, norm kind, MLP kind)
    is refused when false whatever its wording, and each wording is accepted where it is true."""
    from generator.facts.claim_error import ClaimError
    from generator.facts.traits import check_tags

    for tagline in wordings:
        family, facts = facts_of(holds_on)
        check_tags(with_yaml(family, tmp_path, tags=[], tagline=tagline), facts)
        family, facts = facts_of(fails_on)
        with pytest.raises(ClaimError, match="tagline phrase .*: says "):
            check_tags(with_yaml(family, tmp_path, tags=[], tagline=tagline), facts)
