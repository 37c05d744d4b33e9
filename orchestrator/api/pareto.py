"""The Pareto front of a multi-objective sweep: the trials no other trial beats on every
objective at once. Plain computation over the trials' last results."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from orchestrator.errors import ConfigError

__all__ = ["pareto_front"]

T = TypeVar("T")


def pareto_front(
    items: Sequence[T],
    result_of: Callable[[T], Mapping[str, Any] | None],
    metrics: Sequence[str],
    modes: Sequence[str],
    value_of: Callable[[Mapping[str, Any] | None, str], float | None],
) -> list[T]:
    """The items whose results are not dominated (another at least as good on every
    metric and better on one), in their order. Items missing a metric are left out."""
    if not metrics or len(metrics) != len(modes) or any(m not in ("min", "max") for m in modes):
        raise ConfigError(
            f"a Pareto front needs metrics and as many modes 'min'/'max', got {metrics!r}, "
            f"{modes!r}"
        )
    signs = [1.0 if mode == "max" else -1.0 for mode in modes]
    scored: list[tuple[T, list[float]]] = []
    for item in items:
        found = [value_of(result_of(item), metric) for metric in metrics]
        values = [v for v in found if v is not None]
        if len(values) == len(found):
            scored.append((item, [s * v for s, v in zip(signs, values, strict=True)]))

    def dominated(point: list[float]) -> bool:
        return any(
            all(o >= p for o, p in zip(other, point, strict=True)) and other != point
            for _, other in scored
        )

    return [item for item, point in scored if not dominated(point)]
