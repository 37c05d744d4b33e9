"""The public :class:`Trial` handle.

A trial's state lives in exactly one place, its
:class:`~orchestrator.core.machine.TrialMachine`, and the rest of what the loop knows of it
in its :class:`~orchestrator.engine.trial_runtime.TrialRuntime`; this handle is a read-only view of
both and turns the user's requests (``restore``, ``pause``, ``resume``, ``stop``) into
decisions for the loop: the same :mod:`~orchestrator.core.decisions` a scheduler makes,
carried out the same way. Every request is an awaitable that returns once the loop has
carried it out, and each can be awaited from a hook without deadlock: the loop never
waits for hooks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.decisions import Pause, RestoreFrom, Resume, Stop
from orchestrator.core.events import Decided, Event, SaveRequested
from orchestrator.core.machine import TrialState
from orchestrator.engine.history import SpilledHistory
from orchestrator.errors import ConfigError, NoCheckpointError, TrialError, TrialNotRunning

if TYPE_CHECKING:
    from orchestrator.core.stopping import StopCondition
    from orchestrator.engine.ports import RequestSink
    from orchestrator.engine.trial_runtime import TrialRuntime


def handle_of(runtime: TrialRuntime) -> Trial:
    """The handle of ``runtime``: the loop's record holds it untyped, since the engine
    does not know this layer; every record the API builds gets one."""
    handle = runtime.handle
    assert isinstance(handle, Trial), f"trial {runtime.id} has no handle"
    return handle


class Trial:
    """One configuration being trained. Created by ``Orchestrator.add_trial``."""

    # Slots: a sweep's result holds every trial's handle for the whole experiment.
    __slots__ = ("_rt", "_sink")

    def __init__(self, runtime: TrialRuntime, sink: Callable[[], RequestSink | None]) -> None:
        self._rt = runtime
        self._sink = sink  # the loop that takes its requests, while there is one
        runtime.handle = self

    # -- what it is ------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._rt.id

    @property
    def config(self) -> dict[str, Any]:
        """The config it runs with now (a PBT exploit gives it a new one). A finished
        trial's is read back from where its record was sealed (a new copy each time)."""
        return self._rt.peek().config

    @property
    def trainable_cls(self) -> type:
        return self._rt.peek().spec.trainable

    @property
    def stop_condition(self) -> StopCondition:
        return self._rt.peek().spec.stop

    @property
    def resources(self) -> dict[str, float]:
        return dict(self._rt.peek().spec.resources)

    # -- what happened -----------------------------------------------------------------

    @property
    def state(self) -> TrialState:
        return self._rt.state

    @property
    def results(self) -> list[dict[str, Any]]:
        """Its history: one result per iteration, oldest first (a restore to iteration
        k drops those after k). A finished trial's is read back from where the journal
        keeps it (a new list each time: issue 36, finished trials' histories are not
        held in memory)."""
        results = self._rt.results
        if isinstance(results, SpilledHistory):
            return results.load()
        return results

    @property
    def last_result(self) -> dict[str, Any] | None:
        return self._rt.last_result

    @property
    def discarded_results(self) -> int:
        """Results dropped from the history by restores (rollbacks)."""
        return self._rt.discarded_results

    @property
    def checkpoints(self) -> list[Checkpoint]:
        """Its persisted checkpoints on its timeline, oldest first: garbage-collected
        ones are gone, and so are those a restore left behind (saved after the
        checkpoint it restarted from, or before an exploit)."""
        return list(self._rt.peek().machine.checkpoints)

    @property
    def latest_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint on its timeline, which a failure restores. Right after
        an exploit or a clone, before it saves its own, that is the other trial's
        checkpoint it restored."""
        return self._rt.peek().machine.latest_checkpoint

    @property
    def error(self) -> BaseException | None:
        """What is wrong with the trial now: the failure that put it in ERROR (or PAUSED
        it, storage being down), or the one it is recovering from; ``None`` once it
        reports results again. Every failure stays in :attr:`errors`."""
        return self._rt.peek().machine.error

    @property
    def errors(self) -> list[BaseException]:
        """Every failure of the trial, oldest first (recovered ones included)."""
        return list(self._rt.peek().machine.errors)

    @property
    def num_failures(self) -> int:
        return self._rt.peek().machine.num_failures

    @property
    def iteration(self) -> int:
        return self._rt.iteration

    @property
    def node_id(self) -> str | None:
        """The Ray node its actor runs on (None while it has none)."""
        return self._rt.node_id

    @property
    def host(self) -> str | None:
        """The host name of :attr:`node_id`."""
        return self._rt.host_name

    @property
    def actor(self) -> Any:
        """The trial's live Ray actor handle, or ``None`` when it has none."""
        return self._rt.actor

    def __repr__(self) -> str:
        return f"Trial({self.id}, {self.state.value}, iteration={self.iteration})"

    # -- requests --------------------------------------------------------------------

    async def restore(
        self, checkpoint: Checkpoint | None = None, *, config: Mapping[str, Any] | None = None
    ) -> Checkpoint:
        """Roll back (mid-run) or bring back (PAUSED/TERMINATED/ERROR) to ``checkpoint``.

        Defaults to the newest persisted checkpoint. Returns once the checkpoint is
        loaded and the trial is training again; results then continue at
        ``checkpoint.iteration + 1`` and later ones recorded before are dropped.
        ``checkpoint`` may belong to another trial (e.g. to clone a good one). With
        ``config``, the trial continues with that config: a trainable whose
        ``reset_config(new_config)`` returns True keeps its actor; otherwise a new actor
        is set up with it and loads the checkpoint.
        """
        if checkpoint is None:
            checkpoint = self.latest_checkpoint
            if checkpoint is None:
                raise NoCheckpointError(
                    f"trial {self.id} has no persisted checkpoint to restore; set "
                    "checkpoint_every in add_trial() or pass a checkpoint"
                )
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(
                f"trial {self.id}: restore() takes a Checkpoint (e.g. from trial.checkpoints), "
                f"got {type(checkpoint).__name__}"
            )
        self._check_restorable(checkpoint)
        if config is not None:
            if not isinstance(config, Mapping):
                raise ConfigError(
                    f"trial {self.id}: restore(config=...) takes a dict, got "
                    f"{type(config).__name__}"
                )
            from orchestrator.core.validate import check_sendable

            config = dict(config)
            check_sendable(config, self.id)
        before = self._rt.runs_started
        await self._request(
            Decided(RestoreFrom(self.id, checkpoint, config)),
            lambda: self._rt.runs_started > before or self._gave_up(),
        )
        if self._rt.runs_started == before:
            why = f"; last error: {self.error}" if self.error is not None else ""
            raise TrialError(
                self.id,
                f"could not restore {checkpoint.uri}: the trial is {self.state.value}{why}",
                self.error,
            )
        return checkpoint

    async def pause(self) -> None:
        """Save (always, unless its newest iteration is saved already, storage is down or
        the trainable saves only when it reports a checkpoint), release the actor and its
        resources; ``resume()`` continues from there."""
        await self._request(Decided(Pause(self.id)), lambda: self.state.is_settled)

    async def resume(self) -> None:
        """Continue a PAUSED (or ERROR) trial from its newest checkpoint."""
        before = self._rt.runs_started
        await self._request(
            Decided(Resume(self.id)),
            lambda: self._rt.runs_started > before or self._gave_up() or self._training(),
        )

    async def save(self) -> Checkpoint | None:
        """Checkpoint the trial right after its next result (the step in flight, when
        one is); returns the persisted checkpoint once its upload committed, or None when
        the trial settled first or saves only when it says so (a training function
        checkpoints through ``report(..., checkpoint=...)``)."""
        newest = self.latest_checkpoint
        await self._request(
            SaveRequested(),
            lambda: (
                self.latest_checkpoint != newest
                or self.state.is_settled
                or not self._rt.machine.policy.saves_on_demand
            ),
        )
        latest = self.latest_checkpoint
        return latest if latest != newest else None

    async def stop(self) -> None:
        """End the trial now: TERMINATED once the call in flight is back (or killed
        after ``stop_grace_s``). A trial that checkpoints (``checkpoint_every > 0``) and
        saves on demand saves a final checkpoint first, unless its newest iteration is
        saved already or storage is down. The same as a scheduler's ``Stop`` or the stop
        criterion: a failure meanwhile ends it TERMINATED too."""
        await self._request(Decided(Stop(self.id)), lambda: self.state.is_terminal)

    async def wait(self) -> Trial:
        """Return once the trial is settled: TERMINATED, ERROR or PAUSED."""
        if not self.state.is_settled:
            self._refuse_waiting_from_own_hook()
            await self._until(lambda: self.state.is_settled)
        return self

    # -- plumbing ----------------------------------------------------------------------

    def _check_restorable(self, checkpoint: Checkpoint) -> None:
        """Refuse a checkpoint its trial dropped (a rollback abandoned it, or retention
        deleted it): its files are going, and it is on no timeline of that trial."""
        dispatcher = self._sink()
        owner = dispatcher.trials.get(checkpoint.trial_id) if dispatcher is not None else None
        why = owner.peek().machine.dropped.get(checkpoint.key) if owner is not None else None
        if why is not None:
            whose = "this trial's" if owner is self._rt else "trial " + checkpoint.trial_id + "'s"
            raise NoCheckpointError(
                f"trial {self.id}: cannot restore {checkpoint.uri}, {whose} checkpoint at "
                f"iteration {checkpoint.iteration}: {why}; restore one of "
                f"trial.checkpoints (or trial.latest_checkpoint) instead"
            )

    def _view(self, runtime: TrialRuntime) -> None:
        """Show ``runtime`` from now on: a resumed experiment rebuilt, from its journal,
        the trial this handle's ``add_trial`` call adopted."""
        self._rt = runtime
        runtime.handle = self

    def _training(self) -> bool:
        return self.state is TrialState.RUNNING and not self._rt.machine.pausing

    def _refuse_waiting_from_own_hook(self) -> None:
        """A trial's training waits for its result hooks (``TrialPolicy.hook_progress``):
        one of them waiting for the trial to settle would wait forever."""
        dispatcher = self._sink()
        progress = self._rt.machine.policy.hook_progress
        if (
            progress is not None
            and progress.seen(self.id) is not None
            and dispatcher is not None
            and dispatcher.hooks.is_draining(self.id)
        ):
            raise TrialError(
                self.id,
                "a hook of this trial awaited trial.wait(), but the trial trains only as "
                "far as its hooks keep up, so it would never settle; await "
                "trial.stop()/pause() instead, or wait in a task of your own "
                "(asyncio.create_task) that the hook does not await",
            )

    def _gave_up(self) -> bool:
        return self.state is TrialState.ERROR or self.state is TrialState.TERMINATED

    async def _request(self, event: Event, done: Callable[[], bool]) -> None:
        dispatcher = self._sink()
        if dispatcher is None or not dispatcher.running:
            raise TrialNotRunning(
                f"trial {self.id}: requests need a running orchestrator; use them inside "
                "`async with Orchestrator(...)`"
            )
        waiter = self._add_waiter(done, after=event)
        dispatcher.request(self._rt, event)
        await waiter

    async def _until(self, done: Callable[[], bool]) -> None:
        await self._add_waiter(done)

    def _add_waiter(
        self, done: Callable[[], bool], after: Event | None = None
    ) -> asyncio.Future[None]:
        from orchestrator.engine.trial_runtime import Waiter

        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if after is None and done():
            future.set_result(None)
            return future
        self._rt.add_waiter(Waiter(done, future, after))
        return future
