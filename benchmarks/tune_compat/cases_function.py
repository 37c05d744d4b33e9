"""The function and class APIs, checkpoints, retries and restores:
``test_function_api.py``, ``test_api_checkpoint_integration.py``,
``test_tuner_restore.py`` and the docs' trainables/checkpoints/fault-tolerance pages."""

from __future__ import annotations

import json
import os
import tempfile

from benchmarks.tune_compat.system import System, case, raises

FN = "test_function_api"
CK = "test_api_checkpoint_integration"
RS = "test_tuner_restore"
DOCS = "doc_code/trainables"


def _save(tune, step: int, **metrics):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "state.json"), "w") as fh:
            json.dump({"step": step}, fh)
        tune.report({"step": step, **metrics}, checkpoint=tune.Checkpoint.from_directory(d))


def _load(ckpt) -> int:
    with ckpt.as_directory() as d:
        with open(os.path.join(d, "state.json")) as fh:
            return json.load(fh)["step"]


def _resuming(s: System, total: int = 4, crash_at: int | None = None):
    """Counts to ``total`` with a checkpoint each step, from the last checkpoint; the
    first attempt raises at ``crash_at``."""
    tune = s.tune
    marker = s.marker("crashed")

    def f(config):
        ckpt = tune.get_checkpoint()
        step = _load(ckpt) if ckpt else 0
        while step < total:
            step += 1
            if step == crash_at and not os.path.exists(marker):
                open(marker, "w").close()
                raise RuntimeError("first attempt fails")
            _save(tune, step, resumed=ckpt is not None)

    return f


@case(FN)
def case_return_number_is_metric(s: System) -> None:
    rg = s.fit(lambda config: 3)
    assert rg[0].metrics["_metric"] == 3


@case(FN)
def case_report_checkpoint_latest(s: System) -> None:
    rg = s.fit(_resuming(s, 3))
    assert _load(rg[0].checkpoint) == 3


@case(FN)
def case_get_checkpoint_none_at_start(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"none": tune.get_checkpoint() is None})

    assert s.fit(f)[0].metrics["none"] is True


@case(FN)
def case_retry_resumes_from_checkpoint(s: System) -> None:
    tune = s.tune
    rg = s.fit(_resuming(s, 4, crash_at=3), failure_config=tune.FailureConfig(max_failures=1))
    r = rg[0]
    assert r.error is None and r.metrics["step"] == 4 and r.metrics["resumed"] is True
    assert len(r.metrics_dataframe) >= 4


@case(FN)
def case_retry_without_checkpoint_restarts(s: System) -> None:
    tune = s.tune
    marker = s.marker("once")

    def f(config):
        if not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("first")
        tune.report({"ok": 1})

    rg = s.fit(f, failure_config=tune.FailureConfig(max_failures=2))
    assert rg.num_errors == 0 and rg[0].metrics["ok"] == 1


@case(FN)
def case_max_failures_exhausted(s: System) -> None:
    tune = s.tune
    counter = s.marker("count")

    def f(config):
        with open(counter, "a") as fh:
            fh.write("x")
        raise RuntimeError("always")

    rg = s.fit(f, failure_config=tune.FailureConfig(max_failures=2))
    assert rg.num_errors == 1 and len(open(counter).read()) == 3


@case(FN)
def case_checkpoint_num_to_keep(s: System) -> None:
    tune = s.tune
    rg = s.fit(_resuming(s, 5), checkpoint_config=tune.CheckpointConfig(num_to_keep=2))
    assert [m["step"] for _, m in rg[0].best_checkpoints] == [4, 5]


@case(FN)
def case_checkpoint_score_attribute(s: System) -> None:
    tune = s.tune

    def f(config):
        for step, loss in enumerate([5, 1, 3, 2, 4], start=1):
            _save(tune, step, loss=loss)

    rg = s.fit(
        f,
        checkpoint_config=tune.CheckpointConfig(
            num_to_keep=2, checkpoint_score_attribute="loss", checkpoint_score_order="min"
        ),
    )
    assert sorted(m["loss"] for _, m in rg[0].best_checkpoints) == [1, 2]


