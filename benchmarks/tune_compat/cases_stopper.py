"""Stoppers: what ``test_stopper.py`` and the docs' stopping page check."""

from __future__ import annotations

import datetime
import pickle
import time

from benchmarks.tune_compat.system import System, case

SRC = "test_stopper"
DOCS = "doc_code/stopping"


def _forever(s: System, metric=lambda i, config: i):
    tune = s.tune

    def f(config):
        i = 0
        while True:
            i += 1
            time.sleep(0.02)
            tune.report({"m": metric(i, config), "i": i})

    return f


@case(SRC)
def case_maximum_iteration_stopper(s: System) -> None:
    stop = s.mod("stopper").MaximumIterationStopper(max_iter=4)
    rg = s.fit(_forever(s), stop=stop)
    assert rg[0].metrics["training_iteration"] == 4


@case(SRC)
def case_trial_plateau_stopper(s: System) -> None:
    stop = s.mod("stopper").TrialPlateauStopper(metric="m", std=0.01, num_results=4, grace_period=4)
    rg = s.fit(_forever(s, lambda i, c: 1.0), stop=stop)
    assert rg[0].metrics["training_iteration"] == 4


@case(SRC)
def case_trial_plateau_threshold(s: System) -> None:
    stopper = s.mod("stopper")
    stop = stopper.CombinedStopper(
        stopper.TrialPlateauStopper(
            metric="m", std=0.01, num_results=3, grace_period=3, metric_threshold=5.0, mode="min"
        ),
        stopper.MaximumIterationStopper(12),
    )
    # constant 10: a plateau, but above the threshold for "min": runs on to 12
    rg = s.fit(_forever(s, lambda i, c: 10.0), stop=stop)
    assert rg[0].metrics["training_iteration"] == 12


@case(SRC)
def case_experiment_plateau_stopper(s: System) -> None:
    tune = s.tune
    stop = s.mod("stopper").ExperimentPlateauStopper(metric="m", top=2, patience=0, std=0.001)
    rg = s.fit(_forever(s, lambda i, c: 1.0), {"a": tune.grid_search([1, 2])}, stop=stop)
    assert all(r.metrics.get("training_iteration", 0) < 100 for r in rg)


@case(SRC)
def case_timeout_stopper_seconds(s: System) -> None:
    stop = s.mod("stopper").TimeoutStopper(3)
    started = time.monotonic()
    rg = s.fit(_forever(s), stop=stop)
    assert len(rg) == 1 and time.monotonic() - started < 120


@case(SRC)
def case_timeout_stopper_timedelta(s: System) -> None:
    stop = s.mod("stopper").TimeoutStopper(datetime.timedelta(seconds=3))
    rg = s.fit(_forever(s), stop=stop)
    assert len(rg) == 1


@case(SRC)
def case_timeout_stopper_pickle_keeps_budget(s: System) -> None:
    stopper = s.mod("stopper").TimeoutStopper(60)
    stopper.stop_all()
    again = pickle.loads(pickle.dumps(stopper))
    assert not again.stop_all()


@case(SRC)
def case_combined_stopper(s: System) -> None:
    stopper = s.mod("stopper")

    class AtThree(s.tune.Stopper):
        def __call__(self, trial_id, result):
            return result["i"] >= 3

        def stop_all(self):
            return False

    stop = stopper.CombinedStopper(stopper.MaximumIterationStopper(10), AtThree())
    rg = s.fit(_forever(s), stop=stop)
    assert rg[0].metrics["i"] == 3


@case(SRC)
def case_function_stopper(s: System) -> None:
    stop = s.mod("stopper").FunctionStopper(lambda trial_id, result: result["m"] >= 5)
    rg = s.fit(_forever(s), stop=stop)
    assert rg[0].metrics["m"] == 5


@case(DOCS)
def case_stop_dict_metric_threshold(s: System) -> None:
    rg = s.fit(_forever(s, lambda i, c: i / 10), stop={"m": 0.3})
    assert rg[0].metrics["i"] == 3


@case(DOCS)
def case_stop_function(s: System) -> None:
    rg = s.fit(_forever(s), stop=lambda trial_id, result: result["i"] >= 6)
    assert rg[0].metrics["i"] == 6


@case(DOCS)
def case_custom_stopper_stop_all(s: System) -> None:
    tune = s.tune

    class AfterN(tune.Stopper):
        def __init__(self):
            self.seen = 0

        def __call__(self, trial_id, result):
            self.seen += 1
            return False

        def stop_all(self):
            return self.seen >= 5

    rg = s.fit(_forever(s), {"a": tune.grid_search([1, 2])}, stop=AfterN())
    assert all(r.metrics.get("training_iteration", 0) < 100 for r in rg)


@case(DOCS)
def case_stop_per_trial_by_config(s: System) -> None:
    tune = s.tune

    def f(config):
        for i in range(1, 100):
            tune.report({"i": i, "limit": config["limit"]})

    rg = s.fit(
        f,
        {"limit": tune.grid_search([2, 4])},
        stop=lambda tid, result: result["i"] >= result["limit"],
    )
    assert sorted(r.metrics["i"] for r in rg) == [2, 4]
