"""The encyclopedia's generator: recipe → checkpoint → notes → facts → site, one package per stage.

Each stage imports only the stages before it; the facts JSON is the only thing that crosses from facts to
site. ``build`` runs the stages for every family (``python -m generator build``), ``contribute`` writes a
new family from an existing one (``new --like``), ``ownership`` marks the directories the build may
write, and ``__main__`` is the command line.
"""
