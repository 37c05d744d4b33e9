"""``ray.tune.search.sample``: Tune's search-space ``Domain`` classes and functions.

``tune.uniform(0, 1)`` is at once trialflow's :class:`orchestrator.search.Uniform`
(what the searchers and the sweep read, with Tune's arguments and semantics: bounds,
quantization, ``randint``'s excluded upper bound) and Tune's :class:`Float` (what a Tune user reads:
``isinstance(d, Float)``, ``d.lower``, ``d.sample(size=10)``, ``d.quantized(0.1)``).
So each kind of trialflow domain has a subclass here that adds Tune's class as a
mixin; the mixins define only Tune's names, never the engine's (``_draw``, ``kind``...),
so what a domain means to the engine does not change.

``Float(0, 1)`` built by hand has no sampler yet, as on Tune: ``.uniform()``,
``.loguniform()`` or ``.normal()`` picks one; ``.sample()`` and a Tuner's
``param_space`` use Tune's default (uniform); trialflow's own ``SearchSpace`` refuses
it by its key. A domain that has a sampler refuses a
second one with Tune's ``ValueError``; ``.quantized(q)`` may follow any.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from orchestrator import search
from orchestrator.tune.error import unsupported
from orchestrator.tune.sample import _TuneFunction, grid_search

__all__ = [
    "Categorical",
    "Domain",
    "Float",
    "Function",
    "Integer",
    "choice",
    "grid_search",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "uniform",
]

_INF = float("inf")


def _rng(random_state: Any) -> random.Random:
    """Tune's ``random_state`` (a seed, a numpy ``Generator``/``RandomState``, or none:
    numpy's global state, so ``np.random.seed`` makes draws repeat as on Tune)."""
    if isinstance(random_state, random.Random):
        return random_state
    if isinstance(random_state, int):
        return random.Random(random_state)
    if random_state is None:
        import numpy as np

        return random.Random(int(np.random.randint(2**31)))
    if hasattr(random_state, "integers"):  # numpy Generator
        return random.Random(int(random_state.integers(2**31)))
    if hasattr(random_state, "randint"):  # numpy RandomState
        return random.Random(int(random_state.randint(2**31)))
    raise TypeError(
        f"random_state must be None, an int or a numpy Generator/RandomState, "
        f"got {type(random_state).__name__}"
    )


def _one_sampler(domain: Domain, wanted: str) -> ValueError:
    return ValueError(
        f"You can only choose one sampler for parameter domains. Existing sampler for "
        f"parameter {type(domain).__mro__[1].__name__}: {domain!r}. Tried to add {wanted}"
    )


class _ByHand(abc.ABCMeta):
    """``Float(0, 1)``, ``Categorical([...])``, ``Function(f)`` called by hand build
    their bare (or, for ``Function``, finished) form; the classes themselves stay the
    bases that ``isinstance`` checks."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        maker = _BY_HAND.get(cls)
        if maker is not None:
            return maker(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class Domain(search.Domain, metaclass=_ByHand):
    """Tune's base class of a search-space domain (``isinstance(d, Domain)``)."""

    def sample(self, config: Any = None, size: int = 1, random_state: Any = None) -> Any:
        """Tune's ``sample``: one value, or a list of ``size`` values (Tune gives a
        numpy array for some domains: a list reads the same way)."""
        if isinstance(config, random.Random):  # the engine's call: SearchSpace's draw
            return search.Domain.sample(self, config)
        rng = _rng(random_state)
        drawn = [self._tune_draw(config, rng) for _ in range(size)]
        return drawn if size > 1 else drawn[0]

    def _tune_draw(self, config: Any, rng: random.Random) -> Any:
        return search.Domain.sample(self._with_sampler(), rng)

    def _with_sampler(self) -> search.Domain:
        return self

    @property
    def sampler(self) -> str | None:
        """The name of the sampler chosen (Tune gives an object; its ``str`` reads so)."""
        return getattr(self, "kind", None)

    def cast(self, value: Any) -> Any:
        return value

    def is_grid(self) -> bool:
        return isinstance(self, search.Grid)

    def is_function(self) -> bool:
        return False

    def is_valid(self, value: Any) -> bool:
        raise NotImplementedError

    @property
    def domain_str(self) -> str:
        return "(unknown)"


class _Bare:
    """A Tune domain built by hand, before a sampler is chosen: only Tune's API;
    a space refuses it (by key) until one is."""

    kind = "bare"
    sampler = None

    def _problem(self) -> str | None:
        name = type(self).__mro__[2].__name__
        return f"{name}{self.domain_str} has no sampler: call .uniform() (or another) first"  # type: ignore[attr-defined]

    def _draw(self, rng: random.Random) -> Any:
        raise AssertionError("unreachable: _problem refuses it")

    def _args(self) -> tuple[Any, ...]:
        return ()

    def with_default_sampler(self) -> Domain:
        """This domain with Tune's default sampler (uniform): what a Tuner's space
        makes of it, as Tune samples it."""
        return self.uniform()  # type: ignore[attr-defined, no-any-return]

    def _tune_draw(self, config: Any, rng: random.Random) -> Any:
        return self.with_default_sampler()._tune_draw(config, rng)

    def __repr__(self) -> str:
        return f"{type(self).__mro__[2].__name__}{self.domain_str}"  # type: ignore[attr-defined]


