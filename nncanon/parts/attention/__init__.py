"""Attention variants: softmax attention over a causal mask and what a family changes in it (positions by ALiBi
or a partial rotary or none, the ``_attn`` method, keys and values shared across blocks)."""
