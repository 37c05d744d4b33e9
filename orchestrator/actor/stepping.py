"""A trainable's steps in one train call: how many run, when the call ends, and whether
a function trainable may run on past its last result (``After.RUN_ON``, see
:mod:`orchestrator.actor.function`). The trial actor (:mod:`orchestrator.actor.trial_actor`)
calls these with the trial it hosts; they count each result (iteration, times) as the
driver will number it.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from orchestrator.actor.function import After
from orchestrator.actor.trainable import Trainable
from orchestrator.core.wire import FUNCTION_DONE, REPORTED_CHECKPOINT

__all__ = ["RUN_ON_MAX_STEP_S", "HostedTrial", "exited", "one_step", "run_steps", "step"]


class HostedTrial(Protocol):
    """What these need of a trial its actor hosts (the actor's ``_HostedTrial``)."""

    trial_id: str
    stop: Any  # its stop condition, called with each numbered result; or None
    deferred: Exception | None  # a buffered step's error, raised by the next call
    time_total: float
    awaiter: Any  # runs what an ``async def`` method returns

    def require(self) -> Trainable: ...


#: The longest step after which a function trainable may run on into its next one
#: (``run_on``): a stop, a pause or a restore that comes instead waits for the function
#: to reach its next ``report()``, so for at most about this long. Past it, the round
#: trip the run-on hides is a few percent of a step at most.
RUN_ON_MAX_STEP_S = 1.0


def run_steps(
    hosted: HostedTrial, limit: int, slice_s: float | None, run_on: bool, alone: bool
) -> list[dict[str, Any]]:
    """:meth:`TrialActor.train_many`'s steps (``alone``: its actor hosts no other
    trial, so a function may run on)."""
    results: list[dict[str, Any]] = []
    deadline = None if slice_s is None else time.perf_counter() + slice_s

    def stop_met(result: dict[str, Any]) -> bool:
        if hosted.stop is None:
            return False
        numbered = {
            **result,
            "training_iteration": hosted.require().iteration,
            "trial_id": hosted.trial_id,
        }
        return bool(hosted.stop(numbered))

    def verdict(result: dict[str, Any]) -> After:
        """Whether the call goes on after ``result``, and if not, whether a function
        may run on (the stop condition sees each result once)."""
        results.append(result)
        if FUNCTION_DONE in result or stop_met(result):
            return After.WAIT
        free = After.RUN_ON if alone else After.WAIT  # where no decision can fall
        at_limit = len(results) >= limit
        if (
            at_limit
            or REPORTED_CHECKPOINT in result  # the save must come right after it
            or (deadline is not None and time.perf_counter() >= deadline)
        ):
            return free if run_on or not at_limit else After.WAIT
        return After.MORE

    def after(result: dict[str, Any], took: float) -> After:
        """In the function's thread: what it does after this report."""
        then = verdict(_account(hosted, result, took))
        return After.WAIT if then is After.RUN_ON and took > RUN_ON_MAX_STEP_S else then

    step_batch = getattr(hosted.require(), "step_batch", None)
    try:
        if step_batch is not None and hosted.deferred is None:
            # A function trainable: the reports of this call are judged in the
            # function's thread as they come, so it runs on without a hand-off.
            try:
                last = step_batch(after)
            except SystemExit as err:
                raise exited(err) from err
            if last is not None:
                results.append(_account(hosted, last, 0.0))
        else:
            while verdict(step(hosted)) is After.MORE:
                pass
    except Exception as err:
        if not results:
            raise
        # The steps before it stand, as they would one per call: the driver gets
        # them now, and this error with the next call.
        hosted.deferred = err
    return results


def one_step(
    hosted: HostedTrial, run_on: bool, alone: bool
) -> dict[str, Any] | list[dict[str, Any]]:
    """One step: a class's ``step()``; a function's next report through
    :func:`run_steps` (a list of one), so that its time is measured in its own thread
    whether or not it ran on into this step before the call came."""
    if hosted.deferred is None and hasattr(hosted.require(), "step_batch"):
        return run_steps(hosted, 1, None, run_on, alone)
    return step(hosted)


def step(hosted: HostedTrial) -> dict[str, Any]:
    if hosted.deferred is not None:
        err, hosted.deferred = hosted.deferred, None
        raise err
    trainable = hosted.require()
    start = time.perf_counter()
    result = hosted.awaiter.call(trainable.step)
    return _account(hosted, result, time.perf_counter() - start)


def _account(hosted: HostedTrial, result: Any, took: float) -> dict[str, Any]:
    """A step's result, counted: the trainable's iteration and the result's times."""
    trainable = hosted.require()
    if not isinstance(result, dict):
        raise TypeError(
            f"trial {hosted.trial_id}: {type(trainable).__name__}.step() must return a "
            f"dict of metrics, got {type(result).__name__}"
        )
    trainable.iteration += 1
    hosted.time_total += took
    result.setdefault("time_this_iter_s", took)
    result.setdefault("time_total_s", hosted.time_total)
    return result


def exited(err: SystemExit) -> Exception:
    """The error a trial fails with when its code called ``sys.exit()``: Ray would end
    the worker process for a ``SystemExit``, and the driver could only say that the
    actor died unexpectedly."""
    from orchestrator.errors import TrainableExited

    code = err.code
    if code is None:
        call, status = "sys.exit()", 0
    elif isinstance(code, int):
        call, status = f"sys.exit({code})", code
    else:
        call, status = f"sys.exit({code!r})", 1
    return TrainableExited(
        f"it called {call} (exit code {status}); a trainable must return or raise, so this "
        "counts as a failure of the trial"
    )
