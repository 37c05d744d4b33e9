"""One experiment's trials and what runs them: the state behind an ``Orchestrator``.

``Orchestrator`` is the public surface (its arguments, ``add_trial``, ``run``, ``sweep``,
``async with``); this object is what the session, the resumption, the sweeps' port and
the trial handles share: the settings, the trials by id, and, while entered, the
session's loop, hooks and journal. Nothing here reaches into the ``Orchestrator``: it
hands this object to the session, which opens the parts and sets them here, and to a
sweep's port.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Container, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.api.trial import Trial, handle_of
from orchestrator.core.hook_progress import HookProgress
from orchestrator.core.machine import TrialState
from orchestrator.errors import ConfigError, OrchestratorError

if TYPE_CHECKING:
    from orchestrator.api.resumption import Resumption
    from orchestrator.core.identity import TrialMatcher
    from orchestrator.core.judge import Judge
    from orchestrator.core.machine import TrialPolicy
    from orchestrator.core.options import TrialOptions
    from orchestrator.core.settings import ExperimentSettings, StorageMode
    from orchestrator.core.spec import TrialSpec
    from orchestrator.engine.hooks import HookRunner
    from orchestrator.engine.loop import Dispatcher
    from orchestrator.engine.ray_calls import RayBackend
    from orchestrator.engine.trial_runtime import TrialRuntime
    from orchestrator.journal.reader import JournalContents
    from orchestrator.journal.writer import Journal
    from orchestrator.sweeps.driver import Sweep

__all__ = ["Experiment", "Opening"]


@dataclass(frozen=True)
class Opening:
    """What entering the experiment opens with: storage, Ray, hooks, logs, progress."""

    storage_uri: str
    storage_options: Mapping[str, Any]
    ray_address: str | None
    num_cpus: float | None
    log_to_driver: bool
    runtime_env: Mapping[str, Any] | None
    hooks: list[Any]
    logger_names: tuple[str, ...]
    progress: bool
    take_over: bool
    # The Ray the engine calls: None is Ray itself (started or joined on entry); the
    # engine's tests pass an in-process fake (``tests/support/fakeray.py``), and Ray is not
    # started at all.
    ray_backend: RayBackend | None = None


class Experiment:
    """See the module docstring."""

    def __init__(
        self, settings: ExperimentSettings, storage_mode: StorageMode, opening: Opening
    ) -> None:
        self.settings = settings
        self.storage_mode = storage_mode
        self.opening = opening
        self.trials: dict[str, TrialRuntime] = {}
        self.token = secrets.token_hex(3)  # in default trial ids: one per Orchestrator
        # The session's parts, while entered.
        self.dispatcher: Dispatcher | None = None
        self.hooks: HookRunner | None = None
        self.journal: Journal | None = None
        self.resumption: Resumption | None = None
        # Before entering a resumed experiment: the journal's trials as the calls so far
        # matched them (read at the first add_trial; entering reads the journal again).
        self.preview: TrialMatcher | None = None
        self.logger: Any = None  # the built-in ExperimentLogger
        self.progress: Any = None  # the ProgressReporter
        self.runs_in_progress = 0
        self.sweeps: dict[str, Sweep] = {}  # running or run in this session
        self.journaled_sweeps: dict[str, Any] = {}  # as a resumed journal had them
        # How far result hooks have got, for every trial's policy: bound to the hook
        # runner while entered (the policies are built before, and never change).
        self.hook_progress = HookProgress()
        # One bound method for every handle (issue 36: a new one per trial was 64 bytes).
        self.sink = self.request_sink

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def storage_uri(self) -> str:
        return self.opening.storage_uri

    # -- trials ----------------------------------------------------------------------

    def trial_spec(
        self,
        trainable: Any,
        config: Mapping[str, Any] | None,
        options: TrialOptions,
        trial_id: str | None = None,
    ) -> TrialSpec:
        """A new trial's validated spec (:func:`~orchestrator.api.specs.build_trial_spec`)."""
        from orchestrator.api.specs import build_trial_spec

        return build_trial_spec(
            self.settings,
            trainable,
            config,
            options,
            trial_id=trial_id,
            index=len(self.trials),
            token=self.token,
            taken=self._taken_ids(),
        )

    def add(
        self,
        spec: TrialSpec,
        *,
        judge: Judge | None = None,
        required_metrics: Mapping[str, str] | None = None,
    ) -> TrialRuntime:
        """A new trial of ``spec``, PENDING (started now when ``run()`` is in progress).
        Its policy is built now, once: it asks ``judge`` after its stop criterion, and
        its first result must report ``required_metrics`` (metric: what reads it) too."""
        from orchestrator.engine.trial_runtime import TrialRuntime

        if spec.trial_id in self.trials:
            raise ConfigError(f"trial {spec.trial_id} already exists in experiment {self.name!r}")
        rt = TrialRuntime(spec, self.policy(spec, judge, required_metrics))
        Trial(rt, self.sink)
        self.trials[rt.id] = rt
        self.attach(rt)
        return rt

    def policy(
        self,
        spec: TrialSpec,
        judge: Judge | None = None,
        required_metrics: Mapping[str, str] | None = None,
    ) -> TrialPolicy:
        """The policy a trial of ``spec`` runs with in this experiment (see
        :func:`~orchestrator.core.spec.policy_for`)."""
        from orchestrator.core.spec import policy_for

        return policy_for(
            spec,
            self.settings,
            judge,
            required_metrics=required_metrics,
            hook_progress=self.hook_progress,
        )

    def rejudge(
        self, trial_id: str, *, judge: Judge | None, required_metrics: Mapping[str, str]
    ) -> TrialRuntime | None:
        """A trial the experiment holds (a resumed sweep's, adopted from the journal
        before the sweep's call), judged by ``judge`` from now on: its machine is
        rebuilt, record and all, with a policy built for it (policies never change).
        None: the experiment holds no such trial."""
        rt = self.trials.get(trial_id)
        if rt is not None:
            rt.machine = rt.machine.rebuilt(self.policy(rt.spec, judge, required_metrics))
        return rt

    def add_call(self, spec: TrialSpec) -> Trial:
        """What an ``add_trial`` call of ``spec`` returns: the handle of the journaled
        trial it adopts in a resumed experiment, else of a new trial. Before entering a
        resumed experiment, the journal is read at the first call (the preview), so the
        handle has its final id at once: the adopted trial's."""
        adopted = self.claim(spec)
        if adopted is None and self.settings.continuation.resume and self.dispatcher is None:
            from orchestrator.api.resumption import preview, previewed_spec

            if self.preview is None:
                self.preview = preview(self, self._read_journal_now())
            spec = previewed_spec(self.preview, spec)
        return handle_of(adopted if adopted is not None else self.add(spec))

    def _read_journal_now(self) -> JournalContents:
        """The journal, read from sync code before entering (before Ray starts); raises
        as entering would: no such experiment, a damaged journal."""
        from orchestrator.journal.existing import check_existing

        async def read() -> JournalContents | None:
            where = self.opening
            return await check_existing(
                where.storage_uri, where.storage_options, self.settings, self.storage_mode
            )

        # In a thread of its own: the caller may be sync code or inside a running loop.
        with ThreadPoolExecutor(1, thread_name_prefix="journal-preview") as pool:
            contents = pool.submit(asyncio.run, read()).result()
        assert contents is not None  # resume=True: the journal, or an error raised
        return contents

    def claim(self, spec: TrialSpec) -> TrialRuntime | None:
        """The journaled trial an ``add_trial`` call of a resumed experiment adopts, or
        None when the call adds a new trial (or the experiment was not resumed)."""
        if self.resumption is None:
            return None
        from orchestrator.api.resumption import claim

        adopted = claim(self, self.resumption, spec)
        if adopted is not None and (
            self.dispatcher is not None and self.dispatcher.trials.get(adopted.id) is not adopted
        ):
            self.attach(adopted)  # its journaled spec was lost: it was rebuilt now
        return adopted

    def attach(self, rt: TrialRuntime) -> None:
        """Give ``rt`` to the loop, if one runs (and start it if ``run()`` is on)."""
        if self.dispatcher is not None:
            self.dispatcher.attach(rt)
            if self.runs_in_progress and rt.state is TrialState.PENDING:
                self.dispatcher.launch(rt)

    def request_sink(self) -> Dispatcher | None:
        """Where the trial handles' requests go: the loop, while entered."""
        return self.dispatcher

    def handles(self) -> list[Trial]:
        return [handle_of(rt) for rt in self.trials.values()]

    def _taken_ids(self) -> Container[str]:
        """The ids a new trial may not take. In a resumed experiment a call naming a
        journaled trial adopts it (or is refused with why), so those are left out."""
        if self.resumption is None:
            return self.trials
        return _NotJournaled(self.trials, self.resumption.matcher.journaled)

    # -- running -----------------------------------------------------------------------

    def entered(self) -> tuple[Dispatcher, HookRunner]:
        if self.dispatcher is None or self.hooks is None:
            raise OrchestratorError(
                f"experiment {self.name!r}: use `async with Orchestrator(...) as orch:` "
                "(or orch.run_sync()) before running"
            )
        return self.dispatcher, self.hooks

    async def wait_settled(self) -> None:
        """Until every trial is settled and every hook has run (a hook may revive one)."""
        dispatcher, hooks = self.entered()
        while True:
            await dispatcher.wait_settled()
            await hooks.wait_idle()
            await asyncio.sleep(0)
            if dispatcher.settled_now() and hooks.statistics().backlog == 0:
                return

    async def end_hooks(self, trials: list[Any]) -> None:
        _, hooks = self.entered()
        await hooks.call_now("on_experiment_end", trials)

    def touch_journal(self) -> None:
        if self.journal is not None:
            self.journal.touch()

    def journal_extras(self) -> dict[str, Any]:
        """The sweeps' documents, for every journal write."""
        sweeps = dict(self.journaled_sweeps)
        sweeps.update({name: sweep.journal_doc() for name, sweep in self.sweeps.items()})
        return {"sweeps": list(sweeps.values())} if sweeps else {}


class _NotJournaled(Container[str]):
    """The ids of ``trials`` that ``journaled`` says no. A view: O(1) per lookup."""

    def __init__(self, trials: Container[str], journaled: Callable[[str], bool]) -> None:
        self._trials, self._journaled = trials, journaled

    def __contains__(self, trial_id: object) -> bool:
        return trial_id in self._trials and not self._journaled(str(trial_id))


async def give_back_memory() -> None:
    """Once a run or a sweep is over, return the C heap's free pages to the system, in
    a thread (issue 36: what its trials' actors and Ray's task bookkeeping held while it
    ran is freed by then, but glibc kept it: at 2,000 trivial trials on Ray the driver's
    RSS had grown by 7 to 10 KiB a trial, 1 to 2.5 KiB after this)."""
    from orchestrator.engine.c_heap import give_back_freed_memory

    await asyncio.to_thread(give_back_freed_memory)
