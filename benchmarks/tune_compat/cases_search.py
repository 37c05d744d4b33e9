"""Searchers (Optuna, your own, limiters) and schedulers: ``test_searchers.py`` and the
docs' tuning pages."""

from __future__ import annotations

import math
import os

from benchmarks.tune_compat.system import System, case, raises

SRC = "test_searchers"
DOCS = "doc_code/tuning"


def _quadratic(s: System):
    tune = s.tune

    def f(config):
        tune.report({"loss": (config["x"] - 0.3) ** 2})

    return f


def _define_by_run(trial):
    """An Optuna define-by-run space (module level: Tune pickles its searcher)."""
    trial.suggest_float("x", 0, 1)
    if trial.suggest_categorical("kind", ["a", "b"]) == "a":
        trial.suggest_int("n", 1, 3)


def _optuna(s: System):
    return s.mod("search.optuna").OptunaSearch


@case(SRC)
def case_optuna_in_tuner(s: System) -> None:
    tune = s.tune
    rg = s.fit(
        _quadratic(s),
        {"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(
            metric="loss", mode="min", num_samples=6, search_alg=_optuna(s)(seed=1)
        ),
    )
    assert len(rg) == 6 and rg.num_errors == 0
    assert rg.get_best_result().metrics["loss"] == min(r.metrics["loss"] for r in rg)


@case(SRC)
def case_optuna_points_to_evaluate(s: System) -> None:
    tune = s.tune
    search = _optuna(s)(points_to_evaluate=[{"x": 0.3}], seed=0)
    rg = s.fit(
        _quadratic(s),
        {"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=3, search_alg=search),
    )
    assert rg.get_best_result().config["x"] == 0.3


@case(SRC)
def case_optuna_evaluated_rewards(s: System) -> None:
    tune = s.tune
    search = _optuna(s)(points_to_evaluate=[{"x": 0.9}], evaluated_rewards=[0.36], seed=0)
    rg = s.fit(
        _quadratic(s),
        {"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=2, search_alg=search),
    )
    assert len(rg) == 2 and all(r.config["x"] != 0.9 for r in rg)


@case(SRC)
def case_optuna_define_by_run(s: System) -> None:
    tune = s.tune

    search = _optuna(s)(space=_define_by_run, metric="loss", mode="min", seed=0)
    rg = s.fit(_quadratic(s), tune_config=tune.TuneConfig(num_samples=4, search_alg=search))
    assert len(rg) == 4 and all("x" in r.config and "kind" in r.config for r in rg)


@case(SRC)
def case_optuna_distributions_space(s: System) -> None:
    import optuna

    tune = s.tune
    search = _optuna(s)(
        space={"x": optuna.distributions.FloatDistribution(0, 1)}, metric="loss", mode="min", seed=0
    )
    rg = s.fit(_quadratic(s), tune_config=tune.TuneConfig(num_samples=3, search_alg=search))
    assert len(rg) == 3 and all(0 <= r.config["x"] <= 1 for r in rg)


@case(SRC)
def case_optuna_multi_objective(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"a": config["x"], "b": 1 - config["x"]})

    search = _optuna(s)(metric=["a", "b"], mode=["min", "min"], seed=0)
    rg = s.fit(
        f, {"x": tune.uniform(0, 1)}, tune_config=tune.TuneConfig(num_samples=4, search_alg=search)
    )
    assert len(rg) == 4 and rg.get_best_result("a", "min").metrics["a"] == min(
        r.metrics["a"] for r in rg
    )


@case(SRC)
def case_optuna_seed_reproducible(s: System) -> None:
    tune = s.tune

    def configs(name):
        rg = s.fit(
            _quadratic(s),
            {"x": tune.uniform(0, 1)},
            name=name,
            tune_config=tune.TuneConfig(
                metric="loss", mode="min", num_samples=3, search_alg=_optuna(s)(seed=5)
            ),
        )
        return sorted(r.config["x"] for r in rg)

    assert configs("one") == configs("two")


@case(SRC)
def case_optuna_nan_result_survives(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"loss": float("nan") if config["x"] > 0.5 else config["x"]})

    rg = s.fit(
        f,
        {"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(
            metric="loss", mode="min", num_samples=6, search_alg=_optuna(s)(seed=2)
        ),
    )
    assert len(rg) == 6 and rg.num_errors == 0


