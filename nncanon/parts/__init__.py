"""The shared mechanisms families are written from, one module per mechanism, each with the relations that state
what its values mean, grouped by kind as the site's Mechanics page groups them:

- ``blocks``: the text block and what varies in it: Llama's tree (``decoder``), MLPs (``mlp``, ``ungated``,
  ``xielu``), mixtures (``mixture``), the parallel and sandwich blocks, norms, learned positions, per-layer
  inputs, and what a Llama-tree family assigns (``text_family``);
- ``attention``: softmax attention (``softmax``) and its variants: ALiBi, partial rotary, no rotary, the
  ``_attn`` method, keys and values shared across blocks;
- ``recurrent``: the recurrent mixers and their states: the causal convolution, gated DeltaNet, Mamba-2's and
  Mamba-1's selective scans, LFM2's short convolution, Griffin's RG-LRU, and hybrid stacks of them;
- ``vision``: the vision lines: the shared line (tower, projector, the scatter at the image tokens), towers read
  at a layer, AnyRes, pixel shuffle, gated cross-attention, image spans that attend both ways, LLaVA-OneVision,
  the Qwen vision line;
- ``encoders``: encoders and encoder-decoder stacks (none yet).

Beside them, what every kind uses: ``loading`` (how a family's ``build`` loads a local checkpoint) and
``weights`` (the relations that prove each standard weight against the forward).

A family module (``nncanon.families.<name>``) is data over these parts plus the relations only it needs.
"""
