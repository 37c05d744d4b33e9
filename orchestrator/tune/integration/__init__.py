"""Ray's integrations under the facade: ``ray_train`` (a Ray Train run inside a trial),
the framework callbacks ``xgboost``, ``lightgbm``, ``pytorch_lightning`` and ``keras``
(``ray.tune.integration.<name>``: Ray Tune's names, arguments and results), ``mlflow``
and ``wandb`` (``ray.air.integrations.<name>``: ``python -m orchestrator tune`` maps one
onto the other). Nothing is imported here: each module imports its library only when
used. What is not covered yet says, when imported, what to use instead."""

__all__: list[str] = []
