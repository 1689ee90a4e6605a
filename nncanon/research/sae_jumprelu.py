"""JumpReLU sparse autoencoders and transcoders in Gemma Scope 2's ``params.safetensors`` format.

A Gemma Scope 2 release (``google/gemma-scope-2-<size>-<pt|it>``) holds one folder per SAE, named
``<site>/layer_<i>_width_<w>_l0_<small|medium|big>`` (transcoders may end ``_affine``), each with a
``params.safetensors`` of float32 tensors and a ``config.json``::

    w_enc      [d_in, d_sae]    encoder weight (note: input-major, the transpose of TopKSAE's W_enc)
    b_enc      [d_sae]
    w_dec      [d_sae, d_out]   decoder weight (d_out = d_in for an SAE)
    b_dec      [d_out]
    threshold  [d_sae]          one JumpReLU threshold per feature
    affine_skip_connection [d_out, d_in]   (affine transcoders only)

    config.json: {"architecture": "jump_relu", "hf_hook_point_in": "model.layers.<i>....", ...}

(read from SAELens' ``gemma_3_sae_huggingface_loader`` and its tests: it loads exactly these keys with
``safetensors.torch.load_file``, maps ``w_enc``/``w_dec`` to ``W_enc``/``W_dec`` without transposing, and
``affine_skip_connection`` to its ``W_skip``, which it applies as ``x @ W_skip.T``). The encoding is
SAELens' ``JumpReLUSAE.encode``::

    pre   = x @ W_enc + b_enc                       # [..., d_sae]
    z     = relu(pre) * (pre > threshold)           # a feature fires only above its own threshold
    x_hat = z @ W_dec + b_dec  (+ x @ W_skip.T for an affine transcoder)

Where each site reads, as a standard name (``SITES``; the release's own hook points are SAELens'
``_infer_gemma_3_raw_cfg_dict``): ``resid_post`` is the decoder block's output,
``model.layers[i].layer_output``; ``attn_out`` is ``o_proj``'s input, the heads' outputs before they
are mixed, ``model.layers[i].self_attn.attention_premix`` flattened to ``[..., num_heads * head_dim]``;
``mlp_out`` is ``post_feedforward_layernorm``'s output, ``model.layers[i].mlp_post_norm_output``;
a transcoder reads ``model.layers[i].mlp_norm_output`` and predicts ``mlp_post_norm_output``::

    from nncanon.sae_jumprelu import JumpReLUSAE

    sae = JumpReLUSAE.load("resid_post/layer_17_width_16k_l0_medium")   # a folder of the release
    with model.trace(prompt):
        resid = model.layers[17].layer_output.save()
    features = sae.encode(resid)          # [batch, seq, d_sae], zero below each feature's threshold
    rebuilt = sae.decode(features)        # [batch, seq, d]
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .sae import SAEFormatError, check_ndims, check_sizes, checked_input, require_keys

__all__ = ["JumpReLUSAE", "Site", "SITES", "WIDTHS", "site_of", "release_folder", "PARAMS", "CONFIG"]

PARAMS = "params.safetensors"
CONFIG = "config.json"
KEYS = ("w_enc", "b_enc", "w_dec", "b_dec", "threshold")
SKIP = "affine_skip_connection"

#: The width tokens of the folder names and the feature counts they stand for (SAELens' width map).
WIDTHS = {"16k": 16384, "65k": 65536, "262k": 262144, "1m": 1048576}


@dataclass(frozen=True)
class Site:
    """Where one kind of Gemma Scope 2 folder reads (and, for a transcoder, writes), as the release
    names it (``hf_in``/``hf_out``: a path under ``model.layers.<i>`` and ``.input``/``.output``) and as
    nncanon's standard value names it."""

    folder: str  #: the folder prefix, ``resid_post``
    hf_in: str  #: the release's hook point in a block, ``{i}`` the block: ``model.layers.{i}.output``
    hook: str  #: the standard value read, ``model.layers[i].layer_output``
    flatten_heads: bool = False  #: the value is per head and the SAE reads it flattened
    hf_out: str | None = None  #: a transcoder's target
    hook_out: str | None = None

    def hf_hook_point_in(self, layer: int) -> str:
        return self.hf_in.format(i=layer)

    def hf_hook_point_out(self, layer: int) -> str | None:
        return None if self.hf_out is None else self.hf_out.format(i=layer)


