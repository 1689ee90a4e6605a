"""Encoders and encoder-decoder stacks: bidirectional blocks (BERT's and its descendants'), and two stacks under
one model (BART's: an encoder, and a decoder that cross-attends to the encoder's output)."""
