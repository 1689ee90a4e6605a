"""Encoders and encoder-decoder stacks: the place for their parts (bidirectional blocks, cross-attention from a
decoder to an encoder's output). None yet."""
