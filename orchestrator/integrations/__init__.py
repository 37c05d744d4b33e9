"""Integrations with the tools people train and track with, each in its own module
(``orchestrator.integrations.mlflow``, ``.wandb``...). Nothing is imported here: each
module imports its library only when it is used."""

__all__: list[str] = []
