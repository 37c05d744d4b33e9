"""What ``Tuner.restore`` checks before it continues a run, in Tune's rules.

- The trainable must be the run's (the same name, as Tune compares them) and a
  re-given ``param_space`` must have the run's keys: it may refresh values (objects
  that do not survive a restart), not add or drop hyperparameters.
- A directory Ray Tune wrote (``experiment_state-*.json``, ``tuner.pkl``) is told
  apart from a directory that holds no run: it is refused by name, with what to do.
  This facade does not continue Tune's runs: Tune's state is pickled Ray-internal
  objects (trials, searcher, scheduler) whose layout changes between Ray versions, so
  reading it would make every restore depend on the Ray version that wrote it, and a
  half-read run (results but not the searcher's or scheduler's state) would go on
  differently from Tune without saying so. Starting a new run, or finishing that one
  with Ray Tune, are both exact.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import storage
from orchestrator.core.locations import experiment_uri
from orchestrator.errors import ConfigError
from orchestrator.tune import saved
from orchestrator.tune.adapters import trainable_name
from orchestrator.tune.error import TuneError

__all__ = [
    "check_same_run",
    "local_filesystem",
    "path_text",
    "ray_tune_refusal",
    "run_at",
    "written_by_ray_tune",
]

log = logging.getLogger("orchestrator.tune")

_TUNE_STATE_PREFIX = "experiment_state-"
_TUNE_TUNER = "tuner.pkl"


def path_text(path: Any) -> str:
    """A path given as ``str`` or ``os.PathLike`` (``pathlib.Path``), as text."""
    return str(os.fspath(path))


def local_filesystem(filesystem: Any) -> bool:
    """No filesystem, or pyarrow's local one (a path then means what it says); any
    other is refused by the caller (``storage_path`` takes ``s3://``/``gs://`` URIs)."""
    if filesystem is None:
        return True
    kind = type(filesystem)
    return kind.__name__ == "LocalFileSystem" and kind.__module__.startswith("pyarrow")


def written_by_ray_tune(uri: str) -> bool:
    """Whether ``uri`` holds Ray Tune's own experiment files (``tuner.pkl``, or the
    ``experiment_state-*.json`` that ``tune.run`` leaves alone)."""
    local = "://" not in uri or uri.startswith("file://")
    if local:  # a local store lists directories, not name prefixes
        directory = uri.removeprefix("file://")
        try:
            names = os.listdir(directory)
        except OSError:
            return False
        return _TUNE_TUNER in names or any(n.startswith(_TUNE_STATE_PREFIX) for n in names)

    async def look() -> bool:
        try:
            async with storage.open_storage(uri) as store:
                if await store.exists(_TUNE_TUNER):
                    return True
                return bool(await store.list(_TUNE_STATE_PREFIX))
        except storage.StorageError:
            return False

    return bool(saved._run(look()))


def ray_tune_refusal(path: str) -> TuneError:
    return TuneError(
        f"Tuner.restore: {path} was written by Ray Tune (experiment_state-*.json, "
        "tuner.pkl), whose runs orchestrator.tune cannot continue (Tune's pickled state "
        "changes with Ray's version); start a new run with tune.Tuner(...), or finish "
        "this one with Ray Tune's own Tuner.restore"
    )


def run_at(path: Any, what: str) -> tuple[str, str, str, str]:
    """``(path as text, storage_path, name, uri)`` of the run of ours at ``path``, for
    ``what`` (the caller, named in the error): a directory Ray Tune wrote, or one that
    holds no run, is refused in one line."""
    text = path_text(path)
    storage_path, name = saved.split(text)
    uri = experiment_uri(storage_path, name)
    if not saved.is_experiment(uri, tuner=False):
        if written_by_ray_tune(uri):
            raise ray_tune_refusal(text)
        raise TuneError(
            f"{what}: {text} is not an experiment (no experiment_state.json there); give "
            "the directory fit() wrote: <storage_path>/<name>"
        )
    return text, storage_path, name, uri


def warn_ray_tune(path: str) -> None:
    """``can_restore`` answers False for Tune's directories, and says why once."""
    log.warning("%s", str(ray_tune_refusal(path)).replace("Tuner.restore: ", "", 1))


def _keys(space: Any, prefix: str = "") -> list[str]:
    if not isinstance(space, Mapping):
        return []
    keys: list[str] = []
    for key, value in space.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            keys.extend(_keys(value, name + "/"))
        else:
            keys.append(name)
    return keys


def check_same_run(
    path: str, document: Mapping[str, Any], trainable: Any, param_space: Any
) -> None:
    """Refuse another trainable, or a ``param_space`` with other keys, in one line
    naming what differs (Tune refuses both, as a ValueError: so is ConfigError)."""
    expected = document.get("trainable_name")
    got = trainable_name(trainable)
    if expected is not None and got != expected:
        raise ConfigError(
            f"Invalid `trainable` input to `Tuner.restore()` of {path}: got a trainable "
            f"with identifier '{got}' but the run's is '{expected}'; pass in the same "
            "trainable that was used to initialize the Tuner"
        )
    if param_space is None:
        return
    old, new = set(_keys(document.get("param_space"))), set(_keys(param_space))
    if old != new:
        added, missing = sorted(new - old), sorted(old - new)
        raise ConfigError(
            f"Invalid `param_space` input to `Tuner.restore()` of {path}: its keys differ "
            f"from the run's (added: {added}, missing: {missing}); pass the same "
            "`param_space` the Tuner was built with (re-give it only to refresh values "
            "such as object references, not to add or drop hyperparameters)"
        )
