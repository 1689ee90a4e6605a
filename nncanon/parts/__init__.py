"""Shared parts of decoder families: each mechanic written once, with the relations that prove it."""
