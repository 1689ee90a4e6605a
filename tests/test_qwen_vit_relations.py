"""The Qwen ViT line's relations: every vision-language family's relations hold on its tiny checkpoint
under every load (the text loads and the image one), every value of every vision host is stated by
some relation, and a wrong claim about a vision value fails the proof, naming it.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from generator.facts.proof import RelationError, pattern, prove_family, targets
from nncanon.parts.vision import qwen_vit
from nncanon.parts.vision.qwen_vit import relations as vit_relations

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5_moe_text")
IMAGE = "image-text-to-text"


class Proof:
    """One family's loads (each model loaded once) and what proving them gave."""

    def __init__(self, name: str):
        from generator.checkpoint.checkpoints import checkpoint_dir
        from generator.facts.collect import PROMPTS
        from generator.facts.loads import resolve_loads
        from generator.facts.measure import run_inputs
        from generator.recipe.family import get_family

        self.family = get_family(name)
        self.module = importlib.import_module(self.family.module)
        self.models = resolve_loads(self.family, self.module, checkpoint_dir(get_family(self.family)))
        self.inputs = lambda model: run_inputs(model, self.module, list(PROMPTS))
        self._facts: list[dict] | None = None

    @property
    def image(self) -> str:
        return next(load.label for load in self.models.all if load.task == IMAGE)

    def loads(self, only_image: bool = False) -> list:
        return [load for load in self.models.all if not only_image or load.task == IMAGE]

    def prove(self, only_image: bool = False) -> list[dict]:
        return prove_family(self.family, self.models, self.loads(only_image), self.inputs)

    @property
    def facts(self) -> list[dict]:
        if self._facts is None:
            self._facts = self.prove()
        return self._facts


@pytest.fixture(scope="module")
def proofs():
    cache: dict[str, Proof] = {}

    def get(name: str) -> Proof:
        if name not in cache:
            cache[name] = Proof(name)
        return cache[name]

    yield get
    for proof in cache.values():
        proof.models.close()


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def vision_hosts(model) -> list:
    """The hosts that exist with images: the encoder's, and the text blocks DeepStack adds to."""
    return [e for e in model._hosts if e._std_path.startswith("model.vision") or hasattr(type(e), "deepstack_output")]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_relation_holds_under_every_load(family, proofs):
    proof = proofs(family)
    facts = proof.facts
    image = proof.image
    vision = [f for f in facts if f["host"].startswith("model.vision")]
    assert vision, "no relation on the vision hosts"
    for fact in vision:  # each vision relation ran under the image load, and only there
        assert list(fact["errors"]) == [image], fact
        error = fact["errors"][image]  # "0", or "≤ tolerance"
        assert error == "0" or float(error.removeprefix("≤ ")) <= 1e-4, fact
    for fact in facts:
        if fact["host"] == "model":  # the root's relations hold under every load, images or not
            assert not fact["skipped"], fact
            assert set(fact["errors"]) == {load.label for load in proof.loads()}, fact


@pytest.mark.parametrize("family", FAMILIES)
def test_every_vision_value_is_stated_by_a_relation(family, proofs):
    proof = proofs(family)
    model = proof.models.get(proof.image)
    proven: set[tuple[str, str]] = set()
    for fact in proof.facts:
        for term in fact["proves"]:
            for envoy in (e for e in [model, *model._hosts] if pattern(e._std_path) == fact["host"]):
                try:  # a hybrid stack's block has one mixer or the other
                    found, attr, _ = targets(model, envoy, term)
                except AttributeError:
                    continue
                proven.update((pattern(e._std_path), attr) for e in found)
    served = {(pattern(e._std_path), value.name) for e in vision_hosts(model) for value in type(e).values()
              if all(condition.holds(model) for condition in value.conditions)}
    assert served and served <= proven, sorted(served - proven)
    if family in ("qwen3_vl", "qwen3_vl_moe"):
        assert ("model.layers[i]", "deepstack_output") in proven


def test_the_vision_relations_each_host_carries():
    assert qwen_vit.VisionBlock.RELATIONS[0].adds == ("layer_input", "{mixer}.attention_output", "layer_mid")
    from nncanon.parts.attention.softmax import HEAD_RESULTS_RELATION

    assert qwen_vit.VisionAttention.RELATIONS == (*vit_relations.ATTENTION_RELATIONS, HEAD_RESULTS_RELATION)
    assert qwen_vit.VisionMLP.RELATIONS == vit_relations.MLP_RELATIONS_FC
    assert qwen_vit.GatedVisionMLP.RELATIONS == vit_relations.GATED_MLP_RELATIONS
    assert qwen_vit.DeepStackVision.RELATIONS == vit_relations.DEEPSTACK_RELATIONS
    # the text root of a VL line replaces exactly the relations images change, and keeps the others
    texts = lambda relations: [r.text for r in relations]  # noqa: E731
    from nncanon.parts.blocks.decoder import ROOT_RELATIONS

    changed = set(texts(ROOT_RELATIONS)) - set(texts(qwen_vit.IMAGE_ROOT_RELATIONS))
    assert changed == {"layers[0].layer_input == token_embeddings"}
    assert len(set(texts(ROOT_RELATIONS)) - set(texts(qwen_vit.DEEPSTACK_ROOT_RELATIONS))) == 2


# -- a wrong claim fails, naming it ---------------------------------------------------------------


def test_a_wrong_vision_relation_fails_naming_it(proofs, monkeypatch):
    from nncanon.core.relations import relation

    @relation("layer_mid == layer_input", proves="layer_mid", reads="layer_input layer_mid")
    def wrong(host, r):
        return [(r["layer_input"], r["layer_mid"])]

    monkeypatch.setattr(qwen_vit.VisionBlock, "RELATIONS", (*qwen_vit.VisionBlock.RELATIONS, wrong))
    with pytest.raises(RelationError, match=r"'layer_mid == layer_input'.*does not hold on model\.vision\.layers\[0\]"):
        proofs("qwen2_vl").prove(only_image=True)


def test_attention_across_images_is_not_the_heads(proofs, monkeypatch):
    """The packed attention's relation is block-diagonal: claiming one segment over the whole row fails."""
    monkeypatch.setattr(vit_relations, "segment_bounds",
                        lambda config, grid, block: [0, int(grid.prod(-1).sum())])
    with pytest.raises(RelationError, match=r"attention_head_outputs == softmax.*does not hold on model\.vision"):
        proofs("qwen2_vl").prove(only_image=True)


def test_the_stack_without_deepstack_fails(proofs, monkeypatch):
    """Claiming no DeepStack block (the stream passes untouched at the image tokens too) fails on block 0."""
    monkeypatch.setattr(vit_relations, "taps", lambda model: [])
    with pytest.raises(RelationError, match=r"layers\[i\]\.layer_output == layers\[i\+1\]\.layer_input.*"
                                            r"does not hold on model under image"):
        proofs("qwen3_vl").prove(only_image=True)
