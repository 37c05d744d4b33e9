"""Ray Tune's ``Checkpoint``: a directory of files, local or in S3/GCS.

In a trainable, ``Checkpoint.from_directory(d)`` wraps a directory to report and
``tune.get_checkpoint()`` returns one to resume from (a local directory). In results, a
checkpoint points at the persisted copy in the run's storage (a path, or an
``s3://``/``gs://`` URI that ``to_directory``/``as_directory`` download, verified).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["Checkpoint"]

_METADATA = ".metadata.json"


class Checkpoint:
    """A checkpoint directory: ``path`` (a local path or a storage URI)."""

    def __init__(self, path: str | os.PathLike[str], filesystem: Any = None) -> None:
        if filesystem is not None:
            from orchestrator.tune.error import unsupported

            raise unsupported(
                "Checkpoint(filesystem=...)",
                "give the path as a local path or an s3:// / gs:// URI",
            )
        text = os.fspath(path)
        if "://" not in text:
            text = os.path.abspath(os.path.expanduser(text))
        self.path: str = text

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Checkpoint:
        return cls(path)

    @property
    def filesystem(self) -> str:
        """Where ``path`` is: "local", or the URI scheme ("s3", "gs")."""
        return self.path.split("://", 1)[0] if "://" in self.path else "local"

    def __repr__(self) -> str:
        return f"Checkpoint(filesystem={self.filesystem}, path={self.path})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __fspath__(self) -> str:
        return self.path

    # -- reading ---------------------------------------------------------------------------

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the checkpoint's files into ``path`` (default: a new temporary directory);
        returns it."""
        target = os.fspath(path) if path is not None else tempfile.mkdtemp(prefix="checkpoint_")
        os.makedirs(target, exist_ok=True)
        if self.filesystem == "local":
            shutil.copytree(self.path, target, dirs_exist_ok=True)
        else:
            _download(self.path, target)
        return target

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """A local directory holding the files: the checkpoint's own when it is local (do
        not write into it), else a temporary download removed afterwards."""
        if self.filesystem == "local":
            yield self.path
            return
        target = self.to_directory()
        try:
            yield target
        finally:
            shutil.rmtree(target, ignore_errors=True)

    # -- metadata (a JSON file in the directory, as Tune's) ------------------------------

    def get_metadata(self) -> dict[str, Any]:
        with self.as_directory() as directory:
            file = os.path.join(directory, _METADATA)
            if not os.path.exists(file):
                return {}
            with open(file) as f:
                loaded = json.load(f)
        return dict(loaded) if isinstance(loaded, Mapping) else {}

    def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Write the metadata as a new file, never into the old one: a checkpoint in
        local storage shares each file's bytes (a hard link to one blob) with every
        other checkpoint of that content, which an in-place write would change too."""
        self._local_only("set_metadata")
        file = os.path.join(self.path, _METADATA)
        fd, tmp = tempfile.mkstemp(prefix=".metadata-", dir=self.path)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(dict(metadata), f)
            os.replace(tmp, file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def update_metadata(self, metadata: Mapping[str, Any]) -> None:
        self.set_metadata({**self.get_metadata(), **metadata})

    def _local_only(self, what: str) -> None:
        if self.filesystem != "local":
            from orchestrator.tune.error import unsupported

            raise unsupported(
                f"Checkpoint.{what} on a persisted checkpoint ({self.path})",
                "a persisted checkpoint is verified and never changed; set metadata "
                "before reporting it",
            )


def _download(uri: str, target: str) -> None:
    """Fetch a persisted checkpoint (its manifest verified) from S3/GCS into ``target``."""
    import asyncio

    import storage

    base, _, key = uri.rpartition("/")
    experiment, _, trial = base.rpartition("/")

    async def fetch() -> None:
        async with storage.open_storage(experiment) as store:
            await store.get_checkpoint(f"{trial}/{key}", target)

    asyncio.run(fetch())
