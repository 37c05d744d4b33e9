"""SearchSpace: whole configs built, sample_from resolved in dependency order, every bad key
named before a trial starts; and the CLI's JSON form."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.search import (
    Choice,
    Grid,
    LogUniform,
    QUniform,
    RandInt,
    SearchSpace,
    Uniform,
    choice,
    grid,
    loguniform,
    quniform,
    randint,
    sample_from,
    space_from_json,
    uniform,
)


def example() -> dict[str, Any]:
    return {
        "lr": loguniform(1e-4, 1e-1),
        "layers": choice([2, 4, 8]),
        "opt": {"name": grid(["sgd", "adam"]), "momentum": uniform(0.8, 0.99)},
        "wd": sample_from(lambda cfg: cfg["lr"] / 10),
        "epochs": 20,
    }


def test_a_sample_is_a_full_plain_config() -> None:
    space = SearchSpace(example())
    config = space.sample(random.Random(1), {("opt", "name"): "adam"})
    assert set(config) == {"lr", "layers", "opt", "wd", "epochs"}
    assert 1e-4 <= config["lr"] <= 1e-1 and config["layers"] in (2, 4, 8)
    assert config["opt"]["name"] == "adam" and 0.8 <= config["opt"]["momentum"] <= 0.99
    assert config["wd"] == config["lr"] / 10 and config["epochs"] == 20
    assert type(config) is dict and type(config["opt"]) is dict


def test_random_domains_and_grids_in_the_dicts_order() -> None:
    space = SearchSpace(
        {"b": {"y": uniform(0, 1), "x": grid([1, 2])}, "a": randint(0, 3), "z": grid(["p", "q"])}
    )
    assert list(space.random_domains) == [("b", "y"), ("a",)]
    assert list(space.grid_domains) == [("b", "x"), ("z",)]
    assert space.num_grid_points == 4
    # The first grid key varies fastest, as in Ray Tune.
    assert space.grid_points == [
        {("b", "x"): 1, ("z",): "p"},
        {("b", "x"): 2, ("z",): "p"},
        {("b", "x"): 1, ("z",): "q"},
        {("b", "x"): 2, ("z",): "q"},
    ]


def test_no_grid_is_one_empty_grid_point() -> None:
    space = SearchSpace({"x": uniform(0, 1)})
    assert space.num_grid_points == 1 and space.grid_points == [{}]


def test_constants_pass_through_unchanged_and_unshared() -> None:
    layers = [64, [32, 16]]
    space = SearchSpace({"layers": layers, "name": "mlp", "none": None, "x": uniform(0, 1)})
    first = space.sample(random.Random(0))
    assert first["layers"] == [64, [32, 16]] and first["name"] == "mlp" and first["none"] is None
    first["layers"][1].append(8)
    layers.append(0)  # the space took a copy
    assert space.sample(random.Random(0))["layers"] == [64, [32, 16]]


def test_a_class_with_a_sample_method_is_a_constant() -> None:
    class Model:
        def sample(self) -> None: ...

    assert SearchSpace({"model": Model}).sample(random.Random(0)) == {"model": Model}


def test_the_same_seed_gives_the_same_configs() -> None:
    space = SearchSpace({"a": uniform(0, 1), "b": {"c": choice(range(100))}})
    one, two, other = random.Random(5), random.Random(5), random.Random(6)
    assert [space.sample(one) for _ in range(5)] == [space.sample(two) for _ in range(5)]
    assert space.sample(one) != space.sample(other)


def test_sample_from_reads_keys_defined_after_it_and_nested_ones() -> None:
    space = SearchSpace(
        {
            "top": sample_from(lambda cfg: cfg["opt"]["wd"] * 2),
            "opt": {
                "wd": sample_from(lambda cfg: cfg["opt"]["lr"] / 10),
                "lr": loguniform(1e-4, 1e-1),
            },
            "lr_copy": sample_from(lambda cfg: cfg["opt"]["lr"]),
        }
    )
    config = space.sample(random.Random(0))
    assert config["opt"]["wd"] == config["opt"]["lr"] / 10
    assert config["top"] == config["opt"]["wd"] * 2 and config["lr_copy"] == config["opt"]["lr"]


def test_each_sample_from_runs_once_per_config_however_often_it_is_read() -> None:
    calls: list[int] = []

    def base(cfg: Mapping[str, Any]) -> int:
        calls.append(1)
        return 3

    space = SearchSpace(
        {
            "a": sample_from(lambda cfg: cfg["base"] + 1),
            "b": sample_from(lambda cfg: cfg["base"] + cfg["a"]),
            "base": sample_from(base),
        }
    )
    calls.clear()  # the dry run at construction called it once
    assert space.sample(random.Random(0)) == {"a": 4, "b": 7, "base": 3}
    assert len(calls) == 1


def test_the_view_is_a_read_only_mapping_that_resolves_only_what_is_read() -> None:
    seen: dict[str, Any] = {}
    order: list[str] = []

    def look(cfg: Mapping[str, Any]) -> str:
        seen.update(has_later="later" in cfg, missing=cfg.get("missing", "default"))
        seen["keys"] = list(cfg)
        order.append("look")
        return "done"

    def later(cfg: Mapping[str, Any]) -> int:
        order.append("later")
        return 1

    SearchSpace({"look": sample_from(look), "later": sample_from(later)})
    assert seen == {"has_later": True, "missing": "default", "keys": ["look", "later"]}
    assert order == ["look", "later"]  # neither `in` nor iterating resolved "later"

    def write(cfg: Any) -> None:
        cfg["x"] = 1

    with pytest.raises(ConfigError, match="space key 'w': sample_from function raised TypeError"):
        SearchSpace({"w": sample_from(write), "x": 0})


def test_a_config_never_holds_the_view() -> None:
    space = SearchSpace(
        {
            "opt": {"lr": uniform(0, 1), "wd": sample_from(lambda cfg: 0.5)},
            "copy": sample_from(lambda cfg: cfg["opt"]),
            "both": sample_from(lambda cfg: [cfg["opt"], {"o": cfg["opt"]}]),
        }
    )
    config = space.sample(random.Random(0))
    assert type(config["copy"]) is dict and config["copy"] == config["opt"]
    assert type(config["both"][0]) is dict and type(config["both"][1]["o"]) is dict
    config["copy"]["lr"] = -1.0
    assert config["opt"]["lr"] != -1.0


def test_resolve_takes_the_given_values_and_samples_the_rest() -> None:
    space = SearchSpace(example())
    config = space.resolve({("lr",): 0.01, ("opt", "name"): "sgd"}, random.Random(0))
    assert config["lr"] == 0.01 and config["wd"] == 0.001 and config["opt"]["name"] == "sgd"
    assert config["layers"] in (2, 4, 8) and 0.8 <= config["opt"]["momentum"] <= 0.99
    with pytest.raises(ConfigError, match="space key 'epochs': not a sampled or grid key"):
        space.resolve({("epochs",): 3, ("opt", "name"): "sgd"}, random.Random(0))
    with pytest.raises(ConfigError, match="space key 'opt.name': a grid key needs a value"):
        space.resolve({("lr",): 0.01}, random.Random(0))


def test_a_grid_space_needs_its_grid_point() -> None:
    space = SearchSpace(example())
    with pytest.raises(ConfigError, match="space key 'opt.name': a grid key needs a value"):
        space.sample(random.Random(0))
    with pytest.raises(ConfigError, match="space key 'lr': not a grid key"):
        space.sample(random.Random(0), {("opt", "name"): "sgd", ("lr",): 1.0})


def test_a_sample_from_cycle_names_its_keys() -> None:
    with pytest.raises(ConfigError, match=r"space keys 'a' -> 'opt.b' -> 'a': .*cycle"):
        SearchSpace(
            {
                "a": sample_from(lambda cfg: cfg["opt"]["b"]),
                "opt": {"b": sample_from(lambda cfg: cfg["a"])},
            }
        )
    with pytest.raises(ConfigError, match=r"space keys 'me' -> 'me'"):
        SearchSpace({"me": sample_from(lambda cfg: cfg)})


class FakeTuneDomain:
    """What a Ray Tune domain looks like from here: an object with a sample method."""

    def sample(self, spec: Any = None) -> float:
        return 0.5


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"opt": {"momentum": uniform(1.0, 0.5)}},
            "space key 'opt.momentum': uniform low must be < high, got low=1.0 high=0.5",
        ),
        ({"opt": {"name": choice([])}}, "space key 'opt.name': choice needs at least one value"),
        ({"g": grid([])}, "space key 'g': grid needs at least one value"),
        ({"lr": loguniform(0, 1)}, "space key 'lr': loguniform low must be > 0"),
        ({"a": {"q": quniform(0, 1, 0)}}, "space key 'a.q': quniform q must be a number > 0"),
        ({"n": randint(0, 1.5)}, "space key 'n': randint bounds must be ints"),  # type: ignore[arg-type]
        ({"f": sample_from("x")}, "space key 'f': sample_from takes a function"),  # type: ignore[arg-type]
        (
            {"opt": {"wd": sample_from(lambda cfg: cfg["opt"]["lr"] / 0), "lr": 1.0}},
            "space key 'opt.wd': sample_from function raised ZeroDivisionError: float division",
        ),
        (
            {"x": sample_from(lambda cfg: cfg["nope"])},
            "space key 'x': sample_from function raised KeyError: 'nope'",
        ),
        (
            {"x": sample_from(lambda cfg: uniform(0, 1))},
            "space key 'x': sample_from function returned uniform(0.0, 1.0); return a value",
        ),
        ({"opt": {"lr": FakeTuneDomain()}}, "space key 'opt.lr': FakeTuneDomain object is not"),
        ({"l": [1, [2, FakeTuneDomain()]]}, "space key 'l': FakeTuneDomain object at [1][1]"),
        ({"l": [1, {"a": uniform(0, 1)}]}, "space key 'l': uniform(0.0, 1.0) at [1]['a'] is"),
        ({"g": {"grid_search": [1, 2]}}, "space key 'g': Ray Tune's {'grid_search': [...]}"),
        ({"opt": {1: 2}}, "space key 'opt.1': keys must be str, got int"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_bad_space_fails_at_construction_naming_the_key(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SearchSpace(raw)
    assert message in str(caught.value)


def test_a_space_must_be_a_dict() -> None:
    with pytest.raises(ConfigError, match="a search space must be a dict.*got list"):
        SearchSpace([uniform(0, 1)])  # type: ignore[arg-type]


def test_space_from_json_builds_the_domains() -> None:
    raw = space_from_json(
        {
            "lr": {"loguniform": [1e-4, 0.1]},
            "layers": {"choice": [2, 4]},
            "x": {"uniform": [0, 1]},
            "q": {"quniform": [0, 10, 2]},
            "n": {"randint": [0, 10]},
            "g": {"grid": ["a", "b"]},
            "const": 3,
            "pair": {"choice": [1], "other": 2},
            "nested": {"a": {"choice": [1]}},
        }
    )
    assert raw["lr"] == LogUniform(1e-4, 0.1) and raw["layers"] == Choice([2, 4])
    assert raw["x"] == Uniform(0, 1) and raw["q"] == QUniform(0, 10, 2)
    assert raw["n"] == RandInt(0, 10) and raw["g"] == Grid(["a", "b"])
    assert raw["const"] == 3 and raw["nested"] == {"a": Choice([1])}
    assert raw["pair"] == {"choice": [1], "other": 2}  # two keys: a nested dict, not a domain


def test_space_from_json_round_trips() -> None:
    obj = {
        "lr": {"loguniform": [0.0001, 0.1]},
        "layers": {"choice": [2, 4, [8, 8]]},
        "opt": {"m": {"uniform": [0.5, 1.0]}, "q": {"quniform": [0.0, 10.0, 2.0]}},
        "n": {"randint": [0, 10]},
        "g": {"grid": ["a", "b"]},
        "const": [1, 2],
        "empty": {},
    }
    text = json.dumps(SearchSpace(space_from_json(obj)).to_json())
    assert json.loads(text) == obj
    assert SearchSpace(space_from_json(json.loads(text))).to_json() == obj


def test_to_json_refuses_what_would_not_read_back() -> None:
    with pytest.raises(ConfigError, match="space key 'f': sample_from has no JSON form"):
        SearchSpace({"f": sample_from(lambda cfg: 1)}).to_json()
    with pytest.raises(ConfigError, match="space key 'c': a dict whose only key is 'choice'"):
        SearchSpace({"c": {"choice": [1, 2]}}).to_json()
    assert SearchSpace({"choice": 3}).to_json() == {"choice": 3}  # the top level never is one


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"x": {"uniform": [0, 1, 2]}}, "space key 'x': uniform takes [low, high], got [0, 1, 2]"),
        ({"a": {"q": {"quniform": [0, 10]}}}, "space key 'a.q': quniform takes [low, high, q]"),
        ({"c": {"choice": "ab"}}, "space key 'c': choice takes [value, ...], got 'ab'"),
        ({"c": {"choice": []}}, "space key 'c': choice needs at least one value"),
        ({"n": {"randint": [0.5, 3]}}, "space key 'n': randint bounds must be ints"),
        ({"lr": {"loguniform": [0, 1]}}, "space key 'lr': loguniform low must be > 0"),
        ({"x": {"uniform": [1, 0]}}, "space key 'x': uniform low must be < high"),
        ({"q": {"quniform": [0, 1, -1]}}, "space key 'q': quniform q must be a number > 0"),
        ({"u": {"uniform": 1}}, "space key 'u': uniform takes [low, high], got 1"),
        ({"f": {"sample_from": "x"}}, "space key 'f': sample_from has no JSON form"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_bad_json_form_names_the_key(obj: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        space_from_json(obj)
    assert message in str(caught.value)


def test_a_json_space_must_be_an_object() -> None:
    with pytest.raises(ConfigError, match="a JSON search space must be an object.*got list"):
        space_from_json([1])
