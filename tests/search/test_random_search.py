"""RandomSearch: num_samples x the grid, reproducible, and continuing exactly after a restore."""

from __future__ import annotations

import pickle
import re
from collections import Counter
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.search import RandomSearch, Searcher, SearchSpace, choice, grid, uniform


def set_up(
    searcher: Searcher, raw: dict[str, Any], num_samples: int, seed: int | None = None
) -> Searcher:
    searcher.setup(SearchSpace(raw), metric=None, mode=None, num_samples=num_samples, seed=seed)
    return searcher


def suggest_all(searcher: Searcher, limit: int = 1000) -> list[dict[str, Any]]:
    configs: list[dict[str, Any]] = []
    for n in range(limit):
        config = searcher.suggest(f"t{n}")
        if config is None:
            return configs
        configs.append(config)
    raise AssertionError(f"still suggesting after {limit} configs")


SPACE: dict[str, Any] = {
    "x": uniform(0, 1),
    "opt": {"name": grid(["sgd", "adam"]), "momentum": uniform(0.8, 0.99)},
    "layers": grid([1, 2, 3]),
    "act": choice(["relu", "gelu"]),
    "epochs": 20,
}


def test_num_samples_repeats_of_every_grid_point() -> None:
    configs = suggest_all(set_up(RandomSearch(seed=0), SPACE, num_samples=4))
    assert len(configs) == 24
    combos = [(c["opt"]["name"], c["layers"]) for c in configs]
    assert Counter(combos) == {(n, k): 4 for n in ("sgd", "adam") for k in (1, 2, 3)}
    # Each repeat walks the whole grid in order, the first grid key varying fastest.
    one_pass = [("sgd", 1), ("adam", 1), ("sgd", 2), ("adam", 2), ("sgd", 3), ("adam", 3)]
    assert combos == one_pass * 4
    assert len({c["x"] for c in configs}) == 24  # random domains drawn fresh every time
    assert all(c["epochs"] == 20 for c in configs)


def test_without_a_grid_num_samples_configs() -> None:
    configs = suggest_all(set_up(RandomSearch(seed=0), {"x": uniform(0, 1)}, num_samples=7))
    assert len(configs) == 7


def test_nothing_more_once_all_are_suggested() -> None:
    searcher = set_up(RandomSearch(seed=0), SPACE, num_samples=1)
    assert len(suggest_all(searcher)) == 6
    assert searcher.suggest("late") is None


def test_a_seed_reproduces_the_configs_another_changes_them() -> None:
    def run(own: int | None, sweep: int | None) -> list[dict[str, Any]]:
        return suggest_all(set_up(RandomSearch(seed=own), SPACE, num_samples=2, seed=sweep))

    assert run(3, None) == run(3, None)
    assert run(3, None) != run(4, None)
    assert run(None, 3) == run(3, None)  # the sweep's seed when the searcher has none
    assert run(3, 9) == run(3, None)  # the searcher's own seed wins


def test_a_restored_searcher_suggests_exactly_what_the_old_one_would_have() -> None:
    old = set_up(RandomSearch(seed=11), SPACE, num_samples=3)
    before = [old.suggest(f"t{n}") for n in range(7)]
    state = pickle.loads(pickle.dumps(old.get_state()))  # as the journal keeps it
    rest = suggest_all(old)

    new = set_up(RandomSearch(seed=11), SPACE, num_samples=3)
    new.set_state(state)
    assert suggest_all(new) == rest
    assert len(before) + len(rest) == 18


def test_a_state_from_another_sweep_is_refused() -> None:
    state = set_up(RandomSearch(seed=1), SPACE, num_samples=3).get_state()
    with pytest.raises(ConfigError, match="from a sweep of 18 trials, this one has 12"):
        set_up(RandomSearch(seed=1), SPACE, num_samples=2).set_state(state)
    with pytest.raises(ConfigError, match="not a RandomSearch state"):
        set_up(RandomSearch(seed=1), SPACE, num_samples=3).set_state(b"optuna bytes")


def test_it_must_be_set_up_first() -> None:
    with pytest.raises(RuntimeError, match="call setup"):
        RandomSearch().suggest("t0")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_samples": 0}, "num_samples must be an int >= 1, got 0"),
        ({"mode": "minimize"}, "mode must be 'min', 'max' or None, got 'minimize'"),
        ({"seed": 1.5}, "seed must be an int or None, got 1.5"),
    ],
)
def test_bad_setup_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"metric": None, "mode": None, "num_samples": 1, "seed": None}
    with pytest.raises(ConfigError, match=re.escape(f"RandomSearch: {message}")):
        RandomSearch().setup(SearchSpace(SPACE), **(arguments | kwargs))


def test_a_bad_seed_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="RandomSearch: seed must be an int or None, got '1'"):
        RandomSearch(seed="1")  # type: ignore[arg-type]
