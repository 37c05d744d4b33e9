"""Bounded retries with full-jitter exponential backoff.

Drivers disable their SDK's own retry loops and funnel every request through
:func:`retrying`, so there is one policy, one place that logs retries, and one bound on
how long a flaky endpoint can stall a caller. Only :class:`TransientError` is retried;
everything else (missing keys, permissions, bad input) fails at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from .errors import TransientError

__all__ = ["Call", "RetryPolicy", "retrying"]

log = logging.getLogger("trialflow.storage")

T = TypeVar("T")


class Call(Protocol):
    """A driver's way to run one request: :func:`retrying` around its mapping of SDK
    errors to ours, which name ``key`` and ``what`` was being done. Drivers hand it to
    the helper modules that build requests for them."""

    def __call__(
        self, key: str | None, what: str, fn: Callable[[], Awaitable[T]]
    ) -> Awaitable[T]: ...


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` counts the first try; delays grow as ``base_delay * 2**n`` up to
    ``max_delay`` and each is drawn uniformly from ``[0, that]`` (full jitter), so
    many clients that failed together do not retry together."""

    attempts: int = 6
    base_delay: float = 0.1
    max_delay: float = 5.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be >= 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("RetryPolicy delays must be >= 0")

    def delay(self, retry_number: int) -> float:
        cap = min(self.max_delay, self.base_delay * (2**retry_number))
        return random.uniform(0.0, cap)


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str = "request",
    on_retry: Callable[[], Awaitable[None]] | None = None,
    quiet: bool = False,
) -> T:
    """Await ``attempt()`` until it succeeds, raises a non-transient error, or the policy's
    attempts are spent (then the last ``TransientError`` propagates).

    ``on_retry`` runs before each retry (e.g. to rewind a stream). Each retry is logged
    as a warning, or with ``quiet`` at INFO: for a caller whose own error, should all
    attempts fail, says everything (a warning per attempt would only repeat it)."""
    for n in range(policy.attempts):
        try:
            return await attempt()
        except TransientError as err:
            if n + 1 >= policy.attempts:
                raise TransientError(
                    f"{err.reason} (gave up after {policy.attempts} attempts)",
                    uri=err.uri,
                    key=err.key,
                ) from err
            pause = policy.delay(n)
            log.log(
                logging.INFO if quiet else logging.WARNING,
                "storage %s failed (%s); retry %d in %.2fs",
                what,
                err,
                n + 1,
                pause,
            )
            await asyncio.sleep(pause)
            if on_retry is not None:
                await on_retry()
    raise AssertionError("unreachable")  # pragma: no cover
