"""The experiment journal: what a restarted driver needs to carry on.

The driver writes one JSON document, ``experiment_state.json``, to the experiment's
storage: every trial's spec (trainable, config, stop criterion, policy), state,
checkpoints (with their manifests), failure count, last error and result history.
Writes are atomic (the storage's ``write_bytes``), batched (at most one per
``interval``), and done by a background task, so the loop never waits for them. Each
result is serialised once, when it is reported, so a write costs a string join, not a
walk over every result; the join runs in a worker thread.

The document holds every result, so it grows with the experiment (about 100 bytes a
result: 100 MB at a million). The pause between writes therefore grows with what a
write costs: with the CPU time of building the document (:data:`WRITE_SHARE`), so the
journal never takes more than a small share of the driver's CPU whatever its size, and
with the time storage took to take it (:data:`STORAGE_SHARE`), so a slow bucket is not
kept busy. Wall time alone was a poor measure of the first: under load, or through one
slow fsync, a small journal's write looked expensive and the next waited seconds, and
a driver that died then resumed from older checkpoints than it needed to.

``Orchestrator(resume=True)`` reads it back (see :func:`load`): a trial that was
training restarts from its newest checkpoint that is both journaled *and* still in
storage, so a checkpoint deleted by garbage collection is never resurrected.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import cloudpickle

from .checkpoints import Checkpoint
from .trial import Trial

log = logging.getLogger("orchestrator.journal")

JOURNAL_KEY = "experiment_state.json"
FORMAT_VERSION = 1


def _json_default(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        with contextlib.suppress(Exception):
            return item()
    tolist = getattr(value, "tolist", None)  # numpy arrays
    if callable(tolist):
        with contextlib.suppress(Exception):
            return tolist()
    return repr(value)


_ENCODER = json.JSONEncoder(default=_json_default, separators=(",", ":"))


def dumps(value: Any) -> str:
    # One encoder for all: json.dumps with options builds a new one per call, which
    # costs more than encoding a small result dict.
    return _ENCODER.encode(value)


def pickle_b64(value: Any) -> str:
    return base64.b64encode(cloudpickle.dumps(value)).decode("ascii")


def unpickle_b64(text: str) -> Any:
    return cloudpickle.loads(base64.b64decode(text))


def class_path(cls: type) -> str | None:
    module = getattr(cls, "__module__", "")
    qualname = getattr(cls, "__qualname__", "")
    if not module or module == "__main__" or "<locals>" in qualname:
        return None
    return f"{module}:{qualname}"


def import_class(path: str) -> Any:
    module_name, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


#: The largest share of the driver's CPU the journal may take: after building a document
#: took ``c`` CPU-seconds, the next write waits at least ``c / WRITE_SHARE``.
WRITE_SHARE = 0.05
#: The largest share of wall time storage may spend taking journal writes: after one
#: took ``t`` seconds to store, the next waits at least ``t / STORAGE_SHARE``.
STORAGE_SHARE = 0.25


class Journal:
    """Batches and writes the experiment's state; see the module docstring."""

    def __init__(self, storage: Any, *, name: str, interval: float = 1.0) -> None:
        self._storage = storage
        self._name = name
        self._interval = interval
        self._trials: dict[str, Trial] = {}
        self._specs: dict[str, dict[str, Any]] = {}
        self._results: dict[str, list[str]] = {}
        self._dirty = asyncio.Event()
        self._after_write: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self.writes = 0
        self.failed_writes = 0
        self._pause = interval  # before the next write, from the last one's cost

    # -- recording (sync, cheap: called from the loop) ----------------------------------

    def track(self, trial: Trial, spec: Mapping[str, Any]) -> None:
        self._trials[trial.id] = trial
        self._specs[trial.id] = dict(spec)
        self._results[trial.id] = [dumps(r) for r in trial.results]
        self.touch()

    def record_result(self, trial: Trial, result: Mapping[str, Any]) -> None:
        self._results[trial.id].append(dumps(result))
        self._dirty.set()

    def truncate(self, trial: Trial, length: int) -> None:
        del self._results[trial.id][length:]
        self._dirty.set()

    def touch(self) -> None:
        self._dirty.set()

    # -- writing ----------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._writer(), name="journal")

    async def aclose(self) -> None:
        """Stop the writer after one last write of the current state."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()

    def after_next_write(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the state as it is now is in storage.

        Deleting a trial's older checkpoints waits for this: until the journal lists the
        newer ones, a driver that dies and resumes can only use the ones it lists, and
        they must still be there.
        """
        self._after_write.append(fn)
        self._dirty.set()

    async def flush(self) -> None:
        self._dirty.clear()
        waiting, self._after_write = self._after_write, []
        cpu = time.thread_time()
        parts = self._capture()
        cpu = time.thread_time() - cpu
        written = False
        try:
            # The join is O(all results): off the loop, from copies of the lists taken
            # on it (results recorded meanwhile go into the next write).
            data, joined_cpu = await asyncio.to_thread(_assemble_timed, *parts)
            stored = time.monotonic()
            await self._storage.write_bytes(JOURNAL_KEY, data)
            stored = time.monotonic() - stored
            self._pause = max(
                self._interval, (cpu + joined_cpu) / WRITE_SHARE, stored / STORAGE_SHARE
            )
            written = True
            self.writes += 1
        except Exception as err:  # storage outage: keep going, the next write catches up
            self.failed_writes += 1
            self._dirty.set()
            log.warning("could not write the experiment journal (will retry): %s", err)
        finally:
            if not written:  # failed or cancelled: they wait for the next write
                self._after_write[:0] = waiting
        if written:
            for fn in waiting:
                try:
                    fn()
                except Exception:  # one bad callback must not stop the others
                    log.exception("after a journal write")

    async def _writer(self) -> None:
        while True:
            await self._dirty.wait()
            await self.flush()
            await asyncio.sleep(self._pause)

    def snapshot(self) -> str:
        """The journal document as it stands (what :meth:`flush` writes)."""
        return _assemble(*self._capture()).decode()

    def _capture(self) -> tuple[str, list[str], list[list[str]]]:
        """The document's header, each trial's head (small, built now) and a copy of
        each trial's result list."""
        header = dumps({"format": FORMAT_VERSION, "name": self._name, "written_at": time.time()})
        heads: list[str] = []
        results: list[list[str]] = []
        for trial_id, trial in self._trials.items():
            heads.append(
                dumps(
                    {
                        **self._specs[trial_id],
                        "id": trial_id,
                        "state": trial.state.value,
                        "iteration": trial.iteration,
                        "num_failures": trial.num_failures,
                        "error": str(trial.error) if trial.error is not None else None,
                        "checkpoints": [c.to_dict() for c in trial.checkpoints],
                        "last_result": trial.last_result,
                    }
                )
            )
            results.append(list(self._results[trial_id]))
        return header, heads, results