@case(FN)
def case_checkpoint_directory_contents(s: System) -> None:
    rg = s.fit(_resuming(s, 2))
    with tempfile.TemporaryDirectory() as out:
        rg[0].checkpoint.to_directory(out)
        assert json.load(open(os.path.join(out, "state.json")))["step"] == 2


@case(DOCS)
def case_checkpoint_api(s: System) -> None:
    Checkpoint = s.tune.Checkpoint
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "f.txt"), "w").write("hi")
        ckpt = Checkpoint.from_directory(d)
        ckpt.set_metadata({"k": 1})
        assert ckpt.get_metadata() == {"k": 1}
        with ckpt.as_directory() as seen:
            assert open(os.path.join(seen, "f.txt")).read() == "hi"
        assert os.path.normpath(ckpt.path) == os.path.normpath(d)


def _counter_class(s: System):
    tune = s.tune

    class Counter(tune.Trainable):
        def setup(self, config):
            self.count = 0

        def step(self):
            self.count += 1
            return {"count": self.count}

        def save_checkpoint(self, checkpoint_dir):
            with open(os.path.join(checkpoint_dir, "c.json"), "w") as fh:
                json.dump({"count": self.count}, fh)

        def load_checkpoint(self, checkpoint_dir):
            with open(os.path.join(checkpoint_dir, "c.json")) as fh:
                self.count = json.load(fh)["count"]

    return Counter


@case(CK)
def case_class_checkpoint_frequency(s: System) -> None:
    tune = s.tune
    rg = s.fit(
        _counter_class(s),
        stop={"training_iteration": 6},
        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=2, num_to_keep=10),
    )
    assert [m["count"] for _, m in rg[0].best_checkpoints] == [2, 4, 6]


@case(CK)
def case_class_checkpoint_at_end(s: System) -> None:
    tune = s.tune
    rg = s.fit(
        _counter_class(s),
        stop={"training_iteration": 3},
        checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
    )
    assert rg[0].checkpoint is not None
    with rg[0].checkpoint.as_directory() as d:
        assert json.load(open(os.path.join(d, "c.json")))["count"] == 3


@case(CK)
def case_function_checkpoint_at_end_refused(s: System) -> None:
    tune = s.tune
    raises(
        ValueError,
        lambda: s.fit(
            lambda config: None, checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True)
        ),
    )


@case(CK)
def case_class_retry_restores_state(s: System) -> None:
    tune = s.tune
    marker = s.marker("crash")
    Base = _counter_class(s)

    class Crashy(Base):
        def step(self):
            result = super().step()
            if self.count == 3 and not os.path.exists(marker):
                open(marker, "w").close()
                raise RuntimeError("crash at 3")
            return result

    rg = s.fit(
        Crashy,
        stop={"training_iteration": 5},
        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
        failure_config=tune.FailureConfig(max_failures=1),
    )
    assert rg.num_errors == 0 and rg[0].metrics["count"] == 5


@case(DOCS)
def case_class_done_stops(s: System) -> None:
    class T(s.tune.Trainable):
        def step(self):
            return {"done": self.iteration >= 2}

    rg = s.fit(T, stop={"training_iteration": 10})
    assert rg[0].metrics["training_iteration"] == 3


@case(DOCS)
def case_class_trial_attributes(s: System) -> None:
    class T(s.tune.Trainable):
        def step(self):
            return {
                "tid": self.trial_id,
                "tname": self.trial_name,
                "done": True,
                "it": self.training_iteration,
            }

    m = s.fit(T)[0].metrics
    assert m["tid"] == m["trial_id"] and m["tname"] and m["it"] == 0


@case(DOCS)
def case_function_yield_refused_or_run(s: System) -> None:
    def f(config):
        for i in range(3):
            yield {"i": i}

    rg = s.fit(f)
    assert rg.num_errors == 1 or rg[0].metrics["i"] == 2


