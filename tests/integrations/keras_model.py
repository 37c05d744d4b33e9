"""A training function for the Keras callback's tests: a one-layer classifier on a
synthetic, seeded data set (no download), on Keras 3's PyTorch backend (TensorFlow is
not needed), resuming from the trial's checkpoint when there is one.

Config: ``epochs``, ``checkpoint_on``, ``report_on``, ``metrics``, ``fail_at`` and
``marks`` (raise once at the end of that epoch, after its report), ``facade``."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "torch")

STEPS = 4  # batches per epoch


def keras_train(config: dict[str, Any]) -> None:
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras
    import numpy as np

    if config.get("facade"):
        from orchestrator import tune
        from orchestrator.tune.integration.keras import TuneReportCheckpointCallback as Callback

        checkpoint: Any = tune.get_checkpoint()
    else:
        from orchestrator import get_checkpoint
        from orchestrator.integrations.keras import ReportCallback as Callback

        checkpoint = get_checkpoint()

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("int64")
    if checkpoint is not None:
        model = Callback.get_model(checkpoint)
        start = int(model.optimizer.iterations.numpy()) // STEPS  # its epochs done
    else:
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [keras.Input((4,)), keras.layers.Dense(2, activation="softmax", name="out")]
        )
        model.compile(
            optimizer=keras.optimizers.SGD(0.5),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
        )
        start = 0

    class Count(keras.callbacks.Callback):  # type: ignore[misc]
        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            assert logs is not None
            logs["epoch_1"], logs["resumed_from"] = epoch + 1, start

    class FailOnce(keras.callbacks.Callback):  # type: ignore[misc]
        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            if config.get("fail_at") == epoch + 1:
                flag = os.path.join(config["marks"], "failed")
                if not os.path.exists(flag):
                    open(flag, "w").close()
                    raise RuntimeError(f"planned failure in epoch {epoch + 1}")

    model.fit(
        x,
        y,
        batch_size=len(x) // STEPS,
        epochs=int(config["epochs"]),
        initial_epoch=start,
        validation_data=(x, y),
        verbose=0,
        callbacks=[
            Count(),
            Callback(
                checkpoint_on=config.get("checkpoint_on", "epoch_end"),
                report_metrics_on=config.get("report_on", "epoch_end"),
                metrics=config.get("metrics"),
            ),
            FailOnce(),
        ],
    )
