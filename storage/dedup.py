"""Content-addressed checkpoints: the names every backend shares.

A checkpoint's bytes are kept once per content, as *blobs* named by their SHA-256
under ``.blobs/sha256/<first two hex>/<64 hex>`` in the experiment's storage (the
manifest already records each file's SHA-256, so it names the blobs). How a backend
holds a checkpoint's files as blobs is its own: hard links on a local disk
(:mod:`storage.blobs_local`), chunked objects on S3 and GCS.

It is on by default. ``TRIALFLOW_CHECKPOINT_DEDUP=0`` in the environment of the driver
and the workers gives the full copy of every checkpoint that earlier versions stored:
for benchmarks (both ways in one run) and as an escape hatch. It is read on every
save, in the process that saves, so a benchmark may switch it between saves.
"""

from __future__ import annotations

import os

from .keys import BLOBS_PREFIX

__all__ = ["BLOBS_DIGEST", "DEDUP_ENV", "blob_key", "dedup_enabled"]

DEDUP_ENV = "TRIALFLOW_CHECKPOINT_DEDUP"

#: The folder below ``.blobs`` of SHA-256-named blobs (another digest would get its own).
BLOBS_DIGEST = "sha256"

_OFF = frozenset({"0", "false", "no", "off"})


def dedup_enabled() -> bool:
    """Whether checkpoints saved now are content-addressed (the default)."""
    return os.environ.get(DEDUP_ENV, "1").strip().lower() not in _OFF


def blob_key(sha256: str) -> str:
    """The key of the blob whose content has the SHA-256 ``sha256`` (64 hex digits)."""
    return f"{BLOBS_PREFIX}/{BLOBS_DIGEST}/{sha256[:2]}/{sha256}"
