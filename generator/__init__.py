"""The encyclopedia generator: family YAMLs, tiny pinned checkpoints, facts, pages."""
