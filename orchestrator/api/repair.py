"""Repairing an experiment's journal under its lease (``python -m orchestrator repair``).

Repair rewrites the journal's head, so it must not run beside a driver that writes it:
it takes the experiment's lease like a driver does (:func:`acquire_lease`), and is
refused with :class:`~orchestrator.errors.ExperimentLocked` while a live driver holds
it (``take_over=True`` takes it anyway, as for a driver). Before that, it looks without
writing: a path where no experiment is, or a storage root that holds experiments, is
a :class:`~orchestrator.errors.ConfigError` and nothing is written there (not even the
lease). What it does is :mod:`orchestrator.journal.repair`'s; then, on a
content-addressed store (S3, GCS), it deletes the blobs no checkpoint names (a driver
or a save killed midway leaves them; no save runs while repair holds the lease).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.journal.repair import RepairReport

__all__ = ["repair"]


async def repair(
    storage: str | os.PathLike[str] | None,
    name: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    take_over: bool = False,
) -> RepairReport:
    """Repair the journal of experiment ``name`` under ``storage``; its report."""
    import storage as storage_pkg
    from orchestrator.api.experiment import Experiment, Opening
    from orchestrator.api.lease import acquire_lease
    from orchestrator.core.locations import experiment_uri
    from orchestrator.core.settings import Continuation, ExperimentSettings
    from orchestrator.journal.repair import check_repairable, repair_experiment
    from orchestrator.journal.storage_check import open_checked

    settings = ExperimentSettings(
        name=name, continuation=Continuation(resume=True)
    )  # resume: create nothing
    uri = experiment_uri(storage, name)
    options = dict(storage_options or {})
    probe = open_checked(uri, options, name)
    local = isinstance(probe, storage_pkg.LocalStorage)
    if local:
        options["create"] = False
    store = storage_pkg.open_storage(uri, **options)
    try:
        await store.open()
        await check_repairable(store)  # looking only: nothing written yet
    except storage_pkg.BucketNotFound as err:
        raise ConfigError(f"no experiment at {uri} ({err}); check --storage and --name") from err
    except BaseException:
        await store.aclose()
        raise
    opening = Opening(
        storage_uri=uri,
        storage_options=options,
        ray_address=None,
        num_cpus=None,
        log_to_driver=False,
        runtime_env=None,
        hooks=[],
        logger_names=(),
        progress=False,
        take_over=take_over,
    )
    try:
        lease = await acquire_lease(
            Experiment(settings, settings.storage_mode(is_local=local), opening)
        )
        try:
            report = await repair_experiment(store)
            # Then, still under the lease, the blobs a crash left that no checkpoint
            # holds: on S3/GCS those no manifest names, on a local disk those with one
            # link left (see ``LocalStorage.sweep_blobs``).
            swept = len(await store.sweep_orphan_blobs()) if store.content_addressed else 0
            swept += await store.sweep_blobs()
            return dataclasses.replace(report, blobs_swept=report.blobs_swept + swept)
        finally:
            await lease.release()
    finally:
        await store.aclose()
