"""Ctrl-C and SIGTERM while an ``Orchestrator`` is entered: end cleanly, say how to go on.

Before this, a script's Ctrl-C ended in asyncio's bare ``KeyboardInterrupt`` and
``CancelledError`` tracebacks, and a SIGTERM (a preempted pod) in the stack dump of Ray's
own handler and exit status 134; neither said how to continue. Now the first signal
cancels the task that entered the orchestrator (what ``asyncio.run`` does for Ctrl-C),
the ``async with`` block closes as usual (every actor stopped, the journal's last write
done, so trials that were running restart from their newest checkpoint on resume), one
line on stderr says how to resume, and then:

- after SIGINT, ``KeyboardInterrupt`` (marked as said: :func:`said`): a script's top
  level ends without a traceback and as interrupted (by SIGINT, 130 in a shell), and a
  host that treats Ctrl-C as its own (the CLI, pytest) still does;
- after SIGTERM, ``SystemExit(143)``: the process ends quietly with the shell's status
  for SIGTERM.

A second signal stops waiting for the close.

The signals are taken only in a script: in the main thread, under ``asyncio.run`` (its
SIGINT handler is in place; ``run_sync`` and the CLI run that way too) or with SIGINT
ignored (a shell's background job, where SIGTERM is the way to stop it). SIGINT is
taken only from ``asyncio.run``, never when ignored or from a host's own handler
(IPython's, a user's); SIGTERM only from Python's default or Ray's handler (``ray.init``
installs one, and Ray's core worker a C one that dumps stacks: hence after Ray starts).
The previous handlers are put back on exit.
"""

from __future__ import annotations

import asyncio
import functools
import shlex
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["EXIT_STATUS", "Interrupts", "resume_command", "said"]

#: The shell's convention: 128 + the signal's number.
EXIT_STATUS: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143}


def said(err: BaseException) -> bool:
    """Whether ``err`` is the ``KeyboardInterrupt`` of an orchestrator that closed after
    Ctrl-C and already said how to resume. A plain ``KeyboardInterrupt``, not a
    subclass: Python ends as interrupted (by SIGINT) only for exactly that type."""
    return bool(getattr(err, "_trialflow_said", False))


def resume_command(storage_uri: str) -> str:
    """The command line that continues the experiment at ``storage_uri``."""
    base, _, name = storage_uri.rpartition("/")
    return f"python -m orchestrator resume --storage {shlex.quote(base)} --name {shlex.quote(name)}"


