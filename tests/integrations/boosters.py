"""Training functions for the XGBoost and LightGBM callbacks' tests: a few boosting
rounds on scikit-learn's bundled breast-cancer data (no download), resuming from the
trial's checkpoint when there is one.

Config: ``rounds`` (the model's total rounds), ``frequency``, ``at_end`` (the
callback's), ``fail_at`` and ``marks`` (raise once when reporting that round: a file in
``marks`` remembers it), ``facade`` (use ``orchestrator.tune``'s callback and
``tune.get_checkpoint`` instead of the native ones)."""

from __future__ import annotations

import os
from typing import Any


def _data() -> tuple[Any, Any, Any, Any]:
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    return x[::2], y[::2], x[1::2], y[1::2]  # deterministic split


def _fail_once(config: dict[str, Any], done_rounds: int) -> None:
    if config.get("fail_at") == done_rounds:
        flag = os.path.join(config["marks"], "failed")
        if not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError(f"planned failure after round {done_rounds}")


def _checkpoint(config: dict[str, Any]) -> Any:
    if config.get("facade"):
        from orchestrator import tune

        return tune.get_checkpoint()
    from orchestrator import get_checkpoint

    return get_checkpoint()


def xgboost_train(config: dict[str, Any]) -> None:
    import xgboost as xgb

    if config.get("facade"):
        from orchestrator.tune.integration.xgboost import TuneReportCheckpointCallback as Callback
    else:
        from orchestrator.integrations.xgboost import ReportCallback as Callback

    class FailOnce(xgb.callback.TrainingCallback):  # type: ignore[misc]
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            _fail_once(config, model.num_boosted_rounds())
            return False

    train_x, train_y, test_x, test_y = _data()
    checkpoint = _checkpoint(config)
    model = Callback.get_model(checkpoint) if checkpoint is not None else None
    done = model.num_boosted_rounds() if model is not None else 0
    xgb.train(
        {"objective": "binary:logistic", "eval_metric": ["logloss", "error"], "max_depth": 2},
        xgb.DMatrix(train_x, label=train_y),
        num_boost_round=int(config["rounds"]) - done,
        evals=[(xgb.DMatrix(test_x, label=test_y), "eval")],
        verbose_eval=False,
        xgb_model=model,
        callbacks=[
            Callback(
                metrics={"loss": "eval-logloss", "error": "eval-error"},
                frequency=int(config.get("frequency", 0)),
                checkpoint_at_end=bool(config.get("at_end", True)),
                results_postprocessing_fn=lambda m: {**m, "resumed_from": done},
            ),
            FailOnce(),  # after the round's report
        ],
    )


def lightgbm_train(config: dict[str, Any]) -> None:
    import lightgbm as lgb

    if config.get("facade"):
        from orchestrator.tune.integration.lightgbm import TuneReportCheckpointCallback as Callback
    else:
        from orchestrator.integrations.lightgbm import ReportCallback as Callback

    def fail_once(env: Any) -> None:
        _fail_once(config, env.iteration + 1)

    fail_once.order = 100  # type: ignore[attr-defined]  # after the report

    train_x, train_y, test_x, test_y = _data()
    checkpoint = _checkpoint(config)
    model = Callback.get_model(checkpoint) if checkpoint is not None else None
    done = model.current_iteration() if model is not None else 0
    train = lgb.Dataset(train_x, label=train_y)
    lgb.train(
        {
            "objective": "binary",
            "metric": ["binary_logloss", "binary_error"],
            "num_leaves": 4,
            "verbose": -1,
            "num_threads": 1,
        },
        train,
        num_boost_round=int(config["rounds"]) - done,
        valid_sets=[lgb.Dataset(test_x, label=test_y, reference=train)],
        valid_names=["eval"],
        init_model=model,
        callbacks=[
            Callback(
                metrics={"loss": "eval-binary_logloss", "error": "eval-binary_error"},
                frequency=int(config.get("frequency", 0)),
                checkpoint_at_end=bool(config.get("at_end", True)),
                results_postprocessing_fn=lambda m: {**m, "resumed_from": done},
            ),
            fail_once,
        ],
    )


def cross_validate(config: dict[str, Any]) -> None:
    """``xgboost.cv`` or ``lightgbm.cv`` (``config["framework"]``) with the callback's
    defaults: each round reports the folds' mean, and nothing is saved."""
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    if config["framework"] == "xgboost":
        import xgboost as xgb

        from orchestrator.integrations.xgboost import ReportCallback as XGBCallback

        def mean(results: dict[str, Any]) -> dict[str, Any]:
            return {name: float(pair[0]) for name, pair in results.items()}  # (mean, std)

        xgb.cv(
            {"objective": "binary:logistic", "max_depth": 2},
            xgb.DMatrix(x, label=y),
            num_boost_round=3,
            nfold=2,
            callbacks=[XGBCallback(results_postprocessing_fn=mean)],
        )
    else:
        import lightgbm as lgb

        from orchestrator.integrations.lightgbm import ReportCallback as LGBCallback

        lgb.cv(
            {"objective": "binary", "num_leaves": 4, "verbose": -1, "num_threads": 1},
            lgb.Dataset(x, label=y),
            num_boost_round=3,
            nfold=2,
            callbacks=[LGBCallback({"loss": "valid-binary_logloss-mean"})],
        )
