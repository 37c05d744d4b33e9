"""The checkpoint manifest: the commit record of a checkpoint.

A checkpoint is the set of files under its key *plus* this manifest, written last; a
key without a manifest is not a checkpoint (an interrupted upload, or one being
deleted). The manifest lists every file's relative path, size and SHA-256 so that a
restore can prove it got exactly what was saved. ``to_dict``/``from_dict`` use plain
JSON types so the manifest can travel through Ray or a journal unchanged.
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
_VERSION = 1


@dataclass(frozen=True)
class ManifestEntry:
    """One file of a checkpoint; ``path`` is relative to the checkpoint's key."""

    path: str
    size: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


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

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "key": self.key,
            "uri": self.uri,
            "created_at": self.created_at,
            "total_size": self.total_size,
            "algorithm": "sha256",
            "files": [f.to_dict() for f in self.files],
        }

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
        if data.get("format") != _FORMAT or data.get("version") != _VERSION:
            raise bad(f"unknown format/version {data.get('format')!r}/{data.get('version')!r}")
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
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise bad(f"bad sha256 for {path!r}")
            try:
                validate_key(path, uri=uri)
            except InvalidKey as err:
                raise bad(f"unsafe path {path!r}") from err
            if path in seen or path == MANIFEST_NAME:
                raise bad(f"duplicate or reserved path {path!r}")
            seen.add(path)
            entries.append(ManifestEntry(path, size, digest))
        uri_field = data.get("uri", "")
        return cls(
            key=key,
            files=tuple(entries),
            uri=uri_field if isinstance(uri_field, str) else "",
            created_at=float(created),
        )

    @classmethod
    def from_json(cls, raw: bytes, *, uri: str = "") -> Manifest:
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise IntegrityError("checkpoint manifest is not valid JSON", uri=uri) from err
        return cls.from_dict(data, uri=uri)