class Float(Domain):
    """A float range: ``.uniform()``, ``.loguniform()``, ``.normal()``, ``.quantized(q)``."""

    @property
    def lower(self) -> float:
        return float(getattr(self, "low", -_INF))

    @property
    def upper(self) -> float:
        return float(getattr(self, "high", _INF))

    def cast(self, value: Any) -> float:
        return float(value)

    def uniform(self) -> Float:
        if not isinstance(self, _Bare):
            raise _one_sampler(self, "uniform")
        if not self.lower > -_INF:
            raise ValueError(
                "Uniform requires a lower bound. Make sure to set the `lower` parameter "
                "of `Float()`."
            )
        if not self.upper < _INF:
            raise ValueError(
                "Uniform requires a upper bound. Make sure to set the `upper` parameter "
                "of `Float()`."
            )
        return uniform(self.lower, self.upper)

    def loguniform(self, base: Any = None) -> Float:
        if not isinstance(self, _Bare):
            raise _one_sampler(self, "loguniform")
        if not self.lower > 0 or not 0 < self.upper < _INF:
            raise ValueError(
                f"LogUniform requires bounds greater than 0, got {self.lower}, "
                f"{self.upper}. Did you pass a variable that has been log-transformed? "
                "If so, pass the non-transformed value instead."
            )
        return loguniform(self.lower, self.upper, base)

    def normal(self, mean: float = 0.0, sd: float = 1.0) -> Float:
        if not isinstance(self, _Bare):
            raise _one_sampler(self, "normal")
        return randn(mean, sd)

    def quantized(self, q: float) -> Float:
        for name, bound in (("lower", self.lower), ("upper", self.upper)):
            if math.isfinite(bound) and not math.isclose(bound / q, round(bound / q)):
                raise ValueError(
                    f"Your {name} variable bound {bound} is not divisible by "
                    f"quantization factor {q}."
                )
        base = self.uniform() if isinstance(self, _Bare) else self
        if isinstance(base, search.RandN):
            return qrandn(base.mean, base.sd, q)
        if isinstance(base, search.LogUniform | search.QLogUniform):
            return qloguniform(base.lower, base.upper, q)
        return quniform(base.lower, base.upper, q)

    def is_valid(self, value: float) -> bool:
        return self.lower <= value <= self.upper

    @property
    def domain_str(self) -> str:
        return f"({self.lower}, {self.upper})"


class Integer(Domain):
    """An int range: ``.uniform()``, ``.loguniform()``, ``.quantized(q)``."""

    low: Any  # the fields of trialflow's domain this mixin is added to
    high: Any

    @property
    def lower(self) -> int:
        return int(self.low)

    @property
    def upper(self) -> int:
        return int(self.high)

    def cast(self, value: Any) -> int:
        return int(value)

    def uniform(self) -> Integer:
        if not isinstance(self, _Bare):
            raise _one_sampler(self, "uniform")
        return randint(self.lower, self.upper)

    def loguniform(self, base: Any = None) -> Integer:
        if not isinstance(self, _Bare):
            raise _one_sampler(self, "loguniform")
        if not self.lower > 0:
            raise ValueError(
                f"LogUniform requires a lower bound greater than 0.Got: {self.lower}. "
                "Did you pass a variable that has been log-transformed? If so, pass the "
                "non-transformed value instead."
            )
        return lograndint(self.lower, self.upper, base)

    def quantized(self, q: int) -> Integer:
        base = self.uniform() if isinstance(self, _Bare) else self
        if isinstance(base, search.LogRandInt | search.QLogRandInt):
            return qlograndint(base.lower, base.upper, q)
        return qrandint(base.lower, base.upper, q)

    def is_valid(self, value: int) -> bool:
        return self.lower <= value <= self.upper

    @property
    def domain_str(self) -> str:
        return f"({self.lower}, {self.upper})"


class Categorical(Domain):
    """One of a list: ``.uniform()`` (``tune.choice``) or ``.grid()``."""

    values: Any

    @property
    def categories(self) -> list[Any]:
        return list(self.values)

    def uniform(self) -> Categorical:
        if not isinstance(self, _Bare):
            raise _one_sampler(self, "uniform")
        return choice(self.categories)

    def grid(self) -> Categorical:
        if not isinstance(self, _Bare):
            raise _one_sampler(self, "grid")
        return _tune(search.grid(self.categories))

    def __len__(self) -> int:
        return len(self.categories)

    def __getitem__(self, item: Any) -> Any:
        return self.categories[item]

    def is_valid(self, value: Any) -> bool:
        return value in self.categories

    @property
    def domain_str(self) -> str:
        return f"{self.categories}"


