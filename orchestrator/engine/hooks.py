"""The async hooks API.

A hook is any object with some of the methods in :data:`HOOK_NAMES`, each a plain or an
``async def`` method. Hooks never run inside the dispatcher: each trial has its own
ordered queue, drained by a short-lived task, so

* one trial's hooks see its events in order, while different trials' hooks interleave;
* a slow hook delays only later hooks of the same trial, and is logged when it passes
  ``slow_after`` seconds; a plain (sync) hook runs in a worker thread, so even a
  blocking one never stalls the loop;
* the runner counts each trial's results its queued ``on_trial_result`` hooks have
  processed and tells a watcher (:meth:`HookRunner.watch_results`): that is how a trial
  is kept from training far past what its hooks have seen (``WaitForHooks``);
* a hook that raises is logged with the trial id, and the experiment goes on (the
  first failure of a kind in full, its repeats one line each: :mod:`.hook_failures`);
* closing waits a short grace for a plain hook still running, then abandons it with a
  line naming it (its thread cannot be stopped: :mod:`.hook_threads`);
* a hook may ``await trial.restore(...)`` or ``trial.pause()``: it waits on the loop,
  which keeps running, and the hook events those produce queue up behind it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import inspect
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from orchestrator.engine.hook_failures import FailureLog, hook_label
from orchestrator.engine.hook_threads import HookThreads

log = logging.getLogger("orchestrator.engine.hooks")

HOOK_NAMES = (
    "on_trial_start",
    "on_trial_result",
    "on_checkpoint",
    "on_trial_restore",
    "on_trial_error",
    "on_trial_complete",
    "on_experiment_end",
)

#: Each hook's arguments, as the runner passes them (checked when hooks are given).
HOOK_SIGNATURES = {
    "on_trial_start": ("trial",),
    "on_trial_result": ("trial", "result"),
    "on_checkpoint": ("trial", "checkpoint"),
    "on_trial_restore": ("trial", "checkpoint"),
    "on_trial_error": ("trial", "error"),
    "on_trial_complete": ("trial",),
    "on_experiment_end": ("trials",),
}

_SYNC_HOOK_THREADS = 8
#: Queued events of one trial whose hooks are all plain (sync) methods run in one trip
#: to a worker thread, at most this many: a trip per call cost a trivial sync result
#: hook ~135 us of the driver's CPU per result.
_SYNC_BATCH = 256
#: Seconds closing waits for a plain hook that is still running before it abandons it.
ABANDON_AFTER_S = 5.0


def check_hooks(hooks: Iterable[Any]) -> None:
    """Refuse a hook method that cannot take the arguments it will be called with, now,
    instead of a traceback logged at every call."""
    from orchestrator.errors import ConfigError

    for hook in hooks:
        for name, params in HOOK_SIGNATURES.items():
            method = getattr(hook, name, None)
            if method is None:
                continue
            expected = f"{name}({', '.join(params)})"
            if not callable(method):
                raise ConfigError(f"hook {type(hook).__name__}.{name} must be a method {expected}")
            try:
                signature = inspect.signature(method)
            except (TypeError, ValueError):  # a builtin or C callable: cannot tell
                continue
            try:
                signature.bind(*params)
            except TypeError:
                raise ConfigError(
                    f"hook {hook_label(method)} takes {signature}, but it is called as "
                    f"{expected}; define it as `def {expected}:` (or async def)"
                ) from None


@dataclass(frozen=True)
class HookStatistics:
    calls: int
    failures: int
    slow_calls: int
    backlog: int


class HookRunner:
    """Runs the hooks of one experiment, per trial in order, never on the loop's path."""

    def __init__(self, hooks: Iterable[Any] = (), *, slow_after: float = 10.0) -> None:
        self._hooks = list(hooks)
        self._slow_after = slow_after
        # A hook object may declare some of its methods *inline* (``inline_hooks``, a
        # set of names): they promise never to block or suspend (they only record, like
        # the built-in loggers and progress display), so they are called at once, in the
        # loop, without a queue, a task or a watchdog: the per-result cost of logging.
        self._inline: dict[str, list[Any]] = {name: [] for name in HOOK_NAMES}
        # The queued ones, each with whether it is ``async def`` (asked once, not per call).
        self._callbacks: dict[str, list[tuple[Any, bool]]] = {name: [] for name in HOOK_NAMES}
        for hook in self._hooks:
            inline = frozenset(getattr(hook, "inline_hooks", ()) or ())
            for name in HOOK_NAMES:
                method = getattr(hook, name, None)
                if not callable(method):
                    continue
                if name in inline:
                    self._inline[name].append(method)
                else:
                    self._callbacks[name].append((method, inspect.iscoroutinefunction(method)))
        # Hook names whose queued callbacks are all plain methods: batched into a thread.
        self._all_sync = {
            name: bool(calls) and not any(is_async for _, is_async in calls)
            for name, calls in self._callbacks.items()
        }
        self._queues: dict[str, collections.deque[tuple[str, Any, tuple[Any, ...]]]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._executor: HookThreads | None = None
        # Plain hook calls sent to a thread: the watch of their queue, and the callback
        # when the call is one hook (a batch marks its calls on the watch).
        self._in_threads: dict[Future[Any], tuple[_Watchdog, Any]] = {}
        self._closing = False
        self._failure_log = FailureLog(log)
        self._calls = self._failures = self._slow = 0
        self._results_seen: dict[str, int] = {}
        self._on_results_seen: Callable[[str, int], None] | None = None

    def wants(self, name: str) -> bool:
        return bool(self._callbacks.get(name)) or bool(self._inline.get(name))

    def emit(self, key: str, name: str, subject: Any, *args: Any) -> None:
        """Queue hook ``name(subject, *args)`` behind ``key``'s earlier hooks. Never blocks."""
        for callback in self._inline.get(name, ()):
            self._call_inline(callback, key, subject, args)
        if not self._callbacks.get(name):
            return
        queue = self._queues.setdefault(key, collections.deque())
        queue.append((name, subject, args))
        if key not in self._workers:
            self._idle.clear()
            self._workers[key] = asyncio.get_running_loop().create_task(
                self._drain(key), name=f"hooks:{key}"
            )

    def queues(self, name: str) -> bool:
        """Hook ``name`` has queued (not inline) callbacks: a user's hook."""
        return bool(self._callbacks.get(name))

    def watch_results(self, callback: Callable[[str, int], None]) -> None:
        """Call ``callback(key, seen)`` each time the queued ``on_trial_result`` hooks
        have processed another result of ``key`` (``seen`` of them so far)."""
        self._on_results_seen = callback

    def results_seen(self, key: str) -> int:
        return self._results_seen.get(key, 0)

    def count_results_from(self, key: str, seen: int) -> None:
        """Count ``key``'s processed results from ``seen`` on (a trial run before). None
        seen is no entry: most trials' hooks never queue (issue 36: an entry a trial)."""
        if seen:
            self._results_seen[key] = seen
        else:
            self._results_seen.pop(key, None)

    def is_draining(self, key: str) -> bool:
        """The caller runs inside one of ``key``'s queued hooks."""
        worker = self._workers.get(key)
        return worker is not None and asyncio.current_task() is worker

    async def wait_idle(self) -> None:
        """Return once every queued hook has run."""
        await self._idle.wait()

    async def call_now(self, name: str, subject: Any, *args: Any) -> None:
        """Run hook ``name`` for the experiment itself (e.g. ``on_experiment_end``)."""
        callbacks = [
            *((c, inspect.iscoroutinefunction(c)) for c in self._inline.get(name, ())),
            *self._callbacks.get(name, ()),
        ]
        watch = _Watchdog(self, "experiment")
        try:
            for callback, is_async in callbacks:
                await self._invoke(callback, is_async, watch, subject, args)
        finally:
            watch.close()

    def _call_inline(self, callback: Any, key: str, subject: Any, args: Sequence[Any]) -> None:
        self._calls += 1
        try:
            result = callback(subject, *args)
            if inspect.iscoroutine(result):
                try:
                    result.send(None)
                except StopIteration:
                    return
                result.close()
                raise RuntimeError("an inline hook awaited something; it must not suspend")
        except Exception as err:
            self._failures += 1
            self._failure_log.failed(callback, key, err)

    def statistics(self) -> HookStatistics:
        backlog = sum(len(q) for q in self._queues.values())
        return HookStatistics(self._calls, self._failures, self._slow, backlog)

    async def aclose(self, grace: float = ABANDON_AFTER_S) -> list[str]:
        """Drop the queued hooks, cancel the running ``async def`` ones, give a plain
        one still running ``grace`` seconds, then abandon it with a line naming it (a
        thread cannot be stopped; it ends with the process, which it no longer holds).
        Returns what was abandoned (``"hook X for <trial>"``)."""
        self._closing = True  # a batch in a thread stops after its current call
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        for task in workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._workers.clear()
        self._queues.clear()
        self._idle.set()
        running = [asyncio.wrap_future(f) for f in self._in_threads if not f.done()]
        if running:
            await asyncio.wait(running, timeout=grace)
            for waited in running:  # its thread's answer, if it ever comes, is dropped
                waited.cancel()
        abandoned = []
        for future, (watch, callback) in self._in_threads.items():
            hook = callback if callback is not None else watch.callback
            if future.done() or hook is None:
                continue
            what = f"hook {hook_label(hook)} for {watch.key}"
            log.warning(
                "%s is still running; abandoned (a running thread cannot be stopped: it "
                "ends with the process, which does not wait for it)",
                what,
            )
            abandoned.append(what)
        self._in_threads.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        return abandoned

    async def _drain(self, key: str) -> None:
        queue = self._queues[key]
        watch = _Watchdog(self, key)
        try:
            while queue:
                if self._all_sync[queue[0][0]]:
                    batch = [queue.popleft()]
                    while queue and self._all_sync[queue[0][0]] and len(batch) < _SYNC_BATCH:
                        batch.append(queue.popleft())
                    await self._invoke_sync_batch(batch, watch)
                    names = [name for name, _, _ in batch]
                else:
                    name, subject, args = queue.popleft()
                    for callback, is_async in self._callbacks[name]:
                        await self._invoke(callback, is_async, watch, subject, args)
                    names = [name]
                results = names.count("on_trial_result")
                if results:
                    seen = self._results_seen[key] = self._results_seen.get(key, 0) + results
                    if self._on_results_seen is not None:
                        self._on_results_seen(key, seen)
        finally:
            watch.close()
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)
            if not self._workers:
                self._idle.set()

    async def _invoke_sync_batch(
        self, batch: list[tuple[str, Any, tuple[Any, ...]]], watch: _Watchdog
    ) -> None:
        """Run plain hooks of consecutive events in order, in one worker-thread trip."""
        loop = asyncio.get_running_loop()
        watch.arm()
        future = self._thread_pool().submit(self._call_sync_batch, batch, watch, loop)
        calls, failures = await self._in_thread(future, watch, None)
        self._calls += calls
        self._failures += failures

    async def _in_thread(self, future: Future[Any], watch: _Watchdog, callback: Any) -> Any:
        """Await a call sent to a hook thread; one cancelled here (the runner closing)
        stays known until :meth:`aclose` has waited for it or abandoned it."""
        self._in_threads[future] = (watch, callback)
        try:
            return await asyncio.wrap_future(future)
        finally:
            if future.done():
                del self._in_threads[future]

    def _call_sync_batch(
        self,
        batch: list[tuple[str, Any, tuple[Any, ...]]],
        watch: _Watchdog,
        loop: asyncio.AbstractEventLoop,
    ) -> tuple[int, int]:
        calls = failures = 0
        for name, subject, args in batch:
            if self._closing:
                break
            for callback, _ in self._callbacks[name]:
                calls += 1
                watch.mark(callback)
                try:
                    result = callback(subject, *args)
                    if inspect.isawaitable(result):  # a plain method that returned one
                        asyncio.run_coroutine_threadsafe(_awaited(result), loop).result()
                except Exception as err:
                    failures += 1
                    self._failure_log.failed(callback, watch.key, err)
                finally:
                    watch.end()
        return calls, failures

    async def _invoke(
        self, callback: Any, is_async: bool, watch: _Watchdog, subject: Any, args: Sequence[Any]
    ) -> None:
        self._calls += 1
        watch.begin(callback)
        try:
            if is_async:
                await callback(subject, *args)
            else:
                future = self._thread_pool().submit(functools.partial(callback, subject, *args))
                result = await self._in_thread(future, watch, callback)
                if inspect.isawaitable(result):
                    await result
        except asyncio.CancelledError:
            raise
        except Exception as err:
            self._failures += 1
            self._failure_log.failed(callback, watch.key, err)
        finally:
            watch.end()

    def _report_slow(self, callback: Any, key: str) -> None:
        self._slow += 1
        log.warning(
            "hook %s for %s has run for more than %.1f s; later hooks of %s wait for it, "
            "and so does its training once it is two calls ahead of its result hooks "
            "(the loop and other trials do not)",
            hook_label(callback),
            key,
            self._slow_after,
            key,
        )

    def _thread_pool(self) -> HookThreads:
        if self._executor is None:
            self._executor = HookThreads(_SYNC_HOOK_THREADS, "hook")
        return self._executor


