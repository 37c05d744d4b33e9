"""What a run keeps beside its journal so that ``Tuner.restore(path, trainable)`` can
make the same ``sweep(...)`` call: the Tuner's configs and the sweep's name, pickled
in ``<experiment>/trialflow_tuner.pkl`` (Tune's own is ``tuner.pkl``; the names differ
so that a Tune run and this facade's may share a directory).

Also the records behind ``get_results()`` of a restored Tuner that has not run: the
journal read as plain data.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import cloudpickle

import storage
from orchestrator.core import moved
from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.tune.config import RunConfig

__all__ = ["TUNER_KEY", "is_experiment", "load", "save", "split"]

log = logging.getLogger("orchestrator.tune")

TUNER_KEY = "trialflow_tuner.pkl"
_VERSION = 1


def split(path: str) -> tuple[str, str]:
    """An experiment's path or URI as (storage_path, name): what
    :func:`~orchestrator.core.locations.experiment_uri` joins back."""
    text = path.rstrip("/")
    if "://" not in text:
        text = os.path.abspath(os.path.expanduser(text))
    parent, _, name = text.rpartition("/")
    return parent, name


def _local(uri: str) -> bool:
    return "://" not in uri or uri.startswith("file://")


async def _exists(uri: str, key: str) -> bool:
    options = {"create": False} if _local(uri) else {}
    try:
        async with storage.open_storage(uri, **options) as store:
            return await store.exists(key)
    except storage.StorageError:
        return False


def is_experiment(uri: str, *, tuner: bool = True) -> bool:
    """Whether ``uri`` holds a journal (and, with ``tuner``, a facade run's configs)."""

    async def look() -> bool:
        if not await _exists(uri, JOURNAL_KEY):
            return False
        return not tuner or await _exists(uri, TUNER_KEY)

    return _run(look())


async def save(uri: str, document: Mapping[str, Any]) -> None:
    data = dict(document, version=_VERSION)
    try:
        blob = cloudpickle.dumps(data)
    except Exception as err:
        run_config = data.get("run_config")
        if not isinstance(run_config, RunConfig) or not run_config.callbacks:
            raise
        log.warning(
            "the run's callbacks cannot be pickled (%s): Tuner.restore will run without them",
            err,
        )
        data["run_config"] = replace(run_config, callbacks=None)
        blob = cloudpickle.dumps(data)
    options = {"create": True} if _local(uri) else {}
    async with storage.open_storage(uri, **options) as store:
        await store.write_bytes(TUNER_KEY, blob)


def load(uri: str) -> dict[str, Any]:
    async def read() -> bytes:
        async with storage.open_storage(uri) as store:
            return await store.read_bytes(TUNER_KEY)

    loaded = moved.loads(_run(read()))
    if not isinstance(loaded, dict) or loaded.get("version") != _VERSION:
        raise ValueError(f"{uri}/{TUNER_KEY} is not a saved Tuner of this version")
    return loaded


def read_records(uri: str) -> Any:
    """The experiment's journal as plain data (``views.experiments``)."""
    from orchestrator.views.experiments import read_experiment

    async def read() -> Any:
        async with storage.open_storage(uri) as store:
            return await read_experiment(store)

    return _run(read())


def _run(coro: Any) -> Any:
    """Run ``coro`` to its end from sync code, even when an event loop runs here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
