"""More of ``test_tuner_restore.py``: restores that lost their newest checkpoints, moved
or relative directories, retention across a restore, ``with_parameters`` objects put
again, a callback that fails the run; and the Ray names users mix into a Tune script
(``ray.remote`` of a ``with_resources`` function, Ray Train's configs and checkpoint)."""

from __future__ import annotations

import os
import shutil

from benchmarks.tune_compat.cases_function import _load, _resuming, _save
from benchmarks.tune_compat.system import System, case, raises

RS = "test_tuner_restore"
FN = "test_function_api"


def _checkpoint_dirs(path: str) -> list[str]:
    return sorted(d for d in os.listdir(path) if d.startswith("checkpoint_"))


def _fails_after(s: System, steps: int):
    """Reports ``steps`` checkpoints from where it resumes, then fails while the marker
    exists, else reports one more."""
    tune = s.tune
    marker = s.marker("fail")
    open(marker, "w").close()

    def f(config):
        ckpt = tune.get_checkpoint()
        step = _load(ckpt) if ckpt else 0
        for _ in range(steps):
            step += 1
            _save(tune, step)
        if os.path.exists(marker):
            raise RuntimeError("failing while the marker exists")
        _save(tune, step + 1)

    return f, marker


@case(RS)
def case_restore_finished_counts_and_best(s: System) -> None:
    tune = s.tune

    def f(config):
        return 1

    tc = tune.TuneConfig(num_samples=3, metric="_metric", mode="max")
    rg = s.fit(f, tune_config=tc, name="n")
    tuner = tune.Tuner.restore(rg.experiment_path, trainable=f)
    before = tuner.get_results()
    assert len(before) == 3 and before.get_best_result().metrics["_metric"] == 1
    after = tuner.fit()
    assert len(after) == 3 and after.get_best_result().metrics["_metric"] == 1


@case(RS)
def case_restore_newest_checkpoints_deleted(s: System) -> None:
    tune = s.tune
    f, marker = _fails_after(s, 4)
    rg = s.fit(f, name="latest")
    assert rg.num_errors == 1 and rg[0].metrics["step"] == 4
    trial_dir = rg[0].path
    for name in _checkpoint_dirs(trial_dir)[-2:]:  # the two newest are lost
        shutil.rmtree(os.path.join(trial_dir, name))
    os.remove(marker)
    tuner = tune.Tuner.restore(rg.experiment_path, trainable=f, resume_errored=True)
    result = tuner.fit()[0]
    assert result.error is None
    assert result.metrics["step"] == 2 + 4 + 1  # from the newest kept, four, one more


@case(RS)
def case_restore_keeps_num_to_keep_across_runs(s: System) -> None:
    tune = s.tune
    f, marker = _fails_after(s, 2)
    keep = tune.CheckpointConfig(num_to_keep=4)
    rg = s.fit(f, name="keep", checkpoint_config=keep)
    assert len(_checkpoint_dirs(rg[0].path)) == 2
    os.remove(marker)
    result = tune.Tuner.restore(rg.experiment_path, trainable=f, resume_errored=True).fit()[0]
    assert result.metrics["step"] == 5 and _load(result.checkpoint) == 5
    assert len(_checkpoint_dirs(result.path)) == 4  # the first run's oldest was deleted


@case(RS)
def case_restore_moved_and_renamed(s: System) -> None:
    tune = s.tune
    f, marker = _fails_after(s, 1)
    keep = tune.CheckpointConfig(num_to_keep=2)
    rg = s.fit(f, name="old", checkpoint_config=keep)
    assert rg.num_errors == 1
    moved = os.path.join(s.tmp, "elsewhere", "new")
    os.makedirs(os.path.dirname(moved))
    shutil.move(rg.experiment_path, moved)
    os.remove(marker)
    results = tune.Tuner.restore(moved, trainable=f, resume_errored=True).fit()
    assert results.num_errors == 0 and results[0].metrics["step"] == 3
    assert results[0].path.startswith(moved) and len(results[0].best_checkpoints) == 2
    assert not os.path.exists(rg.experiment_path)


