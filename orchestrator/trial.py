"""The public :class:`Trial` handle.

A trial's state lives in exactly one place, its :class:`~orchestrator.lifecycle.TrialMachine`;
this handle reads it and turns the user's requests (``restore``, ``pause``, ``resume``,
``stop``) into events for the loop. Every request is an awaitable that returns once the
loop has carried it out, and each can be awaited from a hook without deadlock: the loop
never waits for hooks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .checkpoints import Checkpoint
from .errors import NoCheckpointError, TrialError, TrialNotRunning
from .lifecycle import (
    Event,
    PauseRequested,
    RestoreRequested,
    ResumeRequested,
    StopRequested,
    TrialMachine,
    TrialState,
)
from .stopping import StopCondition
from .trainable import Trainable

if TYPE_CHECKING:
    from .loop import Dispatcher


class Trial:
    """One configuration being trained. Created by ``Orchestrator.add_trial``."""

    def __init__(
        self,
        trial_id: str,
        trainable_cls: type[Trainable],
        config: Mapping[str, Any],
        *,
        machine: TrialMachine,
        stop: StopCondition,
        resources: Mapping[str, float],
    ) -> None:
        self.id = trial_id
        self.trainable_cls = trainable_cls
        self.config: dict[str, Any] = dict(config)
        self.stop_condition = stop
        self.resources = dict(resources)
        self.results: list[dict[str, Any]] = []
        self.last_result: dict[str, Any] | None = None
        self.discarded_results = 0
        self.node_id: str | None = None
        self.host: str | None = None  # the host name of ``node_id``
        self._machine = machine
        self._dispatcher: Dispatcher | None = None
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        # Loop-private runtime: the live actor and its call sequence number.
        self._actor: Any = None
        self._seq = 0
        self._host: Any = None  # the loop's Host record for ``_actor``
        self._runs_started = 0
        self._spec: dict[str, Any] = {}  # what the journal records of the trial's set-up
        # A finished trial resumed from a journal runs nothing, so its code was not
        # imported; this loads it if the trial is ever started again.
        self._trainable_loader: Callable[[], Any] | None = None

    # -- state ---------------------------------------------------------------------

    @property
    def state(self) -> TrialState:
        return self._machine.state

    @property
    def checkpoints(self) -> list[Checkpoint]:
        """Persisted checkpoints, oldest first (garbage-collected ones are gone)."""
        return list(self._machine.checkpoints)

    @property
    def latest_checkpoint(self) -> Checkpoint | None:
        return self._machine.latest_checkpoint

    @property
    def error(self) -> BaseException | None:
        """What is wrong with the trial now: the failure that put it in ERROR (or PAUSED
        it, storage being down), or the one it is recovering from; ``None`` once it
        reports results again. Every failure stays in :attr:`errors`."""
        return self._machine.error

    @property
    def errors(self) -> list[BaseException]:
        """Every failure of the trial, oldest first (recovered ones included)."""
        return list(self._machine.errors)

    @property
    def num_failures(self) -> int:
        return self._machine.num_failures

    @property
    def iteration(self) -> int:
        return self._machine.iteration

    @property
    def actor(self) -> Any:
        """The trial's live Ray actor handle, or ``None`` when it has none."""
        return self._actor

    def __repr__(self) -> str:
        return f"Trial({self.id}, {self.state.value}, iteration={self.iteration})"

    # -- requests --------------------------------------------------------------------

    async def restore(self, checkpoint: Checkpoint | None = None) -> Checkpoint:
        """Roll back (mid-run) or bring back (PAUSED/TERMINATED/ERROR) to ``checkpoint``.

        Defaults to the newest persisted checkpoint. Returns once the checkpoint is
        loaded and the trial is training again; results then continue at
        ``checkpoint.iteration + 1`` and later ones recorded before are dropped.
        ``checkpoint`` may belong to another trial (e.g. to clone a good one).
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
        before = self._runs_started
        await self._request(
            RestoreRequested(checkpoint),
            lambda: self._runs_started > before or self._gave_up(),
        )
        if self._runs_started == before:
            why = f"; last error: {self.error}" if self.error is not None else ""
            raise TrialError(
                self.id,
                f"could not restore {checkpoint.uri}: the trial is {self.state.value}{why}",
                self.error,
            )
        return checkpoint

    async def pause(self) -> None:
        """Save, release the actor and its resources; ``resume()`` continues from there."""
        await self._request(PauseRequested(), lambda: self.state.is_settled)

    async def resume(self) -> None:
        """Continue a PAUSED (or ERROR) trial from its newest checkpoint."""
        before = self._runs_started
        await self._request(
            ResumeRequested(),
            lambda: self._runs_started > before or self._gave_up() or self._training(),
        )

    async def stop(self) -> None:
        """End the trial now (saving a final checkpoint when it checkpoints at all)."""
        await self._request(StopRequested(), lambda: self.state.is_terminal)

    async def wait(self) -> Trial:
        """Return once the trial is settled: TERMINATED, ERROR or PAUSED."""
        if not self.state.is_settled:
            await self._until(lambda: self.state.is_settled)
        return self

    # -- plumbing (used by the loop) ---------------------------------------------------

    def _load_code(self) -> None:
        """Import the trainable (and unpickle config and stop criterion) of a finished
        trial resumed without them, now that it is to run again."""
        assert self._trainable_loader is not None
        self.trainable_cls, config, self.stop_condition = self._trainable_loader()
        self.config = dict(config)
        self._trainable_loader = None
        self._machine.policy.should_stop = self.stop_condition
        self._machine.policy.iteration_limit = self.stop_condition.iteration_limit

    def _training(self) -> bool:
        return self.state is TrialState.RUNNING and not self._machine.pausing

    def _gave_up(self) -> bool:
        return self.state is TrialState.ERROR or self.state is TrialState.TERMINATED

    async def _request(self, event: Event, done: Callable[[], bool]) -> None:
        dispatcher = self._dispatcher
        if dispatcher is None or not dispatcher.running:
            raise TrialNotRunning(
                f"trial {self.id}: requests need a running orchestrator; use them inside "
                "`async with Orchestrator(...)`"
            )
        waiter = self._add_waiter(done, after_event=True)
        dispatcher.request(self, event)
        await waiter

    async def _until(self, done: Callable[[], bool]) -> None:
        await self._add_waiter(done, after_event=False)

    def _add_waiter(self, done: Callable[[], bool], *, after_event: bool) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not after_event and done():
            future.set_result(None)
            return future
        self._waiters.append((done, future))
        return future

    def _wake_waiters(self) -> None:
        if not self._waiters:
            return
        still: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        for done, future in self._waiters:
            if future.done():
                continue
            if done():
                future.set_result(None)
            else:
                still.append((done, future))
        self._waiters = still

    def _fail_waiters(self, error: BaseException) -> None:
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(error)
        self._waiters = []