_TRANSCODER = dict(
    hf_in="model.layers.{i}.pre_feedforward_layernorm.output",
    hook="model.layers[i].mlp_norm_output",
    hf_out="model.layers.{i}.post_feedforward_layernorm.output",
    hook_out="model.layers[i].mlp_post_norm_output",
)
#: Every folder kind of Gemma Scope 2 that reads one block (``*_all`` folders hold every block).
SITES = {
    "resid_post": Site("resid_post", "model.layers.{i}.output", "model.layers[i].layer_output"),
    "attn_out": Site(
        "attn_out",
        "model.layers.{i}.self_attn.o_proj.input",
        "model.layers[i].self_attn.attention_premix",
        True,
    ),
    "mlp_out": Site(
        "mlp_out",
        "model.layers.{i}.post_feedforward_layernorm.output",
        "model.layers[i].mlp_post_norm_output",
    ),
    "transcoder": Site("transcoder", **_TRANSCODER),
}


def site_of(folder: str) -> Site:
    """The site of a folder prefix: ``resid_post``, ``resid_post_all``, ``attn_out``, ... ``transcoder_all``."""
    base = folder[: -len("_all")] if folder.endswith("_all") else folder
    if base not in SITES:
        raise SAEFormatError(
            f"{folder!r} is not a Gemma Scope 2 folder (known: {', '.join(SITES)}, each also as <name>_all)"
        )
    return SITES[base]


def release_folder(directory: str | os.PathLike, site: str, layer: int, width: str, l0: str) -> Path:
    """One SAE's folder in a release download: ``<directory>/<site>/layer_<i>_width_<w>_l0_<l0>``."""
    return Path(directory) / site / f"layer_{layer}_width_{width}_l0_{l0}"


