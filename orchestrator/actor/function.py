"""Function trainables: ``def train(config)`` calling :func:`report` once per iteration.

``add_trial(train)`` wraps the function in a generated :class:`Trainable` subclass
(:func:`wrap_function`), so the driver's state machine, stop conditions, schedulers,
pause and restore treat it exactly like a class: one ``step()`` is one ``report()``.

Theory of operation
-------------------
The function runs in a daemon thread of the trial's actor (an ``async def`` function
under ``asyncio.run`` in that thread). The actor's thread and the function's thread
hand control back and forth, so one of them runs at a time, except while the function
runs on (below): then it runs beside the actor's calls that need none of its state
(sending results, a save of a checkpoint it staged before).

- ``step()`` lets the function run (it starts the thread the first time) and waits for
  its next message: a report (returned as the step's metrics), its return (the
  :data:`~orchestrator.core.events.FUNCTION_DONE` pseudo-result, which finishes the trial),
  or the exception it raised (raised again by ``step()``: a trial failure). A function
  that returns a dict has reported it: it is the trial's last result, one more
  iteration, judged like any other, before ``FUNCTION_DONE`` (Ray Tune's rule, so a
  ``def f(config): return {"score": ...}`` records its score); None is nothing, anything
  else is logged and ignored.
- ``report()`` sends the metrics and blocks until the next ``step()``, unless the call
  that took them let the function *run on* (below). A stop, pause or restore decided
  on a result finds the function waiting at that result's ``report()``.
- Running on: a buffered call (:meth:`FunctionTrainable.step_batch`) may end with
  :attr:`After.RUN_ON` when the driver said that no decision can fall on the call's
  last result (it is no scheduler's milestone, no iteration limit; the trial's stop
  condition is checked here). The function then goes on into its next step while that
  result travels to the driver and the driver asks for the next one, and waits at the
  *start* of its next ``report()``, before anything of that report (its checkpoint
  included) is taken, for the call that asks for it. So the round trip between two
  results overlaps the step instead of adding to it, and a function is still never
  more than one result ahead of the decisions made on its results: a stop that comes
  instead ends the function at that waiting ``report()`` and nothing of that result
  is delivered. Only the code between the two reports ran past the decision.
- To unwind the function (a restore on a live actor, ``cleanup()``), the blocked
  ``report()`` raises :class:`_Unwind`, a ``BaseException`` that ``except Exception``
  does not catch, so the function's ``finally`` blocks and context managers run. A
  function that has not returned within :data:`FUNCTION_GRACE_S` is abandoned (its
  thread is a daemon) and the wrapper's ``abandoned`` says its process is not clean.

A checkpoint reported with ``report(metrics, checkpoint=d)`` is *staged* before
``report`` sends anything: ``d`` is moved (``os.rename``) into the trial's node-local
scratch space and an empty directory is put back at ``d``, so the caller may delete or
reuse ``d`` at once. It is copied instead across filesystems, and for a symlink, one of
this trial's own scratch directories (such as the one :func:`get_checkpoint` returned)
or the process's working directory (or one holding it). Hard links are not used: they
share the files' inodes with ``d``, and a caller that rewrites a file of ``d`` in place
(``torch.save`` truncates) would change the staged checkpoint while it uploads. The
machine asks for a save right after a result that carries a checkpoint;
``save_checkpoint`` then renames the staged directory into place (no byte is read
twice) and the usual pipeline commits or uploads it beside the next step.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import inspect
import itertools
import logging
import os
import queue
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from orchestrator.actor.trainable import Trainable
from orchestrator.core.wire import FUNCTION_DONE, REPORTED_CHECKPOINT
from orchestrator.errors import ConfigError, NotInTrial

__all__ = [
    "FUNCTION_GRACE_S",
    "After",
    "FunctionTrainable",
    "current_trial_id",
    "get_checkpoint",
    "is_function",
    "on_run_end",
    "report",
    "wrap_function",
]

log = logging.getLogger("orchestrator.actor.function")

#: Seconds an unwound function may take to return (its ``finally`` blocks) before its
#: thread is abandoned.
FUNCTION_GRACE_S = 10.0


class After(enum.Enum):
    """What the function does after a report, as ``step_batch``'s callback says."""

    MORE = "more"  # the call goes on: the next report is also this call's (no hand-off)
    WAIT = "wait"  # the call ends; the function waits in this report for the next call
    RUN_ON = "run-on"  # the call ends; the function runs on, to wait at its next report


