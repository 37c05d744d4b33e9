"""The checkpoint manifest: the commit record of a checkpoint.

A checkpoint is the set of files under its key *plus* this manifest, written last; a
key without a manifest is not a checkpoint (an interrupted upload, or one being
deleted). The manifest lists every file's relative path, size and SHA-256 so that a
restore can prove it got exactly what was saved. ``to_dict``/``from_dict`` use plain
JSON types so the manifest can travel through Ray or a journal unchanged.

Version 2 (content-addressed checkpoints on object stores, see :mod:`storage.blobs`)
adds ``chunk_size`` and, per file, ``chunks``: the SHA-256 of each fixed-size piece,
each stored once as a blob; the checkpoint's key then holds only this manifest.
Version 1 (every file stored under the key) is still read.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from .errors import IntegrityError, InvalidKey
from .keys import validate_key

__all__ = ["MANIFEST_NAME", "Manifest", "ManifestEntry"]

#: The manifest's name inside a checkpoint's key. Reserved: a checkpoint directory may
#: not contain a top-level file of this name.
MANIFEST_NAME = ".trialflow-manifest.json"

_FORMAT = "trialflow-checkpoint"
_VERSIONS = (1, 2)


@dataclass(frozen=True)
class ManifestEntry:
    """One file of a checkpoint; ``path`` is relative to the checkpoint's key."""

    path: str
    size: int
    sha256: str
    #: Version 2: the SHA-256 of each ``Manifest.chunk_size`` piece, in order (none for
    #: an empty file); None in version 1, where the file is stored under the key.
    chunks: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "size": self.size, "sha256": self.sha256}
        if self.chunks is not None:
            out["chunks"] = list(self.chunks)
        return out


@dataclass(frozen=True)
class Manifest:
    """What a committed checkpoint contains.

    ``key`` is the checkpoint's key and ``uri`` its full location when it was written
    (informational: restoring uses the key, so a moved bucket still works).
    """

    key: str
    files: tuple[ManifestEntry, ...]
    uri: str = ""
    created_at: float = field(default_factory=time.time)
    #: Version 2: the size of every chunk but a file's last; None in version 1.
    chunk_size: int | None = None

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def version(self) -> int:
        return 1 if self.chunk_size is None else 2

    def blobs(self) -> frozenset[str]:
        """The SHA-256 of every blob this checkpoint names (empty for version 1)."""
        return frozenset(c for f in self.files for c in f.chunks or ())

    def to_dict(self) -> dict[str, Any]:
        out = {
            "format": _FORMAT,
            "version": self.version,
            "key": self.key,
            "uri": self.uri,
            "created_at": self.created_at,
            "total_size": self.total_size,
            "algorithm": "sha256",
            "files": [f.to_dict() for f in self.files],
        }
        if self.chunk_size is not None:
            out["chunk_size"] = self.chunk_size
        return out

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True).encode("utf-8")

    @classmethod
    def from_dict(cls, data: Any, *, uri: str = "") -> Manifest:
        """Rebuild a manifest, checking every field: it may come from untrusted storage,
        and its paths become local file names on restore."""

        def bad(why: str) -> IntegrityError:
            return IntegrityError(f"malformed checkpoint manifest: {why}", uri=uri)

        if not isinstance(data, dict):
            raise bad("not a JSON object")
        version = data.get("version")
        if data.get("format") != _FORMAT or version not in _VERSIONS:
            raise bad(f"unknown format/version {data.get('format')!r}/{version!r}")
        chunk_size = data.get("chunk_size") if version == 2 else None
        if version == 2 and (
            not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size <= 0
        ):
            raise bad(f"bad chunk_size {chunk_size!r}")
        if data.get("algorithm", "sha256") != "sha256":
            raise bad(f"unknown checksum algorithm {data.get('algorithm')!r}")
        key = data.get("key")
        files = data.get("files")
        created = data.get("created_at", 0.0)
        if not isinstance(key, str) or not isinstance(files, list):
            raise bad("missing key or files")
        if not isinstance(created, (int, float)):
            raise bad("created_at is not a number")
        entries: list[ManifestEntry] = []
        seen: set[str] = set()
        for item in files:
            if not isinstance(item, dict):
                raise bad("file entry is not an object")
            path, size, digest = item.get("path"), item.get("size"), item.get("sha256")
            if not isinstance(path, str) or not isinstance(digest, str):
                raise bad("file entry without path or sha256")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise bad(f"bad size for {path!r}")
            if not _is_hex(digest):
                raise bad(f"bad sha256 for {path!r}")
            chunks: tuple[str, ...] | None = None
            if chunk_size is not None:
                raw = item.get("chunks")
                if not isinstance(raw, list) or not all(_is_hex(c) for c in raw):
                    raise bad(f"bad chunks for {path!r}")
                if len(raw) != -(-size // chunk_size):
                    raise bad(f"{len(raw)} chunks do not cover the {size} bytes of {path!r}")
                chunks = tuple(raw)
            try:
                validate_key(path, uri=uri)
            except InvalidKey as err:
                raise bad(f"unsafe path {path!r}") from err
            if path in seen or path == MANIFEST_NAME:
                raise bad(f"duplicate or reserved path {path!r}")
            seen.add(path)
            entries.append(ManifestEntry(path, size, digest, chunks))
        uri_field = data.get("uri", "")
        return cls(
            key=key,
            files=tuple(entries),
            uri=uri_field if isinstance(uri_field, str) else "",
            created_at=float(created),
            chunk_size=chunk_size,
        )

    @classmethod
    def from_json(cls, raw: bytes, *, uri: str = "") -> Manifest:
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise IntegrityError("checkpoint manifest is not valid JSON", uri=uri) from err
        return cls.from_dict(data, uri=uri)


def _is_hex(digest: object) -> bool:
    return (
        isinstance(digest, str)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest)
    )
