"""Tuner and TuneConfig: what ``test_tuner.py`` and the docs' tuning pages check."""

from __future__ import annotations

import os
import threading
import time

from benchmarks.tune_compat.system import System, case, raises

SRC = "test_tuner"
DOCS = "doc_code/tuning"


@case(SRC)
def case_grid_runs_each_value(s: System) -> None:
    def f(config):
        s_tune.report({"score": config["a"] * 2})

    s_tune = s.tune
    rg = s.fit(f, {"a": s.tune.grid_search([1, 2, 3])})
    assert len(rg) == 3
    assert sorted(r.config["a"] for r in rg) == [1, 2, 3]
    assert sorted(r.metrics["score"] for r in rg) == [2, 4, 6]


@case(SRC)
def case_num_samples_repeats_grid(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    rg = s.fit(
        f,
        {"a": tune.grid_search([1, 2]), "b": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(num_samples=2),
    )
    assert len(rg) == 4
    assert sorted(r.config["a"] for r in rg) == [1, 1, 2, 2]


@case(SRC)
def case_function_return_dict_is_result(s: System) -> None:
    def f(config):
        return {"score": config["a"] * 2}

    rg = s.fit(f, {"a": 3})
    assert rg[0].metrics["score"] == 6


@case(SRC)
def case_class_trainable_runs_until_stop(s: System) -> None:
    class T(s.tune.Trainable):
        def setup(self, config):
            self.a = config["a"]

        def step(self):
            return {"value": self.a * self.iteration}

    rg = s.fit(T, {"a": 2}, stop={"training_iteration": 3})
    assert rg[0].metrics["training_iteration"] == 3
    assert rg[0].metrics["value"] == 4


@case(SRC)
def case_nested_param_space(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"v": config["outer"]["inner"] + config["outer"]["fixed"]})

    rg = s.fit(f, {"outer": {"inner": tune.choice([5]), "fixed": 1}})
    assert rg[0].config == {"outer": {"inner": 5, "fixed": 1}}
    assert rg[0].metrics["v"] == 6


@case(SRC)
def case_param_space_must_be_dict(s: System) -> None:
    raises((ValueError, TypeError), lambda: s.tune.Tuner(lambda c: None, param_space=[1, 2]))


@case(SRC)
def case_unpicklable_trainable_refused_at_build(s: System) -> None:
    lock = threading.Lock()

    def f(config):
        with lock:
            pass

    raises(TypeError, lambda: s.tune.Tuner(f))


@case(SRC)
def case_get_results_after_fit(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": config["a"]})

    tuner = s.tuner(f, {"a": tune.grid_search([1, 2])})
    rg = tuner.fit()
    again = tuner.get_results()
    assert sorted(r.metrics["x"] for r in again) == sorted(r.metrics["x"] for r in rg)


@case(SRC)
def case_trial_dirname_creator(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    rg = s.fit(
        f,
        {"a": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(
            trial_dirname_creator=lambda trial: f"mine_{trial.config['a']}"
        ),
    )
    assert sorted(os.path.basename(r.path) for r in rg) == ["mine_1", "mine_2"]


@case(SRC)
def case_trial_name_creator(s: System) -> None:
    tune = s.tune
    names = s.marker("names")

    def f(config):
        with open(names + tune.get_context().get_trial_name(), "w"):
            pass
        tune.report({"x": 1})

    s.fit(
        f,
        {"a": tune.grid_search([7])},
        tune_config=tune.TuneConfig(trial_name_creator=lambda t: f"named_{t.config['a']}"),
    )
    assert os.path.exists(names + "named_7")


@case(SRC)
def case_context_names_trial(s: System) -> None:
    tune = s.tune

    def f(config):
        ctx = tune.get_context()
        tune.report(
            {
                "id": ctx.get_trial_id(),
                "name": ctx.get_trial_name(),
                "exp": ctx.get_experiment_name(),
                "dir_ok": os.path.isdir(ctx.get_trial_dir()),
            }
        )

    rg = s.fit(f, name="ctx_exp")
    m = rg[0].metrics
    assert m["exp"] == "ctx_exp" and m["dir_ok"] and m["id"] == m["trial_id"] and m["name"]


@case(SRC)
def case_working_dir_is_per_trial(s: System) -> None:
    tune = s.tune

    def f(config):
        with open("written_here.txt", "w") as fh:
            fh.write(str(config["a"]))
        tune.report(
            {"cwd": os.path.realpath(os.getcwd()), "orig": os.environ.get("TUNE_ORIG_WORKING_DIR")}
        )

    rg = s.fit(f, {"a": tune.grid_search([1, 2])})
    here = os.path.realpath(os.getcwd())
    assert len({r.metrics["cwd"] for r in rg}) == 2
    for r in rg:
        assert r.metrics["cwd"] != here
        assert os.path.realpath(r.metrics["orig"]) == here
        with open(os.path.join(r.metrics["cwd"], "written_here.txt")) as fh:
            assert fh.read() == str(r.config["a"])


@case(SRC)
def case_max_concurrent_trials(s: System) -> None:
    tune = s.tune
    spans = s.marker("spans")

    def f(config):
        start = time.time()
        time.sleep(0.5)
        with open(spans, "a") as fh:
            fh.write(f"{start} {time.time()}\n")
        tune.report({"x": 1})

    s.fit(
        f, {"a": tune.grid_search([1, 2, 3])}, tune_config=tune.TuneConfig(max_concurrent_trials=1)
    )
    rows = sorted(tuple(map(float, line.split())) for line in open(spans))
    assert len(rows) == 3
    assert all(rows[i][1] <= rows[i + 1][0] for i in range(2)), rows


@case(SRC)
def case_errors_do_not_raise_from_fit(s: System) -> None:
    tune = s.tune

    def f(config):
        if config["a"] == 2:
            raise ValueError("boom")
        tune.report({"x": 1})

    rg = s.fit(f, {"a": tune.grid_search([1, 2])})
    assert rg.num_errors == 1 and len(rg.errors) == 1 and rg.num_terminated == 1


@case(SRC)
def case_error_keeps_user_type(s: System) -> None:
    def f(config):
        raise ValueError("boom")

    rg = s.fit(f)
    assert isinstance(rg.errors[0], ValueError)
    assert isinstance(rg[0].error, ValueError)
    assert "boom" in str(rg[0].error)


@case(SRC)
def case_time_budget_ends_run(s: System) -> None:
    tune = s.tune

    def f(config):
        while True:
            time.sleep(0.1)
            tune.report({"x": 1})

    started = time.monotonic()
    rg = s.fit(f, tune_config=tune.TuneConfig(time_budget_s=4))
    assert len(rg) == 1 and time.monotonic() - started < 120


@case(SRC)
def case_num_samples_infinite_with_budget(s: System) -> None:
    tune = s.tune

    def f(config):
        time.sleep(0.2)
        tune.report({"x": config["a"]})

    rg = s.fit(
        f, {"a": tune.uniform(0, 1)}, tune_config=tune.TuneConfig(num_samples=-1, time_budget_s=8)
    )
    assert len(rg) >= 1


@case(SRC)
def case_with_parameters_function(s: System) -> None:
    tune = s.tune
    import numpy as np

    data = np.arange(100_000)

    def f(config, data=None):
        tune.report({"total": int(data.sum()) + config["a"]})

    rg = s.fit(tune.with_parameters(f, data=data), {"a": 1})
    assert rg[0].metrics["total"] == int(data.sum()) + 1


@case(SRC)
def case_with_parameters_class(s: System) -> None:
    tune = s.tune

    class T(tune.Trainable):
        def setup(self, config, offset=None):
            self.offset = offset

        def step(self):
            return {"v": self.offset, "done": True}

    rg = s.fit(tune.with_parameters(T, offset=41))
    assert rg[0].metrics["v"] == 41


@case(SRC)
def case_with_resources_dict(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    rg = s.fit(tune.with_resources(f, {"cpu": 2}), {"a": tune.grid_search([1, 2])})
    assert rg.num_errors == 0 and len(rg) == 2


@case(SRC)
def case_with_resources_function(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    rg = s.fit(tune.with_resources(f, lambda config: {"cpu": config["n"]}), {"n": 1})
    assert rg.num_errors == 0


@case(SRC)
def case_callback_sees_every_trial(s: System) -> None:
    tune = s.tune

    class Counter(tune.Callback):
        def __init__(self):
            self.results, self.completed, self.started, self.ended = 0, [], 0, False

        def on_trial_start(self, iteration, trials, trial, **info):
            self.started += 1

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self.results += 1

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.completed.append(trial.config["a"])

        def on_experiment_end(self, trials, **info):
            self.ended = True

    def f(config):
        for _ in range(2):
            tune.report({"x": 1})

    cb = Counter()
    s.fit(f, {"a": tune.grid_search([1, 2])}, callbacks=[cb])
    assert cb.started == 2 and cb.results == 4 and sorted(cb.completed) == [1, 2] and cb.ended


@case(SRC)
def case_callback_on_trial_error(s: System) -> None:
    tune = s.tune

    class Errors(tune.Callback):
        def __init__(self):
            self.errors = []

        def on_trial_error(self, iteration, trials, trial, **info):
            self.errors.append(trial.config["a"])

    def f(config):
        raise RuntimeError("x")

    cb = Errors()
    s.fit(f, {"a": 3}, callbacks=[cb])
    assert cb.errors == [3]


@case(SRC)
def case_fail_fast_raise(s: System) -> None:
    tune = s.tune

    def f(config):
        raise ValueError("first")

    raises(
        Exception,
        lambda: s.fit(
            f, {"a": tune.grid_search([1, 2])}, failure_config=tune.FailureConfig(fail_fast="raise")
        ),
    )


@case(DOCS)
def case_fail_fast_stops_others(s: System) -> None:
    tune = s.tune

    def f(config):
        if config["a"] == 1:
            raise ValueError("first")
        tune.report({"x": 1})

    rg = s.fit(
        f,
        {"a": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        failure_config=tune.FailureConfig(fail_fast=True),
    )
    assert rg.num_errors == 1
    assert sum(1 for r in rg if r.metrics and "x" in r.metrics) == 0


@case(DOCS)
def case_tune_config_metric_mode_for_best(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"loss": (config["x"] - 2) ** 2})

    rg = s.fit(
        f,
        {"x": tune.grid_search([0, 1, 2, 3])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
    )
    assert rg.get_best_result().config["x"] == 2


@case(DOCS)
def case_reuse_actors_false(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"pid": os.getpid()})

    rg = s.fit(
        f, {"a": tune.grid_search([1, 2, 3])}, tune_config=tune.TuneConfig(reuse_actors=False)
    )
    assert len(rg) == 3 and rg.num_errors == 0


@case(DOCS)
def case_sample_from_derived(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"b": config["b"]})

    rg = s.fit(
        f, {"a": tune.grid_search([1, 2]), "b": tune.sample_from(lambda spec: spec.config.a * 10)}
    )
    assert sorted(r.metrics["b"] for r in rg) == [10, 20]