#: ``step_batch``'s callback: a report's result and its seconds -> what comes next.
OnReport = Callable[[dict[str, Any], float], After]

_GO = "go"
_UNWIND = "unwind"

#: The run whose thread (or a task or thread copying its context) is executing.
_current: contextvars.ContextVar[_Run | None] = contextvars.ContextVar(
    "trialflow_function_run", default=None
)


class _Unwind(BaseException):
    """Raised from a blocked :func:`report` to end a function that must not go on."""


# -- the public API inside a function ------------------------------------------------------


def report(metrics: Mapping[str, Any], checkpoint: str | os.PathLike[str] | None = None) -> None:
    """Report one iteration's ``metrics``, with a checkpoint directory if given.

    Returns when the driver asks for the next iteration, or at once when no decision
    can fall on this result (then the next ``report()`` waits for the driver's request
    before it takes anything); a function is never more than one result ahead of the
    decisions made on its results (while it waits in an ``async def`` function, its
    event loop waits too, background tasks included). ``checkpoint``'s
    files are taken before anything is sent (see the module's docstring): the directory
    is left empty and may be deleted or reused as soon as this returns.
    """
    _run_here("report").report(metrics, checkpoint)


def get_checkpoint() -> str | None:
    """The local directory of the checkpoint this run resumes from, or None for a fresh
    start. It stays until the run ends; read it, do not write into it."""
    return _run_here("get_checkpoint").checkpoint


def current_trial_id() -> str:
    """The id of the trial whose function is running here (in its thread, or in code it
    calls there): for a library that names files or logs after the trial."""
    return _run_here("current_trial_id").trial_id


#: How a run of the function ended, as :func:`on_run_end`'s callbacks are told.
RunOutcome = Literal["finished", "failed", "stopped"]


def on_run_end(callback: Callable[[RunOutcome], None]) -> None:
    """Call ``callback(outcome)`` in the function's thread when this run of it ends:
    ``"finished"`` (it returned), ``"failed"`` (it raised) or ``"stopped"`` (the driver
    ended it at a report: a stop, a pause, a restore). For a library that opened
    something for the run and must close it as its users expect, such as
    ``setup_mlflow``'s MLflow run (FINISHED, FAILED, KILLED). Callbacks run before the
    driver hears of the end, newest first; one that raises is logged, the others run."""
    _run_here("on_run_end").at_end.append(callback)


def _run_here(what: str) -> _Run:
    run = _current.get()
    if run is None:
        raise NotInTrial(
            f"{what}() was called outside a trial: call it from a training function passed "
            "to add_trial (or from code that function calls, in its thread)"
        )
    return run


# -- wrapping --------------------------------------------------------------------------------


def is_function(obj: Any) -> bool:
    """Whether ``add_trial`` should wrap ``obj`` as a training function: any callable
    that is neither a class (a class must subclass Trainable) nor a Trainable."""
    return callable(obj) and not isinstance(obj, type) and not isinstance(obj, Trainable)


def function_name(fn: Callable[..., Any]) -> str:
    """A name for ``fn``: its ``__name__``, through ``functools.partial`` too."""
    while not hasattr(fn, "__name__") and hasattr(fn, "func"):
        fn = fn.func
    return str(getattr(fn, "__name__", None) or type(fn).__name__)


def wrap_function(fn: Callable[..., Any]) -> type[Trainable]:
    """A :class:`FunctionTrainable` subclass running ``fn``, named after it.

    Its ``__qualname__`` has ``<locals>``: it cannot be imported by a path, so the
    journal and Ray pickle it by value (cloudpickle), with ``fn`` by reference when
    ``fn`` is importable."""
    if not is_function(fn):
        raise ConfigError(f"{fn!r} is not a training function")
    name = function_name(fn)
    namespace = {
        "function": staticmethod(fn),
        "__module__": getattr(fn, "__module__", None) or __name__,
        "__qualname__": f"wrap_function.<locals>.{name}",
        "__doc__": f"The training function {name}, as a trainable.",
    }
    return type(name, (FunctionTrainable,), namespace)


