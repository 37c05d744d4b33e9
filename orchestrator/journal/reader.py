"""Reading the journal back from storage, for a driver that resumes.

:func:`load_experiment` rebuilds what each trial had reached (plain data: loading its
code is the resuming driver's choice) and the head's other fields (the sweeps). A
damaged journal is named here, before Ray starts (:mod:`orchestrator.journal.damage`).
Looking at an experiment without resuming it is :mod:`orchestrator.views.experiments`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.journal_format import (
    BACKUP_KEY,
    JOURNAL_KEY,
    JournaledTrial,
    merge_sealed,
    replay_parts,
    spec_fields,
)
from orchestrator.errors import JournalError
from orchestrator.journal.damage import damaged, discontinuity, parse_head, parse_segment

__all__ = ["JournalContents", "load", "load_experiment"]

log = logging.getLogger("orchestrator.journal")


@dataclass(frozen=True)
class JournalContents:
    """A journal as read back: its trials, and the head's other fields (``sweeps``,
    ``started_at``...); on resume, the iterations each trial's logs held when read
    (``logs``: see :mod:`orchestrator.journal.trial_logs`)."""

    trials: list[JournaledTrial]
    extras: dict[str, Any]
    logs: Mapping[str, Mapping[str, tuple[int, ...]]] = field(default_factory=dict)


async def load(storage: Any) -> list[JournaledTrial] | None:
    """The journaled trials, or ``None`` when the experiment has no journal yet."""
    contents = await load_experiment(storage)
    return None if contents is None else contents.trials


async def load_experiment(storage: Any) -> JournalContents | None:
    """The journal, or ``None`` when the experiment has none (no head, no backup).

    A damaged journal (an object truncated, not JSON, missing fields; a missing head
    whose backup survives) raises :class:`~orchestrator.errors.JournalDamaged`, which
    names the object, what is wrong and how to recover. Checkpoints the journal lists
    but storage no longer holds (garbage-collected after the last journal write) are
    dropped here. The journal lists only checkpoints on each trial's timeline (see
    ``MachineState.timeline``), so an abandoned run's are never picked, even while they
    still wait for deletion.
    """
    experiment = storage.uri
    if not await storage.exists(JOURNAL_KEY):
        if await storage.exists(BACKUP_KEY):
            raise damaged(
                experiment, storage.uri_for(JOURNAL_KEY), "is missing (its backup is there)"
            )
        return None
    head = parse_head(
        await storage.read_bytes(JOURNAL_KEY), storage.uri_for(JOURNAL_KEY), experiment
    )
    from orchestrator.journal.sealed import read_listed

    doc, sealed = merge_sealed(head, await read_listed(storage, head))
    results = await _load_results(storage, head, doc, sealed)
    stored: dict[str, frozenset[str]] = {}

    async def committed(trial_id: str, ckpt: Checkpoint) -> bool:
        owner = ckpt.trial_id  # an origin may be another trial's
        if owner not in stored:
            stored[owner] = frozenset(await storage.list_checkpoints(owner))
        if ckpt.key in stored[owner]:
            return True
        log.info("trial %s: checkpoint %s is gone from storage; not used", trial_id, ckpt.uri)
        return False

    trials = []
    for entry in doc["trials"]:
        trial_id = entry["id"]
        checkpoints = []
        for raw in entry["checkpoints"]:
            ckpt = Checkpoint.from_dict(raw)
            if await committed(trial_id, ckpt):
                checkpoints.append(_where_now(storage, ckpt))
        origin = Checkpoint.from_dict(entry["origin"]) if entry.get("origin") else None
        if origin is not None and not await committed(trial_id, origin):
            origin = None
        if origin is not None:
            origin = _where_now(storage, origin)
        if trial_id not in stored:
            stored[trial_id] = frozenset(await storage.list_checkpoints(trial_id))
        spec = spec_fields(entry)
        trials.append(
            JournaledTrial(
                id=trial_id,
                spec=spec,
                state=entry["state"],
                iteration=int(entry.get("iteration", 0)),
                num_failures=int(entry.get("num_failures", 0)),
                error=entry.get("error"),
                checkpoints=checkpoints,
                results=results.get(trial_id, []),
                events=list(entry.get("events") or []),
                config_pickle=entry.get("config_now_pickle"),
                origin=origin,
                stored_keys=stored[trial_id],
                save_failed=bool(entry.get("save_failed")),
            )
        )
    extras = {k: v for k, v in doc.items() if k not in ("trials", "segments", "sealed")}
    return JournalContents(trials, extras)


def _where_now(storage: Any, ckpt: Checkpoint) -> Checkpoint:
    """``ckpt`` at its key in ``storage``: the journal's ``uri`` and ``path`` say where it
    was written, which an experiment moved since (another directory, bucket or prefix)
    no longer is; its key (checked in this storage above) says where it is now."""
    where = storage.uri_for(ckpt.key)
    local = storage.scheme == "file"
    uri = "file://" + where if local else where
    if uri == ckpt.uri:
        return ckpt
    return replace(ckpt, uri=uri, path=where if local else None)


async def _load_results(
    storage: Any,
    head: Mapping[str, Any],
    doc: Mapping[str, Any],
    sealed: Mapping[str, list[Any]],
) -> dict[str, list[Any]]:
    """Every trial's results (:func:`replay_parts`), reading the segments the head lists
    and checking each (a missing or damaged one is :class:`JournalDamaged`); ``doc`` is
    the head with its sealed entries, ``sealed`` their rows."""
    if int(doc.get("format", 1)) < 2:
        return replay_parts(doc, [])
    from storage import NotFound

    segments = []
    for key in doc.get("segments", []):
        where = storage.uri_for(key)
        try:
            data = await storage.read_bytes(key)
        except NotFound as err:
            raise damaged(
                storage.uri, where, f"is missing (the head {storage.uri_for(JOURNAL_KEY)} lists it)"
            ) from err
        except Exception as err:
            raise JournalError(
                f"the journal at {storage.uri_for(JOURNAL_KEY)} lists result segment "
                f"{where}, which cannot be read ({err}); the experiment "
                "cannot be resumed with its result history"
            ) from err
        segments.append((where, parse_segment(data, where, storage.uri)))
    broken = discontinuity(head, segments, sealed)
    if broken is not None:
        raise damaged(storage.uri, *broken)
    return replay_parts(doc, [parts for _, parts in segments], sealed)
