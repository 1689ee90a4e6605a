"""TopK residual-stream sparse autoencoders in the ``layer<i>.sae.pt`` format.

A ``layer<i>.sae.pt`` file is a ``torch.save`` dict of float32 tensors, one file per block::

    W_enc  [d_sae, d]     encoder weight
    b_enc  [d_sae]        encoder bias
    W_dec  [d, d_sae]     decoder weight
    b_dec  [d]            decoder bias
    k      int            features kept per token (optional: Qwen-Scope's files leave it out,
                          their release name says it, ``...-L0_50`` is k = 50)

Qwen-Scope's residual SAEs (``Qwen/SAE-Res-...``) are read at the decoder block's output, which
is ``model.layers[i].layer_output``. The encoding is Qwen-Scope's::

    pre = x @ W_enc.T + b_enc                    # [..., d_sae]
    z   = pre where it is among the k largest of its row, else 0
    x_hat = z @ W_dec.T + b_dec

so exactly ``k`` features of each token are kept, at their pre-activation values (no ReLU, no
subtraction of ``b_dec`` from the input: the release's own usage code encodes ``x`` as it is). The
other common TopK convention (Gao et al.; EleutherAI's ``sparsify``) encodes ``x - b_dec``; pass
``subtract_b_dec=True`` for SAEs trained that way (a file may say so with a boolean
``subtract_b_dec`` entry)::

    from nncanon.sae import TopKSAE

    sae = TopKSAE.load("layer3.sae.pt", k=50)
    with model.trace(prompt):
        resid = model.layers[3].layer_output.save()
    features = sae.encode(resid)          # [batch, seq, d_sae], k nonzero per token
    rebuilt = sae.decode(features)        # [batch, seq, d]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

__all__ = ["TopKSAE", "SAEFormatError", "layer_file"]

KEYS = ("W_enc", "b_enc", "W_dec", "b_dec")


class SAEFormatError(ValueError):
    """A ``layer<i>.sae.pt`` file that is not in the format: says which file and which entry."""


def layer_file(directory: str | os.PathLike, layer: int) -> Path:
    """The path of block ``layer``'s SAE in a release directory: ``<directory>/layer<layer>.sae.pt``."""
    return Path(directory) / f"layer{layer}.sae.pt"