class _Watchdog:
    """Reports a hook call of one queue (``key``) that runs past ``slow_after`` seconds.

    One timer serves a whole drain of the queue (armed by its first call, looking
    again every ``slow_after`` seconds, or when the call running then would be late,
    until the drain ends): a timer per call (``call_later`` and ``cancel``) cost three
    quarters of a trivial hook's ~10 us per result. A batch of plain hooks marks each
    call from its worker thread (:meth:`mark`); only the loop touches the timer.
    """

    __slots__ = ("runner", "key", "loop", "callback", "started", "reported", "timer")

    def __init__(self, runner: HookRunner, key: str) -> None:
        self.runner = runner
        self.key = key
        self.loop = asyncio.get_running_loop()
        self.callback: Any = None  # the call running now, if any
        self.started = 0.0  # time.monotonic() when it began
        self.reported = False
        self.timer: asyncio.TimerHandle | None = None

    def begin(self, callback: Any) -> None:
        self.mark(callback)
        self.arm()

    def mark(self, callback: Any) -> None:
        """``callback`` begins now (from the loop or a worker thread: ``callback`` is
        written last, so the loop never pairs it with the previous call's start)."""
        self.started = time.monotonic()
        self.reported = False
        self.callback = callback

    def arm(self) -> None:
        if self.timer is None:
            self.timer = self.loop.call_later(self.runner._slow_after, self._check)

    def end(self) -> None:
        self.callback = None

    def close(self) -> None:
        """Stop watching. ``callback`` stays as the calls set it: a plain hook still
        running in its thread once the runner closes is named from it."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _check(self) -> None:
        """Report the call running now if it is late; look again while the drain lasts."""
        slow_after = self.runner._slow_after
        delay = max(slow_after, 0.1)
        callback = self.callback
        if callback is not None and not self.reported:
            left = self.started + slow_after - time.monotonic()
            if left > 0:  # a later call than the one the timer was armed for
                delay = left
            else:
                self.reported = True
                self.runner._report_slow(callback, self.key)
        self.timer = self.loop.call_later(delay, self._check)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
