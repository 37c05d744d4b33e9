"""What an experiment's storage already holds, before anything is written to it.

Opening an experiment that exists without ``resume=True`` would mix two runs in one
journal and one set of checkpoint folders (the second run's journal listing only its
own trials, the first's results deleted, same-named checkpoints overwritten), and a
``resume=True`` of an experiment that never existed would quietly start afresh. Both
are refused here with what was found and the ways on; ``overwrite=True`` deletes the
old experiment first, completely.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY
from orchestrator.core.lease_record import LEASE_KEY
from orchestrator.core.settings import ExperimentSettings, StorageMode
from orchestrator.errors import ExperimentExists, ExperimentNotFound
from orchestrator.journal.reader import JournalContents, load_experiment
from orchestrator.journal.storage_check import check_local_path
from orchestrator.journal.trial_logs import complete_from_logs

log = logging.getLogger("orchestrator")


@dataclass(frozen=True)
class Found:
    """An experiment in storage, as its journal's head describes it."""

    trials: int
    written_at: float | None
    damaged: str | None = None  # what is wrong with its journal's head, if anything

    @property
    def updated(self) -> str:
        if self.written_at is None:
            return "unknown"
        return datetime.fromtimestamp(self.written_at).strftime("%Y-%m-%d %H:%M:%S")


async def find(store: Any) -> Found | None:
    """The experiment ``store`` (opened) holds, or None when it has no journal (a
    damaged one is still found: it is not ours to replace)."""
    from orchestrator.journal.damage import damage_of

    if not await store.exists(JOURNAL_KEY):
        if await store.exists(BACKUP_KEY):
            return Found(0, None, "its journal's head is missing")
        return None
    data = await store.read_bytes(JOURNAL_KEY)
    what = damage_of(data)
    try:
        head = json.loads(data) if what is None else {}
        sealed = sum(int(o.get("trials") or 0) for o in head.get("sealed") or [])
        return Found(len(head.get("trials", [])) + sealed, head.get("written_at"), what)
    except (ValueError, AttributeError):
        return Found(0, None, "its journal's head is not a journal head")


def refuse_or_accept(
    found: Found | None, *, uri: str, name: str, resume: bool, overwrite: bool
) -> bool:
    """Raise when opening is refused; True when the old experiment must be deleted."""
    if resume and found is None:
        raise ExperimentNotFound(
            f"experiment {name!r}: nothing to resume at {uri} (no experiment_state.json); "
            "check storage and name, or drop resume=True to start it"
        )
    if found is not None and not resume:
        if overwrite:
            return True
        if found.damaged:
            from orchestrator.journal.damage import repair_command

            raise ExperimentExists(
                f"experiment {name!r} already exists at {uri}, and its journal is damaged "
                f"({JOURNAL_KEY} {found.damaged}); recover it with `{repair_command(uri)}` "
                "and pass resume=True to continue it, or pass overwrite=True to replace it, "
                "or choose another name"
            )
        raise ExperimentExists(
            f"experiment {name!r} already exists at {uri} ({found.trials} trial(s), last "
            f"updated {found.updated}); pass resume=True to continue it, overwrite=True to "
            "replace it, or choose another name"
        )
    return False


async def delete_all(store: Any, local_root: str | None) -> None:
    """Delete everything the experiment holds but the lease this driver holds on it: the
    journal's head first (so an interrupted delete never leaves a head listing missing
    segments), then the rest."""
    await store.delete(JOURNAL_KEY)
    await store.delete(BACKUP_KEY)
    if local_root is not None:  # hidden staging directories and all
        lock = os.path.basename(store.lock_path(LEASE_KEY))  # guards the lease's renewals
        await asyncio.to_thread(_clear_directory, local_root, {LEASE_KEY, lock})
    else:
        for top in sorted({key.split("/", 1)[0] for key in await store.list("")} - {LEASE_KEY}):
            await store.delete(top)
    log.info("deleted the earlier experiment at %s (overwrite=True)", store.uri)


def _clear_directory(root: str, keep: set[str]) -> None:
    for name in os.listdir(root) if os.path.isdir(root) else []:
        if name in keep:
            continue
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


async def check_existing(
    uri: str, options: Mapping[str, Any], settings: ExperimentSettings, mode: StorageMode
) -> JournalContents | None:
    """Before Ray starts: check the storage arguments, refuse to open an existing
    experiment without ``resume`` (or to resume a missing one), and with ``overwrite``
    delete the old one. With ``resume``, the journal read back (a damaged one raises
    :class:`~orchestrator.errors.JournalDamaged` here, before Ray starts), completed
    from the trials' logs where it lost results (:mod:`orchestrator.journal.trial_logs`)."""
    import storage as storage_pkg

    options = dict(options)
    if mode.is_local:
        options["create"] = False  # looking must create nothing
    store = storage_pkg.open_storage(uri, **options)
    try:
        try:
            await store.open()
        except storage_pkg.BucketNotFound:
            if not mode.is_local:
                raise
            found = None  # no directory: no experiment
        else:
            found = await find(store)
        if mode.is_local:
            await asyncio.to_thread(check_local_path, store.uri, settings.name)
        if refuse_or_accept(
            found,
            uri=uri,
            name=settings.name,
            resume=settings.continuation.resume,
            overwrite=settings.continuation.overwrite,
        ):
            await delete_all(store, store.uri if mode.is_local else None)
        if settings.continuation.resume:
            contents = await load_experiment(store)
            return None if contents is None else await complete_from_logs(store, contents)
        return None
    finally:
        await store.aclose()
