"""nncanon.sae: TopK SAEs in the layer<i>.sae.pt format, on real layers[i].layer_output reads."""

from __future__ import annotations

import pytest
import torch

from nncanon.research.sae import SAEFormatError, TopKSAE, layer_file

PROMPT = "The cat sat on the mat because it was warm."


@pytest.fixture(scope="module")
def resid(model):
    """layers[i].layer_output of the tiny checkpoint for two blocks: a DeltaNet and an attention one."""
    reads = {}
    with model.trace(PROMPT):
        reads[1] = model.layers[1].layer_output.save()
        reads[3] = model.layers[3].layer_output.save()
    return reads


def test_round_trip_keeps_every_tensor_and_k(tmp_path, model):
    sae = TopKSAE.random(model.hidden_size, 16 * model.hidden_size, 7, seed=3)
    path = sae.save(layer_file(tmp_path, 3))
    assert path.name == "layer3.sae.pt"
    stored = torch.load(path, weights_only=True)
    assert sorted(stored) == ["W_dec", "W_enc", "b_dec", "b_enc", "k"] and stored["k"] == 7
    assert stored["W_enc"].shape == (16 * model.hidden_size, model.hidden_size)
    assert stored["W_dec"].shape == (model.hidden_size, 16 * model.hidden_size)
    assert all(stored[name].dtype == torch.float32 for name in ("W_enc", "b_enc", "W_dec", "b_dec"))
    loaded = TopKSAE.load(path)
    assert loaded.k == 7 and (loaded.d, loaded.d_sae) == (model.hidden_size, 16 * model.hidden_size)
    for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
        assert torch.equal(getattr(loaded, name), getattr(sae, name))


def test_encode_keeps_exactly_k_features_per_token(resid, model):
    for layer, x in resid.items():
        sae = TopKSAE.random(model.hidden_size, 12 * model.hidden_size, 9, seed=layer)
        z = sae.encode(x)
        assert z.shape == (*x.shape[:-1], sae.d_sae)
        assert torch.equal((z != 0).sum(-1), torch.full(x.shape[:-1], 9))
        # the kept entries are the k largest pre-activations, at their values (Qwen-Scope's rule)
        pre = x @ sae.W_enc.T + sae.b_enc
        top = pre.topk(9, dim=-1)
        assert torch.equal(z.gather(-1, top.indices), top.values)
        assert torch.equal(sae.pre_activations(x), pre)
        rebuilt = sae.decode(z)
        assert rebuilt.shape == x.shape
        torch.testing.assert_close(rebuilt, z @ sae.W_dec.T + sae.b_dec)
        assert torch.equal(sae(x), rebuilt)


def test_subtract_b_dec_encodes_the_centered_stream(resid, model):
    plain = TopKSAE.random(model.hidden_size, 8 * model.hidden_size, 5, seed=1)
    centered = TopKSAE(plain.W_enc, plain.b_enc, plain.W_dec, 10 * plain.b_dec + 1, 5, subtract_b_dec=True)
    x = resid[3]
    assert torch.equal(
        centered.encode(x),
        TopKSAE(plain.W_enc, plain.b_enc, plain.W_dec, centered.b_dec, 5).encode(x - centered.b_dec),
    )
    assert not torch.equal(centered.encode(x), plain.encode(x))


def test_a_qwen_scope_file_without_k_needs_k(tmp_path, model):
    sae = TopKSAE.random(model.hidden_size, 4 * model.hidden_size, 3)
    path = tmp_path / "layer0.sae.pt"
    torch.save({name: getattr(sae, name).detach() for name in ("W_enc", "b_enc", "W_dec", "b_dec")}, path)
    with pytest.raises(SAEFormatError, match=r"does not say k.*k=50"):
        TopKSAE.load(path)
    assert TopKSAE.load(path, k=3).k == 3
    sae.save(path)
    with pytest.raises(SAEFormatError, match="saved with k = 3, but k = 4 was passed"):
        TopKSAE.load(path, k=4)


def test_malformed_files_name_the_entry(tmp_path):
    d, d_sae = 6, 12
    good = {
        "W_enc": torch.zeros(d_sae, d),
        "b_enc": torch.zeros(d_sae),
        "W_dec": torch.zeros(d, d_sae),
        "b_dec": torch.zeros(d),
        "k": 2,
    }
    cases = [
        ({k: v for k, v in good.items() if k != "b_enc"}, "missing b_enc"),
        ({**good, "W_dec": torch.zeros(d_sae, d)}, r"W_dec is \[12, 6\], but W_enc .* makes it \[6, 12\]"),
        ({**good, "k": 13}, "k = 13 must be between 1 and d_sae = 12"),
        ({**good, "k": "50"}, "entry 'k': expected an integer"),
    ]
    for data, message in cases:
        path = tmp_path / "layer0.sae.pt"
        torch.save(data, path)
        with pytest.raises(SAEFormatError, match=message):
            TopKSAE.load(path)
    with pytest.raises(FileNotFoundError, match="layer9.sae.pt"):
        TopKSAE.load(layer_file(tmp_path, 9))


def test_a_stream_of_the_wrong_width_is_refused(resid, model):
    sae = TopKSAE.random(model.hidden_size + 1, 4 * model.hidden_size, 3)
    with pytest.raises(ValueError, match=f"not d = {model.hidden_size + 1}"):
        sae.encode(resid[1])