class JumpReLUSAE(torch.nn.Module):
    """A JumpReLU SAE (``d_out == d_in``, no skip) or transcoder from ``d_in`` to ``d_out`` with ``d_sae``
    features. ``encode``/``decode`` take any leading dimensions and keep them; inputs are computed in the
    SAE's dtype (float32 as loaded)."""

    def __init__(
        self,
        W_enc: torch.Tensor,
        b_enc: torch.Tensor,
        W_dec: torch.Tensor,
        b_dec: torch.Tensor,
        threshold: torch.Tensor,
        W_skip: torch.Tensor | None = None,
        *,
        config: dict[str, Any] | None = None,
        source: str = "JumpReLUSAE",
    ) -> None:
        super(JumpReLUSAE, self).__init__()
        _check_shapes(source, W_enc, b_enc, W_dec, b_dec, threshold, W_skip)
        self.W_enc = _frozen(W_enc)
        self.b_enc = _frozen(b_enc)
        self.W_dec = _frozen(W_dec)
        self.b_dec = _frozen(b_dec)
        self.threshold = _frozen(threshold)
        self.W_skip = None if W_skip is None else _frozen(W_skip)
        self.config = dict(config or {})

    # -- sizes --------------------------------------------------------------------------------

    @property
    def d_in(self) -> int:
        return self.W_enc.shape[0]

    @property
    def d_sae(self) -> int:
        return self.W_enc.shape[1]

    @property
    def d_out(self) -> int:
        return self.W_dec.shape[1]

    def extra_repr(self) -> str:
        skip = ", affine skip" if self.W_skip is not None else ""
        return f"d_in={self.d_in}, d_sae={self.d_sae}, d_out={self.d_out}{skip}"

    # -- the maps -------------------------------------------------------------------------------

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W_enc + b_enc``, ``[..., d_sae]``."""
        return self._input(x, self.d_in, "encode") @ self.W_enc + self.b_enc

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The features of ``x`` (``[..., d_in]``): ``relu(pre)`` where ``pre > threshold``, else 0."""
        pre = self.pre_activations(x)
        return torch.relu(pre) * (pre > self.threshold).to(pre.dtype)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``z @ W_dec + b_dec`` (``[..., d_out]``) of features ``z`` (``[..., d_sae]``); no skip term."""
        return self._input(z, self.d_sae, "decode") @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``decode(encode(x))``, plus ``x @ W_skip.T`` for an affine transcoder."""
        out = self.decode(self.encode(x))
        if self.W_skip is not None:
            out = out + self._input(x, self.d_in, "encode") @ self.W_skip.T
        return out

    def _input(self, x: Any, width: int, what: str) -> torch.Tensor:
        per_head = (what == "encode" and isinstance(x, torch.Tensor) and x.ndim >= 2
                    and x.shape[-2] * x.shape[-1] == width)
        hint = (f"; a per-head value such as attention_premix reads as x.flatten(-2) ({width} = heads x head_dim?)"
                if per_head else "")
        return checked_input("JumpReLUSAE", x, width, what, "d_in" if what == "encode" else "d_sae",
                             self.W_enc.dtype, hint)

    # -- files ------------------------------------------------------------------------------------

    def state(self) -> dict[str, torch.Tensor]:
        """The tensors ``save`` writes, under the release's names."""
        state = {
            "w_enc": self.W_enc,
            "b_enc": self.b_enc,
            "w_dec": self.W_dec,
            "b_dec": self.b_dec,
            "threshold": self.threshold,
        }
        if self.W_skip is not None:
            state[SKIP] = self.W_skip
        return {name: tensor.detach().contiguous().clone() for name, tensor in state.items()}

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``<folder>/params.safetensors`` and ``<folder>/config.json`` (the SAE's ``config``, with
        ``architecture: jump_relu``); returns the folder."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file(self.state(), str(folder / PARAMS))
        config = {"architecture": "jump_relu", **self.config}
        (folder / CONFIG).write_text(json.dumps(config, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return folder

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        *,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> JumpReLUSAE:
        """Load a release folder (its ``params.safetensors`` and, when present, ``config.json``) or one
        ``params.safetensors`` file."""
        path = Path(path)
        params = path / PARAMS if path.is_dir() else path
        if not params.is_file():
            raise FileNotFoundError(
                f"{params}: no such file (a Gemma Scope 2 folder holds params.safetensors and config.json)"
            )
        config = _read_config(params.parent / CONFIG) if params.name == PARAMS else {}
        try:
            from safetensors import SafetensorError
            from safetensors.torch import load_file
        except ImportError as error:  # pragma: no cover - transformers depends on safetensors
            raise ImportError("reading params.safetensors needs the safetensors package") from error
        try:
            data = load_file(str(params), device="cpu")
        except (SafetensorError, OSError, ValueError) as error:
            raise SAEFormatError(f"{params}: not a safetensors file ({error})") from error
        require_keys(params, data, KEYS,
                     f"a Gemma Scope 2 params.safetensors holds {', '.join(KEYS)}, and {SKIP} for an affine transcoder")
        extra = sorted(set(data) - set(KEYS) - {SKIP})
        if extra:
            raise SAEFormatError(
                f"{params}: unexpected tensor {extra[0]!r} (expected {', '.join(KEYS)}, {SKIP})"
            )
        tensors = [data[key].to(dtype) for key in KEYS]
        skip = data[SKIP].to(dtype) if SKIP in data else None
        return cls(*tensors, skip, config=config, source=str(params)).to(device)

    @classmethod
    def random(
        cls,
        d_in: int,
        d_sae: int,
        d_out: int | None = None,
        *,
        seed: int = 0,
        skip: bool = False,
        config: dict[str, Any] | None = None,
    ) -> JumpReLUSAE:
        """A random SAE (unit-norm decoder rows, encoder their transpose, thresholds spread over the
        pre-activations' scale so that some features fire and some do not): for tests and examples."""
        d_out = d_in if d_out is None else d_out
        generator = torch.Generator().manual_seed(seed)
        W_dec = torch.randn(d_sae, d_out, generator=generator)
        W_dec = W_dec / W_dec.norm(dim=1, keepdim=True)
        W_enc = torch.randn(d_in, d_sae, generator=generator) / d_in**0.5
        b_enc = 0.01 * torch.randn(d_sae, generator=generator)
        b_dec = 0.01 * torch.randn(d_out, generator=generator)
        threshold = 0.5 * torch.rand(d_sae, generator=generator)
        W_skip = 0.01 * torch.randn(d_out, d_in, generator=generator) if skip else None
        return cls(W_enc, b_enc, W_dec, b_dec, threshold, W_skip, config=config)


def _frozen(tensor: torch.Tensor) -> torch.nn.Parameter:
    return torch.nn.Parameter(tensor.detach().clone(), requires_grad=False)


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise SAEFormatError(f"{path}: not JSON ({error})") from error
    if not isinstance(config, dict):
        raise SAEFormatError(f"{path}: expected a JSON object, got {type(config).__name__}")
    architecture = config.get("architecture")
    if architecture is not None and architecture != "jump_relu":
        raise SAEFormatError(f"{path}: architecture is {architecture!r}, not 'jump_relu'")
    return config


def _check_shapes(
    source: str,
    W_enc: torch.Tensor,
    b_enc: torch.Tensor,
    W_dec: torch.Tensor,
    b_dec: torch.Tensor,
    threshold: torch.Tensor,
    W_skip: torch.Tensor | None,
) -> None:
    check_ndims(source, {"w_enc": (W_enc, 2), "b_enc": (b_enc, 1), "w_dec": (W_dec, 2), "b_dec": (b_dec, 1),
                         "threshold": (threshold, 1)})
    d_in, d_sae = W_enc.shape
    d_out = W_dec.shape[1]
    expected = {
        "b_enc": (b_enc, (d_sae,)),
        "w_dec": (W_dec, (d_sae, d_out)),
        "b_dec": (b_dec, (d_out,)),
        "threshold": (threshold, (d_sae,)),
    }
    if W_skip is not None:
        expected[SKIP] = (W_skip, (d_out, d_in))
    check_sizes(source, expected, f"w_enc [d_in, d_sae] = {[d_in, d_sae]}",
                "b_enc [d_sae], w_dec [d_sae, d_out], b_dec [d_out], threshold [d_sae]")
