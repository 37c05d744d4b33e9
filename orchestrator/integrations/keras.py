"""Keras (3, on any backend: TensorFlow, PyTorch, JAX): report (and checkpoint) from
inside ``Model.fit``'s loop.

``model.fit(..., callbacks=[ReportCallback(metrics={"loss": "val_loss"})])`` in a
function trainable reports, at each hook of ``report_metrics_on`` (Keras' callback hooks
less their ``on_``; default the end of each epoch), the chosen entries of Keras' logs as
one result; at each hook of ``checkpoint_on`` (default: each epoch's end too) the result
carries the whole model, saved as ``model.keras`` (Ray Tune's file name). A trial
resumes with ``ReportCallback.get_model(get_checkpoint())`` and
``fit(..., initial_epoch=...)``.
"""

from __future__ import annotations

import os
from typing import Any

from orchestrator.integrations._report import (
    Metrics,
    Reporter,
    checkpoint_directory,
    normalize,
    pick,
    plain_report,
    report_saved,
)

try:
    import keras
except ImportError as err:  # pragma: no cover - the extra installs it
    from orchestrator.integrations._report import missing_library

    raise missing_library(
        "keras",
        "keras",
        err,
        "; Keras 3 also needs its backend: tensorflow, or set KERAS_BACKEND=torch (or jax) "
        "in the trial's environment",
    ) from None

__all__ = ["HOOKS", "MODEL_FILENAME", "ReportCallback"]

#: The file a checkpoint holds the model in (Ray Tune's name for it).
MODEL_FILENAME = "model.keras"

#: Keras' callback hooks a report may follow, less their ``on_``.
HOOKS = frozenset(
    name[3:]
    for name in dir(keras.callbacks.Callback)
    if name.startswith("on_") and callable(getattr(keras.callbacks.Callback, name))
)


class ReportCallback(keras.callbacks.Callback):  # type: ignore[misc]
    """Reports ``metrics`` from Keras' logs at each hook of ``report_metrics_on``, and
    with the model at each hook of ``checkpoint_on`` (a checkpoint's result is always
    reported, as on Ray Tune)."""

    #: How a result (and a checkpoint directory) leaves: the facade's subclass adds
    #: Ray Tune's automatic keys.
    _report: Reporter = staticmethod(plain_report)

    def __init__(
        self,
        checkpoint_on: str | list[str] = "epoch_end",
        report_metrics_on: str | list[str] = "epoch_end",
        metrics: Metrics = None,
    ) -> None:
        super().__init__()
        self._checkpoint_on = _hooks(checkpoint_on, "checkpoint_on")
        self._report_on = _hooks(report_metrics_on, "report_metrics_on")
        self._metrics = normalize(metrics)
        for hook in self._checkpoint_on | self._report_on:  # Keras calls on_<hook>
            setattr(self, f"on_{hook}", self._hook_for(hook))

    @staticmethod
    def get_model(checkpoint: Any, filename: str = MODEL_FILENAME) -> Any:
        """The model a checkpoint of this callback holds (a directory path, or the
        facade's ``Checkpoint``), compiled as it was saved."""
        with checkpoint_directory(checkpoint) as directory:
            return keras.models.load_model(os.path.join(directory, filename))

    def _hook_for(self, hook: str) -> Any:
        def handle(*args: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
            if logs is None and args and isinstance(args[-1], dict):
                logs = args[-1]  # Keras passes logs positionally in places
            metrics = pick(
                {name: _plain(value) for name, value in (logs or {}).items()},
                self._metrics,
                "Keras",
            )
            if hook in self._checkpoint_on:
                model = self.model
                report_saved(
                    type(self)._report,
                    metrics,
                    lambda directory: model.save(os.path.join(directory, MODEL_FILENAME)),
                )
            else:
                type(self)._report(metrics, None)

        return handle


def _hooks(on: str | list[str], name: str) -> frozenset[str]:
    hooks = [on] if isinstance(on, str) else list(on)
    unknown = [hook for hook in hooks if hook not in HOOKS]
    if unknown:
        raise ValueError(
            f"{name}={unknown!r}: not Keras callback hooks; name hooks less their 'on_', "
            f"e.g. 'epoch_end', 'train_batch_end' (all: {sorted(HOOKS)})"
        )
    return frozenset(hooks)


def _plain(value: Any) -> Any:
    """A logged tensor or NumPy scalar as a Python number."""
    return value.item() if hasattr(value, "item") else value
