"""What a search-space key may take: the domains ``choice``, ``uniform``, ``grid``...

A domain checks its arguments when it is built but only *reports* a problem when a
:class:`~orchestrator.search.space.SearchSpace` takes it (or it is sampled): a domain
does not know the key it is written under, and an error that names the key is the one
a user can act on in a space of fifty keys.
"""

from __future__ import annotations

import abc
import copy
import decimal
import inspect
import math
import numbers
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from orchestrator.errors import ConfigError

# How far off a multiple of q a float bound may be and still count as one: 0.7 / 0.1 is
# 6.999999999999999, and 0.7 must stay a valid upper bound for quniform(0.1, 0.7, 0.1).
_GRID_TOLERANCE = 1e-9


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _bounds_problem(kind: str, low: Any, high: Any) -> str | None:
    if not (_is_real(low) and _is_real(high)):
        return f"{kind} bounds must be numbers, got low={low!r} high={high!r}"
    if not (math.isfinite(float(low)) and math.isfinite(float(high))):
        return f"{kind} bounds must be finite, got low={low!r} high={high!r}"
    if not float(low) < float(high):
        return f"{kind} low must be < high, got low={low!r} high={high!r}; swap them"
    return None


def _values_problem(kind: str, values: object) -> str | None:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        return f"{kind} takes a list of values, got {type(values).__name__}"
    if not values:
        return f"{kind} needs at least one value, got an empty list"
    for index, value in enumerate(values):
        if isinstance(value, Domain):
            return f"{kind} values must be constants, got {value!r} at index {index}"
    return None


def _as_float(value: Any) -> Any:
    return float(value) if _is_real(value) else value


class Domain(abc.ABC):
    """A set of values for one key of a search space, and how to draw from it."""

    kind: ClassVar[str]  # the name of the function that builds it, and of its JSON form

    @property
    def problem(self) -> str | None:
        """What is wrong with the arguments (without the key), or ``None``."""
        return self._problem()

    def sample(self, rng: random.Random) -> Any:
        problem = self._problem()
        if problem is not None:
            raise ConfigError(problem)
        return self._draw(rng)

    def to_json(self) -> dict[str, Any]:
        """The domain in the CLI's JSON form (see ``space_from_json``)."""
        return {self.kind: list(self._args())}

    def __repr__(self) -> str:
        return f"{self.kind}({', '.join(repr(arg) for arg in self._args())})"

    @abc.abstractmethod
    def _problem(self) -> str | None: ...

    @abc.abstractmethod
    def _draw(self, rng: random.Random) -> Any: ...

    @abc.abstractmethod
    def _args(self) -> tuple[Any, ...]: ...


@dataclass(frozen=True, repr=False)
class _Values(Domain):
    values: Sequence[Any]

    def __post_init__(self) -> None:
        if _values_problem(self.kind, self.values) is None:
            object.__setattr__(self, "values", tuple(self.values))

    def _problem(self) -> str | None:
        return _values_problem(self.kind, self.values)

    def _args(self) -> tuple[Any, ...]:
        return (list(self.values),)

    def to_json(self) -> dict[str, Any]:
        return {self.kind: list(self.values)}


class Choice(_Values):
    """One of ``values``, each equally likely."""

    kind = "choice"

    def _draw(self, rng: random.Random) -> Any:
        # A copy: a trial that mutates its list-valued choice must not change the domain.
        return copy.deepcopy(rng.choice(self.values))


class Grid(_Values):
    """Every one of ``values``, in turn: the searcher expands it into one trial per value."""

    kind = "grid"

    def _draw(self, rng: random.Random) -> Any:
        raise ConfigError(
            "grid(...) is expanded by the searcher into one trial per value, not sampled; "
            "use choice(...) to sample one value"
        )


@dataclass(frozen=True, repr=False)
class _Interval(Domain):
    low: float
    high: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "low", _as_float(self.low))
        object.__setattr__(self, "high", _as_float(self.high))

    def _problem(self) -> str | None:
        return _bounds_problem(self.kind, self.low, self.high)

    def _args(self) -> tuple[Any, ...]:
        return (self.low, self.high)


class Uniform(_Interval):
    """A float uniform in ``[low, high]``."""

    kind = "uniform"

    def _draw(self, rng: random.Random) -> float:
        return rng.uniform(self.low, self.high)


class LogUniform(_Interval):
    """A float whose logarithm is uniform: each order of magnitude is equally likely."""

    kind = "loguniform"

    def _problem(self) -> str | None:
        problem = super()._problem()
        if problem is None and self.low <= 0:
            return f"loguniform low must be > 0, got low={self.low!r}; use uniform for 0"
        return problem

    def _draw(self, rng: random.Random) -> float:
        value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return min(max(value, self.low), self.high)  # exp(log(high)) may round past high


