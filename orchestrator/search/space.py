"""A whole search space: a nested dict of domains and constants, checked up front.

:class:`SearchSpace` validates every key before the first trial starts (including one
dry-run sample, so a ``sample_from`` that raises fails the sweep, not its tenth trial)
and builds configs for the searchers: plain nested dicts, never shared with the space
or with each other.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections.abc import Iterator, Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.search.domains import JSON_KINDS, Domain, Grid, SampleFrom, domain_from_json

Path = tuple[str, ...]


def _where(path: Any) -> str:
    if isinstance(path, tuple):
        return "'" + ".".join(str(key) for key in path) + "'"
    return repr(path)


def _looks_like_domain(value: Any) -> bool:
    # Classes are fine as constants (a model class with a ``sample`` method is common).
    return not isinstance(value, type) and hasattr(value, "sample")


def _misplaced(value: Any, at: str = "") -> str | None:
    """Why a constant cannot be one: it is, or holds, a domain (ours or another library's)."""
    if isinstance(value, Domain):
        return f"{value!r} at {at} is inside a constant; a domain must be a key's whole value"
    if isinstance(value, Mapping) and set(value) == {"grid_search"}:
        return "Ray Tune's {'grid_search': [...]} is not supported here; use grid([...])"
    if _looks_like_domain(value):
        return (
            f"{type(value).__name__} object{' at ' + at if at else ''} is not a trialflow "
            "domain (from Ray Tune?); use orchestrator.search's choice, uniform, ... instead"
        )
    if type(value) in (list, tuple):
        items: Any = enumerate(value)
    elif isinstance(value, Mapping):
        items = value.items()
    else:
        return None
    for key, item in items:
        found = _misplaced(item, f"{at}[{key!r}]")
        if found is not None:
            return found
    return None


class _ConfigView(Mapping[str, Any]):
    """What a sample_from function sees: the config, resolving what it reads on demand."""

    __slots__ = ("_resolver", "_prefix")

    def __init__(self, resolver: _Resolver, prefix: Path) -> None:
        self._resolver = resolver
        self._prefix = prefix

    def __getitem__(self, key: str) -> Any:
        return self._resolver.read(self._prefix, key)

    def __contains__(self, key: object) -> bool:  # without resolving the key
        return key in self._resolver.node(self._prefix)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._resolver.node(self._prefix)))

    def __len__(self) -> int:
        return len(self._resolver.node(self._prefix))

    def __repr__(self) -> str:
        return f"<config view {_where(self._prefix)}: keys {list(self)}>"


class _Resolver:
    """Fills in one config's sample_from values, each before the first one that reads it."""

    def __init__(self, config: dict[str, Any], pending: Mapping[Path, SampleFrom]) -> None:
        self.config = config
        self.pending = dict(pending)
        self.stack: list[Path] = []
        # Errors already worded for the user, which pass through outer sample_from calls
        # unwrapped (a plain ConfigError, so the user sees the type they catch).
        self.raised: list[ConfigError] = []

    def fail(self, message: str) -> ConfigError:
        error = ConfigError(message)
        self.raised.append(error)
        return error

    def run(self) -> dict[str, Any]:
        for path in list(self.pending):
            if path in self.pending:
                self._resolve(path)
        return self.config

    def node(self, prefix: Path) -> dict[str, Any]:
        node = self.config
        for key in prefix:
            node = node[key]
        return node

    def read(self, prefix: Path, key: str) -> Any:
        node = self.node(prefix)
        if key not in node:
            raise KeyError(key)
        path = (*prefix, key)
        if path in self.pending:
            self._resolve(path)
        value = node[key]
        return _ConfigView(self, path) if isinstance(value, dict) else value

    def _resolve(self, path: Path) -> None:
        if path in self.stack:
            cycle = " -> ".join(_where(p) for p in [*self.stack[self.stack.index(path) :], path])
            raise self.fail(
                f"space keys {cycle}: sample_from functions read each other in a cycle; "
                "break it so one of them does not read the other"
            )
        self.stack.append(path)
        try:
            try:
                value = self.pending[path].fn(_ConfigView(self, ()))
            except Exception as error:
                if any(error is own for own in self.raised):
                    raise
                raise self.fail(
                    f"space key {_where(path)}: sample_from function raised "
                    f"{type(error).__name__}: {error}"
                ) from error
            # Still on the stack: a function that returns the view of its own key is a cycle.
            value = self._plain(value, path)
        finally:
            self.stack.pop()
        self.node(path[:-1])[path[-1]] = value
        del self.pending[path]

    def _plain(self, value: Any, path: Path) -> Any:
        if isinstance(value, _ConfigView):
            return {key: self._plain(value[key], path) for key in value}
        if type(value) is dict:
            return {key: self._plain(item, path) for key, item in value.items()}
        if type(value) in (list, tuple):
            return type(value)(self._plain(item, path) for item in value)
        if isinstance(value, Domain):
            raise self.fail(
                f"space key {_where(path)}: sample_from function returned {value!r}; "
                "return a value, not a domain"
            )
        return copy.deepcopy(value)


