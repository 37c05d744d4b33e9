"""NumpySearch draws the configs Ray Tune's BasicVariantGenerator draws: the same seed
gives the same configs in the same order (checked against Tune's own generator when Ray
Tune is installed), grids expand in Tune's order, points_to_evaluate come first."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from orchestrator.errors import ConfigError
from orchestrator.search import (
    SearchSpace,
    choice,
    grid,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)
from orchestrator.search.numpy_search import NumpySearch


def ours(raw: dict[str, Any], num_samples: int, seed: Any = None, **kwargs: Any) -> list[Any]:
    searcher = NumpySearch(seed, **kwargs)
    searcher.setup(SearchSpace(raw), metric=None, mode=None, num_samples=num_samples, seed=None)
    configs = []
    while (config := searcher.suggest(f"t{len(configs)}")) is not None:
        configs.append(config)
    return configs


def test_the_same_configs_as_ray_tunes_generator_for_every_domain() -> None:
    tune = pytest.importorskip("ray.tune")
    from ray.tune.search.sample import _BackwardsCompatibleNumpyRng
    from ray.tune.search.variant_generator import generate_variants

    def space(t: Any) -> dict[str, Any]:
        return {
            "u": t.uniform(-1, 1),
            "lu": t.loguniform(1e-4, 1e-1),
            "qu": t.quniform(0, 1, 0.1),
            "qlu": t.qloguniform(0.1, 10, 0.1),
            "c": t.choice(["a", "b", [1, 2]]),
            "ri": t.randint(0, 10),
            "lri": t.lograndint(1, 100),
            "qri": t.qrandint(0, 20, 5),
            "qlri": t.qlograndint(10, 1000, 10),
            "n": t.randn(1.0, 2.0),
            "qn": t.qrandn(0.0, 1.0, 0.25),
            "g": t.grid_search([3, 1]),
            "nested": {"a": t.grid_search(["x", "y"]), "b": t.uniform(0, 1)},
            "const": 7,
        }

    def tunes(seed: Any) -> list[dict[str, Any]]:
        """What BasicVariantGenerator(random_state=seed) runs: one shared RNG, and
        generate_variants once per sample."""
        rng = _BackwardsCompatibleNumpyRng(seed)
        return [
            spec["config"]
            for _ in range(3)
            for _, spec in generate_variants({"config": space(tune)}, random_state=rng)
        ]

    mine = {
        "u": uniform(-1, 1),
        "lu": loguniform(1e-4, 1e-1),
        "qu": quniform(0, 1, 0.1),
        "qlu": qloguniform(0.1, 10, 0.1),
        "c": choice(["a", "b", [1, 2]]),
        "ri": randint(0, 10),
        "lri": lograndint(1, 100),
        "qri": qrandint(0, 20, 5),
        "qlri": qlograndint(10, 1000, 10),
        "n": randn(1.0, 2.0),
        "qn": qrandn(0.0, 1.0, 0.25),
        "g": grid([3, 1]),
        "nested": {"a": grid(["x", "y"]), "b": uniform(0, 1)},
        "const": 7,
    }
    assert ours(mine, 3, seed=42) == tunes(42)
    np.random.seed(7)
    expected = tunes(None)
    np.random.seed(7)
    got = ours(mine, 3)
    assert got == expected and len(got) == 12


def test_grids_expand_with_the_first_sorted_key_fastest() -> None:
    configs = ours({"b": grid([1, 2]), "a": grid(["x", "y", "z"])}, 1, seed=0)
    assert [(c["a"], c["b"]) for c in configs] == [
        ("x", 1),
        ("y", 1),
        ("z", 1),
        ("x", 2),
        ("y", 2),
        ("z", 2),
    ]


def test_points_to_evaluate_come_first_and_expand_over_the_grid_they_leave_open() -> None:
    raw = {"x": uniform(0, 1), "g": grid([1, 2]), "k": 0}
    configs = ours(raw, 3, seed=0, points_to_evaluate=[{"x": 0.5}, {"x": 0.25, "g": 9, "k": 3}])
    assert [(c["x"], c["g"], c["k"]) for c in configs[:3]] == [
        (0.5, 1, 0),
        (0.5, 2, 0),
        (0.25, 9, 3),
    ]
    assert len(configs) == 5 and all(c["x"] not in (0.5, 0.25) for c in configs[3:])


def test_constant_grid_search_draws_once_per_repeat() -> None:
    configs = ours({"x": uniform(0, 1), "g": grid([1, 2, 3])}, 2, seed=0, constant_grid_search=True)
    assert len({c["x"] for c in configs[:3]}) == 1 and configs[0]["x"] != configs[3]["x"]


def test_its_state_continues_where_it_was() -> None:
    raw = {"x": uniform(0, 1), "g": grid([1, 2])}
    first = NumpySearch(3)
    first.setup(SearchSpace(raw), metric=None, mode=None, num_samples=4, seed=None)
    head = [first.suggest(f"t{n}") for n in range(3)]
    later = NumpySearch(3)
    later.setup(SearchSpace(raw), metric=None, mode=None, num_samples=4, seed=None)
    later.set_state(first.get_state())
    assert head + [later.suggest(f"t{n}") for n in range(3, 8)] == ours(raw, 4, seed=3)
    assert later.suggest("t8") is None


def test_sample_from_sees_the_drawn_values() -> None:
    configs = ours({"x": uniform(0, 1), "y": sample_from(lambda c: c["x"] * 2)}, 2, seed=1)
    assert all(c["y"] == c["x"] * 2 for c in configs)


def test_a_point_naming_an_unknown_key_is_refused() -> None:
    searcher = NumpySearch(points_to_evaluate=[{"nope": 1}])
    with pytest.raises(ConfigError, match="'nope', which is not a key"):
        searcher.setup(
            SearchSpace({"x": uniform(0, 1)}), metric=None, mode=None, num_samples=1, seed=None
        )
