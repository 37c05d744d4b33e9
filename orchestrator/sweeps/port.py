"""What a sweep needs from the experiment it runs in, declared here and implemented by
the API layer (:class:`orchestrator.api.sweep_port.ExperimentPort`).

A sweep never holds the ``Orchestrator``: it builds and adds trials, sends them
requests, keeps or retires idle workers and asks for journal writes through this port,
so what it may touch is this list and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from orchestrator.core.events import Event
    from orchestrator.core.judge import Judge
    from orchestrator.core.options import TrialOptions
    from orchestrator.core.spec import TrialSpec
    from orchestrator.engine.trial_runtime import TrialRuntime

__all__ = ["SweepPort"]


class SweepPort(Protocol):
    def trial_spec(
        self, trainable: Any, config: Mapping[str, Any], options: TrialOptions, trial_id: str
    ) -> TrialSpec:
        """A checked spec, as ``add_trial`` would build it (raises ``ConfigError``)."""
        ...

    def add(
        self, spec: TrialSpec, *, judge: Judge | None, required_metrics: Mapping[str, str]
    ) -> TrialRuntime:
        """A new PENDING trial whose policy, built now and never changed, asks ``judge``
        after its stop criterion, and whose first result must report
        ``required_metrics`` (metric: what reads it) unless the experiment was told
        ``strict_metrics=False``."""
        ...

    def claim(
        self, trial_id: str, *, judge: Judge | None, required_metrics: Mapping[str, str]
    ) -> TrialRuntime | None:
        """A trial the experiment holds (a resumed sweep's earlier trial, adopted from
        the journal), from now on judged and checked as :meth:`add` would; None: the
        experiment holds no such trial."""
        ...

    def launch(self, rt: TrialRuntime) -> None: ...

    def request(self, rt: TrialRuntime, event: Event, *, first: bool = False) -> None:
        """Send ``event`` to the trial, after the events already queued (``first``:
        before them, so no queued result of the trial's is handled before it)."""
        ...

    def is_settled(self, rt: TrialRuntime) -> bool: ...

    def pin(self, key: str) -> None:
        """Keep checkpoint ``key`` until :meth:`unpin` (a queued exploit's donor)."""
        ...

    def unpin(self, key: str) -> None: ...

    def keep_idle_workers(self, keep: bool) -> bool:
        """Keep finished trials' workers for the next trial; returns the old setting."""
        ...

    async def warm_workers(self, resources: Mapping[str, float], count: int) -> int:
        """Start up to ``count`` workers for trials of ``resources`` now, before any
        trial asks (kept while idle workers are); how many were started."""
        ...

    def retire_idle_workers(self) -> None: ...

    async def cluster_resources(self) -> Mapping[str, float]:
        """The cluster's total resources, in Ray's names (what it can hold at once)."""
        ...

    def touch_journal(self) -> None: ...

    def set_objective(self, metric: str, mode: str | None) -> None:
        """Show ``metric`` as the objective in the live progress display."""
        ...

    async def wait_settled(self) -> None: ...

    async def end_hooks(self, trials: list[Any]) -> None: ...
