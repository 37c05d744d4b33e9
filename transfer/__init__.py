"""transfer: copy directories between Ray nodes in bounded memory.

``await copy_dir(source_node_id, source_path, target_node_id, target_path)`` streams a
directory between Ray tasks on the two nodes in checksummed chunks, sends only what
differs, and swaps the result in at once. See ``api.copy_dir`` for the options.
"""

from .api import DEFAULT_CHUNK_SIZE, DEFAULT_MAX_IN_FLIGHT, copy_dir, copy_dir_sync
from .errors import (
    IntegrityError,
    NodeLostError,
    SizeLimitExceeded,
    TransferError,
    TransferIntegrityError,
    UnsafePathError,
)
from .from_store import ContentStore
from .stats import TransferProgress, TransferStats

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_IN_FLIGHT",
    "ContentStore",
    "IntegrityError",
    "NodeLostError",
    "SizeLimitExceeded",
    "TransferError",
    "TransferIntegrityError",
    "TransferProgress",
    "TransferStats",
    "UnsafePathError",
    "copy_dir",
    "copy_dir_sync",
]
