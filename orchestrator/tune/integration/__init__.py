"""Ray Tune's ``ray.tune.integration``: only ``ray_train`` is covered (a Ray Train run
inside a trial); the framework callbacks (Keras, Lightning, XGBoost, LightGBM) are not,
and importing them says what to use instead."""

__all__: list[str] = []
