"""Lay a local checkpoint directory out as a Hugging Face hub cache entry, so ``nncanon.load("org/name")``
(and transformers, and an nnsight server) resolve it offline as if it had been downloaded.

The layout is huggingface_hub's: ``HF_HOME/hub/models--org--name/`` with ``blobs/<sha256>``,
``snapshots/<commit>/<file>`` linking to the blobs, and ``refs/<revision>`` holding the commit. The tests
and the "Large models" page use it on the tiny checkpoints; it is also how a checkpoint copied by hand
onto an offline machine becomes loadable by its id.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def lay_out(checkpoint: str | os.PathLike, repo_id: str, hf_home: str | os.PathLike,
            revision: str = "main") -> Path:
    """Copy ``checkpoint``'s files into ``hf_home``'s hub cache as ``repo_id`` at ``revision``; the snapshot directory.

    The commit is the sha1 of the files' digests, so the same files get the same commit.
    """
    checkpoint = Path(checkpoint)
    files = sorted(p for p in checkpoint.rglob("*") if p.is_file())
    if not files:
        raise FileNotFoundError(f"{checkpoint}: no files to lay out; pass a checkpoint directory")
    repo = Path(hf_home) / "hub" / f"models--{repo_id.replace('/', '--')}"
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    commit = hashlib.sha1("".join(f"{p.relative_to(checkpoint)}:{d}\n" for p, d in digests.items()).encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    for path, digest in digests.items():
        blob = repo / "blobs" / digest
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            blob.write_bytes(path.read_bytes())
        link = snapshot / path.relative_to(checkpoint)
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / revision).write_text(commit)
    return snapshot


__all__ = ["lay_out"]
