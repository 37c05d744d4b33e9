"""The transfer error family.

Callers catch :class:`TransferError` and never need Ray's exception zoo: the driver side
converts actor deaths, lost objects and remote failures into these types at one place
(``api._map_ray_errors``). Every message names the node or path and says what to do.
Whenever one of these is raised, the target directory is as it was before the copy.
"""

from __future__ import annotations

__all__ = [
    "IntegrityError",
    "NodeLostError",
    "SizeLimitExceeded",
    "TransferError",
    "TransferIntegrityError",
    "UnsafePathError",
]


class TransferError(Exception):
    """Base of every error ``transfer`` raises on purpose; the target is left unchanged."""


class UnsafePathError(TransferError, ValueError):
    """A path in a listing or a chunk would escape the target or is not a plain name.

    Raised for absolute paths, ``..``, empty components, symlinks resolving outside the
    tree, and device files, FIFOs or sockets, which a checkpoint has no business holding.
    """


class TransferIntegrityError(TransferError):
    """Bytes arrived that do not match what the source announced (checksum, size, framing),
    or a source file changed while it was being copied. Retrying usually helps.

    Named apart from :class:`storage.IntegrityError` (stored bytes that do not match
    their manifest); the old name ``transfer.IntegrityError`` stays importable."""


#: The name this error had before it was told apart from ``storage.IntegrityError``.
IntegrityError = TransferIntegrityError


class SizeLimitExceeded(TransferError):
    """The bytes to send exceed ``max_size``; raised before any byte moves."""


class NodeLostError(TransferError):
    """The source or target node (or the actor copying on it) died mid-copy."""
