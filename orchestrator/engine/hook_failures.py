"""How a failing hook is reported: its first failure of a kind in full, the repeats in
one line each.

A hook that raises on every call (a typo in a user's callback) used to print its whole
traceback at every result: 640 lines for 60 results, burying everything else. The rule:
the first failure of one hook (one method of one hook object) with one exception type
is logged with its traceback; each later failure of that hook with that type is one
line naming the trial, the count so far and the exception's message. Another exception
type from the same hook is news: its first is shown in full too. The count is across
trials: the same bug failing for every trial is one traceback.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

__all__ = ["FailureLog", "hook_label"]


class FailureLog:
    """Logs hook failures by the module's rule. Thread-safe: plain hooks fail in the
    hook runner's worker threads."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, str, type[BaseException]], int] = {}

    def failed(self, callback: Any, key: str, err: BaseException) -> None:
        """``callback`` raised ``err`` for ``key`` (call from its ``except`` block)."""
        owner = getattr(callback, "__self__", callback)
        label = hook_label(callback)
        rule = (id(owner), label, type(err))
        with self._lock:
            count = self._counts[rule] = self._counts.get(rule, 0) + 1
        if count == 1:
            self._log.error(
                "hook %s failed for %s; the experiment goes on (its repeats of this "
                "error are one line each)",
                label,
                key,
                exc_info=err,
            )
            return
        message = str(err).splitlines()[0] if str(err) else ""
        self._log.error(
            "hook %s failed again for %s (%d times so far): %s%s",
            label,
            key,
            count,
            type(err).__name__,
            f": {message}" if message else "",
        )


def hook_label(callback: Any) -> str:
    """``Owner.method`` for a bound method, else the callable's name."""
    owner = getattr(callback, "__self__", None)
    prefix = type(owner).__name__ + "." if owner is not None else ""
    return prefix + getattr(callback, "__name__", repr(callback))
