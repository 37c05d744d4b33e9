"""Make SIGINT reach this process, whatever it inherited.

A process started from one of Ray's (which block SIGINT in what they spawn) or with
SIGINT ignored (a shell's background job) would otherwise run on through Ctrl-C, since
blocked and ignored signals survive exec. The handler is restored before the signal is
unblocked: a Ctrl-C that arrived while it was blocked is pending, and unblocking it
while it is still ignored would discard it. Light on purpose (no imports of ours):
``python -m orchestrator`` calls it before it loads anything else.
"""

from __future__ import annotations

import signal
import threading

__all__ = ["answer_ctrl_c"]


def answer_ctrl_c() -> None:
    """Restore Python's Ctrl-C (``KeyboardInterrupt``) in the main thread; a Ctrl-C
    that was pending is raised here. Does nothing in other threads."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