@case(SRC)
def case_optuna_reports_many_times(s: System) -> None:
    tune = s.tune

    def f(config):
        for i in range(5):
            tune.report({"loss": config["x"] / (i + 1)})

    rg = s.fit(
        f,
        {"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(
            metric="loss", mode="min", num_samples=3, search_alg=_optuna(s)(seed=0)
        ),
    )
    assert all(r.metrics["training_iteration"] == 5 for r in rg)


@case(SRC)
def case_optuna_save_restore(s: System) -> None:
    tune = s.tune
    OptunaSearch = _optuna(s)
    search = OptunaSearch(metric="loss", mode="min", seed=0)
    s.fit(
        _quadratic(s),
        {"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(num_samples=2, search_alg=search),
    )
    path = os.path.join(s.tmp, "searcher.pkl")
    search.save(path)
    again = OptunaSearch()
    again.restore(path)
    rg = s.fit(  # the restored searcher has its space: no param_space (Tune refuses one)
        _quadratic(s),
        name="second",
        tune_config=tune.TuneConfig(num_samples=2, search_alg=again),
    )
    assert len(rg) == 2


@case(SRC)
def case_optuna_standalone_suggest(s: System) -> None:
    search = _optuna(s)()
    assert search.set_search_properties("loss", "min", {"x": s.tune.uniform(0, 1)})
    config = search.suggest("t1")
    assert 0 <= config["x"] <= 1
    search.on_trial_complete("t1", {"loss": 0.5, "x": config["x"]})


@case(SRC)
def case_optuna_convert_search_space(s: System) -> None:
    import optuna

    OptunaSearch = _optuna(s)
    space = OptunaSearch.convert_search_space(
        {"a": {"b": s.tune.uniform(0, 1)}, "c": s.tune.choice([1, 2])}
    )
    assert isinstance(space["a/b"], optuna.distributions.FloatDistribution)
    assert isinstance(space["c"], optuna.distributions.CategoricalDistribution)


@case(SRC)
def case_optuna_grid_refused(s: System) -> None:
    raises(ValueError, lambda: _optuna(s).convert_search_space({"a": s.tune.grid_search([1, 2])}))


@case(SRC)
def case_optuna_add_evaluated_point(s: System) -> None:
    search = _optuna(s)(space={"x": s.tune.uniform(0, 1)}, metric="loss", mode="min")
    search.add_evaluated_point({"x": 0.5}, 0.04)
    config = search.suggest("t1")
    assert 0 <= config["x"] <= 1


@case(DOCS)
def case_concurrency_limiter(s: System) -> None:
    tune = s.tune
    search = s.mod("search").ConcurrencyLimiter(_optuna(s)(seed=0), max_concurrent=1)
    rg = s.fit(
        _quadratic(s),
        {"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=3, search_alg=search),
    )
    assert len(rg) == 3


@case(DOCS)
def case_repeater(s: System) -> None:
    tune = s.tune
    search = s.mod("search").Repeater(_optuna(s)(seed=0), repeat=2)
    rg = s.fit(
        _quadratic(s),
        {"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=4, search_alg=search),
    )
    assert len(rg) == 4 and len({r.config["x"] for r in rg}) == 2


@case(DOCS)
def case_own_searcher(s: System) -> None:
    tune = s.tune
    Searcher = s.mod("search").Searcher

    class Counting(Searcher):
        def __init__(self):
            super().__init__(metric="loss", mode="min")
            self.n, self.done = 0, []

        def suggest(self, trial_id):
            if self.n >= 3:
                return Searcher.FINISHED
            self.n += 1
            return {"x": self.n / 10}

        def on_trial_complete(self, trial_id, result=None, error=False):
            self.done.append(trial_id)

    searcher = Counting()
    rg = s.fit(_quadratic(s), tune_config=tune.TuneConfig(num_samples=10, search_alg=searcher))
    assert sorted(r.config["x"] for r in rg) == [0.1, 0.2, 0.3]
    assert len(searcher.done) == 3


def _climb(s: System, steps: int = 8):
    tune = s.tune

    def f(config):
        for i in range(1, steps + 1):
            tune.report({"acc": config["q"] * i})

    return f


@case(DOCS)
def case_asha_stops_weak_trials(s: System) -> None:
    tune = s.tune
    asha = s.mod("schedulers").ASHAScheduler(max_t=8, grace_period=1, reduction_factor=2)
    # The strongest first, one at a time: the weaker meet filled rungs (async ASHA
    # never stops a trial that reaches a rung first, so the order must not be left to
    # the machine's load).
    rg = s.fit(
        _climb(s),
        {"q": tune.grid_search([0.4, 0.3, 0.2, 0.1])},
        tune_config=tune.TuneConfig(
            metric="acc", mode="max", scheduler=asha, max_concurrent_trials=1
        ),
    )
    iters = [r.metrics["training_iteration"] for r in rg]
    assert max(iters) == 8 and min(iters) < 8


@case(DOCS)
def case_hyperband_runs(s: System) -> None:
    tune = s.tune
    hb = s.mod("schedulers").HyperBandScheduler(max_t=8)
    rg = s.fit(
        _climb(s),
        {"q": tune.grid_search([0.1, 0.2, 0.3])},
        tune_config=tune.TuneConfig(metric="acc", mode="max", scheduler=hb),
    )
    assert len(rg) == 3 and rg.num_errors == 0
    assert rg.get_best_result().config["q"] == 0.3


@case(DOCS)
def case_median_stopping_rule(s: System) -> None:
    tune = s.tune
    msr = s.mod("schedulers").MedianStoppingRule(grace_period=1, min_samples_required=1)
    rg = s.fit(
        _climb(s),
        {"q": tune.grid_search([0.1, 0.2, 0.3])},
        tune_config=tune.TuneConfig(metric="acc", mode="max", scheduler=msr),
    )
    assert len(rg) == 3 and rg.num_errors == 0


@case(DOCS)
def case_pbt_mutates(s: System) -> None:
    tune = s.tune

    def f(config):
        import json
        import tempfile

        step = 0
        ckpt = tune.get_checkpoint()
        if ckpt:
            with ckpt.as_directory() as d:
                step = json.load(open(os.path.join(d, "s.json")))["step"]
        while step < 12:
            step += 1
            with tempfile.TemporaryDirectory() as d:
                json.dump({"step": step}, open(os.path.join(d, "s.json"), "w"))
                tune.report(
                    {"score": config["lr"] * step}, checkpoint=tune.Checkpoint.from_directory(d)
                )

    pbt = s.mod("schedulers").PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=3,
        hyperparam_mutations={"lr": tune.uniform(0.01, 1)},
    )
    rg = s.fit(
        f,
        {"lr": tune.uniform(0.01, 1)},
        tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=3, scheduler=pbt),
    )
    assert len(rg) == 3 and rg.num_errors == 0
    assert all(not math.isnan(r.metrics["score"]) for r in rg)


@case(DOCS)
def case_fifo_scheduler(s: System) -> None:
    tune = s.tune
    rg = s.fit(
        _climb(s, 3),
        {"q": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(
            metric="acc", mode="max", scheduler=s.mod("schedulers").FIFOScheduler()
        ),
    )
    assert all(r.metrics["training_iteration"] == 3 for r in rg)
