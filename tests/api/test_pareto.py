"""The Pareto front of a multi-objective sweep: no trial in it is beaten on every metric."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.api.pareto import pareto_front
from orchestrator.core.best import finite_metric as metric_value
from orchestrator.errors import ConfigError


def front(points: list[dict[str, Any] | None], modes: list[str]) -> list[int]:
    items = list(range(len(points)))
    return pareto_front(items, lambda i: points[i], ["loss", "gain"], modes, metric_value)


def test_the_front_keeps_exactly_the_undominated_trials() -> None:
    points: list[dict[str, Any] | None] = [
        {"loss": 1.0, "gain": 1.0},
        {"loss": 2.0, "gain": 3.0},
        {"loss": 2.0, "gain": 0.5},  # beaten by 0 on both
        {"loss": 0.5, "gain": 0.2},
        {"loss": 1.0, "gain": 1.0},  # equal to 0: neither beats the other
        {"loss": 9.0},  # lacks gain
        None,
    ]
    assert front(points, ["min", "max"]) == [0, 1, 3, 4]
    assert front(points, ["max", "min"]) == [2, 3]


def test_bad_modes_are_refused() -> None:
    with pytest.raises(ConfigError, match="as many modes"):
        front([{"loss": 1.0, "gain": 1.0}], ["min"])
