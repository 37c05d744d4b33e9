"""More of what Tune's tests check: failures and retries seen by callbacks, the best
result's filters, stoppers across a pickle, searcher and scheduler options."""

from __future__ import annotations

import os
import pickle
import tempfile
import time

from benchmarks.tune_compat.system import System, case, raises

SRC = "test_tuner"


def _fails_first(s: System, times: int = 1):
    tune = s.tune
    counter = s.marker("attempts")

    def f(config):
        with open(counter, "a") as fh:
            fh.write("x")
        if len(open(counter).read()) <= times:
            raise RuntimeError("not yet")
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "c"), "w").close()
            tune.report({"ok": 1}, checkpoint=tune.Checkpoint.from_directory(d))

    return f


@case("test_function_api")
def case_max_failures_unbounded(s: System) -> None:
    tune = s.tune
    rg = s.fit(_fails_first(s, 3), failure_config=tune.FailureConfig(max_failures=-1))
    assert rg.num_errors == 0 and rg[0].metrics["ok"] == 1


@case("test_callbacks")
def case_callback_on_trial_recover(s: System) -> None:
    tune = s.tune

    class Seen(tune.Callback):
        def __init__(self):
            self.recovered, self.checkpoints = 0, 0

        def on_trial_recover(self, iteration, trials, trial, **info):
            self.recovered += 1

        def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
            self.checkpoints += 1

    seen = Seen()
    s.fit(_fails_first(s, 1), failure_config=tune.FailureConfig(max_failures=1), callbacks=[seen])
    assert seen.recovered == 1 and seen.checkpoints == 1


@case("test_api_checkpoint_integration")
def case_function_checkpoint_frequency_refused(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    raises(
        ValueError,
        lambda: s.fit(f, checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=2)),
    )


@case("test_result_grid")
def case_best_result_skips_nan(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": float("nan") if config["a"] == 3 else config["a"]})

    rg = s.fit(f, {"a": tune.grid_search([1, 2, 3])})
    assert rg.get_best_result("x", "max").config["a"] == 2


@case("test_result_grid")
def case_best_result_scope_avg(s: System) -> None:
    tune = s.tune

    def f(config):
        for v in config["values"]:
            tune.report({"x": v})

    rg = s.fit(f, {"values": tune.grid_search([[0, 0, 9], [5, 5, 5]])})
    assert rg.get_best_result("x", "max", scope="avg").config["values"] == [5, 5, 5]
    assert rg.get_best_result("x", "max", scope="last").config["values"] == [0, 0, 9]
    assert rg.get_best_result("x", "max", scope="last-5-avg").config["values"] == [5, 5, 5]


@case("test_stopper")
def case_timeout_stopper_spent_stays_spent(s: System) -> None:
    stopper = s.mod("stopper").TimeoutStopper(0.5)
    stopper.stop_all()
    time.sleep(0.7)
    assert stopper.stop_all()
    assert pickle.loads(pickle.dumps(stopper)).stop_all()


@case("test_stopper")
def case_stop_unknown_key_not_silent(s: System) -> None:
    tune = s.tune

    def f(config):
        for i in range(50):
            tune.report({"i": i})

    try:
        rg = s.fit(f, stop={"no_such_metric": 1})
    except Exception:
        return
    assert rg.num_errors == 1 or rg[0].metrics["i"] < 49


@case("test_searchers")
def case_concurrency_limiter_batch(s: System) -> None:
    tune = s.tune
    optuna = s.mod("search.optuna").OptunaSearch(seed=0)
    search = s.mod("search").ConcurrencyLimiter(optuna, max_concurrent=2, batch=True)

    def f(config):
        tune.report({"loss": config["x"]})

    rg = s.fit(
        f,
        {"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=4, search_alg=search),
    )
    assert len(rg) == 4 and rg.num_errors == 0


@case("test_sample")
def case_basic_variant_max_concurrent(s: System) -> None:
    tune = s.tune
    spans = s.marker("spans")

    def f(config):
        start = time.time()
        time.sleep(0.3)
        with open(spans, "a") as fh:
            fh.write(f"{start} {time.time()}\n")
        tune.report({"x": 1})

    gen = s.mod("search").BasicVariantGenerator(max_concurrent=1)
    s.fit(f, {"a": tune.grid_search([1, 2, 3])}, tune_config=tune.TuneConfig(search_alg=gen))
    rows = sorted(tuple(map(float, line.split())) for line in open(spans))
    assert len(rows) == 3 and all(rows[i][1] <= rows[i + 1][0] for i in range(2))


@case("doc_code/tuning")
def case_pbt_synch(s: System) -> None:
    tune = s.tune

    def f(config):
        for i in range(1, 7):
            with tempfile.TemporaryDirectory() as d:
                open(os.path.join(d, "c"), "w").close()
                tune.report(
                    {"score": config["lr"] * i}, checkpoint=tune.Checkpoint.from_directory(d)
                )

    pbt = s.mod("schedulers").PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        synch=True,
        hyperparam_mutations={"lr": [0.1, 0.5, 1.0]},
    )
    rg = s.fit(
        f,
        {"lr": tune.choice([0.1, 0.5, 1.0])},
        tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=2, scheduler=pbt),
    )
    assert len(rg) == 2 and rg.num_errors == 0


@case("doc_code/trainables")
def case_class_reset_config_with_reuse(s: System) -> None:
    tune = s.tune

    class T(tune.Trainable):
        def setup(self, config):
            self.a = config["a"]

        def step(self):
            return {"a": self.a, "done": True}

        def reset_config(self, new_config):
            self.a = new_config["a"]
            return True

    rg = s.fit(
        T,
        {"a": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(reuse_actors=True, max_concurrent_trials=1),
    )
    assert sorted(r.metrics["a"] for r in rg) == [1, 2, 3]


@case("doc_code/checkpoints")
def case_checkpoint_only_some_iterations(s: System) -> None:
    tune = s.tune

    def f(config):
        for i in range(1, 7):
            if i % 3 == 0:
                with tempfile.TemporaryDirectory() as d:
                    open(os.path.join(d, str(i)), "w").close()
                    tune.report({"i": i}, checkpoint=tune.Checkpoint.from_directory(d))
            else:
                tune.report({"i": i})

    r = s.fit(f)[0]
    assert [m["i"] for _, m in r.best_checkpoints] == [3, 6]
    with r.checkpoint.as_directory() as d:
        # dot files aside (ours keeps a checksum manifest there: see the README)
        assert [n for n in os.listdir(d) if not n.startswith(".")] == ["6"]
