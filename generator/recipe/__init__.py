"""Stage 1, the recipe: a family's YAML read and validated.

In: ``families/<family>.yaml`` (lines, tagline, tags, the tiny checkpoint's recipe, the full-size configs,
page and claims) and the paths of its notes. Out: a frozen `Family` (``family.load_family`` /
``get_family``), or one `FamilyYamlError` naming the file and the dotted field. No torch, no model.
"""