# -- the trainable ---------------------------------------------------------------------------


class FunctionTrainable(Trainable):
    """Runs ``function`` (set by :func:`wrap_function`) in a thread, one report a step.

    ``abandoned`` is True once a function did not return within
    :data:`FUNCTION_GRACE_S` of being unwound: its thread still runs, so this process
    should not host another trial.
    """

    #: It checkpoints only when the function reports one: no save on pause or stop.
    saves_on_demand = False
    #: It wraps a training function (``function``): what identifies the trial is that
    #: function (:func:`orchestrator.core.identity.trainable_identity`).
    wraps_function = True
    function: Callable[[dict[str, Any]], Any]

    def __init__(self) -> None:
        self.abandoned = False
        self._run: _Run | None = None
        self._staged: str | None = None  # reported with the last result, not yet saved
        self._restored: str | None = None  # what get_checkpoint() returns on the next run
        self._names = itertools.count()
        self._own_scratch: str | None = None  # when no actor gave us a scratch directory

    def step(self) -> dict[str, Any]:
        run = self._go(None)
        kind, value, staged = run.from_fn.get()
        if kind == "report":
            return self._take(value, staged)
        return self._ended(run, kind, value)

    def step_batch(self, on_report: OnReport) -> dict[str, Any] | None:
        """Run the function until ``on_report`` (called in the function's thread with each
        report's metrics and the seconds it took) returns other than ``After.MORE``: a
        buffered train call's steps with two thread hand-offs in all, not two per report;
        with ``After.RUN_ON`` the function goes on meanwhile (see the module). Returns
        None, or, when the function ended, what :meth:`step` returns then (the caller's last
        result); raises what the function or ``on_report`` raised."""
        run = self._go(on_report)
        kind, value, _ = run.from_fn.get()
        if kind == "batch-end":
            return None
        if kind == "batch-error":
            raise value
        return self._ended(run, kind, value)

    def _go(self, on_report: OnReport | None) -> _Run:
        """Start the function, or let it go on from the report it waits in."""
        run = self._run
        if run is not None and run.finished:
            raise RuntimeError(f"trial {self.trial_id}: step() after its function returned")
        if run is None:
            run = self._run = _Run(self, self._restored)
            run.on_report = on_report
            run.thread.start()
        else:
            run.on_report = on_report
            run.to_fn.put(_GO)
        return run

    def _take(self, metrics: dict[str, Any], staged: str | None) -> dict[str, Any]:
        """A report's metrics as the step's result; its checkpoint waits for the save."""
        self._drop_staged()
        self._staged = staged
        if staged is not None:
            metrics[REPORTED_CHECKPOINT] = True
        return metrics

    def _ended(self, run: _Run, kind: str, value: Any) -> dict[str, Any]:
        run.finished = True
        run.thread.join()
        if kind == "done":
            if run.reports == 0 and run.checkpoint is None:
                log.warning(
                    "trial %s: its function %s returned without calling report(): the "
                    "trial ends with no results",
                    self.trial_id,
                    type(self).__name__,
                )
            return {FUNCTION_DONE: True}
        if isinstance(value, (Exception, SystemExit)):  # the actor names a SystemExit
            raise value
        raise RuntimeError(
            f"trial {self.trial_id}: its function raised {type(value).__name__}: {value}"
        ) from value

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        staged, self._staged = self._staged, None
        if staged is None:
            raise RuntimeError(
                f"trial {self.trial_id}: a save was asked for, but its function reported no "
                "checkpoint since the last one (a function checkpoints only through "
                "report(metrics, checkpoint=directory))"
            )
        try:
            os.rename(staged, checkpoint_dir)  # replaces the empty directory the actor made
        except OSError:
            for entry in os.listdir(staged):
                shutil.move(os.path.join(staged, entry), os.path.join(checkpoint_dir, entry))
            shutil.rmtree(staged, ignore_errors=True)

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        """End a running function (a restore on a live actor: its ``finally`` blocks
        run), then keep the checkpoint for the next run's :func:`get_checkpoint`: hard
        links in scratch, since the actor removes ``checkpoint_dir`` once this returns."""
        self._end_run()
        stash = self._scratch_path("restored")
        try:
            shutil.copytree(checkpoint_dir, stash, copy_function=os.link)
        except OSError:  # another filesystem, or links refused
            shutil.rmtree(stash, ignore_errors=True)
            shutil.copytree(checkpoint_dir, stash)
        self._drop(self._restored)
        self._restored = stash

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Yes: the next run starts the function afresh with the new config anyway."""
        return True

    def cleanup(self) -> None:
        self._end_run()
        self._drop(self._restored)
        self._restored = None
        self._drop(self._own_scratch)
        self._own_scratch = None

    # -- internals -------------------------------------------------------------------------

    def _end_run(self) -> None:
        """Unwind the running function, if any, and wait for it up to the grace period."""
        run, self._run = self._run, None
        self._drop_staged()
        if run is None:
            return
        if not run.finished:
            run.cancelled = True
            run.to_fn.put(_UNWIND)
        run.thread.join(FUNCTION_GRACE_S)
        if run.thread.is_alive():
            self.abandoned = True
            log.warning(
                "trial %s: its function did not return within %.0f s of being asked to stop "
                "(at its report()); its thread is abandoned, still running",
                self.trial_id,
                FUNCTION_GRACE_S,
            )

    def stage(self, source: str | os.PathLike[str]) -> str:
        """Take the reported checkpoint ``source`` into scratch (in the function's thread,
        while the actor's thread waits); returns where it is."""
        path = os.path.abspath(os.fspath(source))
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"trial {self.trial_id}: report(checkpoint={path!r}): no such directory"
            )
        if not os.path.isdir(path):
            raise NotADirectoryError(
                f"trial {self.trial_id}: report(checkpoint={path!r}) is not a directory"
            )
        root = self._scratch_root()
        if _inside(path, root):
            raise ConfigError(
                f"trial {self.trial_id}: report(checkpoint={path!r}) contains the trial's "
                f"scratch space {root}: report a directory of its own"
            )
        target = self._scratch_path("reported")
        # Moving the process's working directory would make it the checkpoint's.
        movable = not (os.path.islink(path) or _inside(root, path) or _inside(path, os.getcwd()))
        if movable:
            mode = stat.S_IMODE(os.stat(path).st_mode)
            try:
                os.rename(path, target)
            except OSError:
                pass  # another filesystem, a mount point...: copy it
            else:
                try:
                    os.mkdir(path, mode)  # the caller may reuse or delete it
                except OSError:
                    pass
                return target
        shutil.copytree(path, target)
        return target

    def _scratch_root(self) -> str:
        root = getattr(self, "_trialflow_scratch", None)
        if root is None:  # not hosted by a TrialActor (unit tests)
            if self._own_scratch is None:
                self._own_scratch = tempfile.mkdtemp(prefix="trialflow-function-")
            root = self._own_scratch
        return os.path.abspath(str(root))

    def _scratch_path(self, kind: str) -> str:
        """A path in scratch not used before (its parent exists)."""
        root = self._scratch_root()
        os.makedirs(root, exist_ok=True)
        return os.path.join(root, f"function-{kind}-{next(self._names)}")

    def _drop_staged(self) -> None:
        self._drop(self._staged)
        self._staged = None

    @staticmethod
    def _drop(path: str | None) -> None:
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


