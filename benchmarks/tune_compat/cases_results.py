"""ResultGrid and Result: what ``test_result_grid.py`` checks."""

from __future__ import annotations

import os

from benchmarks.tune_compat.system import System, case, raises

SRC = "test_result_grid"


def _three_reports(s: System):
    tune = s.tune

    def f(config):
        p = config["nested"]["param"]
        for k in (1, 4, 3):
            tune.report({"metric": p * k})

    return s.fit(f, {"nested": {"param": tune.grid_search([1, 2])}})


@case(SRC)
def case_best_result_by_metric(s: System) -> None:
    tune = s.tune

    def f(config):
        for _ in range(2):
            tune.report({"x": config["x"]})

    rg = s.fit(f, {"x": tune.grid_search([1, 2])})
    best = rg.get_best_result(metric="x", mode="max")
    assert best.config["x"] == 2 and best.metrics["x"] == 2
    assert rg.get_best_result(metric="x", mode="min").config["x"] == 1


@case(SRC)
def case_best_result_scope_all(s: System) -> None:
    rg = _three_reports(s)
    assert rg.get_best_result("metric", "max", scope="all").config["nested"]["param"] == 2
    assert rg.get_best_result("metric", "min", scope="last").config["nested"]["param"] == 1


@case(SRC)
def case_best_result_no_report_raises(s: System) -> None:
    def f(config):
        pass

    rg = s.fit(f, {"x": s.tune.grid_search([1, 2])})
    raises(RuntimeError, lambda: rg.get_best_result(metric="x", mode="max"))


@case(SRC)
def case_best_result_needs_metric_and_mode(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    rg = s.fit(f, tune_config=tune.TuneConfig(num_samples=2))
    raises(ValueError, lambda: rg.get_best_result())
    raises(ValueError, lambda: rg.get_best_result(metric="x"))
    raises(ValueError, lambda: rg.get_best_result(mode="max"))


@case(SRC)
def case_best_result_one_trial_no_metric(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    assert s.fit(f).get_best_result().metrics["x"] == 1


@case(SRC)
def case_dataframe_last_results(s: System) -> None:
    df = _three_reports(s).get_dataframe()
    assert sorted(df["metric"]) == [3, 6]


@case(SRC)
def case_dataframe_filter_metric(s: System) -> None:
    rg = _three_reports(s)
    assert sorted(rg.get_dataframe(filter_metric="metric", filter_mode="max")["metric"]) == [4, 8]
    df = rg.get_dataframe(filter_metric="metric", filter_mode="min")
    assert sorted(df["metric"]) == [1, 2]
    assert sorted(df["config/nested/param"]) == [1, 2]


@case(SRC)
def case_result_repr_hides_auto_keys(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"loss": 1})

    rg = s.fit(f, {"x": tune.grid_search([1, 2])})
    auto = s.mod("result").AUTO_RESULT_KEYS
    text = repr(rg[0])
    assert "loss" in text and not any(key in text for key in auto)


@case(SRC)
def case_result_fields(s: System) -> None:
    tune = s.tune

    def f(config):
        for i in range(2):
            tune.report({"step": i})

    r = s.fit(f, {"a": 1})[0]
    import pandas as pd

    assert isinstance(r.metrics, dict) and r.config == {"a": 1}
    assert r.metrics["config"] == r.config
    assert isinstance(r.metrics_dataframe, pd.DataFrame) and len(r.metrics_dataframe) == 2
    assert r.error is None and os.path.isdir(r.path)


@case(SRC)
def case_no_checkpoint_is_none(s: System) -> None:
    r = s.fit(lambda config: None)[0]
    assert r.checkpoint is None


@case(SRC)
def case_best_checkpoints_history(s: System) -> None:
    tune = s.tune

    def f(config):
        import tempfile

        for i in range(2):
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "c.txt"), "w") as fh:
                    fh.write(str(i))
                tune.report(
                    {"x": config["x"], "step": i}, checkpoint=tune.Checkpoint.from_directory(d)
                )

    rg = s.fit(f, {"x": tune.grid_search([1, 3])})
    best = rg.get_best_result(metric="x", mode="max")
    assert len(best.best_checkpoints) == 2
    for i, (ckpt, metrics) in enumerate(best.best_checkpoints):
        assert isinstance(ckpt, tune.Checkpoint)
        assert metrics["x"] == 3 and metrics["step"] == i


@case(SRC)
def case_grid_len_index_iterate(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": config["a"]})

    rg = s.fit(f, {"a": tune.grid_search([1, 2, 3])})
    assert len(rg) == 3 and len(list(rg)) == 3
    assert {rg[i].config["a"] for i in range(3)} == {1, 2, 3}


@case(SRC)
def case_experiment_path(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"x": 1})

    rg = s.fit(f, name="where")
    assert os.path.normpath(rg.experiment_path) == os.path.normpath(os.path.join(s.tmp, "where"))
    assert os.path.isdir(rg.experiment_path)
    assert os.path.dirname(os.path.normpath(rg[0].path)) == os.path.normpath(rg.experiment_path)


@case(SRC)
def case_result_from_path(s: System) -> None:
    tune = s.tune

    def f(config):
        for i in range(3):
            tune.report({"i": i})

    r = s.fit(f, {"a": 5})[0]
    again = tune.Result.from_path(r.path)
    assert again.metrics["i"] == 2 and again.config == {"a": 5}


@case(SRC)
def case_experiment_analysis_reads_run(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"score": config["a"]})

    rg = s.fit(f, {"a": tune.grid_search([1, 2])})
    analysis = tune.ExperimentAnalysis(
        rg.experiment_path, default_metric="score", default_mode="max"
    )
    assert analysis.best_config["a"] == 2
    assert len(analysis.dataframe()) == 2


@case(SRC)
def case_moved_experiment_results(s: System) -> None:
    tune = s.tune

    def f(config):
        import tempfile

        for i in range(2):
            with tempfile.TemporaryDirectory() as d:
                open(os.path.join(d, "c"), "w").close()
                tune.report({"i": i}, checkpoint=tune.Checkpoint.from_directory(d))

    rg = s.fit(f, name="moving")
    moved = os.path.join(s.tmp, "moved")
    os.rename(rg.experiment_path, moved)
    restored = tune.Tuner.restore(moved, f).get_results()
    assert restored[0].checkpoint is not None
    assert "moved" in restored[0].checkpoint.path
