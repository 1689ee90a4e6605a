"""Stage 4, the facts: everything a page says, measured on the model and proven.

In: a `Family`, its tiny checkpoint, its run notes, and the library (``nncanon``). Out: one facts JSON
per family (``collect.collect`` into the build directory), cached under a key of every file that can
change it (``collect.cache_key``): every value's shape, where it is read, under which load; every relation
checked on every block (``proof``); every edit's effect on the logits (``edits``); claims, tags and the
tagline checked against the measured traits (``claims``, ``traits``, ``tags``); the config tables
(``configs``). The facts JSON is the only thing that crosses to the site (stage 5).
"""
