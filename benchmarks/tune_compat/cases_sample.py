"""Search spaces and BasicVariantGenerator: what ``test_sample.py`` checks."""

from __future__ import annotations

import numpy as np

from benchmarks.tune_compat.system import System, case, raises

SRC = "test_sample"


def _values(domain, n=200):
    return domain.sample(size=n, random_state=0)


@case(SRC)
def case_uniform_bounds(s: System) -> None:
    xs = _values(s.tune.uniform(-2, -1))
    assert all(-2 <= x < -1 and isinstance(float(x), float) for x in xs) and len(xs) == 200


@case(SRC)
def case_loguniform_bounds(s: System) -> None:
    xs = _values(s.tune.loguniform(1e-4, 1e-1))
    assert all(1e-4 <= x <= 1e-1 for x in xs)


@case(SRC)
def case_quniform_multiples(s: System) -> None:
    xs = _values(s.tune.quniform(2, 6, 0.5))
    assert all(2 <= x <= 6 and abs(x / 0.5 - round(x / 0.5)) < 1e-9 for x in xs)


@case(SRC)
def case_randint_upper_exclusive(s: System) -> None:
    xs = _values(s.tune.randint(-9, 15))
    assert all(-9 <= x < 15 and int(x) == x for x in xs) and max(xs) == 14


@case(SRC)
def case_qrandint_upper_inclusive(s: System) -> None:
    xs = _values(s.tune.qrandint(-21, 12, 3))
    assert all(-21 <= x <= 12 and x % 3 == 0 for x in xs) and 12 in set(xs)


@case(SRC)
def case_lograndint_bounds(s: System) -> None:
    xs = _values(s.tune.lograndint(1, 10))
    assert all(1 <= x < 10 and int(x) == x for x in xs)


@case(SRC)
def case_choice_values(s: System) -> None:
    xs = _values(s.tune.choice(["a", "b", "c"]))
    assert set(xs) == {"a", "b", "c"}


@case(SRC)
def case_randn_and_qrandn(s: System) -> None:
    xs = _values(s.tune.randn(10, 2), 1000)
    assert 9 < float(np.mean(xs)) < 11
    qs = _values(s.tune.qrandn(10, 2, 0.2))
    assert all(abs(q / 0.2 - round(q / 0.2)) < 1e-6 for q in qs)


@case(SRC)
def case_sample_seeded_repeats(s: System) -> None:
    d = s.tune.uniform(0, 1)
    assert list(d.sample(size=5, random_state=7)) == list(d.sample(size=5, random_state=7))


@case(SRC)
def case_domain_classes_by_hand(s: System) -> None:
    sample = s.mod("search.sample")
    d = sample.Float(1e-3, 1).loguniform().quantized(1e-3)
    xs = d.sample(size=50, random_state=0)
    assert all(1e-3 <= x <= 1 for x in xs)
    assert sample.Integer(1, 10).is_valid(5) and not sample.Integer(1, 10).is_valid(12)
    assert sample.Categorical([1, 2]).categories == [1, 2]


@case(SRC)
def case_second_sampler_refused(s: System) -> None:
    raises(ValueError, lambda: s.tune.uniform(0, 1).normal())


@case(SRC)
def case_quantized_bound_checked(s: System) -> None:
    raises(ValueError, lambda: s.mod("search.sample").Float(0.05, 1).uniform().quantized(0.1))


@case(SRC)
def case_sample_from_bad_signature(s: System) -> None:
    raises(ValueError, lambda: s.tune.sample_from(lambda a, b: 1))


@case(SRC)
def case_grid_cross_product(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    rg = s.fit(f, {"a": tune.grid_search([1, 2]), "b": tune.grid_search(["x", "y"])})
    assert sorted((r.config["a"], r.config["b"]) for r in rg) == [
        (1, "x"),
        (1, "y"),
        (2, "x"),
        (2, "y"),
    ]


@case(SRC)
def case_literal_grid_dict(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    rg = s.fit(f, {"a": {"grid_search": [3, 4]}})
    assert sorted(r.config["a"] for r in rg) == [3, 4]


@case(SRC)
def case_points_to_evaluate_first(s: System) -> None:
    tune = s.tune
    search = s.mod("search")

    def f(config):
        tune.report({"x": config["a"]})

    gen = search.BasicVariantGenerator(points_to_evaluate=[{"a": 0.123}])
    rg = s.fit(
        f, {"a": tune.uniform(0, 1)}, tune_config=tune.TuneConfig(search_alg=gen, num_samples=3)
    )
    assert len(rg) == 3 and 0.123 in [r.config["a"] for r in rg]


@case(SRC)
def case_points_to_evaluate_partial(s: System) -> None:
    tune = s.tune
    search = s.mod("search")

    def f(config):
        tune.report({"x": 1})

    gen = search.BasicVariantGenerator(points_to_evaluate=[{"a": 5}])
    rg = s.fit(
        f,
        {"a": tune.randint(0, 3), "b": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(search_alg=gen, num_samples=1),
    )
    assert rg[0].config["a"] == 5 and 0 <= rg[0].config["b"] <= 1


@case(SRC)
def case_random_state_reproducible(s: System) -> None:
    tune = s.tune
    search = s.mod("search")

    def f(config):
        tune.report({"x": 1})

    def configs(name):
        gen = search.BasicVariantGenerator(random_state=1234)
        rg = s.fit(
            f,
            {"a": tune.uniform(0, 1)},
            name=name,
            tune_config=tune.TuneConfig(search_alg=gen, num_samples=3),
        )
        return sorted(r.config["a"] for r in rg)

    assert configs("one") == configs("two")


@case(SRC)
def case_numpy_seed_reproducible(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    def configs(name):
        np.random.seed(42)
        rg = s.fit(
            f, {"a": tune.randint(0, 10**6)}, name=name, tune_config=tune.TuneConfig(num_samples=3)
        )
        return sorted(r.config["a"] for r in rg)

    assert configs("one") == configs("two")


@case(SRC)
def case_sample_from_reads_spec_forms(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    rg = s.fit(
        f,
        {
            "a": 3,
            "b": tune.sample_from(lambda spec: spec["config"]["a"] + 1),
            "c": tune.sample_from(lambda: 9),
        },
    )
    assert rg[0].config["b"] == 4 and rg[0].config["c"] == 9
