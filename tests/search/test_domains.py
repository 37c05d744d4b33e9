"""Each domain draws from the distribution it names, reproducibly, and refuses bad bounds."""

from __future__ import annotations

import dataclasses
import math
import pickle
import random
from collections import Counter
from statistics import fmean
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.search import (
    Domain,
    choice,
    grid,
    loguniform,
    quniform,
    randint,
    sample_from,
    uniform,
)

N = 20_000


def draws(domain: Domain, seed: int = 0, n: int = N) -> list[Any]:
    rng = random.Random(seed)
    return [domain.sample(rng) for _ in range(n)]


def test_uniform_stays_in_bounds_with_the_mean_in_the_middle() -> None:
    values = draws(uniform(2, 5))
    assert all(2.0 <= v <= 5.0 for v in values)
    assert fmean(values) == pytest.approx(3.5, abs=0.05)  # the mean's sd is 0.006
    assert min(values) < 2.01 and max(values) > 4.99


def test_loguniform_spreads_evenly_over_orders_of_magnitude() -> None:
    values = draws(loguniform(1e-4, 1e-1))
    assert all(1e-4 <= v <= 1e-1 for v in values)
    assert fmean(math.log10(v) for v in values) == pytest.approx(-2.5, abs=0.05)
    for decade in (-4, -3, -2):  # each decade holds a third of the draws
        share = sum(10.0**decade <= v < 10.0 ** (decade + 1) for v in values) / N
        assert share == pytest.approx(1 / 3, abs=0.02)


def test_quniform_gives_exact_multiples_of_q_within_the_bounds() -> None:
    values = draws(quniform(0.1, 0.7, 0.1))
    assert set(values) == {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}  # exactly, no 0.30000000000000004


def test_quniform_moves_bounds_that_are_not_multiples_inwards() -> None:
    counts = Counter(draws(quniform(1, 10, 3)))
    assert set(counts) == {3.0, 6.0, 9.0}
    # Uniform over [3, 9], then rounded: the two extremes get half a step each.
    assert counts[6.0] / N == pytest.approx(0.5, abs=0.02)
    assert counts[3.0] / N == pytest.approx(0.25, abs=0.02)


def test_quniform_lowest_highest_and_quantize() -> None:
    domain = quniform(0.15, 0.95, 0.1)
    assert (domain.lowest, domain.highest) == (0.2, 0.9)
    assert domain.quantize(0.5400000001) == 0.5
    assert domain.quantize(5.0) == 0.9  # kept within the bounds


def test_randint_excludes_high_and_reaches_both_ends() -> None:
    counts = Counter(draws(randint(-2, 3)))
    assert set(counts) == {-2, -1, 0, 1, 2}
    assert all(type(v) is int for v in counts)
    assert all(c / N == pytest.approx(0.2, abs=0.02) for c in counts.values())


def test_choice_picks_each_value_equally_often() -> None:
    counts = Counter(draws(choice(["a", "b", "c"]), n=30_000))
    assert set(counts) == {"a", "b", "c"}
    assert all(c / 30_000 == pytest.approx(1 / 3, abs=0.02) for c in counts.values())


def test_choice_hands_out_copies() -> None:
    domain = choice([[1, 2]])
    domain.sample(random.Random(0)).append(3)
    assert domain.values == ([1, 2],)


@pytest.mark.parametrize(
    "domain",
    [uniform(0, 1), loguniform(1e-3, 1), quniform(0, 10, 0.5), randint(0, 1000), choice(range(50))],
    ids=repr,
)
def test_the_same_seed_draws_the_same_values_another_seed_others(domain: Domain) -> None:
    assert draws(domain, seed=7, n=50) == draws(domain, seed=7, n=50)
    assert draws(domain, seed=7, n=50) != draws(domain, seed=8, n=50)


