"""Tune's search-space Domain API (``ray.tune.search.sample``): the classes users check
with ``isinstance``, ``.sample(config, size, random_state)``, and samplers chosen by
hand (``Float(0, 1).uniform().quantized(0.1)``), over trialflow's domains."""

from __future__ import annotations

import functools
import pickle
import random
from typing import Any

import numpy as np
import pytest

from orchestrator import search, tune
from orchestrator.errors import ConfigError
from orchestrator.tune.sample import translate_space
from orchestrator.tune.search.sample import Categorical, Domain, Float, Function, Integer


@pytest.mark.parametrize(
    ("domain", "cls"),
    [
        (tune.uniform(0, 1), Float),
        (tune.quniform(0, 1, 0.1), Float),
        (tune.loguniform(1e-3, 1), Float),
        (tune.qloguniform(1, 100, 1), Float),
        (tune.randn(0, 1), Float),
        (tune.qrandn(0, 1, 0.5), Float),
        (tune.randint(0, 10), Integer),
        (tune.qrandint(0, 10, 2), Integer),
        (tune.lograndint(1, 100), Integer),
        (tune.qlograndint(1, 100, 2), Integer),
        (tune.choice([1, 2]), Categorical),
        (tune.sample_from(lambda spec: 1), Function),
    ],
)
def test_each_function_gives_tunes_class_and_stays_a_trialflow_domain(
    domain: object, cls: type
) -> None:
    assert isinstance(domain, cls) and isinstance(domain, Domain)
    assert isinstance(domain, search.Domain)
    if not isinstance(domain, Function):  # a lambda does not pickle
        assert pickle.loads(pickle.dumps(domain)) == domain


def test_sample_gives_one_value_or_a_list_of_size_values_repeatable_by_seed() -> None:
    domain = tune.uniform(2, 3)
    assert isinstance(domain.sample(), float)
    values = domain.sample(size=20)
    assert isinstance(values, list) and len(values) == 20
    assert all(2 <= value <= 3 for value in values)
    assert domain.sample(size=5, random_state=7) == domain.sample(size=5, random_state=7)
    generator = np.random.default_rng(3)
    assert 2 <= domain.sample(random_state=generator) <= 3
    np.random.seed(11)  # Tune draws from numpy's global state when given none
    first = domain.sample(size=3)
    np.random.seed(11)
    assert domain.sample(size=3) == first


def test_bounds_quantization_and_dtypes_hold_in_samples() -> None:
    ints = tune.randint(0, 3).sample(size=200, random_state=0)
    assert set(ints) == {0, 1, 2} and all(type(value) is int for value in ints)
    quantized = tune.qrandint(0, 10, 5).sample(size=200, random_state=0)
    assert set(quantized) == {0, 5, 10}  # upper included for q > 1, as on Tune
    steps = tune.quniform(0, 1, 0.25).sample(size=200, random_state=0)
    assert set(steps) <= {0.0, 0.25, 0.5, 0.75, 1.0}
    logs = tune.loguniform(1e-4, 1e-1).sample(size=200, random_state=0)
    assert all(1e-4 <= value <= 1e-1 for value in logs)
    assert min(logs) < 1e-3  # each decade as likely, not mostly the top one
    picks = tune.choice(["a", [1], None]).sample(size=100, random_state=0)
    assert {repr(value) for value in picks} == {"'a'", "[1]", "None"}


def test_a_domain_built_by_hand_chooses_one_sampler() -> None:
    bare = Float(0.0, 1.0)
    assert isinstance(bare, Float) and (bare.lower, bare.upper) == (0.0, 1.0)
    assert 0 <= bare.sample() <= 1  # Tune's default sampler: uniform
    chosen = bare.uniform()
    assert isinstance(chosen, search.Uniform) and chosen.domain_str == "(0.0, 1.0)"
    with pytest.raises(ValueError, match="only choose one sampler"):
        chosen.loguniform()
    assert isinstance(Float(1, 10).loguniform(), search.LogUniform)
    assert isinstance(Float(1, 10).loguniform().quantized(1), search.QLogUniform)
    assert isinstance(Float(None, None).normal(1.0, 2.0), search.RandN)
    assert isinstance(Integer(1, 9).loguniform().quantized(2), search.QLogRandInt)
    assert isinstance(Integer(0, 9).quantized(3), search.QRandInt)
    with pytest.raises(ValueError, match="Uniform requires a lower bound"):
        Float(None, 1).uniform()
    with pytest.raises(ValueError, match="not divisible by quantization factor 0.1"):
        Float(0.05, 1).uniform().quantized(0.1)
    with pytest.raises(ValueError, match="greater than 0"):
        Float(0, 1).loguniform()
    with pytest.raises(ValueError, match="upper variable bound 32(.0)? is not divisible by"):
        Float(0, 32).quantized(3)
    thirds = Float(0, 33).quantized(3).sample(size=300, random_state=1)
    assert set(thirds) <= {3.0 * k for k in range(12)} and 33.0 in thirds


def test_a_domain_without_sampler_is_uniform_in_a_tune_space_refused_in_ours() -> None:
    translated = translate_space({"lr": Float(0, 1), "n": Integer(1, 4), "c": Categorical("ab")})
    assert translated == {"lr": tune.uniform(0, 1), "n": tune.randint(1, 4), "c": tune.choice("ab")}
    with pytest.raises(ConfigError, match="'lr'.*no sampler"):
        search.SearchSpace({"lr": Float(0, 1)})


def test_categorical_and_function_read_as_on_tune() -> None:
    colors = Categorical(["red", "blue"]).uniform()
    assert len(colors) == 2 and colors[1] == "blue" and colors.categories == ["red", "blue"]
    assert colors.is_valid("red") and not colors.is_valid("green")
    assert Categorical([1, 2]).grid().is_grid() and not colors.is_grid()
    assert tune.randint(0, 5).is_valid(3) and not tune.uniform(0, 1).is_valid(2)
    double = tune.sample_from(lambda spec: spec["config"]["a"] * 2)
    assert double.is_function() and double.sample({"a": 4}) == 8
    assert Function(lambda: 5).sample() == 5 and not Function(lambda: 5).pass_config
    with pytest.raises(ValueError, match="either 0 or 1 parameters"):
        Function(lambda a, b: a)

    def with_default(spec: Any, b: str = "ok") -> str:
        return b

    def two_needed(spec: Any, b: str) -> str:
        return b

    assert tune.sample_from(with_default).sample(None) == "ok"
    assert tune.sample_from(functools.partial(two_needed, b="set")).sample(None) == "set"
    with pytest.raises(ValueError, match="either 0 or 1 parameters"):
        tune.sample_from(two_needed)  # refused when built, as on Tune


def test_the_searchers_still_read_tunes_domains() -> None:
    space = search.SearchSpace(
        {"x": tune.quniform(0, 1, 0.5), "y": tune.sample_from(lambda s: s["config"]["x"])}
    )
    config = space.sample(random.Random(0))
    assert config["x"] in (0.0, 0.5, 1.0) and config["y"] == config["x"]
