"""XGBoost's and LightGBM's report callbacks with the real libraries, in whole
experiments on the fake Ray (one real-Ray run through the facade each): a boosting
round is a result, ``frequency``/``checkpoint_at_end`` decide which results carry the
booster (Ray Tune's rules), and a trial that fails resumes training from its
persisted booster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")
pytest.importorskip("sklearn")

from orchestrator.integrations import lightgbm as native_lgb  # noqa: E402
from orchestrator.integrations import xgboost as native_xgb  # noqa: E402

from . import experiments  # noqa: E402
from .boosters import _data, lightgbm_train, xgboost_train  # noqa: E402

TRAIN = {"xgboost": xgboost_train, "lightgbm": lightgbm_train}


def rounds(model: Any) -> int:
    if hasattr(model, "num_boosted_rounds"):
        return int(model.num_boosted_rounds())
    return int(model.current_iteration())


def load(framework: str, path: str) -> Any:
    native = native_xgb if framework == "xgboost" else native_lgb
    return native.ReportCallback.get_model(path)


async def run_one(tmp_path: Path, fake_ray: Any, framework: str, **config: Any) -> Any:
    return await experiments.run_one(
        TRAIN[framework], framework, tmp_path, fake_ray, config, max_failures=1
    )


#: (framework, rounds, frequency, checkpoint_at_end) -> (results, checkpointed iterations)
#: XGBoost reports once more after the last round for checkpoint_at_end unless that round
#: already carried the booster; LightGBM checkpoints the last round's own result.
CASES = [
    ("xgboost", 7, 3, True, 8, [3, 6, 8]),
    ("xgboost", 6, 2, True, 6, [2, 4, 6]),
    ("xgboost", 5, 0, True, 6, [6]),
    ("xgboost", 5, 2, False, 5, [2, 4]),
    ("xgboost", 4, 0, False, 4, []),
    ("lightgbm", 7, 3, True, 7, [3, 6, 7]),
    ("lightgbm", 6, 2, True, 6, [2, 4, 6]),
    ("lightgbm", 5, 0, True, 5, [5]),
    ("lightgbm", 5, 2, False, 5, [2, 4]),
    ("lightgbm", 4, 0, False, 4, []),
]


@pytest.mark.parametrize(("framework", "total", "frequency", "at_end", "results", "ckpts"), CASES)
async def test_each_round_is_a_result_and_frequency_picks_the_checkpoints(
    tmp_path: Path,
    fake_ray: Any,
    framework: str,
    total: int,
    frequency: int,
    at_end: bool,
    results: int,
    ckpts: list[int],
) -> None:
    trial = await run_one(
        tmp_path, fake_ray, framework, rounds=total, frequency=frequency, at_end=at_end
    )
    assert [r["training_iteration"] for r in trial.results] == list(range(1, results + 1))
    assert all({"loss", "error"} <= set(r) for r in trial.results)
    losses = [r["loss"] for r in trial.results[:total]]
    assert losses[-1] < losses[0]  # it learns
    assert [c.iteration for c in trial.checkpoints] == ckpts
    for checkpoint in trial.checkpoints:  # each holds the booster of its round
        assert checkpoint.path is not None
        model = load(framework, checkpoint.path)
        assert rounds(model) == min(checkpoint.iteration, total)
    if ckpts:  # the last booster predicts as well as its round said
        _, _, test_x, test_y = _data()
        last = trial.checkpoints[-1]
        assert last.path is not None
        model = load(framework, last.path)
        if framework == "xgboost":
            import xgboost as xgb

            predicted = model.predict(xgb.DMatrix(test_x))
        else:
            predicted = model.predict(test_x)
        error = float(((predicted > 0.5) != test_y).mean())
        assert error == pytest.approx(trial.results[last.iteration - 1]["error"], abs=1e-6)


@pytest.mark.parametrize("framework", sorted(TRAIN))
async def test_a_failed_trial_continues_training_from_its_booster(
    tmp_path: Path, fake_ray: Any, framework: str
) -> None:
    trial = await run_one(
        tmp_path,
        fake_ray,
        framework,
        rounds=8,
        frequency=2,
        at_end=False,
        fail_at=5,
        marks=str(tmp_path),
    )
    assert (tmp_path / "failed").exists()
    # Rounds 1-4 ran, then 5 failed after its report; the retry resumed from round 4's
    # booster and trained rounds 5-8: one result per round on the trial's timeline.
    assert [r["training_iteration"] for r in trial.results] == list(range(1, 9))
    assert [r["resumed_from"] for r in trial.results] == [0] * 4 + [4] * 4
    assert [c.iteration for c in trial.checkpoints] == [2, 4, 6, 8]
    assert trial.checkpoints[-1].path is not None
    assert rounds(load(framework, trial.checkpoints[-1].path)) == 8


def test_metrics_it_was_not_given_are_named_with_those_it_has() -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.integrations._report import pick

    with pytest.raises(ConfigError, match=r"\['eval-auc'\].*\['eval-error', 'eval-logloss'\]"):
        pick({"eval-logloss": 0.5, "eval-error": 0.1}, {"auc": "eval-auc"}, "XGBoost")
    assert pick({"a-b": 1, "c": 2}, None, "X") == {"a-b": 1, "c": 2}
    assert pick({"a-b": 1, "c": 2}, ["c"], "X") == {"c": 2}


@pytest.mark.parametrize("framework", sorted(TRAIN))
async def test_cross_validation_reports_each_round_and_saves_nothing(
    tmp_path: Path, fake_ray: Any, framework: str
) -> None:
    from .boosters import cross_validate

    trial = await experiments.run_one(
        cross_validate, "cv", tmp_path, fake_ray, {"framework": framework}
    )
    key = "test-logloss" if framework == "xgboost" else "loss"
    assert [r["training_iteration"] for r in trial.results] == [1, 2, 3]  # no extra at end
    assert all(isinstance(r[key], float) for r in trial.results)
    assert trial.checkpoints == []


@pytest.mark.parametrize("framework", sorted(TRAIN))
async def test_a_stop_ends_training_at_the_report(
    tmp_path: Path, fake_ray: Any, framework: str
) -> None:
    trial = await experiments.run_one(
        TRAIN[framework],
        "stop",
        tmp_path,
        fake_ray,
        {"rounds": 500},
        stop={"training_iteration": 3},
    )
    assert [r["training_iteration"] for r in trial.results] == [1, 2, 3]


@pytest.mark.parametrize(("framework", "total", "frequency", "at_end"), [c[:4] for c in CASES])
def test_which_rounds_carry_the_booster_is_ray_tunes_choice(
    framework: str, total: int, frequency: int, at_end: bool
) -> None:
    """Ray Tune's own callback and ours, in the same training, record the same reports
    (metrics, and whether each carries a booster)."""
    import importlib

    pytest.importorskip("ray.tune.integration.xgboost")
    theirs = importlib.import_module(f"ray.tune.integration.{framework}")
    ours = native_xgb if framework == "xgboost" else native_lgb
    seen: dict[str, list[tuple[dict[str, Any], bool]]] = {"ray": [], "ours": []}

    class Ray(theirs.TuneReportCheckpointCallback):  # type: ignore[misc,name-defined]
        def _report_metrics(self, report_dict: dict[str, Any]) -> None:
            seen["ray"].append((dict(report_dict), False))

        def _save_and_report_checkpoint(self, report_dict: dict[str, Any], model: Any) -> None:
            seen["ray"].append((dict(report_dict), True))

    class Ours(ours.ReportCallback):  # type: ignore[misc,name-defined]
        @staticmethod
        def _report(metrics: dict[str, Any], checkpoint: str | None) -> None:
            seen["ours"].append((dict(metrics), checkpoint is not None))

    arguments = {"frequency": frequency, "checkpoint_at_end": at_end}
    train_x, train_y, test_x, test_y = _data()
    if framework == "xgboost":
        import xgboost as xgb

        xgb.train(
            {"objective": "binary:logistic", "eval_metric": ["logloss"], "max_depth": 2},
            xgb.DMatrix(train_x, label=train_y),
            num_boost_round=total,
            evals=[(xgb.DMatrix(test_x, label=test_y), "eval")],
            verbose_eval=False,
            callbacks=[Ray(**arguments), Ours(**arguments)],
        )
    else:
        import lightgbm as lgb

        train = lgb.Dataset(train_x, label=train_y)
        lgb.train(
            {"objective": "binary", "num_leaves": 4, "verbose": -1, "num_threads": 1},
            train,
            num_boost_round=total,
            valid_sets=[lgb.Dataset(test_x, label=test_y, reference=train)],
            valid_names=["eval"],
            callbacks=[Ray(**arguments), Ours(**arguments)],
        )
    assert seen["ours"] == seen["ray"] and len(seen["ray"]) >= total


def test_a_missing_framework_is_an_import_error_naming_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "keras", None)  # import keras raises ImportError
    monkeypatch.delitem(sys.modules, "orchestrator.integrations.keras", raising=False)
    with pytest.raises(ImportError, match=r"needs keras.*pip install keras.*KERAS_BACKEND"):
        importlib.import_module("orchestrator.integrations.keras")