def _inside(parent: str, path: str) -> bool:
    """Whether ``path`` is ``parent`` or lies under it."""
    parent, path = os.path.realpath(parent), os.path.realpath(path)
    return os.path.commonpath([parent, path]) == parent


class _Run:
    """One execution of the user's function, in its own thread, and the two queues that
    hand control between that thread and the actor's."""

    def __init__(self, owner: FunctionTrainable, checkpoint: str | None) -> None:
        self.owner = owner
        self.trial_id = owner.trial_id
        self.checkpoint = checkpoint
        self.to_fn: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.from_fn: queue.SimpleQueue[tuple[str, Any, str | None]] = queue.SimpleQueue()
        self.cancelled = False  # being unwound: every report() raises _Unwind
        #: It ran on past its last report (``After.RUN_ON``): its next report waits for
        #: the call that asks for it before taking anything.
        self.ahead = False
        self.finished = False  # its thread returned or raised, and step() saw it
        self.reports = 0
        self.at_end: list[Callable[[RunOutcome], None]] = []  # see on_run_end
        #: Set by ``step_batch`` for the current call: reports go to it, in this thread,
        #: until it says stop; None: each report goes to ``step`` through the queue.
        self.on_report: OnReport | None = None
        self._mark = time.perf_counter()  # when the function went on (for ``took``)
        function, config = type(owner).function, dict(owner.config)
        self.thread = threading.Thread(
            target=self._main,
            args=(function, config),
            name=f"trialflow-function-{self.trial_id}",
            daemon=True,
        )

    def report(self, metrics: Any, checkpoint: str | os.PathLike[str] | None) -> None:
        if self.cancelled:
            raise _Unwind
        if not isinstance(metrics, Mapping):
            raise TypeError(
                f"trial {self.trial_id}: report() takes a dict of metrics, got "
                f"{type(metrics).__name__}"
            )
        result = dict(metrics)
        reserved = [k for k in (REPORTED_CHECKPOINT, FUNCTION_DONE) if k in result]
        if reserved:
            raise ConfigError(f"trial {self.trial_id}: report(): {reserved[0]!r} is reserved")
        if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)):
            raise TypeError(
                f"trial {self.trial_id}: report(checkpoint=...) takes a directory path, "
                f"got {type(checkpoint).__name__}"
            )
        took = time.perf_counter() - self._mark  # its step, not the wait for a call
        if self.ahead:  # it ran on: this result is delivered only when a call asks for it
            self.ahead = False
            self._wait_for_call()
        staged = None if checkpoint is None else self.owner.stage(checkpoint)
        self.reports += 1
        on_report = self.on_report
        after = After.WAIT
        if on_report is None:
            self.from_fn.put(("report", result, staged))
        else:
            try:
                after = on_report(self.owner._take(result, staged), took)
            except Exception as err:  # the caller's, not the function's: end the call
                self.from_fn.put(("batch-error", err, None))
                after = After.WAIT
            else:
                if after is not After.MORE:
                    self.from_fn.put(("batch-end", None, None))
        if after is After.RUN_ON:
            self.ahead = True
        elif after is not After.MORE:
            self._wait_for_call()
        self._mark = time.perf_counter()

    def _wait_for_call(self) -> None:
        """Wait for the next call to let the function go on (or to unwind it)."""
        if self.to_fn.get() == _UNWIND:
            raise _Unwind

    def _main(self, function: Callable[[dict[str, Any]], Any], config: dict[str, Any]) -> None:
        _current.set(self)
        self._mark = time.perf_counter()
        done = False  # it returned (a returned dict still waits at its report)
        try:
            returned = function(config)
            if inspect.isawaitable(returned):
                returned = asyncio.run(_awaited(returned))
            done = True
            if isinstance(returned, Mapping):
                self.report(returned, None)  # the last result: judged like any other
            elif returned is not None:
                log.warning(
                    "trial %s: its function returned a %s, not a dict of metrics: ignored "
                    "(return a dict, or report() it, to record it as a result)",
                    self.trial_id,
                    type(returned).__name__,
                )
        except _Unwind:
            self._ended("finished" if done else "stopped")
            return
        except BaseException as err:
            if self.cancelled:  # raised while unwinding: nobody waits for it
                log.debug("trial %s: its function raised while unwound: %r", self.trial_id, err)
                self._ended("stopped")
                return
            self._ended("failed")
            self.from_fn.put(("error", err, None))
        else:
            self._ended("finished")
            if not self.cancelled:
                self.from_fn.put(("done", None, None))

    def _ended(self, outcome: RunOutcome) -> None:
        """Run :func:`on_run_end`'s callbacks, newest first."""
        while self.at_end:
            callback = self.at_end.pop()
            try:
                callback(outcome)
            except Exception:
                log.warning(
                    "trial %s: a callback for the end of its function's run raised",
                    self.trial_id,
                    exc_info=True,
                )


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
