"""``Orchestrator.sweep``: one population of trials, chosen by a searcher and judged by
a scheduler, within a budget and a concurrency bound.

The sweep is an asyncio task beside the loop, never on its path. It asks the searcher
for a config only when a slot is free (at most ``max_concurrent_trials`` trials hold an
actor), so a learning searcher sees the results it should and Ray's queue never holds
hundreds of pending actors; the searcher runs in a thread of its own (one call at a
time, in order: Optuna's TPE slows as trials grow, and the loop must serve every running
trial meanwhile). Each trial is an ordinary trial whose judge includes the scheduler
(:mod:`orchestrator.sweeps.scheduler_judge`), given when the trial is added (or, for a resumed
sweep's journaled trial, when this call claims it); the sweep watches its trials
(results for the searcher, endings for both) and sends the scheduler's decisions about
trials other than the reporting one to them as a user's requests are sent, resumes and
restores of paused trials waiting for a free slot. With ``reuse_actors`` a finished
trial's worker process is kept idle and the next trial with the same resources starts
in it (a fresh trainable there). The sweep's state (its arguments, which trials it
created, the searcher's and the scheduler's state) is in the journal, so the same
``sweep(...)`` call after ``Orchestrator(resume=True)`` continues it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.core.best import has_metric
from orchestrator.core.decisions import Continue, Decision, RestoreFrom, Resume, Stop
from orchestrator.core.events import Decided
from orchestrator.core.machine import TrialState
from orchestrator.core.sweep_doc import compact, created_ids, not_told_ids, sweep_trial_id
from orchestrator.errors import ConfigError
from orchestrator.schedulers import Scheduler
from orchestrator.search import Searcher
from orchestrator.sweeps.capacity import Capacity
from orchestrator.sweeps.scheduler_judge import PopulationView, SchedulerJudge, info_of, note_stop
from orchestrator.sweeps.scheduler_state import SchedulerState
from orchestrator.sweeps.searcher_thread import SearcherThread
from orchestrator.timeouts import within

if TYPE_CHECKING:
    from orchestrator.engine.trial_runtime import TrialRuntime
    from orchestrator.sweeps.call import SweepCall, SweepPlan
    from orchestrator.sweeps.port import SweepPort

log = logging.getLogger("orchestrator.sweeps.driver")

#: Seconds trials held by the scheduler (:class:`~orchestrator.schedulers.Hold`) may wait
#: while no other trial runs before the scheduler is told the population is stuck
#: (``on_idle``): the trials they wait for may be unable to start (an explicit
#: ``max_concurrent_trials`` above what the cluster holds, say). Longer than a worker's
#: start on a loaded machine, so that a slow start is waited for.
HOLD_PATIENCE_S = 15.0
#: How often the sweep looks whether its held trials' wait can still end by itself.
HOLD_CHECK_S = 1.0


class Sweep:
    """One ``Orchestrator.sweep(...)`` call (see the module docstring)."""

    def __init__(
        self,
        port: SweepPort,
        call: SweepCall,
        plan: SweepPlan,
        journaled: Mapping[str, Any] | None,
    ) -> None:
        self._port = port
        self.name: str = call.name
        self._trainable = call.trainable
        self._space = plan.space
        self._metric, self._mode = call.metric, call.mode
        self._searcher = SearcherThread(plan.searcher, self.name)
        self._scheduler: Scheduler | None = call.scheduler
        # Its state for the journal, pickled again only after a call to it.
        self._scheduler_state = None if call.scheduler is None else SchedulerState(call.scheduler)
        self._options = call.options
        self._capacity = Capacity(port, call.max_concurrent_trials, call.options, self.name)
        self._seed: int | None = call.seed
        self._reuse = bool(call.reuse_actors)
        self._fail_fast: bool = call.fail_fast
        self._call = call.recorded(plan.searcher)
        self._journaled = journaled
        self.total: int = call.num_samples * plan.space.num_grid_points
        self._num_samples: int = call.num_samples
        self._trials: dict[str, TrialRuntime] = {}
        # The trials that may not have ended: every one but those found TERMINATED or
        # ERROR and settled, which leave it (:meth:`_open_trials`) until revived
        # (:meth:`on_revived`). What the sweep asks at each admission (free slots, all
        # placed, all settled) is asked of these, never of every trial it ever created:
        # at ten thousand trivial trials that scan was most of the driver's time.
        self._open: dict[str, TrialRuntime] = {}
        self._population = PopulationView(self._trials)
        # Launches (None), resumes and restores awaiting a slot.
        self._queued: list[tuple[TrialRuntime, Decided | None]] = []
        # Its trials the searcher has not heard the end of yet (it heard of every other
        # one): what the journal lists (``not_told``), so that neither a write nor the
        # driver's memory holds an entry for every trial the sweep made (issue 36).
        self._not_told: set[str] = set()
        self._changed = asyncio.Event()
        self._results_backlog: list[tuple[str, Mapping[str, Any]]] = []
        self._draining = False
        self._wants_results = type(plan.searcher).on_trial_result is not Searcher.on_trial_result
        self._exhausted = False
        self._ending = False  # end() was called: no new trials, the live ones stopped
        self._finished = False
        # A resumed sweep has claimed its journaled trials: until then its document is
        # the journaled one (a write meanwhile must not record a sweep of no trials).
        self._claimed = journaled is None

    # -- the sweep's life ----------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """The sweep ran to its end (it may be run again only then)."""
        return self._finished

    def end(self, *, at_once: bool = False) -> None:
        """End the sweep now (on the loop): no trial is asked for or resumed any more, and
        every trial that has not ended is stopped (TERMINATED, keeping its results and
        checkpoints); ``run()`` returns once they are settled. For experiment-wide stop
        rules and time budgets. A resumed experiment does not continue an ended sweep.

        ``at_once`` (``fail_fast``): the stops come before any event already queued and
        abandon what is in flight (:class:`~orchestrator.core.decisions.Stop`'s
        ``at_once``), so no trial records anything after this call."""
        if self._finished or self._ending:
            return
        self._ending = True
        for _, event in self._queued:
            if isinstance(event, Decided) and isinstance(event.decision, RestoreFrom):
                self._port.unpin(event.decision.checkpoint.key)
        self._queued.clear()
        for rt in self._open_trials():
            if not rt.state.is_terminal:
                self._port.request(rt, Decided(Stop(rt.id, at_once=at_once)), first=at_once)
        self._changed.set()

    async def run(self) -> list[Any]:
        """Run the sweep to its end; its trials' public handles, in creation order."""
        port = self._port
        keep_idle = port.keep_idle_workers(self._reuse)
        if self._metric is not None:
            port.set_objective(self._metric, self._mode)
        try:
            await self._warm_workers()
            await self._start()
            while not await self._done():
                await self._admit()
                if await self._done():
                    break
                await self._wait_for_change()
            self._finished = True
        finally:
            port.keep_idle_workers(keep_idle)
            port.retire_idle_workers()
            await self._searcher.close()
            port.touch_journal()
        await port.wait_settled()
        trials = [rt.handle for rt in self._trials.values()]
        await port.end_hooks(trials)
        return trials

    async def _warm_workers(self) -> None:
        """Start the workers the sweep will run its trials in before anything else (its
        searcher's set-up, the first suggestion): their processes start meanwhile, and
        actor reuse keeps them for the trials after. One per trial it runs at once;
        none when trials do not reuse workers or their resources depend on the config."""
        resources = self._options.resources
        doc = self._journaled or {}
        if not self._reuse or callable(resources) or doc.get("finished"):
            return
        # A resumed sweep's trials that start again get workers as they are placed.
        count = min(await self._capacity.limit(), self.total - len(created_ids(doc)))
        if count > 0:
            await self._port.warm_workers({"cpu": 1.0} if resources is None else resources, count)

    async def _start(self) -> None:
        await self._searcher.call(
            self._searcher.searcher.setup,
            self._space,
            metric=self._metric,
            mode=self._mode,
            num_samples=self._num_samples,
            seed=self._seed,
        )
        doc = self._journaled
        if doc is None:
            return
        from orchestrator.core.codec import unpickle_b64

        if doc.get("searcher_state"):
            state = doc["searcher_state"]
            await self._searcher.call(self._searcher.searcher.set_state, unpickle_b64(state))
            self._searcher.state = state
        if self._scheduler is not None and doc.get("scheduler_state"):
            self._scheduler.load_state_dict(unpickle_b64(doc["scheduler_state"]))
            self._touched_scheduler()
        not_told = not_told_ids(doc)
        self._finished = bool(doc.get("finished"))
        for trial_id in created_ids(doc):
            # Adopted from the journal before this call; judged by this sweep from now on.
            rt = self._port.claim(trial_id, **self._judging(trial_id))
            if rt is None:
                raise ConfigError(
                    f"sweep {self.name!r}: the journal names its trial {trial_id}, which the "
                    "experiment does not hold; resume with the same storage and name"
                )
            self._join(rt)
            if trial_id in not_told:
                self._not_told.add(trial_id)
            if not rt.state.is_terminal:
                self._run_call_trainable(rt)
            if rt.state.is_terminal and trial_id in self._not_told:
                self._tell_complete(rt)  # it ended after the searcher's state was saved
            elif rt.state is TrialState.PENDING:
                self._queued.append((rt, None))  # it was running: start it again
        self._claimed = True
        if self._finished and self._queued:
            # An ended sweep's errored trials retried (resume_errored): they run again,
            # and nothing new is asked of its searcher.
            self._finished, self._exhausted = False, True
        log.info(
            "sweep %r resumed: %d of %d trials created, %d to start again",
            self.name,
            len(self._trials),
            self.total,
            len(self._queued),
        )

    def _run_call_trainable(self, rt: TrialRuntime) -> None:
        """A resumed sweep's trial that may run again runs the trainable of this call, not
        the journal's copy: the user's code as it is now, and objects it holds in Ray's
        object store (the old copy's references died with the old driver)."""
        from dataclasses import replace

        from orchestrator.actor.function import is_function, wrap_function
        from orchestrator.engine.executor import load_code

        if not rt.code_loaded:
            load_code(rt)  # its stop condition and config, as journaled
        trainable = self._trainable
        new = wrap_function(trainable) if is_function(trainable) else trainable
        rt.spec = replace(rt.spec, trainable=new, json=None)

    async def _wait_for_change(self) -> None:
        """Until a trial settles or a decision is made. While the scheduler holds trials,
        also watch that their wait can end: once no trial has run unheld for
        ``HOLD_PATIENCE_S``, the scheduler's ``on_idle`` decides for them."""
        stuck_since: float | None = None
        while not self._changed.is_set():
            if self._scheduler is None:
                await self._changed.wait()
                break
            try:
                await within(HOLD_CHECK_S, self._changed.wait())
                break
            except TimeoutError:
                pass
            trials = self._open_trials()
            if not any(rt.machine.held for rt in trials) or any(map(self._moving, trials)):
                stuck_since = None
            elif stuck_since is None:
                stuck_since = time.monotonic()
            elif time.monotonic() - stuck_since >= HOLD_PATIENCE_S:
                log.info(
                    "sweep %r: held trials waited %.0f s for trials that do not run; "
                    "going on without those",
                    self.name,
                    HOLD_PATIENCE_S,
                )
                self._decide(self._scheduler.on_idle(self._population))  # sets _changed
                self._touched_scheduler()
        self._changed.clear()

    @staticmethod
    def _moving(rt: TrialRuntime) -> bool:
        """The trial is training or restoring: it will report without being told to."""
        machine = rt.machine
        if machine.state is TrialState.RESTORING:
            return True
        return machine.state is TrialState.RUNNING and not machine.held

    async def _done(self) -> bool:
        if self._finished:
            return True
        open_trials = self._open_trials()
        if self._ending:
            return all(self._port.is_settled(rt) for rt in open_trials)
        if self._queued or not all(self._port.is_settled(rt) for rt in open_trials):
            return False
        if len(self._trials) < self.total and not self._exhausted:
            return False
        paused = [rt for rt in open_trials if rt.state is TrialState.PAUSED]
        if paused and self._scheduler is not None:
            decisions = self._scheduler.on_idle(self._population)
            self._touched_scheduler()
            if decisions:
                self._decide(decisions)
                return False  # look again once they are carried out
        if paused:
            log.info(
                "sweep %r ends with %d trial(s) PAUSED (nothing would resume them)",
                self.name,
                len(paused),
            )
        return True

    # -- admitting trials -----------------------------------------------------------------

    async def _admit(self) -> None:
        """Fill free slots: queued resumes and restores first, then new trials."""
        port = self._port
        while not self._ending and await self._free_slots() > 0:
            if self._queued:
                rt, event = self._queued.pop(0)
                if event is None:
                    port.launch(rt)
                else:
                    self._open[rt.id] = rt  # a slot is its from now: counted as live
                    port.request(rt, event)
                    if isinstance(event.decision, RestoreFrom):
                        port.unpin(event.decision.checkpoint.key)  # its machine pins it
                continue
            if len(self._trials) >= self.total or self._exhausted:
                break
            trial_id = sweep_trial_id(self.name, len(self._trials))
            config = await self._searcher.call(self._searcher.suggest, trial_id)
            if self._ending:
                break  # end() came while the searcher was asked: start nothing more
            if config is None:
                if not any(rt.state.has_actor for rt in self._open_trials()):
                    self._exhausted = True  # nothing will change its mind
                break
            self._create(trial_id, config)
        all_placed = not any(rt.state is TrialState.PENDING for rt in self._open_trials())
        if (len(self._trials) >= self.total or self._exhausted) and not self._queued and all_placed:
            port.retire_idle_workers()  # no trial will take them

    def _create(self, trial_id: str, config: dict[str, Any]) -> None:
        options = self._capacity.options_for(config)
        spec = self._port.trial_spec(self._trainable, config, options, trial_id)
        rt = self._port.add(spec, **self._judging(trial_id))
        self._join(rt)
        self._not_told.add(trial_id)
        if self._scheduler is not None:
            self._scheduler.on_trial_add(info_of(rt))
            self._touched_scheduler()
        self._port.launch(rt)
        self._port.touch_journal()

    def _judging(self, trial_id: str) -> dict[str, Any]:
        """How this sweep judges its trial ``trial_id``: the judge (its scheduler, after
        the trial's stop criterion) and the metrics the trial's first result must
        report, given when its policy is built (:meth:`SweepPort.add`, ``claim``)."""
        required: dict[str, str] = {}
        if self._metric:
            # Like a stop metric: a trial whose first result lacks the sweep's metric is
            # an error then, not a sweep whose searcher and scheduler learn nothing.
            required[self._metric] = "the sweep's metric"
        scheduler = self._scheduler
        if scheduler is None:
            return {"judge": None, "required_metrics": required}
        if scheduler.metric:
            required.setdefault(
                scheduler.metric, f"its scheduler's ({type(scheduler).__name__}) metric"
            )
        judge = SchedulerJudge(
            trial_id, scheduler, self._population, self._decide, self._touched_scheduler
        )
        return {"judge": judge, "required_metrics": required}

    def _touched_scheduler(self) -> None:
        """The scheduler was asked something: the journal pickles its state again."""
        if self._scheduler_state is not None:
            self._scheduler_state.touched()

    def _join(self, rt: TrialRuntime) -> None:
        """Make ``rt`` one of this sweep's trials: watched, shown to its scheduler."""
        from orchestrator.schedulers import PBT

        self._trials[rt.id] = rt
        self._open[rt.id] = rt
        rt.observer = self
        rt.report_config = isinstance(self._scheduler, PBT)

    def _open_trials(self) -> list[TrialRuntime]:
        """The trials that have not ended, and those that ended since the last look
        (dropped now). A trial's machine leaves TERMINATED or ERROR only through the
        loop's dispatch, which tells its observer (:meth:`on_revived`): so every trial
        not in the list is ended and settled, and a scan of it for trials that run,
        wait or are held is a scan of every trial. Each trial is dropped once: the cost
        per admission is the trials that are live (and PAUSED), not all N."""
        is_settled = self._port.is_settled
        ended = [
            trial_id
            for trial_id, rt in self._open.items()
            if rt.state.is_terminal and is_settled(rt)
        ]
        for trial_id in ended:
            del self._open[trial_id]
        return list(self._open.values())

    async def _free_slots(self) -> int:
        # A trial without an actor whose request waits in the loop's inbox (a queued
        # resume or restore just sent) is about to take a slot: counted as live, or the
        # sweep would start another trial in its slot before the loop moved it.
        is_settled = self._port.is_settled
        live = sum(
            1
            for rt in self._open_trials()
            if rt.state.has_actor or rt.state is TrialState.PENDING or not is_settled(rt)
        )
        # PENDING ones not launched yet (queued for a slot) do not hold one.
        live -= sum(1 for rt, event in self._queued if event is None)
        return await self._capacity.limit() - live

    # -- watching its trials (on the loop: cheap) ------------------------------------------

    def on_result(self, rt: TrialRuntime, result: Mapping[str, Any]) -> None:
        if not self._wants_results or self._finished or self._searcher.closed:
            return
        self._results_backlog.append((rt.id, result))
        if not self._draining:
            self._draining = self._searcher.submit(self._drain_results)

    def _drain_results(self) -> None:
        self._draining = False
        backlog, self._results_backlog = self._results_backlog, []
        for trial_id, result in backlog:
            self._searcher.searcher.on_trial_result(trial_id, result)

    def on_revived(self, rt: TrialRuntime) -> None:
        """``rt`` left TERMINATED or ERROR (a restore or resume, the scheduler's or a
        user's): it is one of the sweep's live trials again."""
        self._open[rt.id] = rt
        self._changed.set()

    def on_settled(self, rt: TrialRuntime) -> None:
        if self._finished:
            return  # a trial of a finished sweep, revived and ended by hand
        state = rt.state
        if self._scheduler is not None and state.is_terminal:
            info = info_of(rt)
            if state is TrialState.TERMINATED:
                decisions = self._scheduler.on_trial_complete(
                    info, rt.last_result, self._population
                )
            else:
                decisions = self._scheduler.on_trial_error(info, self._population)
            self._touched_scheduler()
            self._decide(decisions)
        if state.is_terminal and rt.id in self._not_told:
            self._tell_complete(rt)
        if state is TrialState.ERROR and self._fail_fast and not self._ending:
            log.warning(
                "sweep %r: trial %s failed and fail_fast is set: the sweep ends now, its "
                "other trials stopped where they are",
                self.name,
                rt.id,
            )
            self.end(at_once=True)
        self._changed.set()

    def _tell_complete(self, rt: TrialRuntime) -> None:
        if self._searcher.closed:
            return  # the sweep's call ended (cancelled): a resumed sweep tells its searcher
        self._not_told.discard(rt.id)
        error = rt.state is TrialState.ERROR
        result = dict(rt.last_result) if rt.last_result is not None else None
        metric = self._metric
        if metric and result is not None and not any(has_metric(r, metric) for r in rt.results):
            # It has no result to learn from, and its last one must not pass for one.
            # An error was said already; else strict_metrics=False let it run.
            result = None
        if result is None and not error and rt.last_result is not None:
            log.warning(
                "sweep %r: trial %s ended without reporting the sweep's metric %r in any "
                "result (it reported %s); the searcher is told it has no result",
                self.name,
                rt.id,
                metric,
                ", ".join(repr(k) for k in rt.last_result) or "nothing",
            )
        self._searcher.submit(self._searcher.complete, rt.id, result, error)

    def _decide(self, decisions: list[Decision]) -> None:
        """Send the scheduler's decisions about trials (not the one reporting) to them,
        as a user's requests are sent: one ``Decided`` event each. A trial without an
        actor that is to run again waits for a free slot first."""
        port = self._port
        for decision in [] if self._ending else decisions:
            rt = self._trials.get(decision.trial_id)
            if rt is None:
                continue
            if isinstance(decision, Continue) and not rt.machine.held:
                continue  # it is running: nothing to say
            if isinstance(decision, Stop) and self._scheduler is not None:
                note_stop(rt, self._scheduler, None)
            event = Decided(decision)
            if isinstance(decision, Resume):
                self._queued.append((rt, event))
            elif isinstance(decision, RestoreFrom) and not rt.state.has_actor:
                # Paused: it needs a slot; keep the donor's checkpoint till then.
                port.pin(decision.checkpoint.key)
                self._queued.append((rt, event))
            else:
                port.request(rt, event)
        self._changed.set()

    # -- the journal ---------------------------------------------------------------------------

    def journal_doc(self) -> dict[str, Any]:
        """The sweep as the journal's head records it (on the loop, at each write)."""
        from orchestrator.core.naming import trainable_identity

        if not self._claimed and self._journaled is not None:
            return compact(self._journaled)

        doc: dict[str, Any] = {
            "name": self.name,
            "trainable": trainable_identity(self._trainable),
            "metric": self._metric,
            "mode": self._mode,
            "num_samples": self._num_samples,
            "total": self.total,
            # Its trials' ids follow from their number (``core/sweep_doc.py``), and
            # the searcher heard of every one but these: O(live trials) a write.
            "created_count": len(self._trials),
            "not_told": sorted(self._not_told),
            "finished": self._finished,
            "searcher_state": self._searcher.state,
            "call": self._call,
        }
        if self._scheduler is not None and self._scheduler_state is not None:
            doc["scheduler_state"] = self._scheduler_state.pickle()
            doc.update(self._scheduler.display().journal_fields())  # PBT's lineage...
        return doc
