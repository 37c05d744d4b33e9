"""The rest of Ray Tune's domains: normal draws, log-scaled ints, and quantized variants.

``qloguniform``, ``randn``, ``qrandn``, ``qrandint``, ``lograndint`` and ``qlograndint``
with Ray Tune's semantics (which bounds are included, how values are quantized), so a
search space written for Tune means the same here. Like the domains of
:mod:`orchestrator.search.domains` they check their arguments when a space takes them
and draw from the ``random.Random`` they are given.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from orchestrator.search.domains import (
    Domain,
    QUniform,
    _bounds_problem,
    _is_int,
    _is_real,
)

__all__ = [
    "LogRandInt",
    "QLogRandInt",
    "QLogUniform",
    "QRandInt",
    "QRandN",
    "RandN",
    "lograndint",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "randn",
]


class QLogUniform(QUniform):
    """A multiple of ``q`` in ``[low, high]`` (``low > 0``) drawn log-uniformly, then
    rounded to ``q`` (Ray Tune's ``qloguniform``)."""

    kind = "qloguniform"

    def _problem(self) -> str | None:
        problem = super()._problem()
        if problem is None and self.lowest <= 0:
            return (
                f"qloguniform needs a multiple of q above 0 within the bounds, got "
                f"low={self.low!r} q={self.q!r}; use qrandn or quniform for 0"
            )
        return problem

    def _draw(self, rng: random.Random) -> float:
        low, high = math.log(self.lowest), math.log(self.highest)
        return self.quantize(math.exp(rng.uniform(low, high)))


def _q_problem(kind: str, q: Any) -> str | None:
    if not _is_real(q) or not math.isfinite(float(q)) or q <= 0:
        return f"{kind} q must be a number > 0, got q={q!r}"
    return None


@dataclass(frozen=True, repr=False)
class RandN(Domain):
    """A float from the normal distribution ``N(mean, sd)``."""

    kind = "randn"
    mean: float = 0.0
    sd: float = 1.0

    def _problem(self) -> str | None:
        if not (_is_real(self.mean) and _is_real(self.sd)):
            return f"{self.kind} takes numbers, got mean={self.mean!r} sd={self.sd!r}"
        if not math.isfinite(float(self.mean)) or not float(self.sd) > 0:
            return f"{self.kind} needs a finite mean and sd > 0, got {self.mean!r}, {self.sd!r}"
        return None

    def _draw(self, rng: random.Random) -> float:
        return rng.gauss(float(self.mean), float(self.sd))

    def _args(self) -> tuple[Any, ...]:
        return (self.mean, self.sd)


@dataclass(frozen=True, repr=False)
class QRandN(RandN):
    """``randn`` rounded to the nearest multiple of ``q``."""

    kind = "qrandn"
    q: float = 1.0

    def _problem(self) -> str | None:
        return super()._problem() or _q_problem(self.kind, self.q)

    def _draw(self, rng: random.Random) -> float:
        return float(round(super()._draw(rng) / self.q) * self.q)

    def _args(self) -> tuple[Any, ...]:
        return (self.mean, self.sd, self.q)


@dataclass(frozen=True, repr=False)
class _IntRange(Domain):
    low: int
    high: int

    def _problem(self) -> str | None:
        if not (_is_int(self.low) and _is_int(self.high)):
            return f"{self.kind} bounds must be ints, got low={self.low!r} high={self.high!r}"
        return _bounds_problem(self.kind, self.low, self.high)

    def _args(self) -> tuple[Any, ...]:
        return (self.low, self.high)


@dataclass(frozen=True, repr=False)
class LogRandInt(_IntRange):
    """An int in ``[low, high)`` (``low > 0``) whose logarithm is uniform: the floor of
    a log-uniform float, as Ray Tune's ``lograndint``."""

    kind = "lograndint"

    def _problem(self) -> str | None:
        problem = super()._problem()
        if problem is None and self.low <= 0:
            return f"lograndint low must be > 0, got low={self.low!r}; use randint for 0"
        return problem

    def _draw(self, rng: random.Random) -> int:
        value = math.floor(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        return min(max(value, self.low), self.high - 1)


@dataclass(frozen=True, repr=False)
class QRandInt(_IntRange):
    """A multiple of ``q`` in ``[low, high]``, both bounds included (Ray Tune's
    ``qrandint``; bounds that are not multiples move inwards)."""

    kind = "qrandint"
    q: int = 1

    def _problem(self) -> str | None:
        problem = super()._problem()
        if problem is not None:
            return problem
        if not _is_int(self.q) or self.q < 1:
            return f"{self.kind} q must be an int >= 1, got q={self.q!r}"
        if self.first > self.last:
            return f"{self.kind} has no multiple of q={self.q} within [{self.low}, {self.high}]"
        return None

    @property
    def first(self) -> int:
        return -(-self.low // self.q)  # ceil

    @property
    def last(self) -> int:
        return self.high // self.q

    def _draw(self, rng: random.Random) -> int:
        return rng.randint(self.first, self.last) * self.q

    def _args(self) -> tuple[Any, ...]:
        return (self.low, self.high, self.q)


@dataclass(frozen=True, repr=False)
class QLogRandInt(QRandInt):
    """A multiple of ``q`` in ``[low, high]`` (``low > 0``) drawn log-uniformly."""

    kind = "qlograndint"

    def _problem(self) -> str | None:
        problem = super()._problem()
        if problem is None and self.first < 1:
            return f"{self.kind} low must be > 0, got low={self.low!r}"
        return problem

    def _draw(self, rng: random.Random) -> int:
        value = math.exp(rng.uniform(math.log(self.first * self.q), math.log(self.last * self.q)))
        return min(max(round(value / self.q), self.first), self.last) * self.q


def qloguniform(low: float, high: float, q: float) -> QLogUniform:
    """A multiple of ``q`` in ``[low, high]`` drawn log-uniformly (``low > 0``)."""
    return QLogUniform(low, high, q)


def randn(mean: float = 0.0, sd: float = 1.0) -> RandN:
    """A float drawn from ``N(mean, sd)``."""
    return RandN(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> QRandN:
    """A float drawn from ``N(mean, sd)``, rounded to a multiple of ``q``."""
    return QRandN(mean, sd, q)


def qrandint(low: int, high: int, q: int = 1) -> QRandInt:
    """An int multiple of ``q`` in ``[low, high]``: ``high`` included."""
    return QRandInt(low, high, q)


def lograndint(low: int, high: int) -> LogRandInt:
    """An int in ``[low, high)`` drawn log-uniformly (``low > 0``)."""
    return LogRandInt(low, high)


def qlograndint(low: int, high: int, q: int) -> QLogRandInt:
    """An int multiple of ``q`` in ``[low, high]`` drawn log-uniformly: ``high`` included."""
    return QLogRandInt(low, high, q)
