"""The experiment as a sweep sees it: :class:`~orchestrator.sweeps.port.SweepPort`
implemented over an entered experiment and its loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.api.experiment import Experiment
    from orchestrator.core.events import Event
    from orchestrator.core.judge import Judge
    from orchestrator.core.options import TrialOptions
    from orchestrator.core.spec import TrialSpec
    from orchestrator.engine.loop import Dispatcher
    from orchestrator.engine.trial_runtime import TrialRuntime

__all__ = ["ExperimentPort"]


class ExperimentPort:
    def __init__(self, exp: Experiment, dispatcher: Dispatcher) -> None:
        self._exp = exp
        self._dispatcher = dispatcher

    def trial_spec(
        self, trainable: Any, config: Mapping[str, Any], options: TrialOptions, trial_id: str
    ) -> TrialSpec:
        return self._exp.trial_spec(trainable, config, options, trial_id)

    def add(
        self, spec: TrialSpec, *, judge: Judge | None, required_metrics: Mapping[str, str]
    ) -> TrialRuntime:
        return self._exp.add(spec, judge=judge, required_metrics=required_metrics)

    def claim(
        self, trial_id: str, *, judge: Judge | None, required_metrics: Mapping[str, str]
    ) -> TrialRuntime | None:
        return self._exp.rejudge(trial_id, judge=judge, required_metrics=required_metrics)

    def launch(self, rt: TrialRuntime) -> None:
        self._dispatcher.launch(rt)

    def request(self, rt: TrialRuntime, event: Event, *, first: bool = False) -> None:
        self._dispatcher.request(rt, event, first=first)

    def is_settled(self, rt: TrialRuntime) -> bool:
        return self._dispatcher.is_settled(rt)

    def pin(self, key: str) -> None:
        self._dispatcher.pins.add(key)

    def unpin(self, key: str) -> None:
        self._dispatcher.pins.discard(key)

    def keep_idle_workers(self, keep: bool) -> bool:
        return self._dispatcher.keep_idle_workers(keep)

    async def warm_workers(self, resources: Mapping[str, float], count: int) -> int:
        return await self._dispatcher.warm_workers(resources, count)

    def retire_idle_workers(self) -> None:
        self._dispatcher.retire_idle_workers()

    async def cluster_resources(self) -> Mapping[str, float]:
        return await self._dispatcher.cluster_resources()

    def touch_journal(self) -> None:
        self._exp.touch_journal()

    def set_objective(self, metric: str, mode: str | None) -> None:
        if self._exp.progress is not None:
            self._exp.progress.set_objective(metric, mode)

    async def wait_settled(self) -> None:
        await self._exp.wait_settled()

    async def end_hooks(self, trials: list[Any]) -> None:
        await self._exp.end_hooks(trials)
