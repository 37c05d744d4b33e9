"""A Ray Train run as one trial: rank 0's reports become the trial's results and
checkpoints, and the trial's checkpoint is where its workers resume.

The pattern (Ray 2.60's, with this module's callback instead of Ray Tune's)::

    import ray.train
    from ray.train.torch import TorchTrainer
    from orchestrator.integrations.ray_train import TrialReportCallback

    def train_loop(config):                  # runs in every Train worker
        checkpoint = ray.train.get_checkpoint()  # the trial's, when it resumes
        ...
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(d))

    def trial(config):                       # the trial: drives Train, holds no CPU
        TorchTrainer(
            train_loop,
            train_loop_config=config,
            scaling_config=ray.train.ScalingConfig(num_workers=2),
            run_config=ray.train.RunConfig(callbacks=[TrialReportCallback()]),
        ).fit()

    orch.add_trial(trial, config={...}, resources={"cpu": 0})

How it works. The callback is built in the trial's function (it needs the trial: it
raises :class:`~orchestrator.errors.NotInTrial` elsewhere), which opens a
:class:`~orchestrator.integrations.relay.Relay` there; Train then pickles it into its
controller and its workers.

- In the controller, after every round of ``ray.train.report`` (Train's
  ``ReportCallback``), it sends rank 0's metrics and the checkpoint Train persisted to
  the relay and waits for the answer. In the trial's process the relay's thread copies
  the checkpoint's files into a local directory (``Checkpoint.to_directory``: Train's
  storage may be a path or a URI) and calls the trial's ``report(metrics,
  checkpoint=dir)``, which returns when the driver asks for the next result. So every
  checkpoint goes through the trial's own pipeline (persisted by the experiment's
  storage driver, kept and deleted by its retention, restored on a restart) and the
  controller goes on only then: Train's reports reach the trial one at a time, never
  ahead of the decisions made on them (Train's workers themselves do not wait for
  their controller, as under Ray Tune).
- When the trial is stopped, paused or restored while its function runs, the relay
  answers STOP: the callback removes the worker group's placement group (its workers
  die with it, so no gang outlives its trial) and asks its controller to abort
  (Train's own ``abort``, its Ctrl-C path); ``fit()`` then raises in the function,
  which is being unwound anyway. Train's abort first waits for its placement-group
  cleaner (up to about 12 s where Ray's state API is slow or missing, as without a
  dashboard), so the function may outlast its 10 s grace: its actor is then not
  reused, which costs nothing since the gang is gone.
- In each worker, once Train has set up its context (Train's ``WorkerCallback``), the
  callback sets the checkpoint ``ray.train.get_checkpoint()`` returns to the trial's
  own (``orchestrator.get_checkpoint()`` when the callback was built: None for a fresh
  start), until the run has reported a checkpoint of its own: after that, a worker
  group Train restarts itself resumes from Train's newest, which is the trial's newest
  too. It replaces what Train may have restored from its own storage (a ``RunConfig``
  ``name`` reused across the trial's runs): the trial's timeline decides, since a
  rollback, an exploit or a restart from an older checkpoint (the newest one lost)
  starts elsewhere than Train's last report.

Which layer handles which failure (the trial's ``max_failures`` counts each once):

- A worker that raises, or dies with its node: Train's ``FailureConfig(max_failures)``
  defaults to 0, so Train stops the run and ``fit()`` raises once for the whole gang;
  the trial fails once and, within its ``max_failures``, restarts in a new actor from
  its newest persisted checkpoint (on the nodes left, or new ones). Keep Train's at 0:
  a Train-level retry would restart the gang from Train's newest checkpoint too, but
  without the trial knowing (its history would go on without a restore) and on top of
  the trial's own retries.
- Waiting for the gang's resources (a placement group Train asks for): Train's,
  without limit by default (``controller_failure_limit=-1``: a start-up that times out
  is retried). The trial's actor waits in ``fit()`` holding nothing (given
  ``resources={"cpu": 0}``; the callback warns when it holds CPUs or GPUs: trials whose
  actors hold the CPUs a gang needs would wait for ever). Ray places a placement group
  whole or not at all, so waiting gangs never hold part of the cluster.
- A node's preemption announced by Ray: Train's (``max_preemption_failures``, default
  unlimited: the gang restarts from Train's newest checkpoint, which the trial has).
- The trial's own process dying (its node lost): the trial's; Train's controller is
  owned by that process and goes with it, and the trial restarts as above.

What it needs and what is left: the trial's checkpoint is handed to the workers as a
directory of the trial's node, so workers on other nodes need it on a shared
filesystem (a worker that cannot see it raises, naming it); likewise Train persists
rank 0's checkpoint to ``RunConfig(storage_path)`` (default ``~/ray_results``), which
the trial's node must be able to read: on several nodes, a shared path or a URI, as
Ray Train itself asks. Train keeps its own copies under its ``CheckpointConfig``
(``num_to_keep=1`` keeps its disk use to one).

It relies on three of Train V2's developer interfaces (``ReportCallback``,
``WorkerCallback`` and ``WorkerGroupCallback``, in
``ray.train.v2._internal.execution.callback``), sets the worker's
``TrainContext.checkpoint`` and reads the worker group's placement group (as Train's
own ``PlacementGroupCleanerCallback`` does); ``tests/train/test_ray_train.py`` pins them.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from typing import Any, ClassVar

from orchestrator.actor.function import current_trial_id, get_checkpoint, report
from orchestrator.errors import NotInTrial
from orchestrator.integrations.relay import STOP, Relay, Sender

try:
    import ray
    import ray.train
    from ray.train.v2._internal.execution.callback import (
        ReportCallback,
        WorkerCallback,
        WorkerGroupCallback,
    )
except ImportError as err:  # pragma: no cover - depends on the installed Ray
    raise ImportError(
        f"orchestrator.integrations.ray_train needs Ray Train V2 ({err}): install the "
        "'train' extra (pip install 'trialflow[train]')"
    ) from err

__all__ = ["TrialReportCallback"]

log = logging.getLogger("orchestrator.integrations.ray_train")


class TrialReportCallback(ReportCallback, WorkerCallback, WorkerGroupCallback):
    """Pass to ``ray.train.RunConfig(callbacks=[...])`` in a trial's function: rank 0's
    ``ray.train.report(metrics, checkpoint=...)`` becomes the trial's ``report``, and
    ``ray.train.get_checkpoint()`` in the workers is the trial's checkpoint (see the
    module's docstring). Build one per ``fit()``, in the trial's function (or code it
    calls, in its thread)."""

    #: The trial's report function, ``(metrics, checkpoint=directory)``: the facade's
    #: callback reports through Ray Tune's ``tune.report`` instead.
    _report: ClassVar[Callable[..., None]] = staticmethod(report)

    def __init__(self) -> None:
        try:
            self._trial_id = current_trial_id()
        except NotInTrial:
            raise NotInTrial(
                f"{type(self).__name__}() was built outside a trial: build it in the "
                "function given to add_trial (or code that function calls, in its thread), "
                "once per fit()"
            ) from None
        _warn_if_holding(self._trial_id)
        self._start = get_checkpoint()
        self._host = socket.gethostname()
        #: Whether workers start from ``_start``: until the run reports a checkpoint.
        self._seed = True
        self._stopping = False
        self._gang: Any = None  # in the controller: the worker group's placement group
        self._relay: Relay | None = Relay(self._deliver, name=f"train-{self._trial_id}")
        self._sender: Sender = self._relay.sender

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_relay"] = None  # the trial's end stays in the trial's process
        state["_gang"] = None
        return state

    # -- in the trial's process (the relay's thread) -------------------------------------

    def _deliver(self, message: tuple[dict[str, Any], Any]) -> None:
        metrics, checkpoint = message
        if checkpoint is None:
            self._report(metrics)
            return
        local = tempfile.mkdtemp(prefix=f"trialflow-train-{self._trial_id}-")
        try:
            checkpoint.to_directory(local)
            self._report(metrics, checkpoint=local)  # moves the files into the trial's
        finally:
            shutil.rmtree(local, ignore_errors=True)

    # -- in Train's controller ---------------------------------------------------------

    def after_report(self, training_report: Any, metrics: list[dict[str, Any]]) -> None:
        if self._stopping:  # the abort asked for is on its way
            return
        checkpoint = training_report.checkpoint
        if self._sender.send((dict(metrics[0]), checkpoint)) == STOP:
            self._stopping = True
            self._sender.close()
            # The gang goes first, at once (its workers die with it): Train's abort waits
            # for its placement-group cleaner before it removes the group, and the trial
            # may not wait that long (its actor is then killed, and the controller with it).
            gang, self._gang = self._gang, None
            if gang is not None:
                from ray.util import remove_placement_group

                remove_placement_group(gang)
            # The controller's own abort (Train's Ctrl-C path) runs once this returns.
            ray.get_runtime_context().current_actor.abort.remote()
            return
        if checkpoint is not None:
            self._seed = False

    def after_worker_group_start(self, worker_group: Any) -> None:
        state = worker_group.get_worker_group_state()
        self._gang = state.placement_group_handle.placement_group

    def before_worker_group_shutdown(self, worker_group: Any) -> None:
        self._gang = None

    def before_worker_group_abort(self, worker_group_context: Any) -> None:
        self._gang = None

    # -- in each Train worker ----------------------------------------------------------

    def after_init_train_context(self) -> None:
        if not self._seed:
            return
        from ray.train.v2._internal.execution.context import get_train_context

        start = self._start
        if start is not None and not os.path.isdir(start):
            raise FileNotFoundError(
                f"trial {self._trial_id}: its checkpoint {start} is on host {self._host} "
                f"and this Ray Train worker on host {socket.gethostname()} cannot see it: "
                "put the scratch directory on a shared filesystem or keep the workers on "
                "the trial's node"
            )
        get_train_context().checkpoint = (
            ray.train.Checkpoint.from_directory(start) if start is not None else None
        )


def _warn_if_holding(trial_id: str) -> None:
    """Say so when the trial's own actor holds CPUs or GPUs: Train's workers get their
    own (one placement group), so the function rarely uses them, and trials whose actors
    hold the CPUs a gang needs wait for it for ever (the default is 1 CPU a trial)."""
    try:
        held = ray.get_runtime_context().get_assigned_resources()
    except Exception:  # noqa: BLE001 - a warning only; Ray's context may be missing
        return
    held = {k: v for k, v in held.items() if k in ("CPU", "GPU") and v > 0}
    if held:
        log.warning(
            "trial %s holds %s while its Ray Train run's workers get their own (one "
            "placement group): unless its function uses them, give the trial "
            "resources={'cpu': 0}, or trials holding CPUs may leave no room for any gang",
            trial_id,
            held,
        )
