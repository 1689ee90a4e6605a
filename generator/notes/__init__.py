"""Stage 3, the notes: a family's notes and the hand-written pages, parsed and run.

In: ``families/<family>.notes.md`` (and the shared notes), ``docs_src/*.md``, a checkpoint to run them on.
Out: each note's text with every code example executed against the model under a time limit, its
``assert`` lines and ``# True`` claims checked, and its expressions evaluated (``examples``,
``note_runner``); the results enter the facts (stage 4) or the hand-written pages (``docs_run``).
"""