@pytest.mark.parametrize(
    ("domain", "words"),
    [
        (choice([]), "choice needs at least one value"),
        (choice("abc"), "choice takes a list of values, got str"),
        (choice([1, uniform(0, 1)]), "choice values must be constants"),
        (grid([]), "grid needs at least one value"),
        (uniform(1.0, 0.5), "uniform low must be < high, got low=1.0 high=0.5"),
        (uniform(1, 1), "uniform low must be < high"),
        (uniform("0", 1), "uniform bounds must be numbers"),  # type: ignore[arg-type]
        (uniform(True, 2), "uniform bounds must be numbers"),
        (uniform(0, math.inf), "uniform bounds must be finite"),
        (loguniform(0, 1), "loguniform low must be > 0, got low=0.0"),
        (loguniform(-1, 1), "loguniform low must be > 0"),
        (loguniform(2, 1), "loguniform low must be < high"),
        (quniform(0, 1, 0), "quniform q must be a number > 0, got q=0.0"),
        (quniform(0, 1, -0.5), "quniform q must be a number > 0"),
        (quniform(0.1, 0.2, 1), "quniform has no multiple of q=1.0 within [0.1, 0.2]"),
        (quniform(1, 0, 0.1), "quniform low must be < high"),
        (randint(0, 2.5), "randint bounds must be ints, got low=0 high=2.5"),  # type: ignore[arg-type]
        (randint(3, 3), "randint low must be < high (high is excluded)"),
        (sample_from(42), "sample_from takes a function config -> value, got int"),  # type: ignore[arg-type]
    ],
    ids=repr,
)
def test_a_bad_domain_says_what_is_wrong_and_cannot_be_sampled(domain: Domain, words: str) -> None:
    assert domain.problem is not None and words in domain.problem
    with pytest.raises(ConfigError, match="must|needs|takes|has no"):
        domain.sample(random.Random(0))


@pytest.mark.parametrize(
    "domain", [uniform(0, 1), randint(0, 5), quniform(0.1, 0.7, 0.1)], ids=repr
)
def test_a_good_domain_has_no_problem(domain: Domain) -> None:
    assert domain.problem is None


def test_grid_and_sample_from_are_not_sampled_on_their_own() -> None:
    with pytest.raises(ConfigError, match="expanded by the searcher"):
        grid([1, 2]).sample(random.Random(0))
    with pytest.raises(ConfigError, match="resolved by SearchSpace.sample"):
        sample_from(lambda cfg: 1).sample(random.Random(0))


def test_repr_reads_like_the_call_that_built_it() -> None:
    assert repr(uniform(0, 1)) == "uniform(0.0, 1.0)"
    assert repr(loguniform(1e-4, 0.1)) == "loguniform(0.0001, 0.1)"
    assert repr(quniform(0, 10, 2)) == "quniform(0.0, 10.0, 2.0)"
    assert repr(randint(0, 10)) == "randint(0, 10)"
    assert repr(choice((2, 4))) == "choice([2, 4])"
    assert repr(grid(["a"])) == "grid(['a'])"

    def scale(cfg: Any) -> float:
        return 1.0

    assert "sample_from(" in repr(sample_from(scale)) and "scale" in repr(sample_from(scale))


def test_to_json() -> None:
    assert uniform(0, 1).to_json() == {"uniform": [0.0, 1.0]}
    assert loguniform(1e-4, 0.1).to_json() == {"loguniform": [1e-4, 0.1]}
    assert quniform(0, 10, 2).to_json() == {"quniform": [0.0, 10.0, 2.0]}
    assert randint(0, 10).to_json() == {"randint": [0, 10]}
    assert choice([2, 4]).to_json() == {"choice": [2, 4]}
    assert grid(["a", "b"]).to_json() == {"grid": ["a", "b"]}
    with pytest.raises(ConfigError, match="sample_from has no JSON form"):
        sample_from(lambda cfg: 1).to_json()


def test_domains_are_frozen_comparable_and_picklable() -> None:
    domain = quniform(0, 10, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        domain.q = 3.0  # type: ignore[misc]
    assert domain == quniform(0.0, 10.0, 2.0) and domain != quniform(0, 10, 5)
    assert pickle.loads(pickle.dumps(domain)) == domain
    assert pickle.loads(pickle.dumps(choice([1, "a"]))) == choice([1, "a"])