class TopKSAE(torch.nn.Module):
    """A TopK sparse autoencoder over a ``d``-wide residual stream with ``d_sae`` features.

    ``encode`` and ``decode`` take any leading dimensions (a ``[batch, seq, d]`` read of
    ``model.layers[i].layer_output``, a ``[tokens, d]`` matrix, one ``[d]`` vector) and keep them.
    Inputs of another dtype are computed in the SAE's dtype (float32 as loaded) and returned in it.
    """

    def __init__(
        self,
        W_enc: torch.Tensor,
        b_enc: torch.Tensor,
        W_dec: torch.Tensor,
        b_dec: torch.Tensor,
        k: int,
        *,
        subtract_b_dec: bool = False,
        source: str = "TopKSAE",
    ) -> None:
        super().__init__()
        _check_shapes(source, W_enc, b_enc, W_dec, b_dec, k)
        self.W_enc = torch.nn.Parameter(W_enc.detach().clone(), requires_grad=False)
        self.b_enc = torch.nn.Parameter(b_enc.detach().clone(), requires_grad=False)
        self.W_dec = torch.nn.Parameter(W_dec.detach().clone(), requires_grad=False)
        self.b_dec = torch.nn.Parameter(b_dec.detach().clone(), requires_grad=False)
        self.k = int(k)
        self.subtract_b_dec = bool(subtract_b_dec)

    # -- sizes --------------------------------------------------------------------------

    @property
    def d(self) -> int:
        """The width of the residual stream it reads."""
        return self.W_enc.shape[1]

    @property
    def d_sae(self) -> int:
        """The number of features."""
        return self.W_enc.shape[0]

    def extra_repr(self) -> str:
        rule = "x - b_dec" if self.subtract_b_dec else "x"
        return f"d={self.d}, d_sae={self.d_sae}, k={self.k}, encodes {rule}"

    # -- the maps ------------------------------------------------------------------------

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """``W_enc x + b_enc`` (of ``x - b_dec`` with ``subtract_b_dec``), ``[..., d_sae]``."""
        x = self._input(x, self.d, "encode")
        if self.subtract_b_dec:
            x = x - self.b_dec
        return x @ self.W_enc.T + self.b_enc

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The features of ``x`` (``[..., d]``): the ``k`` largest pre-activations of each row, others 0."""
        pre = self.pre_activations(x)
        top = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter_(-1, top.indices, top.values)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """The reconstruction ``W_dec z + b_dec`` (``[..., d]``) of features ``z`` (``[..., d_sae]``)."""
        z = self._input(z, self.d_sae, "decode")
        return z @ self.W_dec.T + self.b_dec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``decode(encode(x))``."""
        return self.decode(self.encode(x))

    def _input(self, x: Any, width: int, what: str) -> torch.Tensor:
        return checked_input("TopKSAE", x, width, what, "d" if what == "encode" else "d_sae", self.W_enc.dtype,
                             f"; this SAE reads a {self.d}-wide residual stream (model.layers[i].layer_output)")

    # -- files ----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The dict ``save`` writes: the four tensors, ``k`` and, when set, ``subtract_b_dec``."""
        state: dict[str, Any] = {name: getattr(self, name).detach().clone() for name in KEYS}
        state["k"] = self.k
        if self.subtract_b_dec:
            state["subtract_b_dec"] = True
        return state

    def save(self, path: str | os.PathLike) -> Path:
        """Write the SAE as a ``layer<i>.sae.pt`` file; returns the path."""
        path = Path(path)
        torch.save(self.state(), path)
        return path

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        k: int | None = None,
        *,
        subtract_b_dec: bool | None = None,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> TopKSAE:
        """Load a ``layer<i>.sae.pt`` file.

        ``k``: features kept per token; needed when the file does not hold it (Qwen-Scope's files
        don't: take it from the release name, ``L0_50`` is 50), and checked against it when it does.
        """
        path = Path(path)
        try:
            data = torch.load(path, map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path}: no such SAE file (a release holds layer<i>.sae.pt per block)"
            ) from None
        except Exception as error:  # noqa: BLE001 - any unpickling failure is a format error
            raise SAEFormatError(f"{path}: not a torch.save dict of tensors ({error})") from error
        if not isinstance(data, dict):
            raise SAEFormatError(f"{path}: expected a dict with {', '.join(KEYS)}, got {type(data).__name__}")
        require_keys(path, data, KEYS, f"a layer<i>.sae.pt dict holds {', '.join(KEYS)} and optionally k")
        stored = data.get("k")
        if stored is not None:
            stored = _as_k(stored, f"{path}: entry 'k'")
        if k is None and stored is None:
            raise SAEFormatError(
                f"{path} does not say k (Qwen-Scope's files don't): pass it, "
                "TopKSAE.load(path, k=50) for a release named ...-L0_50"
            )
        if k is not None and stored is not None and int(k) != stored:
            raise SAEFormatError(f"{path} was saved with k = {stored}, but k = {k} was passed")
        rule = bool(data.get("subtract_b_dec", False)) if subtract_b_dec is None else subtract_b_dec
        tensors = []
        for key in KEYS:
            value = data[key]
            if not isinstance(value, torch.Tensor):
                raise SAEFormatError(f"{path}: entry {key!r} is a {type(value).__name__}, not a tensor")
            tensors.append(value.to(dtype))
        sae = cls(*tensors, k=stored if k is None else int(k), subtract_b_dec=rule, source=str(path))
        return sae.to(device)

    @classmethod
    def random(cls, d: int, d_sae: int, k: int, *, seed: int = 0, subtract_b_dec: bool = False) -> TopKSAE:
        """A random SAE (decoder columns of unit norm, encoder its transpose): for tests and examples."""
        generator = torch.Generator().manual_seed(seed)
        W_dec = torch.randn(d, d_sae, generator=generator)
        W_dec = W_dec / W_dec.norm(dim=0, keepdim=True)
        b_enc = 0.01 * torch.randn(d_sae, generator=generator)
        b_dec = 0.01 * torch.randn(d, generator=generator)
        return cls(W_dec.T.contiguous(), b_enc, W_dec, b_dec, k, subtract_b_dec=subtract_b_dec)


