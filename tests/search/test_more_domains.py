"""Ray Tune's remaining domains: each draws within its bounds, with Tune's rules for which
bound is included and how values are quantized, and refuses bad arguments by key."""

from __future__ import annotations

import math
import random
from collections import Counter
from statistics import fmean, pstdev
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.search import (
    Domain,
    OptunaSearch,
    SearchSpace,
    lograndint,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    randn,
)

N = 20_000


def draws(domain: Domain, n: int = N) -> list[Any]:
    rng = random.Random(0)
    return [domain.sample(rng) for _ in range(n)]


def test_randn_has_the_mean_and_spread_asked_for() -> None:
    values = draws(randn(3.0, 2.0))
    assert fmean(values) == pytest.approx(3.0, abs=0.05)
    assert pstdev(values) == pytest.approx(2.0, abs=0.05)


def test_qrandn_gives_multiples_of_q() -> None:
    values = draws(qrandn(0.0, 1.0, 0.5), n=2000)
    assert all(math.isclose(v / 0.5, round(v / 0.5)) for v in values)


def test_qrandint_includes_its_upper_bound_and_steps_by_q() -> None:
    assert set(draws(qrandint(2, 10, 2), n=2000)) == {2, 4, 6, 8, 10}
    assert set(draws(qrandint(1, 3), n=2000)) == {1, 2, 3}


def test_lograndint_excludes_its_upper_bound_and_favours_small_values() -> None:
    counts = Counter(draws(lograndint(1, 100)))
    assert min(counts) == 1 and max(counts) == 99
    assert sum(c for v, c in counts.items() if v < 10) / N == pytest.approx(0.5, abs=0.02)


def test_qlograndint_and_qloguniform_stay_on_their_grid_within_bounds() -> None:
    ints = draws(qlograndint(10, 1000, 10), n=5000)
    assert all(v % 10 == 0 and 10 <= v <= 1000 for v in ints)
    floats = draws(qloguniform(0.1, 10.0, 0.1), n=5000)
    assert all(0.1 <= v <= 10.0 and math.isclose(v * 10, round(v * 10)) for v in floats)


@pytest.mark.parametrize(
    ("domain", "words"),
    [
        (randn(0.0, 0.0), "sd > 0"),
        (qrandn(0.0, 1.0, 0), "q must be"),
        (qrandint(1, 10, 0), "q must be"),
        (qrandint(3, 5, 10), "no multiple"),
        (lograndint(0, 10), "low must be > 0"),
        (qloguniform(0.0, 1.0, 0.5), "above 0"),
    ],
)
def test_bad_arguments_are_refused_naming_the_key(domain: Domain, words: str) -> None:
    with pytest.raises(ConfigError, match=f"space key 'a'.*{words}"):
        SearchSpace({"a": domain})


def test_optuna_takes_the_new_domains_and_keeps_their_rules() -> None:
    pytest.importorskip("optuna")
    searcher = OptunaSearch(seed=0)
    space = SearchSpace(
        {
            "a": qrandint(2, 10, 2),
            "b": lograndint(1, 50),
            "c": qlograndint(10, 100, 10),
            "d": qloguniform(0.1, 5.0, 0.1),
        }
    )
    searcher.setup(space, metric="m", mode="max", num_samples=30, seed=None)
    for n in range(30):
        config = searcher.suggest(f"t{n}")
        assert config is not None
        assert config["a"] in (2, 4, 6, 8, 10) and 1 <= config["b"] < 50
        assert config["c"] % 10 == 0 and math.isclose(config["d"] * 10, round(config["d"] * 10))
        searcher.on_trial_complete(f"t{n}", {"m": float(config["a"])})


def test_optuna_refuses_a_normal_domain_it_cannot_sample() -> None:
    pytest.importorskip("optuna")
    with pytest.raises(ConfigError, match="no Optuna distribution"):
        OptunaSearch().setup(
            SearchSpace({"a": randn()}), metric="m", mode="max", num_samples=1, seed=None
        )
