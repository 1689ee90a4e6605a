"""Stage 2, the checkpoint: the tiny checkpoint a family's page is verified on, built from its recipe.

In: a `Family` (the recipe's config, seed, tokenizer and processor). Out: a checkpoint directory in the
cache (``checkpoints.checkpoint_dir``), whose files' sha256 the recipe pins; the full-size configs built
on the meta device (``meta_models.meta_model``). The weights are a pure function of the recipe
(``tiny_weights``: SHAKE-256 draws), the tokenizer a BPE trained on a fixed corpus (``tiny_tokenizer``), so
a pin holds on every CPU.
"""