class Function(Domain):
    """A value computed by a function of the config (``tune.sample_from``)."""

    fn: Any

    @property
    def func(self) -> Callable[..., Any]:
        fn = self.fn
        return getattr(fn, "func", fn)

    @property
    def pass_config(self) -> bool:
        return bool(getattr(self.fn, "takes_spec", True))

    def _tune_draw(self, config: Any, rng: random.Random) -> Any:
        return self.fn(config if config is not None else {})

    def is_function(self) -> bool:
        return True

    def is_valid(self, value: Any) -> bool:
        return True

    @property
    def domain_str(self) -> str:
        return f"{self.func}()"


# --- Domains built by hand, without a sampler ------------------------------------


class _BareFloat(_Bare, Float):
    def __init__(self, lower: float | None, upper: float | None) -> None:
        self.low = -_INF if lower is None else lower
        self.high = _INF if upper is None else upper


class _BareInteger(_Bare, Integer):
    def __init__(self, lower: int, upper: int) -> None:
        self.low, self.high = lower, upper


class _BareCategorical(_Bare, Categorical):
    def __init__(self, categories: Sequence[Any]) -> None:
        self.values = list(categories)


def _checked_signature(func: Callable[..., Any]) -> None:
    """Tune's rule for a ``sample_from``/``Function`` function: callable with the spec
    or with nothing (``ValueError`` at once, not a ``TypeError`` at the first draw)."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return
    try:
        signature.bind({})
    except TypeError:
        try:
            signature.bind()
        except TypeError:
            raise ValueError(
                "The function passed to a `Function` parameter must be callable with "
                "either 0 or 1 parameters."
            ) from None


_BY_HAND: dict[type, Callable[..., Any]] = {
    Float: _BareFloat,
    Integer: _BareInteger,
    Categorical: _BareCategorical,
    Function: lambda func: sample_from(func),
}


# --- Each trialflow domain as Tune's class -----------------------------------------

_TUNE_CLASS: dict[type, type] = {}
for _core, _tune_base in (
    (search.Uniform, Float),
    (search.LogUniform, Float),
    (search.QUniform, Float),
    (search.QLogUniform, Float),
    (search.RandN, Float),
    (search.QRandN, Float),
    (search.RandInt, Integer),
    (search.LogRandInt, Integer),
    (search.QRandInt, Integer),
    (search.QLogRandInt, Integer),
    (search.Choice, Categorical),
    (search.Grid, Categorical),
    (search.SampleFrom, Function),
):
    _cls = type(_core.__name__, (_tune_base, _core), {"__module__": __name__})
    _TUNE_CLASS[_core] = _cls
    globals()[f"_{_core.__name__}"] = _cls  # picklable by name
    _cls.__qualname__ = f"_{_core.__name__}"
del _core, _tune_base, _cls


def _tune(domain: search.Domain) -> Any:
    """``domain`` as the instance of its Tune-flavoured class (same fields)."""
    cls = _TUNE_CLASS[type(domain)]
    values = [getattr(domain, field.name) for field in dataclasses.fields(domain)]  # type: ignore[arg-type]
    return cls(*values)


# --- Tune's functions: trialflow's domains with Tune's arguments, as Tune's classes ---


def _no_base(name: str, base: Any) -> None:
    if base is not None:
        raise unsupported(
            f"tune.{name}(..., base=...)", "log scales use base e (as Tune's default)"
        )


def uniform(lower: float, upper: float) -> Float:
    return _tune(search.uniform(lower, upper))


def quniform(lower: float, upper: float, q: float) -> Float:
    return _tune(search.quniform(lower, upper, q))


def loguniform(lower: float, upper: float, base: Any = None) -> Float:
    _no_base("loguniform", base)
    return _tune(search.loguniform(lower, upper))


def qloguniform(lower: float, upper: float, q: float, base: Any = None) -> Float:
    _no_base("qloguniform", base)
    return _tune(search.qloguniform(lower, upper, q))


def randn(mean: float = 0.0, sd: float = 1.0) -> Float:
    return _tune(search.randn(mean, sd))


def qrandn(mean: float, sd: float, q: float) -> Float:
    return _tune(search.qrandn(mean, sd, q))


def randint(lower: int, upper: int) -> Integer:
    return _tune(search.randint(lower, upper))


def lograndint(lower: int, upper: int, base: Any = None) -> Integer:
    _no_base("lograndint", base)
    return _tune(search.lograndint(lower, upper))


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    return _tune(search.qrandint(lower, upper, q))


def qlograndint(lower: int, upper: int, q: int, base: Any = None) -> Integer:
    _no_base("qlograndint", base)
    return _tune(search.qlograndint(lower, upper, q))


def choice(categories: Sequence[Any]) -> Categorical:
    return _tune(search.choice(list(categories)))


def sample_from(func: Callable[..., Any]) -> Function:
    _checked_signature(func)
    return _tune(search.sample_from(_TuneFunction(func)))
