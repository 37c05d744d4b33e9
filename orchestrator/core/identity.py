"""Which journaled trial an ``add_trial`` call of a resumed experiment is.

Re-running a script with ``resume=True`` calls ``add_trial`` again for the trials its
journal already holds. Each such call must adopt its journaled trial (the returned
handle is the resumed trial), never add a twin that trains the same config from
scratch. The rule, applied in the order of the calls:

1. A call with ``trial_id=`` names its trial. It adopts the journaled trial of that id;
   when that trial has another trainable or config, the id names a different trial and
   the call is an error. A journaled trial is adopted by one call only: a second call
   naming it is an error too. When the journal has no trial of that id, the call adds
   a new trial of that id.
2. A call without ``trial_id`` is identified by its trainable (``module:qualname``; a
   training function's own name) and its config (compared as JSON). The n-th such call
   adopts the n-th journaled trial of the same trainable and config that was itself
   added without a ``trial_id``, in the order they were added. Trials whose id was given
   (by ``trial_id=`` or by a sweep, which names its trials) are adopted by id only.
3. A call that adopts nothing adds a new trial, and says so (a warning naming the
   trial, and the journaled trials of the same trainable no call has adopted, which is
   what a changed config looks like).

A trial that ``repair`` rebuilt without its spec (it was lost with the journal's head)
has no trainable to compare: a call naming it adopts it and supplies the spec, and so
does an unnamed call when its id was generated (it starts with the trainable's name)
and its config survived (``params.json``), after the whole trials of that identity.

Journaled trials that no call adopts resume as they are (as ``python -m orchestrator
resume`` resumes every trial). Everything here is plain data: no storage, no Ray.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.core import moved
from orchestrator.core.naming import config_identity, trainable_identity
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.core.spec import TrialSpec

__all__ = [
    "Identity",
    "JournaledIdentity",
    "TrialMatcher",
    "config_identity",
    "journaled_identity",
    "spec_identity",
    "trainable_identity",
    "warn_new_trial",
]

log = logging.getLogger("orchestrator")

#: The ids ``add_trial`` generates (``<trainable>_<6 hex>_<5 digits>``): how a journal
#: written before trials recorded ``trial_id_given`` tells generated ids from given ones.
GENERATED_ID = re.compile(r"^.+_[0-9a-f]{6}_\d{5}$")


@dataclass(frozen=True)
class Identity:
    """What a trial is, for matching: its trainable and its config (canonical JSON).
    ``None`` parts are unknown (a trial rebuilt by ``repair`` without its spec)."""

    trainable: str | None
    config: str | None

    @property
    def known(self) -> bool:
        return self.trainable is not None and self.config is not None

    def describe(self) -> str:
        config = self.config or "?"
        if len(config) > 200:
            config = config[:197] + "..."
        return f"{self.trainable or '(unknown trainable)'} with config {config}"


@dataclass(frozen=True)
class JournaledIdentity:
    """A journaled trial as the matcher sees it. ``named``: its id was given (by
    ``trial_id=`` or a sweep), so only a call naming it adopts it."""

    trial_id: str
    identity: Identity
    named: bool
    #: A trial rebuilt by ``repair`` without its spec, whose id was generated: the short
    #: name of its trainable (the id's start). With its config (from its ``params.json``)
    #: an unnamed call of a trainable of that name adopts it, after the whole ones.
    short_name: str | None = None


def spec_identity(spec: TrialSpec) -> Identity:
    """The identity of the trial an ``add_trial`` call describes (of a spec read back
    from a journal: the journaled one, since its code may not be loaded)."""
    if spec.json is not None:
        return journaled_identity(spec.trial_id, spec.json).identity
    return Identity(trainable_identity(spec.trainable), config_identity(spec.config))


def journaled_identity(
    trial_id: str, spec: Mapping[str, Any], *, swept: bool = False
) -> JournaledIdentity:
    """A journaled trial's identity, from its spec's journal fields. Journals written
    before ``trainable_name`` and ``trial_id_given`` existed still match: the trainable
    from its import path (or, pickled, its class), a generated id by its shape."""
    config = spec.get("config")
    if spec.get("spec_lost"):
        generated = GENERATED_ID.match(trial_id) is not None
        known = (
            json.dumps(config, sort_keys=True) if isinstance(config, Mapping) and config else None
        )
        short = trial_id.rsplit("_", 2)[0] if generated and known else None
        return JournaledIdentity(trial_id, Identity(None, known), not generated, short)
    identity = Identity(
        _journaled_trainable(spec),
        json.dumps(config, sort_keys=True) if isinstance(config, Mapping) else None,
    )
    given = spec.get("trial_id_given")
    if given is None:
        given = swept or not GENERATED_ID.match(trial_id)
    return JournaledIdentity(trial_id, identity, named=bool(given))


def _journaled_trainable(spec: Mapping[str, Any]) -> str | None:
    name = spec.get("trainable_name") or spec.get("trainable")
    if name:  # where it is now, if it moved since: a call passes it from there
        return moved.resolve(str(name))
    pickled = spec.get("trainable_pickle")
    if not pickled:
        return None
    from orchestrator.core.codec import unpickle_b64

    try:  # an older journal's pickled trainable (defined in __main__, a function)
        return trainable_identity(unpickle_b64(pickled))
    except Exception:
        return None


class TrialMatcher:
    """Applies the module's rule to the calls of one resumed experiment, in order."""

    def __init__(self, journaled: Iterable[JournaledIdentity]) -> None:
        self._by_id: dict[str, JournaledIdentity] = {}
        self._unnamed: dict[Identity, deque[str]] = {}
        self._spec_lost: dict[tuple[str, str | None], deque[str]] = {}
        for entry in journaled:
            self._by_id[entry.trial_id] = entry
            if not entry.named and entry.identity.known:
                self._unnamed.setdefault(entry.identity, deque()).append(entry.trial_id)
            elif not entry.named and entry.short_name is not None:
                key = (entry.short_name, entry.identity.config)
                self._spec_lost.setdefault(key, deque()).append(entry.trial_id)
        self._adopted: dict[str, str] = {}  # journaled id -> the call that adopted it
        self._calls = 0

    def match(self, identity: Identity, trial_id: str | None) -> str | None:
        """The id of the journaled trial this call adopts, or None: a new trial.
        Raises :class:`ConfigError` when the call names a trial it cannot be."""
        self._calls += 1
        call = f"add_trial call #{self._calls}" + (f" (trial_id={trial_id!r})" if trial_id else "")
        if trial_id is not None:
            return self._by_name(identity, trial_id, call)
        short = (identity.trainable or "").rpartition(":")[2].rpartition(".")[2]
        for waiting in (self._unnamed.get(identity), self._spec_lost.get((short, identity.config))):
            while waiting:
                found = waiting.popleft()
                if found not in self._adopted:
                    self._adopted[found] = call
                    return found
        return None

    def _by_name(self, identity: Identity, trial_id: str, call: str) -> str | None:
        entry = self._by_id.get(trial_id)
        if entry is None:
            return None
        if trial_id in self._adopted:
            raise ConfigError(
                f"trial {trial_id}: {call} names the journaled trial that "
                f"{self._adopted[trial_id]} already adopted; each journaled trial is "
                "adopted by one add_trial call: give this one another trial_id, or drop it"
            )
        if entry.identity.known and entry.identity != identity:
            raise ConfigError(
                f"trial {trial_id}: the journal holds it as {entry.identity.describe()}, "
                f"but {call} gives {identity.describe()}; a resumed trial keeps its "
                "trainable and config: pass the journaled ones, or another trial_id for a "
                "new trial"
            )
        self._adopted[trial_id] = call
        return trial_id

    def unadopted_like(self, identity: Identity) -> list[str]:
        """Journaled trials of the same trainable that no call has adopted (a call
        that adopts nothing while these wait most likely changed its config)."""
        return [
            e.trial_id
            for e in self._by_id.values()
            if e.trial_id not in self._adopted
            and e.identity.trainable is not None
            and e.identity.trainable == identity.trainable
        ]

    def journaled(self, trial_id: str) -> bool:
        return trial_id in self._by_id


def warn_new_trial(matcher: TrialMatcher, trial_id: str, identity: Identity) -> None:
    """Say that a call of a resumed experiment added a new trial, and what it might
    have meant instead."""
    waiting = matcher.unadopted_like(identity)
    hint = ""
    if waiting:
        shown = ", ".join(waiting[:5]) + (", ..." if len(waiting) > 5 else "")
        hint = (
            f"; journaled trials of the same trainable that no call adopted: {shown} "
            "(a changed config is a new trial; they resume as they were)"
        )
    log.warning(
        "resume: trial %s (%s) matches no journaled trial: added as a new trial%s",
        trial_id,
        identity.describe(),
        hint,
    )
