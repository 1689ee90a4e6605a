"""nncanon.sae_jumprelu (Gemma Scope 2's JumpReLU SAEs) and the section's ``kind: jumprelu`` entries.

The maps against a plain float64 computation within nncanon's float32 error model, the threshold's
effect, the release's file format both ways, each bad file in one line, and the entry checks of
generator/notes/sae_jumprelu_check.py on a stand-in for the full-size config (the end-to-end check on
the tiny checkpoint runs in ``python -m generator verify gemma3``).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from generator.notes.sae_jumprelu_check import _bound, jumprelu_release
from generator.recipe.family import get_family
from generator.recipe.fields import FamilyYamlError
from nncanon.research.sae import SAEFormatError
from nncanon.research.sae_jumprelu import SITES, WIDTHS, JumpReLUSAE, release_folder, site_of


def _x(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_encode_and_decode_are_the_plain_computation():
    sae = JumpReLUSAE.random(12, 48, seed=3)
    x = _x(2, 5, 12)
    pre = x.double() @ sae.W_enc.double() + sae.b_enc.double()
    assert ((sae.pre_activations(x).double() - pre).abs() <= _bound(x, sae.W_enc, sae.b_enc)).all()
    z = sae.encode(x)
    own = sae.pre_activations(x)
    expected = torch.where(own > sae.threshold, own.clamp(min=0), torch.zeros_like(own))
    assert torch.equal(z, expected) and z.shape == (2, 5, 48)
    out = sae.decode(z)
    exact = z.double() @ sae.W_dec.double() + sae.b_dec.double()
    assert out.shape == x.shape and ((out.double() - exact).abs() <= _bound(z, sae.W_dec, sae.b_dec)).all()
    assert torch.equal(sae(x), out)  # no skip: forward is decode(encode(x))


def test_the_threshold_decides_which_features_fire():
    sae = JumpReLUSAE.random(8, 32, seed=5)
    x = _x(4, 8, seed=2)
    pre = sae.pre_activations(x)
    z = sae.encode(x)
    fires = (pre > sae.threshold) & (pre > 0)
    assert torch.equal(z != 0, fires) and fires.any() and not fires.all()
    # raising one firing feature's threshold to its largest pre-activation turns it off there
    row, feature = (fires).nonzero()[0].tolist()
    sae.threshold[feature] = pre[:, feature].max()
    assert sae.encode(x)[:, feature].count_nonzero() == 0
    assert torch.equal(sae.encode(x)[:, :feature], z[:, :feature])  # the others are untouched
    sae.threshold.fill_(-float("inf"))
    assert torch.equal(sae.encode(x), torch.relu(pre))


def test_an_affine_transcoder_adds_its_skip():
    sae = JumpReLUSAE.random(6, 24, 10, seed=7, skip=True)
    x = _x(3, 6, seed=4)
    assert (sae.d_in, sae.d_sae, sae.d_out) == (6, 24, 10)
    assert torch.allclose(sae(x), sae.decode(sae.encode(x)) + x @ sae.W_skip.T, rtol=0, atol=1e-6)


def test_save_and_load_in_the_release_format(tmp_path):
    sae = JumpReLUSAE.random(8, 16, seed=1, config={"hf_hook_point_in": "model.layers.3.output"})
    folder = sae.save(release_folder(tmp_path, "resid_post", 3, "16k", "medium"))
    assert folder == tmp_path / "resid_post" / "layer_3_width_16k_l0_medium"
    from safetensors.torch import load_file

    raw = load_file(str(folder / "params.safetensors"))
    assert set(raw) == {"w_enc", "b_enc", "w_dec", "b_dec", "threshold"}
    assert raw["w_enc"].shape == (8, 16) and raw["w_dec"].shape == (16, 8)  # input-major, as released
    config = json.loads((folder / "config.json").read_text())
    assert config == {"architecture": "jump_relu", "hf_hook_point_in": "model.layers.3.output"}
    for path in (folder, folder / "params.safetensors"):
        loaded = JumpReLUSAE.load(path)
        assert torch.equal(loaded.W_enc, sae.W_enc) and torch.equal(loaded.threshold, sae.threshold)
    assert JumpReLUSAE.load(folder).config["hf_hook_point_in"] == "model.layers.3.output"


def _write(folder, tensors, config=None):
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "params.safetensors"))
    if config is not None:
        (folder / "config.json").write_text(config)
    return folder


def _tensors(d_in=4, d_sae=8):
    return {
        "w_enc": torch.zeros(d_in, d_sae),
        "b_enc": torch.zeros(d_sae),
        "w_dec": torch.zeros(d_sae, d_in),
        "b_dec": torch.zeros(d_in),
        "threshold": torch.zeros(d_sae),
    }


@pytest.mark.parametrize(
    ("change", "config", "message"),
    [
        (lambda t: t.pop("threshold"), None, r"missing threshold"),
        (lambda t: t.__setitem__("w_dec", torch.zeros(4, 8)), None, r"w_dec is \[4, 8\].*makes it \[8, 8\]"),
        (lambda t: t.__setitem__("threshold", torch.zeros(7)), None, r"threshold is \[7\]"),
        (lambda t: t.__setitem__("b_enc", torch.zeros(2, 4)), None, r"b_enc must be a 1-d tensor"),
        (lambda t: t.__setitem__("W_enc", torch.zeros(1)), None, r"unexpected tensor 'W_enc'"),
        (lambda t: None, '{"architecture": "topk"}', r"architecture is 'topk', not 'jump_relu'"),
        (lambda t: None, "not json", r"config.json: not JSON"),
    ],
)
def test_a_bad_file_fails_in_one_line(tmp_path, change, config, message):
    tensors = _tensors()
    change(tensors)
    folder = _write(tmp_path / "sae", tensors, config)
    with pytest.raises(SAEFormatError, match=message) as caught:
        JumpReLUSAE.load(folder)
    assert "\n" not in str(caught.value)


def test_not_a_file_or_not_safetensors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"params.safetensors: no such file"):
        JumpReLUSAE.load(tmp_path)
    bad = tmp_path / "params.safetensors"
    bad.write_bytes(b"PK\x03\x04 a zip, not safetensors")
    with pytest.raises(SAEFormatError, match=r"not a safetensors file"):
        JumpReLUSAE.load(tmp_path)


def test_a_wrong_width_says_what_it_reads():
    sae = JumpReLUSAE.random(8, 16)
    with pytest.raises(ValueError, match=r"reads as x.flatten\(-2\)"):
        sae.encode(torch.zeros(1, 3, 2, 4))  # a per-head read, heads not flattened
    with pytest.raises(ValueError, match=r"not d_sae = 16"):
        sae.decode(torch.zeros(3, 8))
    with pytest.raises(TypeError, match=r"save\(\) the value"):
        sae.encode([0.0] * 8)


def test_sites_and_folders():
    assert site_of("resid_post_all") is SITES["resid_post"]
    assert site_of("attn_out").flatten_heads and site_of("transcoder").hook_out.endswith(
        "mlp_post_norm_output"
    )
    assert site_of("mlp_out").hf_hook_point_in(4) == "model.layers.4.post_feedforward_layernorm.output"
    with pytest.raises(SAEFormatError, match=r"'clt' is not a Gemma Scope 2 folder"):
        site_of("clt")
    assert WIDTHS == {"16k": 2**14, "65k": 2**16, "262k": 2**18, "1m": 2**20}


# -- the section's entries, against a stand-in for the full-size config -----------------------------

HOOKS = {
    "model.layers[i].layer_output",
    "model.layers[i].self_attn.attention_premix",
    "model.layers[i].mlp_norm_output",
    "model.layers[i].mlp_post_norm_output",
}
TEXT = SimpleNamespace(num_hidden_layers=34, hidden_size=2560, num_attention_heads=8, head_dim=256)
CONTEXT = SimpleNamespace(resolve=lambda cp: cp, text=lambda cp: TEXT)
FAMILY = SimpleNamespace(path="families/gemma3.yaml")
ENTRY = {
    "id": "gemma-scope-2-4b-it-att",
    "kind": "jumprelu",
    "repo": "google/gemma-scope-2-4b-it",
    "folder": "attn_out",
    "checkpoint": "google/gemma-3-4b-it",
    "layers": [9, 17, 22, 29],
    "widths": ["16k", "65k", "262k"],
    "l0": {"small": [17, 20], "medium": [53, 60], "big": [131, 150]},
    "hook": "model.layers[i].self_attn.attention_premix",
}


def _entry(**change):
    return jumprelu_release(FAMILY, CONTEXT, HOOKS, {**ENTRY, **change}, "saes.releases[0]")


def test_an_entry_becomes_its_row():
    row = _entry()
    assert row["d_in"] == 2048  # heads x head_dim, not hidden_size: o_proj's input
    assert row["k"] == "small 17-20, medium 53-60, big 131-150" and row["layers"] == "9, 17, 22, 29"
    assert (
        _entry(folder="resid_post_all", layers="all", hook="model.layers[i].layer_output")["layers"] == "0-33"
    )
    transcoder = _entry(
        folder="transcoder",
        hook="model.layers[i].mlp_norm_output",
        hook_out="model.layers[i].mlp_post_norm_output",
    )
    assert (
        transcoder["hook"].endswith("-> model.layers[i].mlp_post_norm_output") and transcoder["d_in"] == 2560
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hook": "model.layers[i].attention_output"}, r"\.hook': the attn_out folder reads .*o_proj\.input"),
        ({"folder": "resid_post"}, r"\.hook': the resid_post folder reads model\.layers\.<i>\.output"),
        ({"layers": [9, 34]}, r"\.layers': block 34 is not one of google/gemma-3-4b-it's blocks 0-33"),
        ({"folder": "attn_out_all"}, r"\.layers': the attn_out_all folder covers every block"),
        ({"widths": ["16k", "64k"]}, r"\.widths': expected width tokens"),
        ({"l0": {"small": [20, 17]}}, r"\.l0\.small': expected 0 < lowest <= highest"),
        ({"l0": {"small": 60, "big": 20}}, r"\.l0': the targets must grow"),
        ({"l0": {"tiny": 5}}, r"\.l0': expected a mapping"),
        ({"folder": "clt"}, r"\.folder': 'clt' is not a Gemma Scope 2 folder"),
        ({"k": 50}, r"\.k': unknown field"),
        (
            {"hook_out": "model.layers[i].layer_output"},
            r"\.hook_out': the attn_out folder has no output \(only a transcoder's has\)",
        ),
    ],
)
def test_a_wrong_entry_fails_naming_its_field(change, message):
    with pytest.raises(FamilyYamlError, match=message):
        _entry(**change)


# -- the end-to-end check on gemma3_text's tiny checkpoint, and that it catches what it claims to -------


@pytest.fixture(scope="module")
def tiny():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family("gemma3_text")))


ROWS = [{"site": site, "widths": ["16k"]} for site in SITES]


def test_every_site_verifies_on_the_tiny_checkpoint(tiny, tmp_path):
    from generator.notes.sae_jumprelu_check import verify_jumprelu

    said = verify_jumprelu(tiny, "The cat sat on the mat", ROWS, tmp_path, None)
    assert "attn_out, mlp_out, resid_post, transcoder" in said
    for site in SITES:
        assert (release_folder(tmp_path, site, 0, "16k", "medium") / "params.safetensors").is_file()


def test_a_wrong_standard_hook_fails(tiny, tmp_path, monkeypatch):
    import dataclasses

    from generator.notes import sae_jumprelu_check
    from nncanon.research import sae_jumprelu

    # mlp_out read at the MLP's normed input instead of its post-normed output: not the release's tensor
    wrong = dataclasses.replace(SITES["mlp_out"], hook="model.layers[i].mlp_norm_output")
    monkeypatch.setitem(sae_jumprelu.SITES, "mlp_out", wrong)
    with pytest.raises(
        AssertionError, match=r"mlp_norm_output is not the tensor at model\.layers\.0\.post_feedforward"
    ):
        sae_jumprelu_check.verify_jumprelu(
            tiny, "The cat sat", [{"site": "mlp_out", "widths": ["16k"]}], tmp_path, None
        )


def test_an_encode_without_its_threshold_fails(tiny, tmp_path, monkeypatch):
    from generator.notes import sae_jumprelu_check

    monkeypatch.setattr(JumpReLUSAE, "encode", lambda self, x: torch.relu(self.pre_activations(x)))
    with pytest.raises(AssertionError, match=r"not relu\(pre\) where pre > threshold"):
        sae_jumprelu_check.verify_jumprelu(
            tiny, "The cat sat", [{"site": "resid_post", "widths": ["16k"]}], tmp_path, None
        )
