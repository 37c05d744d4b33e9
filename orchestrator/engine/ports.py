"""What the engine needs from the layers above it, as protocols the engine owns.

The engine never imports the journal, a sweep or the public API: they plug in here.
The journal records what the loop does (:class:`JournalPort`); a sweep watches its
trials (:class:`Observer`); the public ``Trial`` handle sends requests to the loop
(:class:`RequestSink`, which the loop implements).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.engine.trial_runtime import Observer, TrialRuntime

if TYPE_CHECKING:
    from orchestrator.core.events import Event
    from orchestrator.engine.hooks import HookRunner

__all__ = ["JournalPort", "Observer", "RequestSink"]


class JournalPort(Protocol):
    """The experiment's journal as the loop feeds it (cheap, synchronous calls)."""

    def track(self, trial: TrialRuntime) -> None: ...

    def record_result(self, trial: TrialRuntime, result: Mapping[str, Any]) -> None: ...

    def truncate(self, trial: TrialRuntime, length: int) -> None: ...

    def changed(self, trial: TrialRuntime) -> None:
        """The trial's record may have changed (an event was handled for it): the
        journal looks at it again at its next write, and only at such trials."""

    def touch(self) -> None: ...

    def urgent(self) -> None: ...

    def soon(self) -> None: ...

    def after_next_write(self, fn: Callable[[], None]) -> None: ...


class RequestSink(Protocol):
    """Where a trial's requests go: the loop's inbox, while the loop runs."""

    @property
    def running(self) -> bool: ...

    @property
    def trials(self) -> Mapping[str, TrialRuntime]: ...

    @property
    def hooks(self) -> HookRunner: ...

    def request(self, rt: TrialRuntime, event: Event) -> None: ...
