"""A resumed experiment's trials meet the script's calls: which journaled trial each
``add_trial`` call adopts (the rule is :mod:`orchestrator.core.identity`), rebuilt by
:func:`orchestrator.engine.adoption.adopt` in the journal's order.

A call made before entering learns at once which journaled trial it is: the journal is
read then (once, before Ray starts: :func:`preview`), so the handle it returns has its
final id from the start; entering reads the journal again (under the lease) and adopts
each such trial by that id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.api.trial import Trial
from orchestrator.core.identity import (
    TrialMatcher,
    journaled_identity,
    spec_identity,
    warn_new_trial,
)
from orchestrator.core.machine import TrialState
from orchestrator.core.sweep_doc import created_ids
from orchestrator.engine.adoption import adopt
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.core.journal_format import JournaledTrial
    from orchestrator.core.machine import HookProgressView
    from orchestrator.core.settings import ExperimentSettings
    from orchestrator.core.spec import TrialSpec
    from orchestrator.engine.ports import RequestSink
    from orchestrator.engine.trial_runtime import TrialRuntime
    from orchestrator.journal.reader import JournalContents

__all__ = ["Resumption", "adopt_experiment", "claim", "preview", "previewed_spec"]

log = logging.getLogger("orchestrator")


class TrialHolder(Protocol):
    """What adopting journaled trials needs of the experiment (its ``Experiment``)."""

    settings: ExperimentSettings
    trials: dict[str, TrialRuntime]

    @property
    def hook_progress(self) -> HookProgressView: ...

    def request_sink(self) -> RequestSink | None: ...

    @property
    def sink(self) -> Callable[[], RequestSink | None]:
        """``request_sink``, one bound method for every handle."""
        ...


@dataclass
class Resumption:
    """While a resumed experiment is open: which journaled trial each ``add_trial``
    call adopts (:mod:`orchestrator.core.identity`), and the journaled trials whose spec was
    lost (rebuilt by ``repair``), which the call that names them supplies."""

    matcher: TrialMatcher
    spec_lost: dict[str, JournaledTrial] = field(default_factory=dict)


def _matcher(contents: JournalContents) -> TrialMatcher:
    swept = {
        trial_id
        for doc in contents.extras.get("sweeps") or []
        if isinstance(doc, Mapping)
        for trial_id in created_ids(doc)
    }
    return TrialMatcher(
        journaled_identity(e.id, e.spec, swept=e.id in swept) for e in contents.trials
    )


def preview(exp: TrialHolder, contents: JournalContents) -> TrialMatcher:
    """Before entering a resumed experiment, its journal read now: a matcher that has
    seen the trials ``exp`` holds (a previous session's) by their ids, as entering
    will, for the calls made before entering (:func:`previewed_spec`)."""
    matcher = _matcher(contents)
    for rt in exp.trials.values():
        matcher.match(spec_identity(rt.spec), rt.id)
    return matcher


def previewed_spec(matcher: TrialMatcher, spec: TrialSpec) -> TrialSpec:
    """``spec`` of a call made before entering, with the id of the journaled trial it
    adopts (the rule of :mod:`orchestrator.core.identity`); a call that adopts none
    keeps its id, and is said to add a new trial."""
    identity = spec_identity(spec)
    found = matcher.match(identity, spec.trial_id if spec.named else None)
    if found is None:
        warn_new_trial(matcher, spec.trial_id, identity)
        return spec
    return spec if found == spec.trial_id else replace(spec, trial_id=found)


def adopt_experiment(exp: TrialHolder, contents: JournalContents) -> Resumption:
    """Put the journaled trials into ``exp``, in the journal's order, each rebuilt to
    continue; a trial added before entering adopts its journaled trial by its id (the
    one :func:`previewed_spec` gave it, or its own in a previous session; its handle
    then shows the resumed trial), and the others are new trials, after them."""
    matcher = _matcher(contents)
    _say_paused(contents.trials)
    calls: dict[str, TrialRuntime] = {}
    new: list[TrialRuntime] = []
    for rt in exp.trials.values():  # added before entering, in the order of the calls
        # Its id was decided when it was added (said then, if it adopts nothing).
        found = matcher.match(spec_identity(rt.spec), rt.id)
        if found is None:
            new.append(rt)
        else:
            calls[found] = rt
    resumption = Resumption(matcher)
    trials: dict[str, TrialRuntime] = {}
    for entry in contents.trials:
        call = calls.get(entry.id)
        lost = bool(entry.spec.get("spec_lost"))
        rt = adopt(
            entry,
            exp.settings,
            spec=call.spec if call is not None and lost else None,
            hook_progress=exp.hook_progress,
        )
        if call is not None:
            if not lost:
                warn_changed_options(entry.id, rt.spec, call.spec)
            call.handle._view(rt)
        else:
            Trial(rt, exp.sink)
            if lost:
                resumption.spec_lost[entry.id] = entry
        trials[entry.id] = rt
    for rt in new:
        if rt.id in trials:
            raise ConfigError(
                f"trial {rt.id}: the journal holds another trial of that id; give this "
                "add_trial call another trial_id"
            )
        trials[rt.id] = rt
    exp.trials.clear()
    exp.trials.update(trials)
    return resumption


def claim(exp: TrialHolder, resumption: Resumption, spec: TrialSpec) -> TrialRuntime | None:
    """The journaled trial an ``add_trial`` call of the open, resumed experiment
    adopts (None: the call adds a new trial, which has been said)."""
    identity = spec_identity(spec)
    found = resumption.matcher.match(identity, spec.trial_id if spec.named else None)
    if found is None:
        warn_new_trial(resumption.matcher, spec.trial_id, identity)
        return None
    entry = resumption.spec_lost.pop(found, None)
    if entry is None:
        rt = exp.trials[found]
        warn_changed_options(found, rt.spec, spec)
        return rt
    # The call supplies the spec it lost.
    rt = adopt(entry, exp.settings, spec=spec, hook_progress=exp.hook_progress)
    exp.trials[found].handle._view(rt)
    exp.trials[found] = rt
    return rt


#: The options ``warn_changed_options`` compares (the stop criterion besides).
_OPTIONS = (
    "checkpoint_every",
    "resources",
    "max_failures",
    "keep_checkpoints",
    "checkpoint_score",
    "result_buffer",
)


def warn_changed_options(trial_id: str, journaled: TrialSpec, call: TrialSpec) -> None:
    """A resumed trial keeps the options it was journaled with: say which of the
    adopting call's differ (they are not applied)."""
    changed = [
        name
        for name in _OPTIONS
        if _comparable(getattr(journaled, name)) != _comparable(getattr(call, name))
    ]
    old, new = journaled.stop, call.stop
    if old.predicate is None and new.predicate is None and old.thresholds != new.thresholds:
        changed.append("stop")
    if changed:
        log.warning(
            "resume: trial %s keeps its journaled %s; this add_trial call's differ and are "
            "not applied (to run with them, add a new trial: another config or trial_id)",
            trial_id,
            ", ".join(changed),
        )


def _say_paused(entries: Iterable[JournaledTrial]) -> None:
    """Say what happens to paused trials, which would otherwise make ``run()`` return at
    once without a word: one paused because a checkpoint could not be stored (a full
    disk, storage down) is resumed (see :func:`adopt`), since the pause was forced on it
    and the fix (freeing space, say) is usually why the experiment is resumed; one
    paused on request (by the user or a scheduler) stays paused."""
    staying = [e.id for e in entries if e.state == TrialState.PAUSED.value and not e.save_failed]
    if staying:
        shown = ", ".join(staying[:5]) + (
            f" and {len(staying) - 5} more" if len(staying) > 5 else ""
        )
        log.warning(
            "%d trial(s) were paused on request and stay paused: %s; `await trial.resume()` "
            "continues one (a sweep resumes its own when its call continues)",
            len(staying),
            shown,
        )


def _comparable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    return tuple(value) if isinstance(value, (list, tuple)) else value
