"""The experiment lease, held by the driver from entering ``Orchestrator`` to leaving it.

Two drivers on one experiment each ran every trial on their own Ray and spliced their
results into one journal and one set of logs. So a driver takes the experiment's lease
before anything else (before Ray starts, before the journal is read), with the storage's
conditional writes: create-if-absent takes a free lease, compare-and-replace takes a
stale one (of racing newcomers one wins) and renews it (a renewal fails once anyone
else wrote it). A second driver is refused with :class:`ExperimentLocked`, which names
the holder and how to take over. :mod:`orchestrator.core.lease_record` holds the rules.

While entered, a heartbeat task renews the lease every ``ttl / 3`` seconds (so nothing
may block the loop for long while the lease is held: Ray starts in a thread). Writers of
the experiment (the journal, the logs) ask :meth:`ExperimentLease.may_write` first: not
after two renewals failed (storage unreachable: writing resumes once one succeeds),
never again once the lease is lost. A lost lease (a renewal found another driver's
lease, or none) also ends the dispatcher's loop, so ``run()`` raises :class:`LeaseLost`.

Whatever the lease says is read back before it is said: a renewal or a release refused
by the storage reads the record there, and only another holder's record means the lease
is lost (a write of this driver's whose answer was lost is its own, and adopted).
Releasing waits for a renewal in flight, whose write may land after a cancel.

``TRIALFLOW_LEASE_TTL_S`` sets the ttl, at least :data:`MIN_TTL_S` (a shorter one is
refused before anything starts). The read-only commands (``ls``, ``show``, ``plot``)
never take the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.api.lease_holder import holder_alive, this_process
from orchestrator.core.lease_record import (
    DEFAULT_TTL_S,
    LEASE_KEY,
    MIN_TTL_S,
    LeaseRecord,
    Standing,
    fence_after,
    held_by,
    judge,
    locked_message,
    renew_every,
)
from orchestrator.errors import ConfigError, ExperimentLocked, LeaseLost

if TYPE_CHECKING:
    import storage as storage_pkg
    from orchestrator.api.experiment import Experiment

__all__ = [
    "TTL_ENV",
    "ExperimentLease",
    "acquire_lease",
    "holder_alive",
    "lease_ttl",
    "take_lease",
    "this_process",
]

log = logging.getLogger("orchestrator.api.lease")

TTL_ENV = "TRIALFLOW_LEASE_TTL_S"
#: Newcomers racing for one stale lease: how often one re-reads it before giving up.
_ATTEMPTS = 5
#: Seconds before an unreadable lease is read again, and taken if it is unchanged.
UNREADABLE_WAIT_S = 0.5


def lease_ttl() -> float:
    """The lease's ttl from ``$TRIALFLOW_LEASE_TTL_S`` (default :data:`DEFAULT_TTL_S`);
    :class:`ConfigError` for anything but seconds >= :data:`MIN_TTL_S`."""
    text = os.environ.get(TTL_ENV)
    if not text:
        return DEFAULT_TTL_S
    try:
        ttl = float(text)
    except ValueError:
        ttl = float("nan")
    if not ttl >= MIN_TTL_S:  # also NaN
        raise ConfigError(
            f"${TTL_ENV}={text!r}: the lease's ttl must be at least {MIN_TTL_S:g} s (default "
            f"{DEFAULT_TTL_S:g}): it is renewed every ttl/3, and a renewal (a write to the "
            "storage) that cannot land within that stops the driver from writing; set it to "
            f"{MIN_TTL_S:g} or more, or unset it"
        )
    return ttl


async def acquire_lease(exp: Experiment) -> ExperimentLease:
    """Take ``exp``'s lease, or raise :class:`ExperimentLocked` (:class:`ConfigError`
    for a bad ttl, before anything is opened or created)."""
    import storage as storage_pkg
    from orchestrator.journal.existing import refuse_or_accept

    ttl = lease_ttl()
    settings = exp.settings
    options = dict(exp.opening.storage_options)
    local = exp.storage_mode.is_local
    if local:  # resuming must create nothing; a new experiment needs its directory
        options["create"] = not settings.continuation.resume
    store = storage_pkg.open_storage(exp.storage_uri, **options)
    created_root = local and not await asyncio.to_thread(os.path.isdir, store.uri)
    try:
        try:
            await store.open()
        except storage_pkg.BucketNotFound:
            if not (local and settings.continuation.resume):
                raise
            refuse_or_accept(  # raises: nothing to resume
                None,
                uri=exp.storage_uri,
                name=settings.name,
                resume=True,
                overwrite=settings.continuation.overwrite,
            )
            raise
        lease = await take_lease(
            store,
            name=settings.name,
            take_over=exp.opening.take_over,
            created_root=created_root,
            ttl=ttl,
        )
    except BaseException:
        if created_root:
            await asyncio.to_thread(_remove_if_empty, store.uri)
        await store.aclose()
        raise
    return lease


async def take_lease(
    store: storage_pkg.Storage,
    *,
    name: str,
    take_over: bool = False,
    created_root: bool = False,
    ttl: float | None = None,
) -> ExperimentLease:
    """Take the lease of the experiment ``name`` whose root is ``store`` (open, or opened
    on first use), or raise :class:`ExperimentLocked`. The lease owns ``store`` from
    then on: :meth:`ExperimentLease.release` closes it (on failure, the caller does).
    ``created_root``: the caller created the root for this, and release removes it if
    nothing else was written there. ``ttl``: default :func:`lease_ttl`."""
    lease = ExperimentLease(store, name=name, created_root=created_root, ttl=ttl)
    await lease._take(take_over=take_over)
    return lease


class ExperimentLease:
    """One driver's hold on one experiment (see the module docstring)."""

    def __init__(
        self,
        store: storage_pkg.Storage,
        *,
        name: str,
        created_root: bool,
        ttl: float | None = None,
    ) -> None:
        self._store = store
        self._name = name
        self._created_root = created_root
        self.ttl = lease_ttl() if ttl is None else ttl
        if not self.ttl >= MIN_TTL_S:
            raise ConfigError(f"a lease's ttl must be at least {MIN_TTL_S:g} s, not {self.ttl!r}")
        self.holder = this_process(secrets.token_hex(8))
        self.record: LeaseRecord | None = None
        self._version = ""
        self._fence_at = 0.0  # monotonic: no writing from then on without a renewal
        self._fenced_logged = False
        self._lost: LeaseLost | None = None
        self._on_lost: list[Callable[[LeaseLost], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._renewing: asyncio.Task[LeaseLost | None] | None = None  # its write in flight
        self._released = False
        self._unreadable = ""  # the version of an unreadable lease seen once

    @property
    def uri(self) -> str:
        return self._store.uri

    @property
    def lost(self) -> LeaseLost | None:
        return self._lost

    def may_write(self) -> bool:
        """Whether this driver may write to the experiment now: it holds the lease, and
        renewed it recently enough that nobody else can have taken it."""
        if self._lost is not None:
            return False
        if time.monotonic() < self._fence_at:
            return True
        if not self._fenced_logged:
            self._fenced_logged = True
            log.warning(
                "experiment %r: the lease at %s was not renewed for %.0f s; the journal and "
                "the logs are not written until a renewal succeeds",
                self._name,
                self.uri,
                fence_after(self.ttl),
            )
        return False

    def on_lost(self, callback: Callable[[LeaseLost], None]) -> None:
        """Call ``callback`` when the lease is lost (at once if it already is)."""
        if self._lost is not None:
            callback(self._lost)
        else:
            self._on_lost.append(callback)

    # -- taking ------------------------------------------------------------------------

    async def _take(self, *, take_over: bool) -> None:
        from storage import NotFound

        for _ in range(_ATTEMPTS):
            stamped = time.monotonic()
            now = time.time()
            mine = LeaseRecord(self.holder, now, now, self.ttl)
            version = await self._store.write_bytes_if_absent(LEASE_KEY, mine.to_json())
            if version is None:
                try:
                    current = await self._store.read_bytes_versioned(LEASE_KEY)
                except NotFound:
                    continue  # released meanwhile: create it
                version = await self._take_from(current.data, current.version, mine, take_over)
                if version is None:
                    continue  # changed meanwhile: judge it again
            self._hold(mine, version, stamped)
            return
        raise ExperimentLocked(
            f"experiment {self._name!r} at {self.uri}: its lease changed {_ATTEMPTS} times "
            "while this driver tried to take it; other drivers are starting on it: run "
            "again once they are done"
        )

    async def _take_from(
        self, data: bytes, version: str, mine: LeaseRecord, take_over: bool
    ) -> str | None:
        """Replace another driver's lease if it is stale (or ``take_over``); raise
        :class:`ExperimentLocked` if it is held."""
        try:
            theirs: LeaseRecord | None = LeaseRecord.from_json(data)
        except ValueError:
            theirs = None
        now = time.time()
        if theirs is None:
            if version != self._unreadable:  # a lease being written (where files appear
                self._unreadable = version  # before their bytes): look again first
                await asyncio.sleep(UNREADABLE_WAIT_S)
                return None
            reason = "it was unreadable"
        else:
            alive = await asyncio.to_thread(holder_alive, theirs.holder, self.holder)
            verdict = judge(theirs, me=self.holder, now=now, holder_alive=alive)
            if verdict.standing is Standing.HELD and not take_over:
                message = locked_message(theirs, name=self._name, uri=self.uri, now=now)
                raise ExperimentLocked(message, theirs.holder)
            reason = verdict.reason or "take_over=True"
        version_now = await self._store.replace_bytes_if(LEASE_KEY, mine.to_json(), version)
        if version_now is not None:
            log.warning(
                "experiment %r: took over the lease of %s (%s)",
                self._name,
                "an unknown driver" if theirs is None else held_by(theirs, now),
                reason,
            )
        return version_now

    def _hold(self, record: LeaseRecord, version: str, stamped: float) -> None:
        self.record, self._version = record, version
        self._fence_at = stamped + fence_after(self.ttl)
        self._task = asyncio.get_running_loop().create_task(
            self._heartbeat(), name=f"lease:{self._name}"
        )

    # -- holding -----------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        from storage import StorageError

        failing = False
        while True:
            await asyncio.sleep(renew_every(self.ttl))
            # Shielded: a cancel (release) must not abandon a write that may still land;
            # release awaits it instead, and so learns the lease's version.
            self._renewing = asyncio.ensure_future(self._renew())
            try:
                lost = await asyncio.shield(self._renewing)
            except StorageError as err:
                if not failing:
                    log.warning(
                        "experiment %r: could not renew its lease (%s); retrying every %.0f s",
                        self._name,
                        err,
                        renew_every(self.ttl),
                    )
                failing = True
                continue
            if lost is not None:
                self._lose(lost)
                return
            if failing:
                log.warning("experiment %r: its lease is renewed again", self._name)
            failing = False

    async def _renew(self) -> LeaseLost | None:
        assert self.record is not None
        stamped = time.monotonic()
        record = self.record.renewed(time.time())
        data = record.to_json()
        version = await self._store.replace_bytes_if(LEASE_KEY, data, self._version)
        if version is None:
            theirs, current = await self._read_back()
            if current is None or theirs is None or theirs.holder.token != self.holder.token:
                return LeaseLost(self._lost_message(theirs, current))
            # This driver's own record at another version: an earlier renewal whose
            # write landed but whose answer was an error. Still ours: renew that one.
            version = await self._store.replace_bytes_if(LEASE_KEY, data, current)
            if version is None:
                theirs, current = await self._read_back()
                return LeaseLost(self._lost_message(theirs, current))
        self.record, self._version = record, version
        self._fence_at = stamped + fence_after(self.ttl)
        self._fenced_logged = False
        return None

    async def _read_back(self) -> tuple[LeaseRecord | None, str | None]:
        """The record stored now and its version: (None, None) when there is none,
        (None, version) when it is unreadable. Raises StorageError."""
        from storage import NotFound

        try:
            current = await self._store.read_bytes_versioned(LEASE_KEY)
        except NotFound:
            return None, None
        try:
            return LeaseRecord.from_json(current.data), current.version
        except ValueError:
            return None, current.version

    def _lost_message(self, theirs: LeaseRecord | None, version: str | None) -> str:
        start = f"experiment {self._name!r} at {self.uri}: this driver lost its lease"
        end = (
            "; it stopped writing the journal and the logs, and ended its trials (the "
            "other driver, if any, carries the experiment on)"
        )
        if version is None:
            return (
                f"{start}: the lease was deleted (another driver took the experiment over "
                f"and has finished, or the experiment was deleted){end}"
            )
        if theirs is None:
            return f"{start}: another driver replaced it (with a record this one cannot read){end}"
        return f"{start} to {held_by(theirs, time.time())}{end}"

    def _lose(self, error: LeaseLost) -> None:
        self._lost = error
        log.error("%s", error)
        callbacks, self._on_lost = self._on_lost, []
        for callback in callbacks:
            try:
                callback(error)
            except Exception:
                log.exception("after losing the lease")

    # -- releasing ---------------------------------------------------------------------

    async def release(self) -> None:
        """Stop renewing and give the lease back (unless it was lost); remove the
        experiment's directory if taking the lease created it and nothing else was
        written there. Idempotent.

        A renewal in flight is waited for first: its write may land after any cancel,
        and the lease is then at the version it returns. The lease is left in storage
        (with a warning) only when the record there is another holder's."""
        from storage import StorageError

        if self._released:
            return
        self._released = True
        self._on_lost.clear()  # the session is closed: nobody left to stop
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self._settle_renewal()
            if self._lost is None and self.record is not None:
                await self._give_back()
            if self._created_root:
                await asyncio.to_thread(_remove_if_empty, self._store.uri)
        except StorageError as err:
            log.warning(
                "experiment %r: could not release its lease (%s); it expires in %.0f s",
                self._name,
                err,
                self.ttl,
            )
        finally:
            await self._store.aclose()

    async def _settle_renewal(self) -> None:
        """Wait for the last renewal (done or in flight) and take in what it found."""
        from storage import StorageError

        renewal, self._renewing = self._renewing, None
        if renewal is None:
            return
        try:
            lost = await renewal
        except StorageError:
            return  # its write may have landed or not: give_back reads the record
        if lost is not None and self._lost is None:
            self._lose(lost)

    async def _give_back(self) -> None:
        """Delete the lease if the record stored is this driver's (at the version it
        knows, or at one of its writes whose answer was lost)."""
        for _ in range(_ATTEMPTS):
            if await self._store.delete_if(LEASE_KEY, self._version):
                return
            theirs, current = await self._read_back()
            if current is None:
                return  # gone meanwhile
            if theirs is not None and theirs.holder.token == self.holder.token:
                self._version = current  # its own write: delete that
                continue
            if theirs is None:
                log.warning(
                    "experiment %r: its lease at %s holds a record that is not this "
                    "driver's and cannot be read; left as is",
                    self._name,
                    self.uri,
                )
            else:
                log.warning(
                    "experiment %r: its lease was taken over before this driver exited, by "
                    "%s; left to that driver",
                    self._name,
                    held_by(theirs, time.time()),
                )
            return
        log.warning(
            "experiment %r: its lease kept changing while this driver released it; it "
            "expires in %.0f s",
            self._name,
            self.ttl,
        )


def _remove_if_empty(root: str) -> None:
    """Remove ``root`` if it holds nothing but reserved (hidden) files of the storage."""
    from storage.keys import RESERVED_PREFIX

    try:
        names = os.listdir(root)
    except OSError:
        return
    if any(not name.startswith(RESERVED_PREFIX) for name in names):
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(root, name))
    with contextlib.suppress(OSError):
        os.rmdir(root)  # fails, harmlessly, if anything appeared meanwhile