@dataclass(frozen=True, repr=False)
class QUniform(_Interval):
    """A multiple of ``q`` in ``[low, high]``, drawn uniformly then rounded (Ray Tune's way).

    Bounds that are not multiples of ``q`` are moved inwards to the nearest multiple, so
    every value is both a multiple of ``q`` and within the bounds; the two extreme
    multiples are half as likely as the others. Values are floats (use ``randint`` for
    ints) rounded to ``q``'s decimals, so ``quniform(0, 1, 0.1)`` gives ``0.3``, not
    ``0.30000000000000004``.
    """

    kind = "quniform"
    q: float

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "q", _as_float(self.q))

    def _problem(self) -> str | None:
        problem = super()._problem()
        if problem is not None:
            return problem
        if not _is_real(self.q) or not math.isfinite(self.q) or self.q <= 0:
            return f"quniform q must be a number > 0, got q={self.q!r}"
        if self._first_index() > self._last_index():
            return (
                f"quniform has no multiple of q={self.q!r} within [{self.low!r}, {self.high!r}];"
                " use a smaller q"
            )
        return None

    def _args(self) -> tuple[Any, ...]:
        return (self.low, self.high, self.q)

    def _index(self, bound: float, rounding: Callable[[float], int]) -> int:
        ratio = bound / self.q
        nearest = round(ratio)
        close = abs(ratio - nearest) <= _GRID_TOLERANCE * max(1.0, abs(ratio))
        return nearest if close else rounding(ratio)

    def _first_index(self) -> int:
        return self._index(self.low, math.ceil)

    def _last_index(self) -> int:
        return self._index(self.high, math.floor)

    def _value(self, index: int) -> float:
        exponent = decimal.Decimal(repr(self.q)).normalize().as_tuple().exponent
        digits = max(0, -exponent) if isinstance(exponent, int) else 0
        return round(index * self.q, digits)

    @property
    def lowest(self) -> float:
        """The smallest value this domain gives: the first multiple of q at or above low."""
        return self._value(self._first_index())

    @property
    def highest(self) -> float:
        """The largest value this domain gives: the last multiple of q at or below high."""
        return self._value(self._last_index())

    def quantize(self, value: float) -> float:
        """``value`` rounded to the nearest multiple of q, kept within the bounds."""
        index = min(max(round(value / self.q), self._first_index()), self._last_index())
        return self._value(index)

    def _draw(self, rng: random.Random) -> float:
        return self.quantize(rng.uniform(self.lowest, self.highest))


@dataclass(frozen=True, repr=False)
class RandInt(Domain):
    """An int in ``[low, high)``: ``high`` is excluded, as in ``range`` and Ray Tune."""

    kind = "randint"
    low: int
    high: int

    def __post_init__(self) -> None:
        if _is_int(self.low) and _is_int(self.high):
            object.__setattr__(self, "low", int(self.low))
            object.__setattr__(self, "high", int(self.high))

    def _problem(self) -> str | None:
        if not (_is_int(self.low) and _is_int(self.high)):
            return f"randint bounds must be ints, got low={self.low!r} high={self.high!r}"
        if self.low >= self.high:
            return (
                f"randint low must be < high (high is excluded), "
                f"got low={self.low!r} high={self.high!r}"
            )
        return None

    def _draw(self, rng: random.Random) -> int:
        return rng.randrange(self.low, self.high)

    def _args(self) -> tuple[Any, ...]:
        return (self.low, self.high)


@dataclass(frozen=True, repr=False)
class SampleFrom(Domain):
    """A value computed from the rest of the config: ``fn(config) -> value``.

    ``config`` is a read-only view of the trial's config in which the keys this function
    reads are resolved first, whatever their order in the space.
    """

    kind = "sample_from"
    fn: Callable[[Mapping[str, Any]], Any]

    def _problem(self) -> str | None:
        if not callable(self.fn):
            return f"sample_from takes a function config -> value, got {type(self.fn).__name__}"
        return None

    def _draw(self, rng: random.Random) -> Any:
        raise ConfigError("sample_from(...) is resolved by SearchSpace.sample, not on its own")

    def _args(self) -> tuple[Any, ...]:
        return (self.fn,)

    def to_json(self) -> dict[str, Any]:
        raise ConfigError("sample_from has no JSON form; build such a space in Python")

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
        return f"sample_from({name})"


JSON_KINDS: dict[str, type[Domain]] = {
    cls.kind: cls for cls in (Choice, Grid, Uniform, LogUniform, QUniform, RandInt)
}


def domain_from_json(kind: str, args: Any) -> Domain:
    """The domain of the JSON form ``{kind: args}``, e.g. ``{"uniform": [0, 1]}``.

    A bad form is a ConfigError without the key: the caller knows it and prefixes it.
    """
    cls = JSON_KINDS[kind]
    if issubclass(cls, _Values):
        if not isinstance(args, list):
            raise ConfigError(f"{kind} takes [value, ...], got {args!r}")
        domain: Domain = cls(args)
    else:
        names = list(inspect.signature(cls).parameters)
        if not isinstance(args, list) or len(args) != len(names):
            raise ConfigError(f"{kind} takes [{', '.join(names)}], got {args!r}")
        domain = cls(*args)
    if domain.problem is not None:
        raise ConfigError(domain.problem)
    return domain


def choice(values: Sequence[Any]) -> Choice:
    """One of ``values``, each equally likely."""
    return Choice(values)


def uniform(low: float, high: float) -> Uniform:
    """A float uniform in ``[low, high]``."""
    return Uniform(low, high)


def loguniform(low: float, high: float) -> LogUniform:
    """A float in ``[low, high]`` (``low > 0``) whose logarithm is uniform."""
    return LogUniform(low, high)


def quniform(low: float, high: float, q: float) -> QUniform:
    """A float multiple of ``q`` in ``[low, high]``: uniform, then rounded to q."""
    return QUniform(low, high, q)


def randint(low: int, high: int) -> RandInt:
    """An int in ``[low, high)``: ``high`` excluded."""
    return RandInt(low, high)


def grid(values: Sequence[Any]) -> Grid:
    """Every one of ``values``: one trial per value (per ``num_samples`` repeat)."""
    return Grid(values)


def sample_from(fn: Callable[[Mapping[str, Any]], Any]) -> SampleFrom:
    """``fn(config)``: a value computed from the config sampled so far."""
    return SampleFrom(fn)