class Interrupts:
    """The signal handlers of one entered orchestrator: :meth:`catch` installs them,
    :meth:`release` puts the previous ones back, :meth:`ending` is what to raise once
    the orchestrator has closed after a signal."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        task: asyncio.Task[Any],
        previous: dict[int, Any],
    ) -> None:
        self._loop = loop
        self._task = task
        self._previous = previous
        self.signum: int | None = None  # the first signal received
        self.closing = False  # the orchestrator is closing: a first signal waits for it
        self.forced = False  # a second signal: the close was cut short

    @classmethod
    def catch(cls) -> Interrupts | None:
        """Take SIGINT and SIGTERM for the current task where they are ours to take
        (see the module's docstring); None when neither is."""
        task = asyncio.current_task()
        if task is None or threading.current_thread() is not threading.main_thread():
            return None
        sigint = signal.getsignal(signal.SIGINT)
        if not _is_asyncio_run(sigint) and sigint is not signal.SIG_IGN:
            return None  # not a script: IPython, a hand-run loop, a user's own handler
        wanted = {
            signal.SIGINT: _is_asyncio_run(sigint),
            signal.SIGTERM: _is_default_or_ray(signal.getsignal(signal.SIGTERM)),
        }
        loop = asyncio.get_running_loop()
        catcher = cls(loop, task, {})
        for signum, take in wanted.items():
            if not take:
                continue
            previous = signal.getsignal(signum)
            try:
                loop.add_signal_handler(signum, catcher._received, signum)
            except (NotImplementedError, RuntimeError, ValueError):  # no signals here
                continue
            catcher._previous[signum] = previous
        return catcher if catcher._previous else None

    def retake(self) -> None:
        """Take the signals again once Ray is up: Ray's core worker installs its own
        SIGTERM handler when it connects (a stack dump on every SIGTERM), over ours."""
        for signum in self._previous:
            try:
                self._loop.add_signal_handler(signum, self._received, signum)
            except (RuntimeError, ValueError):  # the loop is closing: nothing to take
                pass

    def release(self) -> None:
        """Put the handlers back as they were before :meth:`catch`."""
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            try:
                self._loop.remove_signal_handler(signum)
                signal.signal(signum, handler)
            except (RuntimeError, ValueError):  # the loop is closing: nothing to undo
                pass

    def ours(self, exc: BaseException | None) -> bool:
        """Whether ``exc``, ending the ``async with`` block, is the cancellation a signal
        caused (then it is forgotten: the close that follows must not be cut short)."""
        if self.signum is None or not isinstance(exc, asyncio.CancelledError):
            return False
        uncancel = getattr(self._task, "uncancel", None)  # Python >= 3.11
        if uncancel is not None and not self.forced:
            uncancel()
        return True

    def ending(
        self, storage_uri: str, name: str, abandoned: Sequence[str] = ()
    ) -> BaseException | None:
        """After the close: None when no signal came; else, having said how to resume,
        what to raise: ``KeyboardInterrupt`` after SIGINT, ``SystemExit(143)`` after
        SIGTERM. "Cleanly" is said only when it is true: not after a second signal cut
        the close short, nor when a hook still running was ``abandoned``."""
        if self.signum is None:
            return None
        if self.forced:
            how = (
                "stopped without waiting for a clean shutdown (the journal may miss its "
                "last second)"
            )
        elif abandoned:
            how = (
                f"stopped (actors stopped, journal saved) but not cleanly: {abandoned[0]}"
                + (f" and {len(abandoned) - 1} more" if len(abandoned) > 1 else "")
                + " was still running and is abandoned"
            )
        else:
            how = "stopped cleanly (actors stopped, journal saved)"
        print(
            f"trialflow: {signal.Signals(self.signum).name}: experiment {name!r} {how}; "
            f"continue it with: {resume_command(storage_uri)}, or "
            "Orchestrator(..., resume=True)",
            file=sys.stderr,
            flush=True,
        )
        return self._raised()

    def ending_at_start(self, exc: BaseException, name: str) -> BaseException | None:
        """After a signal cut the start short (``exc`` ended it): having said so, what to
        raise, as :meth:`ending`; None when ``exc`` is not the signal's doing. Nothing
        ran, so there is nothing to continue: the script is simply run again."""
        if not self.ours(exc):
            return None
        assert self.signum is not None
        print(
            f"trialflow: {signal.Signals(self.signum).name}: experiment {name!r} stopped "
            "while it was starting (Ray shut down, nothing ran); run it again to start it",
            file=sys.stderr,
            flush=True,
        )
        return self._raised()

    def _raised(self) -> BaseException:
        assert self.signum is not None
        if self.signum == signal.SIGINT:
            interrupt = KeyboardInterrupt()
            interrupt._trialflow_said = True  # type: ignore[attr-defined]
            _quiet_at_top_level()
            return interrupt
        return SystemExit(EXIT_STATUS[self.signum])

    def _received(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
            if not self.closing:
                self._task.cancel()
            return
        if self.forced:
            return
        self.forced = True
        print(
            f"trialflow: {signal.Signals(signum).name} again: not waiting for the clean shutdown",
            file=sys.stderr,
            flush=True,
        )
        self._task.cancel()


def _quiet_at_top_level() -> None:
    """Let our ``KeyboardInterrupt`` (:func:`said`) end the process without a traceback
    when it reaches the interpreter's top level (the line before it said what
    happened); Python then exits as interrupted (by SIGINT: 130 in a shell). Any other
    exception is shown as before."""
    shown = sys.excepthook
    if getattr(shown, "_trialflow_quiet", False):
        return

    def excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if not said(value):
            shown(kind, value, tb)

    excepthook._trialflow_quiet = True  # type: ignore[attr-defined]
    sys.excepthook = excepthook


def _is_asyncio_run(handler: Any) -> bool:
    """Whether ``handler`` is the SIGINT handler ``asyncio.run`` installs (Python >= 3.11:
    a partial of its runner's ``_on_sigint``)."""
    runner = getattr(asyncio, "Runner", None)
    if runner is None or not isinstance(handler, functools.partial):
        return False
    return isinstance(getattr(handler.func, "__self__", None), runner)


def _is_default_or_ray(handler: Any) -> bool:
    if handler is signal.SIG_DFL or handler is signal.default_int_handler:
        return True
    return str(getattr(handler, "__module__", "") or "").startswith("ray.")
