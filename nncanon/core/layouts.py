"""Layouts: the named shapes values are served in.

A layout is a name and its dimensions, written the way the support tables print them
(``Residual [batch seq hidden_size]``). The dimension names are the vocabulary the
encyclopedia checks measured shapes against: each family says what size every name has
on a loaded model (`StandardModel.dim_sizes`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    name: str
    dims: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.name} [{' '.join(self.dims)}]" if self.dims else self.name

    @property
    def typed(self) -> bool:
        """Whether print(model) shows an arrow with this layout: a scalar shows none."""
        return bool(self.dims)


def layout(name: str, dims: str) -> Layout:
    return Layout(name, tuple(dims.split()))


Residual = layout("Residual", "batch seq hidden_size")
Logits = layout("Logits", "batch seq vocab_size")
NextTokenProbs = layout("NextTokenProbs", "batch vocab_size")
Tokens = layout("Tokens", "batch seq")
Scalar = Layout("scalar")
Queries = layout("Queries", "batch num_heads seq qk_head_dim")
Keys = layout("Keys", "batch num_kv_heads seq qk_head_dim")
Values = layout("Values", "batch num_kv_heads seq head_dim")
Pattern = layout("Pattern", "batch num_heads query key")
HeadOutputs = layout("HeadOutputs", "batch seq num_heads head_dim")
#: each head's contribution to the residual stream: its slice of the premix through its columns of o_proj
HeadResults = layout("HeadResults", "batch seq num_heads hidden_size")
Neurons = layout("Neurons", "batch seq intermediate_size")
RouterLogits = layout("RouterLogits", "batch seq num_experts")
ExpertWeights = layout("ExpertWeights", "batch seq top_k")
ExpertIndices = layout("ExpertIndices", "batch seq top_k")
ExpertOutputs = layout("ExpertOutputs", "batch seq top_k hidden_size")
# transformers 5.23 hands the delta rule its queries and keys at the KEY head count and
# repeats them to the value heads inside the kernel, so they are served key_heads wide.
LinearQK = layout("LinearQK", "batch seq key_heads key_dim")
LinearV = layout("LinearV", "batch seq heads value_dim")
Gates = layout("Gates", "batch seq heads")
State = layout("State", "batch heads key_dim value_dim")
MaybeState = layout("State | None", "batch heads key_dim value_dim")
States = layout("States", "batch seq heads key_dim value_dim")
Patches = layout("Patches", "images patches vision_hidden_size")
#: one head's contribution in a vision tower's residual space: the tower's heads, its width (not the text model's)
TowerHeadResults = layout("TowerHeadResults", "batch seq num_heads vision_hidden_size")
ImageTokenMask = layout("ImageTokenMask", "batch seq")
ImageFeatures = layout("ImageFeatures", "image_tokens hidden_size")
