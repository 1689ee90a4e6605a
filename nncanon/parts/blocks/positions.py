"""Learned absolute positions: a table of position embeddings added to the token embeddings before the first
block (GPT-2's and GPT-Neo's ``wpe``, OPT's ``embed_positions``, mounted as ``embed_positions``).

``position_embeddings`` is a root value of its own, and ``layers[0].layer_input`` is the sum. A row's
positions count its real tokens from 0 (``cumsum(attention_mask) - 1``), so a left-padded row's first real
token is at position 0. OPT's table starts ``offset`` = 2 rows in (``embed_positions.weight[p + 2]``), a
leftover of fairseq's padding rows: position p reads row p + 2, and rows 0 and 1 are never read. BioGPT's table has
the same offset, and its token embedding is scaled (``scale_embedding``: the embedding module multiplies its rows by
``embed_scale`` = √hidden_size), so ``token_embeddings`` is the scaled row and the sum is ``embed_scale ·
embed_tokens.weight[input_ids] + position_embeddings``.
"""

from __future__ import annotations

import math
from typing import Any

from ...core.layouts import Residual
from ...core.locators import child
from ...core.relations import relation
from ...core.values import Value
from .decoder import ROOT_RELATIONS, ROOT_VALUES

_ROW = {0: "p", 2: "p + 2"}


def sinusoid(rows: Any, dim: int) -> Any:
    """The fixed table's rows (fairseq's and tensor2tensor's layout, XGLM's), float64: row n is sin(n · f_i) for the
    first dim/2 features and cos(n · f_i) for the rest, f_i = 10000^(−i/(dim/2 − 1)); a zero column when dim is odd."""
    import torch

    half = dim // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000) / (half - 1)))
    angles = rows.double()[..., None] * freqs
    table = torch.cat([angles.sin(), angles.cos()], dim=-1)
    return torch.cat([table, torch.zeros(*table.shape[:-1], 1, dtype=table.dtype)], dim=-1) if dim % 2 else table


def sinusoid_halves(rows: Any, dim: int) -> Any:
    """tensor2tensor's fixed table as Marian and Pegasus lay it out, float64: row n is sin(n · f_i) on the first
    ceil(dim/2) features and cos(n · f_i) on the rest, f_i = 10000^(−2i/dim) (XGLM's `sinusoid` divides by dim/2 − 1
    instead)."""
    import torch

    freqs = torch.pow(10000.0, -2 * torch.arange((dim + 1) // 2, dtype=torch.float64) / dim)
    angles = rows.double()[..., None] * freqs
    return torch.cat([angles.sin(), angles[..., : dim // 2].cos()], dim=-1)


def learned_positions(offset: int = 0, scaled: bool = False, sinusoidal: bool = False):
    """The root relation of a learned position table whose row for position p is ``p + offset``; ``scaled``: the token
    embedding's rows are multiplied by √hidden_size under the config's ``scale_embedding`` (BioGPT's, XGLM's);
    ``sinusoidal``: the table is not learned but the fixed sinusoid (XGLM's), recomputed here from its formula."""
    rows_of = ("embed_tokens.weight[input_ids] · sqrt(hidden_size) (· 1 when scale_embedding is off)" if scaled
               else "embed_tokens.weight[input_ids]")
    table_of = (f"sinusoid({_ROW[offset]}) (sin(n · 10000^(−i/(d/2 − 1))) on the first d/2 features, cos on the rest)"
                if sinusoidal else f"embed_positions.weight[{_ROW[offset]}]")

    @relation("layers[0].layer_input == token_embeddings + position_embeddings; token_embeddings == "
              f"{rows_of}; position_embeddings == {table_of} at every "
              "real token, p counting each row's real tokens from 0 (cumsum(attention_mask) - 1)",
              proves="token_embeddings position_embeddings",
              reads="input_ids attention_mask token_embeddings position_embeddings layers[0].layer_input")
    def check(host, r):
        ids, positions = r["input_ids"], r["position_embeddings"]
        mask = r["attention_mask"]
        if mask is None:
            import torch

            mask = torch.ones_like(ids)
        counted = (mask.long().cumsum(-1) - 1).clamp(min=0)[:, -ids.shape[1]:]
        real = mask[:, -ids.shape[1]:].bool()
        positions = positions.expand(ids.shape[0], -1, -1)
        if sinusoidal:
            expected = sinusoid(counted + offset, positions.shape[-1])
        else:
            expected = host.embed_positions._module.weight[counted + offset]
        rows = host.embed_tokens._module.weight[ids]
        if scaled and host.text_config.scale_embedding:
            rows = rows * math.sqrt(host.text_config.hidden_size)
        return [(r["token_embeddings"] + r["position_embeddings"], r["layers[0].layer_input"]),
                (rows, r["token_embeddings"]),
                (expected[real], positions[real])]

    return check


def root_relations(offset: int = 0, scaled: bool = False, sinusoidal: bool = False) -> tuple:
    """The root's relations with the first block's input the sum of the two embeddings."""
    positions = learned_positions(offset, scaled, sinusoidal)
    return tuple(positions if rel.text == "layers[0].layer_input == token_embeddings" else rel
                 for rel in ROOT_RELATIONS)


def root_values(table: str) -> list[Value]:
    """The root's values with ``position_embeddings`` after ``token_embeddings``, in the forward's order;
    ``table`` names the native module (``transformer.wpe``)."""
    return [
        *ROOT_VALUES[:2],  # logits, token_embeddings
        Value("position_embeddings", Residual,
              f"The learned position embedding's output ({table}), added to token_embeddings before the "
              "first block; [1, seq, hidden_size] when the batch has no padding (the model numbers the positions "
              "itself), [batch, seq, hidden_size] when nnsight passes each left-padded row's positions",
              child("embed_positions")),
        *ROOT_VALUES[2:],
    ]
