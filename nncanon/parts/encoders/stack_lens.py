"""The lens named on an encoder-decoder's stacks: ``model.decoder.unembed(x)`` is the model's own
(``nncanon.research.lens``: the decoder's final norm, the head and any step past it, T5's rescale), and
``model.encoder.unembed`` refuses in one line: the encoder has no unembedding, its stream reaches the logits only
through the decoder's cross-attention, so a lens on it would read the encoder's states as if they were the decoder's."""

from __future__ import annotations

from typing import Any

from ...core.values import NotOnHost


def _decoder_unembed(stack: Any, x: Any) -> Any:
    """Logits from the decoder's residual stream ``x``, as the model turns its last block's output into them."""
    return stack._std_model.unembed(x)


def _encoder_unembed(stack: Any, x: Any) -> Any:
    raise NotOnHost("model.encoder.unembed: the encoder stack has no unembedding (its stream reaches the logits only "
                    "through the decoder's cross-attention); the lens reads the decoder's stream: "
                    "model.decoder.unembed(model.decoder.layers[i].layer_output)")


#: the attributes a stack's host class takes (``host(..., **DECODER_LENS)``)
DECODER_LENS = {"unembed": _decoder_unembed}
ENCODER_LENS = {"unembed": _encoder_unembed}
