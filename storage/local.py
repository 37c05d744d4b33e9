"""Local disk and NFS: keys are files under a root directory.

Every write goes to a reserved temporary sibling and is renamed into place, so readers
(and other hosts on NFS, which honours rename atomicity within a directory) never see
a partial file. A checkpoint is staged whole in a sibling directory, manifest included,
and committed with one rename. All disk I/O runs in worker threads.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import shutil
import threading
from collections.abc import Callable, Collection
from typing import TypeVar

from . import _local_conditional
from ._concurrency import in_thread, map_bounded, run_stoppable
from ._files import (
    Digest,
    LocalFile,
    atomic_write_bytes,
    clone_hashed,
    copy_hashed,
    fsync_dir,
    remove_quietly,
    scan_dir,
    temp_sibling,
)
from .base import Storage, Versioned
from .errors import (
    BucketNotFound,
    InvalidKey,
    NotADirectory,
    NotFound,
    PermissionDenied,
    StorageError,
    full_device,
)
from .keys import RESERVED_PREFIX, join_key, local_path, validate_key, validate_prefix
from .manifest import MANIFEST_NAME, Manifest, ManifestEntry

__all__ = ["LocalStorage"]

T = TypeVar("T")

#: A checkpoint this small (files, bytes) is staged in one worker thread, not one
#: thread per file: for it, the hand-offs between threads cost more than the copying.
SMALL_FILES = 8
SMALL_BYTES = 4 << 20


class LocalStorage(Storage):
    """Storage in a local (or NFS-mounted) directory.

    The root must exist unless ``create=True``. ``fsync=True`` (default) makes every
    committed write durable before it is reported done. :attr:`uri` and
    :meth:`uri_for` are absolute paths.
    """

    scheme = "file"

    def __init__(self, root: str, *, create: bool = False, fsync: bool = True, **options: object):
        root = os.path.abspath(os.path.expanduser(root))
        super().__init__(root, **options)  # type: ignore[arg-type]
        self.root = root
        self.create = create
        self.fsync = fsync

    def uri_for(self, key: str) -> str:
        return self._path(validate_prefix(key, uri=self.uri))

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/")) if key else self.root

    async def _run(self, key: str | None, what: str, fn: Callable[..., T], *args: object) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        except OSError as err:
            raise self._map_error(err, key, what) from err

    def _map_error(self, err: OSError, key: str | None, what: str) -> StorageError:
        if isinstance(err, StorageError):
            return err
        full = full_device(err, what, uri=self.uri, key=key)
        if full is not None:
            return full
        reason = f"{what} failed: {err.strerror or err}"
        if isinstance(err, (FileNotFoundError, IsADirectoryError, NotADirectoryError)):
            return NotFound(reason, uri=self.uri, key=key)
        if isinstance(err, PermissionError):
            return PermissionDenied(reason, uri=self.uri, key=key)
        return StorageError(reason, uri=self.uri, key=key)

    # -- primitives -------------------------------------------------------------------

    async def _open(self) -> None:
        # A hung NFS mount must not freeze the event loop, even for a stat.
        await asyncio.to_thread(self._check_root)

    async def _close(self) -> None:
        return None

    async def _write_bytes(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            await asyncio.to_thread(atomic_write_bytes, path, data, fsync=self.fsync)
        except (IsADirectoryError, NotADirectoryError, FileExistsError) as err:
            raise StorageError(
                "cannot write: the key or one of its parents is a directory/file clash",
                uri=self.uri,
                key=key,
            ) from err
        except OSError as err:
            raise self._map_error(err, key, "write") from err

    async def _read_bytes(self, key: str) -> bytes:
        def read() -> bytes:
            with open(self._path(key), "rb") as f:
                return f.read()

        return await self._run(key, "read", read)

    async def _exists(self, key: str) -> bool:
        return await self._run(key, "stat", os.path.isfile, self._path(key))

    async def _list(self, prefix: str) -> list[str]:
        def walk() -> list[str]:
            top = self._path(prefix)
            if os.path.isfile(top):
                return [prefix]
            keys: list[str] = []
            for root, dirs, files in os.walk(top):
                dirs[:] = [d for d in dirs if not d.startswith(RESERVED_PREFIX)]
                rel_root = os.path.relpath(root, top)
                rel_parts = [] if rel_root == "." else rel_root.split(os.sep)
                for name in files:
                    if not name.startswith(RESERVED_PREFIX):
                        keys.append("/".join([*([prefix] if prefix else []), *rel_parts, name]))
            return keys

        return await self._run(prefix, "list", walk)

    async def _delete(self, prefix: str) -> None:
        def remove() -> None:
            path = self._path(prefix)
            if os.path.isdir(path) and not os.path.islink(path):
                # Rename first: the tree disappears from listings at once, then goes.
                trash = temp_sibling(path)
                os.rename(path, trash)
                shutil.rmtree(trash)
            else:
                try:
                    os.unlink(path)
                except (FileNotFoundError, NotADirectoryError):
                    pass

        await self._run(prefix, "delete", remove)

    def lock_path(self, key: str) -> str:
        """The hidden file whose POSIX lock guards the conditional writes of ``key``
        (kept, never removed: removing a lock file others may hold breaks the lock)."""
        directory, name = os.path.split(self._path(validate_key(key, uri=self.uri)))
        return os.path.join(directory, _local_conditional.lock_name(name))

    async def _write_bytes_if_absent(self, key: str, data: bytes) -> str | None:
        path = self._path(key)
        return await self._run(
            key,
            "create",
            functools.partial(_local_conditional.create_exclusive, fsync=self.fsync),
            path,
            data,
        )

    async def _read_bytes_versioned(self, key: str) -> Versioned:
        data, version = await self._run(
            key, "read", _local_conditional.read_versioned, self._path(key)
        )
        return Versioned(data, version)

    async def _replace_bytes_if(self, key: str, data: bytes, version: str) -> str | None:
        replace = functools.partial(_local_conditional.replace_if, fsync=self.fsync)
        return await self._run(key, "conditional replace", replace, self._path(key), data, version)

    async def _delete_if(self, key: str, version: str) -> bool:
        delete = functools.partial(_local_conditional.delete_if, fsync=self.fsync)
        return await self._run(key, "conditional delete", delete, self._path(key), version)

    async def _upload_file(self, path: str, key: str, size: int) -> Digest:
        dst = self._path(key)

        def copy(stop: threading.Event) -> Digest:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            tmp = temp_sibling(dst)
            try:
                digest = copy_hashed(path, tmp, fsync=self.fsync, stop=stop)
                os.replace(tmp, dst)
            except BaseException:
                remove_quietly(tmp)
                raise
            return digest

        try:
            return await run_stoppable(copy)
        except OSError as err:
            raise self._map_error(err, key, "upload") from err

    async def _download_file(self, key: str, path: str, expected: ManifestEntry | None) -> None:
        try:
            await run_stoppable(functools.partial(self._copy_out, key, path, expected))
        except OSError as err:
            raise self._map_error(err, key, "download") from err

    def _copy_out(
        self, key: str, path: str, expected: ManifestEntry | None, stop: threading.Event
    ) -> None:
        """Blocking: the file ``key`` cloned (or copied) to ``path``, verified."""
        src = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = temp_sibling(path)
        try:
            if not os.path.isfile(src):
                raise NotFound("download failed: no such key", uri=self.uri, key=key)
            digest = clone_hashed(src, tmp, stop=stop)
            self._verify(key, digest, expected)
            os.replace(tmp, path)
        except BaseException:
            remove_quietly(tmp)
            raise

    def get_small_checkpoint(self, key: str, local_dir: str | os.PathLike[str]) -> Manifest | None:
        """:meth:`get_checkpoint`, synchronously, for a checkpoint of at most
        :data:`SMALL_FILES` files and :data:`SMALL_BYTES` bytes: every file cloned and
        verified against the manifest, in the calling thread. Returns None, having
        written nothing, for a larger one (:meth:`get_checkpoint` handles those).

        A trial actor restores small checkpoints this way (a PBT exploit, a restart):
        on a busy node each hand-off to the event loop's thread and from there to a file
        thread waits for a CPU, and a restore of a few kilobytes took a quarter second.
        """
        key = validate_key(key, uri=self.uri)
        self._check_root()
        try:
            with open(self._path(join_key(key, MANIFEST_NAME)), "rb") as fh:
                manifest = Manifest.from_json(fh.read(), uri=self.uri_for(key))
        except FileNotFoundError as err:
            raise NotFound("no committed checkpoint", uri=self.uri, key=key) from err
        except OSError as err:
            raise self._map_error(err, key, "reading a manifest") from err
        files = manifest.files
        if len(files) > SMALL_FILES or sum(e.size for e in files) > SMALL_BYTES:
            return None
        target = os.fspath(local_dir)
        stop = threading.Event()
        try:
            os.makedirs(target, exist_ok=True)
            for entry in files:
                self._copy_out(
                    join_key(key, entry.path), local_path(target, entry.path), entry, stop
                )
        except OSError as err:
            raise self._map_error(err, key, "download") from err
        return manifest

    # -- checkpoints: stage, then one rename ------------------------------------------

    async def put_checkpoint(
        self, local_dir: str | os.PathLike[str], key: str, *, known: Collection[str] = ()
    ) -> Manifest:
        """Copy ``local_dir`` into a hidden sibling of the checkpoint's directory, write
        the manifest there, then rename the whole directory into place: the commit is one
        atomic rename, and an interrupted put leaves only a hidden staging directory
        (removed on the way out). Falls back to the generic file-by-file protocol if
        the filesystem refuses the rename."""
        key = validate_key(key, uri=self.uri)
        await self._ready()
        files = await asyncio.to_thread(self._scan, local_dir, key)
        final = self._path(key)
        stage = temp_sibling(final)

        async def one(f: LocalFile) -> ManifestEntry:
            return await run_stoppable(functools.partial(self._stage_file, stage, f))

        try:
            if _is_small(files):
                manifest = await run_stoppable(
                    functools.partial(self._stage_small, stage, files, key)
                )
            else:
                await self._run(key, "staging a checkpoint", _make_tree, stage, files)
                try:
                    entries = await map_bounded(one, files, self.file_concurrency)
                except OSError as err:
                    raise self._map_error(err, key, "staging a checkpoint") from err
                manifest = await in_thread(self._finish_stage, stage, final, key, entries)
            # Commit: no await from here until the rename is done, so a cancellation
            # lands either before the commit (nothing visible) or after it (success).
            refused = self._commit(stage, final, key)
        except BaseException:
            await self._cleanup(asyncio.to_thread(remove_quietly, stage), "removing staging")
            raise
        if refused:
            await self._cleanup(asyncio.to_thread(remove_quietly, stage), "removing staging")
            return await super().put_checkpoint(local_dir, key)
        return manifest

    def put_small_checkpoint(self, local_dir: str | os.PathLike[str], key: str) -> Manifest | None:
        """:meth:`put_checkpoint`, synchronously, for a checkpoint of at most
        :data:`SMALL_FILES` files and :data:`SMALL_BYTES` bytes: the same staging, manifest
        and one-rename commit, all in the calling thread.

        Returns None, having written nothing, when the checkpoint is larger or the
        filesystem refuses the commit rename; :meth:`put_checkpoint` handles those. For a
        caller with no event loop to spare: a trial actor commits its own small
        checkpoints this way, for less than any hand-off to another thread or process
        would cost.
        """
        key = validate_key(key, uri=self.uri)
        self._check_root()
        files = self._scan(local_dir, key)
        if not _is_small(files):
            return None
        final = self._path(key)
        stage = temp_sibling(final)
        try:
            manifest = self._stage_small(stage, files, key, threading.Event())
            refused = self._commit(stage, final, key)
        except BaseException:
            remove_quietly(stage)
            raise
        if refused:
            remove_quietly(stage)
            return None
        return manifest

    # -- checkpoint staging (each step runs in one thread) ------------------------------

    def _check_root(self) -> None:
        if os.path.isdir(self.root):
            return
        _refuse_file_in_the_way(self.root, self.uri)
        if not self.create:
            raise BucketNotFound(
                "root directory does not exist (create it, or pass create=True)", uri=self.uri
            )
        try:
            os.makedirs(self.root, 0o777, exist_ok=True)
        except OSError as err:
            raise self._map_error(err, None, "creating the root directory") from err

    def _scan(self, local_dir: str | os.PathLike[str], key: str) -> list[LocalFile]:
        files = scan_dir(os.fspath(local_dir), uri=self.uri, key=key)
        if any(f.rel == MANIFEST_NAME for f in files):
            raise InvalidKey(f"{MANIFEST_NAME} is reserved", uri=self.uri, key=key)
        return files

    def _stage_file(self, stage: str, f: LocalFile, stop: threading.Event) -> ManifestEntry:
        digest = copy_hashed(
            f.path, os.path.join(stage, *f.rel.split("/")), fsync=self.fsync, stop=stop
        )
        return ManifestEntry(f.rel, digest.size, digest.sha256)

    def _stage_small(
        self, stage: str, files: list[LocalFile], key: str, stop: threading.Event
    ) -> Manifest:
        # Everything up to the commit in one thread: a small checkpoint's cost is the
        # hand-offs between threads, not its bytes (7 hops: ~1.5 ms of CPU).
        try:
            _make_tree(stage, files)
            entries = [self._stage_file(stage, f, stop) for f in files]
        except OSError as err:
            raise self._map_error(err, key, "staging a checkpoint") from err
        return self._finish_stage(stage, self._path(key), key, entries)

    def _finish_stage(
        self, stage: str, final: str, key: str, entries: list[ManifestEntry]
    ) -> Manifest:
        """Write the manifest into ``stage`` and clear the way for the commit rename."""
        manifest = Manifest(key=key, files=tuple(entries), uri=self.uri_for(key))
        try:
            atomic_write_bytes(
                os.path.join(stage, MANIFEST_NAME), manifest.to_json(), fsync=self.fsync
            )
            if self.fsync:
                fsync_dir(stage)
        except OSError as err:
            raise self._map_error(err, key, "writing the manifest") from err
        try:
            self._remove_old(final)
        except OSError as err:
            raise self._map_error(err, key, "removing the previous checkpoint") from err
        return manifest

    @staticmethod
    def _remove_old(final: str) -> None:
        """Un-commit a previous checkpoint at ``final`` (manifest first), then remove it."""
        if not os.path.lexists(final):
            return
        if os.path.isdir(final) and not os.path.islink(final):
            try:
                os.unlink(os.path.join(final, MANIFEST_NAME))
            except FileNotFoundError:
                pass
            trash = temp_sibling(final)
            os.rename(final, trash)
            shutil.rmtree(trash)
        else:
            os.unlink(final)

    def _commit(self, stage: str, final: str, key: str) -> bool:
        """Rename ``stage`` to ``final`` and, with ``fsync``, make the rename durable;
        True if the filesystem refused the rename (the caller then falls back to the
        file-by-file protocol)."""
        try:
            os.rename(stage, final)
        except OSError as err:
            if err.errno in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EINVAL):
                return True
            raise self._map_error(err, key, "committing a checkpoint") from err
        if self.fsync:
            fsync_dir(os.path.dirname(final))
        return False


def _refuse_file_in_the_way(root: str, uri: str) -> None:
    """Raise :class:`NotADirectory` when ``root`` or its nearest existing ancestor is not
    a directory: it can never hold the root, with ``create`` or without."""
    path = root
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent
    if not os.path.isdir(path):
        what = "" if path == root else f"cannot be created: {path} "
        raise NotADirectory(
            f"the storage root {what}is a file, not a directory; give the path of a "
            "directory (or of one to create)",
            uri=uri,
        )


def _is_small(files: list[LocalFile]) -> bool:
    return len(files) <= SMALL_FILES and sum(f.size for f in files) <= SMALL_BYTES


def _make_tree(stage: str, files: list[LocalFile]) -> None:
    """``stage`` and the subdirectories ``files`` need in it."""
    os.makedirs(stage)
    for d in sorted({os.path.dirname(f.rel) for f in files} - {""}):
        os.makedirs(os.path.join(stage, *d.split("/")), exist_ok=True)
