"""ELECTRA's generator (ElectraForMaskedLM, model_type electra): BERT's encoder with embeddings of their own width,
projected to the stream before the first block, and a masked-LM head that goes back to that width.

The stack is BERT's (`nncanon.families.bert`): bidirectional multi-head attention with only the right padding
masked, post-norm blocks (``layer_mid`` the attention's add before ``attention.output.LayerNorm``,
``layer_output`` the LayerNorm of the MLP's add), no final norm, positions ``0 .. seq-1`` from the first column,
and token types 0 and 1 for a pair.

What is ELECTRA's own is a width. The word, token type and position tables and their LayerNorm are
``embedding_size`` wide (128 in electra-small's generator, 768 in electra-base's), not ``hidden_size`` (256 in both):
``embeddings_project``, a Linear from one to the other, makes the stream the first block reads, and its output is a
value of its own (``embedding_projection_output``), proven to be that Linear of ``embedding_norm_output`` and to be
``layers[0].layer_input``. The head goes back: ``generator_predictions`` (``head_transform``: dense from
``hidden_size`` to ``embedding_size``, GELU, LayerNorm) then ``generator_lm_head`` (``lm_head``), tied to the
``embedding_size``-wide word embeddings, with a bias of its own. The embeddings and the head's transform are served
in the ``Embedded`` layout ([batch, seq, embedding_size]). The lens applies the transform before the decoder.

The generator is the checkpoint with a vocabulary head; the discriminator (ElectraForPreTraining) scores each token
as replaced or not, one logit per token, and is not this family's class.

A trace takes a prompt, a list of prompts, ids, or the tokenizer's output for a text pair (BERT's WordPiece:
``[CLS] A [SEP] B [SEP]``, token types 0 then 1), under transformers' feature-extraction pipeline (``TEXT_TASK``):
there is no ``generate`` and no next token.

Native names (``electra.embeddings.*``, ``electra.embeddings_project``, ``electra.encoder.layer[i]`` with
``attention``, ``generator_predictions``, ``generator_lm_head``) are mounted on the standard ones (``embed_tokens``,
``embed_token_types``, ``embed_positions``, ``embed_layernorm``, ``embeddings_project``, ``layers[i]`` with
``self_attn``, ``head_transform``, ``lm_head``).
"""

from __future__ import annotations

import sys

from transformers.models.electra import modeling_electra as hf

from ..core.model import StandardModel
from ..parts.blocks.decoder import attention_layer_types, nothing_to_prepare, text_only
from ..parts.blocks.text_family import intermediate_dims
from ..parts.encoders.bidirectional import EncoderAttention
from ..parts.encoders.embeddings import (
    EMBEDDING_PATHS,
    STACK_PATHS,
    Embedded,
    MlmHead,
    embeddings_relation,
    encoder_rename,
    encoder_root,
    encoder_root_relations,
    encoder_root_values,
    projection_relation,
)
from ..parts.encoders.embeddings import before_the_head as transform_then_decoder
from ..parts.encoders.post_norm import PostNormBlock

FAMILY = "electra"
MODEL_TYPES = ("electra",)
#: the pipeline of a text load: an encoder has no text-generation
TEXT_TASK = "feature-extraction"
RENAME = {**encoder_rename("electra"), "electra.embeddings_project": "embeddings_project",
          "generator_predictions": "head_transform", "generator_lm_head": "lm_head"}

ENVOYS = {hf.ElectraLayer: PostNormBlock, hf.ElectraAttention: EncoderAttention}


def _generator_parts(module):
    return module.dense, module.activation, module.LayerNorm


#: ElectraGeneratorPredictions: dense (hidden_size -> embedding_size), GELU (whatever hidden_act says), LayerNorm
HEAD = MlmHead(parts=_generator_parts, act="gelu")

ROOT = encoder_root("ElectraStandardModel", sys.modules[__name__], encoder_root_values(HEAD, width=Embedded),
                    encoder_root_relations(embeddings_relation(enters=False), HEAD, (projection_relation,)))

build = text_only(hf.ElectraForMaskedLM)
layer_types = attention_layer_types  # ElectraConfig has no layer_types: full (bidirectional) attention on every block
prepare = nothing_to_prepare
before_the_head = transform_then_decoder  # the lens applies generator_predictions before the tied decoder


def dim_sizes(model: StandardModel) -> dict[str, int]:
    """The MLP's width and the embeddings' (``embedding_size``, which the projection widens to ``hidden_size``)."""
    return {**intermediate_dims(model), "embedding_size": model.text_config.embedding_size}


def required_paths(model: StandardModel) -> list[str]:
    return [*EMBEDDING_PATHS, "embeddings_project", "head_transform", "lm_head", *STACK_PATHS]
