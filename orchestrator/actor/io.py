"""Storage I/O for our actors: uploads and downloads on an event loop of their own.

The trial actor (restores, and uploads until its node's persister is up) and the
persister (uploads) are plain, synchronous Ray actors: their calls are cheapest that
way. The storage drivers are asyncio code, so they run here, on one event loop in a
daemon thread started the first time the actor touches storage; the actor's threads
hand coroutines over and wait for their results. One loop means one storage client per
actor, whichever Ray thread asks.

This lives outside the actor classes on purpose: Ray turns any class with an
``async def`` method into an async actor, and these must not be.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from orchestrator.core.backoff import Backoff

log = logging.getLogger("orchestrator.actor")

#: Commits in place that take longer than this, several in a row (a slow or network
#: filesystem), stall training too much: the actor then hands its later checkpoints to
#: the node's persister. Generous on purpose: on a busy node a commit of a millisecond of
#: CPU can take tens of milliseconds, and the persister would be no faster there.
COMMIT_IN_PLACE_BUDGET_S = 0.25
SLOW_COMMITS_TOLERATED = 3

T = TypeVar("T")

#: Manifests an actor remembers (those it wrote or read), to tell which blobs a save
#: need not look for: a few per trial it hosts is plenty.
MANIFESTS_REMEMBERED = 64


class ActorIO:
    """Storage operations for one actor (for a trial actor: all the trials it hosts), run
    on a private event loop thread."""

    def __init__(self, storage_uri: str, storage_options: Mapping[str, Any]) -> None:
        self._storage_uri = storage_uri
        self._storage_options = dict(storage_options)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._storage: Any = None
        # Small checkpoints in local storage are committed in the caller's thread (see
        # commit_small); None until the first try tells whether the storage allows it.
        self._in_place: Any = None
        self._in_place_ok = True
        self._slow_commits = 0  # in a row
        # Blobs of content-addressed checkpoints by key (those this actor wrote or
        # read), newest last; only touched on the I/O loop.
        self._blobs_of: OrderedDict[str, frozenset[str]] = OrderedDict()

    # -- the calls the actor makes (from any of its threads) ---------------------------

    def persist(
        self,
        trial_id: str,
        local_dir: str,
        key: str,
        retry_for: float,
        follows: Iterable[str] = (),
    ) -> dict[str, Any]:
        """Upload ``local_dir`` as checkpoint ``key`` and commit it; returns the manifest.

        ``follows``: keys of checkpoints the driver keeps while this save is under way
        (the trial's newest, its restore origin): their blobs are not uploaded again,
        nor looked for (see ``storage.blobs``).

        While storage is unreachable the upload is retried for up to ``retry_for``
        seconds; an uncommitted attempt is never visible as a checkpoint. The local copy
        is removed once committed, and once given up (nothing will upload it again, and
        on a full disk it only takes more room).
        """
        try:
            return self._run(self._persist(trial_id, local_dir, key, retry_for, tuple(follows)))
        finally:
            shutil.rmtree(local_dir, ignore_errors=True)

    def commit_small(self, trial_id: str, local_dir: str, key: str) -> dict[str, Any] | None:
        """Commit ``local_dir`` as checkpoint ``key`` here, in the calling thread, when
        that is cheap: storage is a local directory and the checkpoint small (see
        ``LocalStorage.put_small_checkpoint``). Returns the manifest, or None when the
        checkpoint is for the node's persister: then nothing was written, and a storage
        error is left for the persister to retry or report.

        Cheaper than a persister upload for a checkpoint of a few files: no call to
        another process, no thread hand-off; training waits about a millisecond. After
        :data:`SLOW_COMMITS_TOLERATED` commits in a row took longer than
        :data:`COMMIT_IN_PLACE_BUDGET_S`, this actor stops trying: a slow filesystem
        does not keep stalling training.
        """
        if not self._in_place_ok or self._local_storage() is None:
            return None
        from storage import StorageError

        start = time.perf_counter()
        try:
            manifest = self._in_place.put_small_checkpoint(local_dir, key)
        except StorageError as err:
            if is_permanent(err):  # the persister would meet it too: say it now
                shutil.rmtree(local_dir, ignore_errors=True)
                raise
            log.info(
                "trial %s: committing %s in place failed (%s); uploading it", trial_id, key, err
            )
            return None
        took = time.perf_counter() - start
        self._slow_commits = self._slow_commits + 1 if took > COMMIT_IN_PLACE_BUDGET_S else 0
        if self._slow_commits >= SLOW_COMMITS_TOLERATED:
            self._in_place_ok = False
            log.info(
                "trial %s: %d checkpoint commits in a row took over %.0f ms (the last %.0f "
                "ms); the node's persister takes this actor's checkpoints from now on",
                trial_id,
                self._slow_commits,
                COMMIT_IN_PLACE_BUDGET_S * 1000,
                took * 1000,
            )
        if manifest is None:
            return None
        shutil.rmtree(local_dir, ignore_errors=True)
        return dict(manifest.to_dict())

    def fetch(self, key: str, local_dir: str) -> str:
        """Download checkpoint ``key`` into ``local_dir`` (replaced if present): a small
        one from local storage in the calling thread (see ``get_small_checkpoint``),
        any other on the event loop."""
        shutil.rmtree(local_dir, ignore_errors=True)
        local = self._local_storage()
        if local is None or local.get_small_checkpoint(key, local_dir) is None:
            self._run(self._fetch(key, local_dir))
        return local_dir

    def _local_storage(self) -> Any:
        """The experiment's storage as a ``LocalStorage`` for calls in the caller's
        thread, or None when it is not a local directory."""
        if self._in_place is None and self._in_place_ok:
            from storage import LocalStorage, open_storage

            storage = open_storage(self._storage_uri, **self._storage_options)
            if isinstance(storage, LocalStorage):
                self._in_place = storage
            else:
                self._in_place_ok = False
        return self._in_place

    def start_fetch(self, key: str, local_dir: str) -> concurrent.futures.Future[None]:
        """:meth:`fetch` in the background: the download (and its verification) runs on
        the I/O thread while the caller goes on (a restarting actor runs the trainable's
        ``setup`` meanwhile); the future says when it is done."""
        shutil.rmtree(local_dir, ignore_errors=True)
        return self._submit(self._fetch(key, local_dir))

    def close(self) -> None:
        """Close the storage client and stop the loop thread (idempotent)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._aclose(), loop).result(timeout=30)
        except Exception as err:  # closing is best effort: the actor is going away
            log.debug("closing storage %s: %s", self._storage_uri, err)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)

    # -- internals ------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._submit(coro).result()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._loop is None:
                from storage import quiet_sdk_noise

                self._loop = asyncio.new_event_loop()
                quiet_sdk_noise(self._loop)
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="trialflow-io", daemon=True
                )
                self._thread.start()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop)

    def _open(self) -> Any:
        if self._storage is None:
            from storage import open_storage

            self._storage = open_storage(self._storage_uri, **self._storage_options)
        return self._storage

    async def _persist(
        self, trial_id: str, local_dir: str, key: str, retry_for: float, follows: tuple[str, ...]
    ) -> dict[str, Any]:
        from storage import StorageError

        storage = self._open()
        known = await self._known_blobs(follows) if storage.content_addressed else ()
        deadline = time.monotonic() + retry_for
        backoff = Backoff(0.2, 5.0, jitter="half")
        attempt = 0
        while True:
            try:
                manifest = await storage.put_checkpoint(local_dir, key, known=known)
                self._remember(manifest)
                return dict(manifest.to_dict())
            except StorageError as err:
                attempt += 1
                delay = backoff.delay(attempt)
                if is_permanent(err) or time.monotonic() + delay > deadline:
                    raise
                log.warning(
                    "trial %s: persisting %s failed, retrying in %.1f s: %s",
                    trial_id,
                    key,
                    delay,
                    err,
                )
                await asyncio.sleep(delay)

    async def _fetch(self, key: str, local_dir: str) -> None:
        self._remember(await self._open().get_checkpoint(key, local_dir))

    def _remember(self, manifest: Any) -> None:
        blobs = manifest.blobs()
        if blobs:
            self._blobs_of[manifest.key] = blobs
            self._blobs_of.move_to_end(manifest.key)
            while len(self._blobs_of) > MANIFESTS_REMEMBERED:
                self._blobs_of.popitem(last=False)

    async def _known_blobs(self, keys: tuple[str, ...]) -> frozenset[str]:
        """The blobs of these committed checkpoints: remembered, else read from their
        manifests (one small read each). One that cannot be read adds nothing: its
        blobs are then looked for, as any other's."""
        from storage import StorageError

        known: set[str] = set()
        for key in keys:
            blobs = self._blobs_of.get(key)
            if blobs is None:
                try:
                    manifest = await self._open().read_manifest(key)
                except StorageError as err:
                    log.debug("no known blobs from %s: %s", key, err)
                    continue
                self._remember(manifest)
                blobs = manifest.blobs()
            known |= blobs
        return frozenset(known)

    async def _aclose(self) -> None:
        storage, self._storage = self._storage, None
        if storage is not None:
            await storage.aclose()


def is_permanent(err: BaseException) -> bool:
    """Storage errors that waiting will not fix (retrying them only delays the news): a
    full disk or quota and a file storage cannot keep among them, which took the whole
    ``save_retry_for`` budget before the trial paused."""
    import storage

    permanent = (
        storage.BucketNotFound,
        storage.InvalidKey,
        storage.NotADirectory,
        storage.PermissionDenied,
        storage.StorageFull,
        storage.UnsupportedFile,
        storage.UnsupportedURI,
    )
    return isinstance(err, permanent)
