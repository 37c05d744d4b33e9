"""Ray's integrations under the facade: ``ray_train`` (a Ray Train run inside a trial),
``mlflow`` and ``wandb`` (``ray.air.integrations.<name>``: ``python -m orchestrator tune``
maps one onto the other). Nothing is imported here: each module imports its library only
when used. What is not covered yet says, when imported, what to use instead."""

__all__: list[str] = []