@case(RS)
def case_can_restore(s: System) -> None:
    tune = s.tune
    rg = s.fit(_resuming(s, 1), name="done")
    assert tune.Tuner.can_restore(rg.experiment_path)
    assert not tune.Tuner.can_restore(os.path.join(s.tmp, "nothing"))


@case(RS)
def case_restore_resume_errored(s: System) -> None:
    tune = s.tune
    f = _resuming(s, 4, crash_at=3)
    rg = s.fit(f, name="errs")
    assert rg.num_errors == 1
    again = tune.Tuner.restore(rg.experiment_path, f, resume_errored=True).fit()
    assert again.num_errors == 0 and again[0].metrics["step"] == 4
    assert again[0].metrics["resumed"] is True


@case(RS)
def case_restore_restart_errored(s: System) -> None:
    tune = s.tune
    f = _resuming(s, 4, crash_at=3)
    rg = s.fit(f, name="errs")
    again = tune.Tuner.restore(rg.experiment_path, f, restart_errored=True).fit()
    assert again.num_errors == 0 and again[0].metrics["resumed"] is False


@case(RS)
def case_restore_errored_left_alone(s: System) -> None:
    tune = s.tune
    f = _resuming(s, 4, crash_at=3)
    rg = s.fit(f, name="errs")
    again = tune.Tuner.restore(rg.experiment_path, f).fit()
    assert again.num_errors == 1


@case(RS)
def case_restore_finished_keeps_results(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"a": config["a"]})

    rg = s.fit(f, {"a": tune.grid_search([1, 2])}, name="fin")
    again = tune.Tuner.restore(rg.experiment_path, f).fit()
    assert sorted(r.metrics["a"] for r in again) == [1, 2]


@case(RS)
def case_restore_with_param_space(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"a": config["a"]})

    space = {"a": tune.grid_search([1, 2])}
    rg = s.fit(f, space, name="ps")
    again = tune.Tuner.restore(rg.experiment_path, f, param_space=space).fit()
    assert len(again) == 2


@case(RS)
def case_restore_other_keys_refused(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"a": config["a"]})

    rg = s.fit(f, {"a": 1}, name="ps")
    raises(ValueError, lambda: tune.Tuner.restore(rg.experiment_path, f, param_space={"b": 1}))


@case(RS)
def case_restore_pathlib(s: System) -> None:
    import pathlib

    tune = s.tune
    rg = s.fit(_resuming(s, 1), name="pl")
    assert tune.Tuner.can_restore(pathlib.Path(rg.experiment_path))
    assert len(tune.Tuner.restore(pathlib.Path(rg.experiment_path), _resuming(s, 1)).fit()) == 1


@case("tune_run")
def case_tune_run_analysis(s: System) -> None:
    tune = s.tune

    def f(config):
        tune.report({"score": config["a"]})

    analysis = tune.run(
        f,
        config={"a": tune.grid_search([1, 2, 3])},
        metric="score",
        mode="max",
        storage_path=str(s.tmp),
        name="legacy",
        verbose=0,
    )
    assert analysis.best_config["a"] == 3
    assert analysis.get_best_trial("score", "min").config["a"] == 1
    assert len(analysis.dataframe()) == 3 and len(analysis.trials) == 3


@case("doc_code/faq")
def case_train_names_in_tune(s: System) -> None:
    from ray import train

    tune = s.tune

    def f(config):
        train.report({"x": 1})

    rg = tune.Tuner(f, run_config=train.RunConfig(storage_path=str(s.tmp), name="tr")).fit()
    assert rg[0].metrics["x"] == 1


@case("doc_code/faq")
def case_train_checkpoint_in_tune(s: System) -> None:
    from ray import train

    def f(config):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "x"), "w").close()
            train.report({"x": 1}, checkpoint=train.Checkpoint.from_directory(d))

    rg = s.fit(f)
    assert rg[0].checkpoint is not None
