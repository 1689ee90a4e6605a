"""Mechanisms shared by several families, each written once with the relations that prove it."""
