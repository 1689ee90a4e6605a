"""What every family with RoBERTa's architecture under transformers classes of its own (CamemBERT,
Data2Vec-Text, and the pre-norm XLM-R XL and RoBERTa-PreLayerNorm) declares the same way: written once, assigned by
each family module.

RoBERTa's stack is BERT's (`nncanon.parts.encoders.post_norm`, `nncanon.parts.encoders.bidirectional`); its root
numbers the positions past the padding row and keeps the MLM head in one ``lm_head``
(`nncanon.parts.encoders.embeddings.past_the_padding_row_root`, ``ROBERTA_HEAD``). A family differs in its classes,
its backbone's attribute name and its tokenizer, which is data of its YAML. A pre-norm family's blocks are
`nncanon.parts.encoders.pre_norm`'s, its root has a final norm (``norm``), and XLM-R XL's embeddings have no
LayerNorm (``embedding_norm``).
"""

from __future__ import annotations

from typing import Any

from ..blocks.decoder import attention_layer_types, nothing_to_prepare
from ..blocks.text_family import intermediate_dims
from .bidirectional import EncoderAttention
from .embeddings import (
    EMBEDDING_PATHS,
    ROBERTA_HEAD,
    encoder_rename,
    encoder_root,
    past_the_padding_row_root,
    roberta_paths,
)
from .post_norm import PostNormBlock
from .pre_norm import PreNormEncoderAttention

#: the pipeline of a text load: an encoder has no text-generation
TEXT_TASK = "feature-extraction"
#: no layer_types in the config: full (bidirectional) attention on every block
layer_types = attention_layer_types
prepare = nothing_to_prepare
dim_sizes = intermediate_dims
required_paths = roberta_paths
rename = encoder_rename


def envoys(layer: type, attention: type, block: Any = PostNormBlock) -> dict:
    """``ENVOYS``: the family's layer class carries ``block``'s values, its attention wrapper the encoder
    attention's."""
    return {layer: block, attention: EncoderAttention}


def root(name: str, family_module: Any, final_norm: bool = False, embedding_norm: bool = True) -> type:
    """``ROOT``: RoBERTa's root host under ``name``, its relations proven on the family's own classes; a pre-norm
    stack's ``final_norm`` (mounted as ``norm``), and ``embedding_norm`` False where the embeddings' sum enters the
    first block unnormed."""
    return encoder_root(name, family_module, *past_the_padding_row_root(ROBERTA_HEAD, final_norm, embedding_norm),
                        final_norm=final_norm)


def pre_norm_rename(backbone: str, final_norm: str, embedding_norm: bool = True) -> dict[str, str]:
    """``RENAME`` of a pre-norm family: the encoder's mounts under ``backbone``, its final norm (the native path
    ``final_norm``) as ``norm``, and no embeddings' LayerNorm where there is none."""
    mounts = {path: name for path, name in encoder_rename(backbone).items()
              if embedding_norm or name != "embed_layernorm"}
    return {**mounts, final_norm: "norm"}


def pre_norm_envoys(layer: type, attention: type, block: Any) -> dict:
    """``ENVOYS`` of a pre-norm family: its layer carries ``block`` (`pre_norm.pre_norm_block`), its attention
    wrapper the attention whose projections the block states from the normed stream."""
    return {layer: block, attention: PreNormEncoderAttention}


def pre_norm_paths(attention_norm: str, mlp_norm: str, embedding_norm: bool = True):
    """``required_paths`` of a pre-norm family: RoBERTa's root less what it lacks, the final norm, and the first
    block's modules with its two norms."""
    embeddings = [p for p in EMBEDDING_PATHS if embedding_norm or p != "embed_layernorm"]
    stack = ["layers", "layers.0.self_attn", "layers.0.self_attn.self", "layers.0.self_attn.E_output.dense",
             f"layers.0.self_attn.{attention_norm}", f"layers.0.{mlp_norm}", "layers.0.intermediate",
             "layers.0.E_output.dense"]

    def required_paths(model: Any) -> list[str]:
        return [*embeddings, "norm", "lm_head", "lm_head.dense", "lm_head.layer_norm", "lm_head.decoder", *stack]

    return required_paths