class SearchSpace:
    """A validated search space; builds one trial's config at a time.

    Domains are met in the dict's order, depth first: that order is the one the random
    domains draw in (so a seed reproduces configs) and the one grids expand in (the
    first grid key varies fastest, as in Ray Tune).
    """

    def __init__(self, raw: Mapping[str, Any]) -> None:
        if not isinstance(raw, Mapping):
            raise ConfigError(
                f"a search space must be a dict of key: domain or constant, "
                f"got {type(raw).__name__}"
            )
        self._random: dict[Path, Domain] = {}
        self._grids: dict[Path, Grid] = {}
        self._derived: dict[Path, SampleFrom] = {}
        self._template = self._take(raw, ())
        self.sample(random.Random(0), {path: g.values[0] for path, g in self._grids.items()})

    def _take(self, raw: Mapping[Any, Any], prefix: Path) -> dict[str, Any]:
        node: dict[str, Any] = {}
        for key, value in raw.items():
            if not isinstance(key, str):
                raise ConfigError(
                    f"space key {_where((*prefix, repr(key)))}: keys must be str, "
                    f"got {type(key).__name__}"
                )
            node[key] = self._take_value(value, (*prefix, key))
        return node

    def _take_value(self, value: Any, path: Path) -> Any:
        if isinstance(value, Domain):
            problem = value.problem
            if problem is not None:
                raise ConfigError(f"space key {_where(path)}: {problem}")
            if isinstance(value, Grid):
                self._grids[path] = value
            elif isinstance(value, SampleFrom):
                self._derived[path] = value
            else:
                self._random[path] = value
            return value
        if isinstance(value, Mapping) and set(value) != {"grid_search"}:
            return self._take(value, path)
        problem = _misplaced(value)
        if problem is not None:
            raise ConfigError(f"space key {_where(path)}: {problem}")
        return copy.deepcopy(value)

    @property
    def random_domains(self) -> dict[Path, Domain]:
        """The domains drawn at random (neither grid nor sample_from), in drawing order."""
        return dict(self._random)

    @property
    def grid_domains(self) -> dict[Path, Grid]:
        return dict(self._grids)

    @property
    def num_grid_points(self) -> int:
        return math.prod(len(g.values) for g in self._grids.values())

    @property
    def grid_points(self) -> list[dict[Path, Any]]:
        """Every combination of the grid values, the first grid key varying fastest."""
        paths = list(self._grids)[::-1]
        values = [self._grids[path].values for path in paths]
        return [
            dict(zip(paths[::-1], combo[::-1], strict=True)) for combo in itertools.product(*values)
        ]

    def sample(
        self, rng: random.Random, grid_point: Mapping[Path, Any] | None = None
    ) -> dict[str, Any]:
        """A full config: ``grid_point``'s grid values, the random domains drawn from rng."""
        assigned = self._grid_values(grid_point or {})
        for path, domain in self._random.items():
            assigned[path] = domain.sample(rng)
        return self._build(assigned)

    def resolve(self, values: Mapping[Path, Any], rng: random.Random) -> dict[str, Any]:
        """A full config taking ``values`` (key path -> value) for the keys it names."""
        for path in values:
            if path not in self._random and path not in self._grids:
                raise ConfigError(f"space key {_where(path)}: not a sampled or grid key")
        assigned = self._grid_values({p: values[p] for p in self._grids if p in values})
        for path, domain in self._random.items():
            assigned[path] = copy.deepcopy(values[path]) if path in values else domain.sample(rng)
        return self._build(assigned)

    def _grid_values(self, point: Mapping[Path, Any]) -> dict[Path, Any]:
        for path in point:
            if path not in self._grids:
                raise ConfigError(f"space key {_where(path)}: not a grid key of this space")
        for path in self._grids:
            if path not in point:
                raise ConfigError(
                    f"space key {_where(path)}: a grid key needs a value; "
                    "pass one of space.grid_points as grid_point"
                )
        return {path: copy.deepcopy(point[path]) for path in self._grids}

    def _build(self, assigned: Mapping[Path, Any]) -> dict[str, Any]:
        def fill(node: dict[str, Any], prefix: Path) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for key, value in node.items():
                path = (*prefix, key)
                if isinstance(value, dict):
                    out[key] = fill(value, path)
                elif isinstance(value, SampleFrom):
                    out[key] = value  # a placeholder, until the resolver replaces it
                elif isinstance(value, Domain):
                    out[key] = assigned[path]
                else:
                    out[key] = copy.deepcopy(value)
            return out

        return _Resolver(fill(self._template, ()), self._derived).run()

    def to_json(self) -> dict[str, Any]:
        """The space in the CLI's JSON form (no sample_from), read back by space_from_json."""

        def dump(node: dict[str, Any], prefix: Path) -> dict[str, Any]:
            if prefix and len(node) == 1 and next(iter(node)) in JSON_KINDS:
                raise ConfigError(
                    f"space key {_where(prefix)}: a dict whose only key is "
                    f"{next(iter(node))!r} would read back as a domain; rename the key"
                )
            out: dict[str, Any] = {}
            for key, value in node.items():
                path = (*prefix, key)
                if isinstance(value, dict):
                    out[key] = dump(value, path)
                elif isinstance(value, SampleFrom):
                    raise ConfigError(f"space key {_where(path)}: sample_from has no JSON form")
                elif isinstance(value, Domain):
                    out[key] = value.to_json()
                else:
                    out[key] = copy.deepcopy(value)
            return out

        return dump(self._template, ())

    def __repr__(self) -> str:
        return f"SearchSpace({self._template!r})"


def space_from_json(obj: Any) -> dict[str, Any]:
    """A raw space from its JSON form: ``{"lr": {"loguniform": [1e-4, 0.1]}, "epochs": 20}``.

    A dict whose only key names a domain (choice, grid, uniform, loguniform, quniform,
    randint) becomes that domain, other dicts nest, and everything else is a constant.
    """
    if not isinstance(obj, Mapping):
        raise ConfigError(
            f"a JSON search space must be an object of key: domain or constant, "
            f"got {type(obj).__name__}"
        )
    return _from_json(obj, ())


def _from_json(node: Mapping[Any, Any], prefix: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and len(value) == 1:
            name, args = next(iter(value.items()))
            if name == "sample_from":
                raise ConfigError(
                    f"space key {_where(path)}: sample_from has no JSON form; "
                    "build such a space in Python"
                )
            if name in JSON_KINDS:
                try:
                    out[key] = domain_from_json(name, args)
                except ConfigError as error:
                    raise ConfigError(f"space key {_where(path)}: {error}") from None
                continue
        out[key] = _from_json(value, path) if isinstance(value, Mapping) else value
    return out
