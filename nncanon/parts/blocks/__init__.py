"""Text blocks: Llama's tree and what a family's block changes in it (the MLP, a mixture, a parallel or sandwich
block, its norms, learned positions, per-layer inputs)."""