@case(RS)
def case_restore_relative_storage_path(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"score": 1})

    here = os.getcwd()
    os.chdir(s.tmp)
    try:
        tune.Tuner(
            f, run_config=tune.RunConfig(storage_path="relative", name="exp", verbose=0)
        ).fit()
        results = tune.Tuner.restore("relative/exp", trainable=f).fit()
    finally:
        os.chdir(here)
    assert results.num_errors == 0 and results[0].metrics["score"] == 1


@case(RS)
def case_restore_with_parameters_again(s: System) -> None:
    tune = s.tune
    f, marker = _fails_after(s, 1)

    def g(config, data=None):
        assert data == list(range(1000))
        f(config)

    def wrapped():
        return tune.with_parameters(g, data=list(range(1000)))

    rg = s.fit(wrapped(), name="params")
    assert rg.num_errors == 1
    os.remove(marker)
    results = tune.Tuner.restore(rg.experiment_path, wrapped(), resume_errored=True).fit()
    assert results.num_errors == 0 and results[0].metrics["step"] == 3


@case(RS)
def case_callback_error_fails_fit(s: System) -> None:
    tune = s.tune

    class Breaks(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            raise RuntimeError("callback fails")

    raises(Exception, lambda: s.fit(_resuming(s, 3), name="cb", callbacks=[Breaks()]))


@case(FN)
def case_report_checkpoint_positionally(s: System) -> None:
    tune = s.tune
    import tempfile

    def f(config):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "x"), "w").close()
            tune.report({"a": 1}, tune.Checkpoint.from_directory(d))

    rg = s.fit(f)
    assert rg[0].checkpoint is not None
    assert "x" in os.listdir(rg[0].checkpoint.path)


@case(RS)
def case_checkpoint_dirs_numbered_from_zero(s: System) -> None:
    rg = s.fit(_resuming(s, 2), name="numbers")
    assert _checkpoint_dirs(rg[0].path) == ["checkpoint_000000", "checkpoint_000001"]


@case("tune_with_resources")
def case_with_resources_function_for_ray_remote(s: System) -> None:
    import ray

    tune = s.tune

    def f(config):
        return config["a"] * 2

    wrapped = tune.with_resources(f, {"cpu": 1})
    assert ray.get(ray.remote(wrapped).remote({"a": 2})) == 4
    rg = s.fit(wrapped, {"a": 3})
    assert rg[0].metrics["_metric"] == 6


@case("doc_code/faq")
def case_train_configs_and_checkpoint_in_tune(s: System) -> None:
    from ray import train

    tune = s.tune
    f, marker = _fails_after(s, 1)
    os.remove(marker)

    def g(config):
        ckpt = train.get_checkpoint()
        assert ckpt is None and train.get_context().get_trial_id()
        f(config)

    rg = tune.Tuner(
        g,
        run_config=train.RunConfig(
            storage_path=str(s.tmp),
            name="trcfg",
            checkpoint_config=train.CheckpointConfig(num_to_keep=1),
            failure_config=train.FailureConfig(max_failures=1),
        ),
    ).fit()
    assert rg.num_errors == 0 and rg[0].metrics["step"] == 2
    assert len(_checkpoint_dirs(rg[0].path)) == 1


@case(FN)
def case_tune_run_retry_keeps_one_row_per_iteration(s: System) -> None:
    tune = s.tune
    analysis = tune.run(
        _resuming(s, 10, crash_at=6),
        max_failures=3,
        storage_path=str(s.tmp),
        name="retry",
        verbose=0,
    )
    [frame] = list(analysis.trial_dataframes.values())
    assert list(frame["training_iteration"]) == list(range(1, 11))
    assert list(frame["step"]) == list(range(1, 11))


@case(FN)
def case_tune_run_keep_checkpoints_num_keeps_the_last(s: System) -> None:
    tune = s.tune
    analysis = tune.run(
        _resuming(s, 6), keep_checkpoints_num=3, storage_path=str(s.tmp), name="k", verbose=0
    )
    [trial] = analysis.trials
    assert _load(trial.checkpoint) == 6 and _load(analysis.get_last_checkpoint()) == 6
    assert len(_checkpoint_dirs(os.path.dirname(trial.checkpoint.path))) == 3