def _assemble_timed(header: str, heads: list[str], results: list[list[str]]) -> tuple[bytes, float]:
    """:func:`_assemble`, and the CPU-seconds it took (in the thread that ran it)."""
    start = time.thread_time()
    data = _assemble(header, heads, results)
    return data, time.thread_time() - start


def _assemble(header: str, heads: list[str], results: list[list[str]]) -> bytes:
    """The document from :meth:`Journal._capture`'s parts: the header, then each trial's
    head with its results spliced in."""
    parts = [
        head[:-1] + ',"results":[' + ",".join(rows) + "]}"
        for head, rows in zip(heads, results, strict=True)
    ]
    return (header[:-1] + ',"trials":[' + ",".join(parts) + "]}").encode()


@dataclass(frozen=True)
class JournaledTrial:
    """One trial as the journal recorded it, ready to be rebuilt."""

    id: str
    trainable: type
    config: dict[str, Any]
    stop: Any
    checkpoint_every: int
    resources: dict[str, float]
    max_failures: int
    keep_checkpoints: int | None
    checkpoint_score: tuple[str, str] | None
    result_buffer: int
    state: str
    num_failures: int
    error: str | None
    checkpoints: list[Checkpoint]
    results: list[dict[str, Any]]


def spec_of(
    trial: Trial,
    *,
    checkpoint_every: int,
    max_failures: int,
    keep_checkpoints: int | None,
    checkpoint_score: tuple[str, str] | None,
    result_buffer: int,
) -> dict[str, Any]:
    """The parts of a trial that never change, as journal fields."""
    path = class_path(trial.trainable_cls)
    return {
        "trainable": path,
        "trainable_pickle": None if path else pickle_b64(trial.trainable_cls),
        "config": trial.config,
        "config_pickle": pickle_b64(trial.config),
        "stop_pickle": pickle_b64(trial.stop_condition),
        "checkpoint_every": checkpoint_every,
        "resources": trial.resources,
        "max_failures": max_failures,
        "keep_checkpoints": keep_checkpoints,
        "checkpoint_score": list(checkpoint_score) if checkpoint_score else None,
        "result_buffer": result_buffer,
    }


async def load(storage: Any) -> list[JournaledTrial] | None:
    """The journaled trials, or ``None`` when the experiment has no journal yet.

    Checkpoints the journal lists but storage no longer holds (garbage-collected after
    the last journal write) are dropped here.
    """
    if not await storage.exists(JOURNAL_KEY):
        return None
    doc = json.loads(await storage.read_bytes(JOURNAL_KEY))
    trials = []
    for entry in doc["trials"]:
        trial_id = entry["id"]
        committed = set(await storage.list_checkpoints(trial_id))
        checkpoints = []
        for raw in entry["checkpoints"]:
            ckpt = Checkpoint.from_dict(raw)
            if ckpt.key in committed:
                checkpoints.append(ckpt)
            else:
                log.info(
                    "trial %s: checkpoint %s is gone from storage; not used", trial_id, ckpt.uri
                )
        if entry.get("trainable"):
            trainable = import_class(entry["trainable"])
        else:
            trainable = unpickle_b64(entry["trainable_pickle"])
        score = entry.get("checkpoint_score")
        trials.append(
            JournaledTrial(
                id=trial_id,
                trainable=trainable,
                config=unpickle_b64(entry["config_pickle"]),
                stop=unpickle_b64(entry["stop_pickle"]),
                checkpoint_every=int(entry["checkpoint_every"]),
                resources=dict(entry["resources"]),
                max_failures=int(entry["max_failures"]),
                keep_checkpoints=entry.get("keep_checkpoints"),
                checkpoint_score=(score[0], score[1]) if score else None,
                result_buffer=int(entry.get("result_buffer", 1)),
                state=entry["state"],
                num_failures=int(entry.get("num_failures", 0)),
                error=entry.get("error"),
                checkpoints=checkpoints,
                results=list(entry.get("results", [])),
            )
        )
    return trials
