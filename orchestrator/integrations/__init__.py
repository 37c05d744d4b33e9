"""Thin adapters to the libraries people train and track with, one module per library
(``orchestrator.integrations.xgboost``...). Nothing is imported here: each module
imports its own library when it is imported, so trialflow never needs them."""

__all__: list[str] = []
