"""mT5 (MT5ForConditionalGeneration, model_type mt5): T5 v1.1's encoder-decoder trained on 101 languages: T5's two
pre-norm stacks, RMS norms, relative position buckets and unscaled scores, with a gated-GELU MLP and no rescale
of the decoder's output before the head.

Everything T5's page says of its stacks, blocks and attention holds here (`nncanon.parts.encoders.pre_norm_seq2seq`,
`nncanon.parts.attention.relative_position`), on mT5's own classes. What differs is the MLP and the head. The MLP
is gated (``DenseReluDense`` a ``MT5DenseGatedActDense``: ``wi_0``, ``wi_1`` and ``wo`` mounted as ``gate_proj``,
``up_proj`` and ``down_proj``, ``act`` as ``act_fn``): ``wo(gelu_new(wi_0(x)) · wi_1(x))``, Llama's gated MLP with
a tanh-approximated GELU. The head reads the decoder's final norm output as it is: mT5's forward has no
d_model^-0.5 rescale (T5's, where its checkpoint ties the head). Under transformers 5.23 and 5.25 MT5Config ties the
head to the word embeddings whatever the checkpoint's config.json says (it drops ``tie_word_embeddings`` and sets
it true), and the tiny checkpoint is built so: ``lm_head.weight`` is ``shared.weight``, which the root relation
checks.

A trace takes ``input_ids`` and, optionally, ``decoder_input_ids``; without them the call decodes ``input_ids``
shifted one to the right behind ``decoder_start_token_id`` (the pad token, 0), as T5's does.
"""

from __future__ import annotations

import sys

from transformers.models.mt5 import modeling_mt5 as hf

from ..parts.blocks.decoder import nothing_to_prepare, text_only
from ..parts.blocks.mlp import MLP
from ..parts.encoders.pre_norm_seq2seq import (
    before_the_head,
    pre_norm_dim_sizes,
    pre_norm_envoys,
    pre_norm_layer_types,
    pre_norm_rename,
    pre_norm_required_paths,
    pre_norm_root,
    shift_when_missing,
)

FAMILY = "mt5"
MODEL_TYPES = ("mt5",)
#: the pipeline of a text load: its preprocessing only tokenizes (text2text-generation's would generate)
TEXT_TASK = "feature-extraction"
#: the gated MLP's projections on Llama's names
RENAME = pre_norm_rename({"wi_0": "gate_proj", "wi_1": "up_proj", "wo": "down_proj", "act": "act_fn"})

ENVOYS = pre_norm_envoys(hf.MT5DenseGatedActDense, MLP)

ROOT = pre_norm_root("MT5StandardModel", sys.modules[__name__])

build = text_only(hf.MT5ForConditionalGeneration)
STACKS = ("encoder", "decoder")
before_the_head = before_the_head  # the lens: the decoder's final norm (no rescale: mT5's forward has none)
decoder_inputs = shift_when_missing  # a call with no decoder_input_ids decodes input_ids shifted right

layer_types = pre_norm_layer_types  # the encoder's blocks, then the decoder's
prepare = nothing_to_prepare
dim_sizes = pre_norm_dim_sizes
required_paths = pre_norm_required_paths
