"""Ray Tune's ``grid_search`` and the reading of a Tune ``param_space`` (its literal
forms and ``sample_from``'s function of ``spec``) as trialflow's.

``grid_search`` returns a ``grid``; a literal ``{"grid_search": [...]}`` in a space is
read as one too (:func:`translate_space`). ``sample_from`` (in
:mod:`orchestrator.tune.search.sample`, with Tune's other search-space functions) takes
Tune's function of ``spec`` (``spec.config.x``, ``spec["config"]["x"]``, or the config
itself: ``spec["x"]``, ``spec.x``) or of nothing, which :class:`_TuneFunction` adapts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator import search
from orchestrator.tune.error import unsupported

__all__ = ["grid_search", "translate_space"]


def grid_search(values: Sequence[Any]) -> search.Grid:
    return search.grid(list(values))


class _TuneFunction:
    """A Tune ``sample_from`` function as trialflow's: it reads the config through a spec.
    Picklable when the function is."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        try:
            self.takes_spec = bool(inspect.signature(func).parameters)
        except (TypeError, ValueError):
            self.takes_spec = True
        self.__qualname__ = str(getattr(func, "__qualname__", "sample_from"))  # its repr

    def __call__(self, config: Mapping[str, Any]) -> Any:
        if not self.takes_spec:
            return self.func()
        return self.func(_Lazy(config, root=True))


class _Lazy(Mapping[str, Any]):
    """A config view read on demand (so trialflow resolves only what the function reads),
    with attribute access. The ``root`` view is Tune's ``spec`` as both of Tune's
    signatures read it: the config itself (``spec["a"]``, ``spec.a``) and, for a key
    ``config`` the config lacks, the config again (``spec.config.a``,
    ``spec["config"]["a"]``); a key ``config`` of the user's wins, as on Tune."""

    def __init__(self, view: Mapping[str, Any], *, root: bool = False) -> None:
        self._view = view
        self._root = root

    def __getitem__(self, key: str) -> Any:
        try:
            value = self._view[key]
        except KeyError:
            if not (self._root and key == "config"):
                raise
            return _Lazy(self._view)
        return _Lazy(value) if isinstance(value, Mapping) else value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __iter__(self) -> Any:
        return iter(self._view)

    def __len__(self) -> int:
        return len(self._view)


def translate_space(space: Any) -> Any:
    """A Tune param_space with Tune's literal forms (``{"grid_search": [...]}``, and
    ``{"eval": "..."}``, refused) as a trialflow space; a domain built by hand without
    a sampler (``Float(0, 1)``) takes Tune's default one (uniform)."""
    default = getattr(space, "with_default_sampler", None)
    if default is not None:
        return default()
    if isinstance(space, Mapping):
        if set(space) == {"grid_search"}:
            return search.grid(list(space["grid_search"]))
        if set(space) == {"eval"}:
            raise unsupported(
                "Ray Tune's {'eval': '...'} in param_space",
                "use tune.sample_from(lambda spec: ...)",
            )
        return {key: translate_space(value) for key, value in space.items()}
    return space
