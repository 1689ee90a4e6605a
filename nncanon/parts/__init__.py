"""The shared mechanisms families are written from: one module per mechanism, each with the relations that
state what its values mean.

- ``decoder``: the model root and the block (Llama's tree), and a text-only family's ``build``;
- ``attention``: softmax attention over a causal mask, recomputed from queries and keys;
- ``mlp``: the dense MLP, gated or not, and the same MLP on a mixture's token rows;
- ``mixture``: top-k mixtures of experts, with or without a gated shared expert;
- ``parallel``: the parallel block (attention and MLP read the same input, one sum), with one norm or two;
- ``ungated``: the MLP with no gate, ``down(act(up(x)))``, whatever the family calls its up projection;
- ``rotary``: which dimensions of a head a partial rotary turns, and how it pairs them (halves or adjacent);
- ``positions``: learned absolute positions added to the token embeddings (GPT-2, GPT-Neo; OPT's offset of 2);
- ``method_attention``: the attention computed in a method of its own (``_attn``: GPT-J, GPT-Neo, CodeGen);
- ``conv``: the causal convolution's cache state, shared by the recurrent mixers;
- ``deltanet``: the gated DeltaNet mixer and its delta-rule recurrence;
- ``ssd``: Mamba-2's selective scan (state-space duality);
- ``qwen_vit``: the Qwen vision line (encoder, merger, the scatter at the image tokens);
- ``loading``: how a family's ``build`` loads a local checkpoint and its tokenizer.

A family module (``nncanon.families.<name>``) is data over these parts plus the relations only it needs.
"""
