"""One back-off rule for the orchestrator's retries: exponential, capped, and with
optional jitter so that many clients failing together do not retry together.

Used by the state machine (restart after a failure: no jitter, so it stays testable
by hand), garbage collection and uploads (half jitter). The storage layer, a library
of its own that imports nothing of the orchestrator, keeps the same rule with full
jitter in ``storage.retry.RetryPolicy``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Backoff:
    """``delay(n)`` before retry ``n`` (1, 2, ...): ``base * 2**(n-1)``, at most ``cap``;
    ``jitter="half"`` draws it from ``[delay/2, 1.5 delay)``, ``"full"`` from
    ``[0, delay)``."""

    base: float
    cap: float
    jitter: Literal["none", "half", "full"] = "none"

    def delay(self, attempt: int) -> float:
        if self.base <= 0 or attempt < 1:
            return 0.0
        delay = min(self.cap, self.base * 2.0 ** (attempt - 1))
        if self.jitter == "half":
            return delay * (0.5 + random.random())
        if self.jitter == "full":
            return random.uniform(0.0, delay)
        return float(delay)
