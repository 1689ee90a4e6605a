"""What every family with RoBERTa's architecture under transformers classes of its own (CamemBERT,
Data2Vec-Text, ...) declares the same way: written once, assigned by each family module.

RoBERTa's stack is BERT's (`nncanon.parts.encoders.post_norm`, `nncanon.parts.encoders.bidirectional`); its root
numbers the positions past the padding row and keeps the MLM head in one ``lm_head``
(`nncanon.parts.encoders.embeddings.past_the_padding_row_root`, ``ROBERTA_HEAD``). A family differs in its classes,
its backbone's attribute name and its tokenizer, which is data of its YAML.
"""

from __future__ import annotations

from typing import Any

from ..blocks.decoder import attention_layer_types, nothing_to_prepare
from ..blocks.text_family import intermediate_dims
from .bidirectional import EncoderAttention
from .embeddings import ROBERTA_HEAD, encoder_rename, encoder_root, past_the_padding_row_root, roberta_paths
from .post_norm import PostNormBlock

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


def root(name: str, family_module: Any) -> type:
    """``ROOT``: RoBERTa's root host under ``name``, its relations proven on the family's own classes."""
    return encoder_root(name, family_module, *past_the_padding_row_root(ROBERTA_HEAD))