def _as_k(value: Any, where: str) -> int:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int):
        raise SAEFormatError(f"{where}: expected an integer, got {value!r}")
    return value


def _check_shapes(
    source: str, W_enc: torch.Tensor, b_enc: torch.Tensor, W_dec: torch.Tensor, b_dec: torch.Tensor, k: int
) -> None:
    check_ndims(source, {"W_enc": (W_enc, 2), "b_enc": (b_enc, 1), "W_dec": (W_dec, 2), "b_dec": (b_dec, 1)})
    d_sae, d = W_enc.shape
    check_sizes(source, {"b_enc": (b_enc, (d_sae,)), "W_dec": (W_dec, (d, d_sae)), "b_dec": (b_dec, (d,))},
                f"W_enc [d_sae, d] = {[d_sae, d]}", "b_enc [d_sae], W_dec [d, d_sae], b_dec [d]")
    k = _as_k(k, f"{source}: k")
    if not 0 < k <= d_sae:
        raise SAEFormatError(f"{source}: k = {k} must be between 1 and d_sae = {d_sae}")


# -- the checks every SAE format shares (sae_jumprelu's too) ---------------------------------------------


def checked_input(owner: str, x: Any, width: int, what: str, wanted: str, dtype: torch.dtype,
                  why: str = "") -> torch.Tensor:
    """``x`` as ``owner.what`` (encode, decode) takes it: a tensor whose last dimension is ``width`` (``wanted``
    names it), in the SAE's ``dtype``; else one error in the SAE's words, ``why`` saying what it reads."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{owner}.{what} takes a tensor, got {type(x).__name__} (save() the value in the trace "
            "and encode it after the trace)"
        )
    if x.shape[-1:] != (width,):
        raise ValueError(f"{owner}.{what}: the last dimension of a {list(x.shape)} tensor is not {wanted} = {width}{why}")
    return x.to(dtype)


def require_keys(path: Any, data: dict, keys: tuple[str, ...], holds: str) -> None:
    """Every entry of ``keys`` in a loaded file's ``data``; else one SAEFormatError saying what the format ``holds``."""
    missing = [key for key in keys if key not in data]
    if missing:
        raise SAEFormatError(f"{path}: missing {', '.join(missing)} ({holds})")


def check_ndims(source: str, tensors: dict[str, tuple[Any, int]]) -> None:
    """Each named entry a tensor of its number of dimensions."""
    for name, (tensor, ndim) in tensors.items():
        if not isinstance(tensor, torch.Tensor) or tensor.ndim != ndim:
            got = list(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise SAEFormatError(f"{source}: {name} must be a {ndim}-d tensor, got {got}")


def check_sizes(source: str, expected: dict[str, tuple[torch.Tensor, tuple[int, ...]]], made_by: str,
                legend: str) -> None:
    """Each named tensor of the shape the encoder's sizes (``made_by``) make it; ``legend``: every entry's shape."""
    for name, (tensor, shape) in expected.items():
        if tuple(tensor.shape) != shape:
            raise SAEFormatError(
                f"{source}: {name} is {list(tensor.shape)}, but {made_by} makes it {list(shape)} ({legend})"
            )
