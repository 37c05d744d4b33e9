"""PyTorch Lightning: report (and checkpoint) from inside ``Trainer.fit``'s loop.

``Trainer(callbacks=[ReportCallback(metrics={"loss": "val_loss"}, on="validation_end")])``
in a function trainable reports, at each chosen hook (``on``: Lightning's callback hooks
less their ``on_``; default the end of each validation), the chosen entries of
``trainer.callback_metrics`` as one result; with ``save_checkpoints`` (the default) the
result carries ``trainer.save_checkpoint(<dir>/<filename>)`` as its checkpoint. The
sanity check's validation reports nothing, and neither does a hook where none of the
metrics is logged yet (a warning names the missing ones, once). A trial resumes with
``trainer.fit(model, ckpt_path=os.path.join(get_checkpoint(), filename))``.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from orchestrator.integrations._report import (
    Metrics,
    Reporter,
    normalize,
    plain_report,
    report_saved,
)

try:
    from lightning.pytorch import Callback, Trainer
except ImportError:  # the older package name
    try:
        from pytorch_lightning import Callback, Trainer  # type: ignore[assignment]
    except ImportError as err:  # pragma: no cover - the extra installs it
        from orchestrator.integrations._report import missing_library

        raise missing_library("lightning", "lightning", err) from None

__all__ = ["HOOKS", "ReportCallback"]

log = logging.getLogger("orchestrator.integrations.lightning")

#: Lightning's callback hooks a report may follow, less their ``on_``.
HOOKS = frozenset(
    name[3:]
    for name in dir(Callback)
    if name.startswith("on_") and callable(getattr(Callback, name))
)


class ReportCallback(Callback):
    """Reports ``metrics`` from ``trainer.callback_metrics`` at each hook of ``on``, with
    the trainer's checkpoint (file ``filename``) when ``save_checkpoints``."""

    #: How a result (and a checkpoint directory) leaves: the facade's subclass adds
    #: Ray Tune's automatic keys.
    _report: Reporter = staticmethod(plain_report)

    def __init__(
        self,
        metrics: Metrics = None,
        filename: str = "checkpoint",
        save_checkpoints: bool = True,
        on: str | list[str] = "validation_end",
    ) -> None:
        super().__init__()
        hooks = [on] if isinstance(on, str) else list(on)
        unknown = [hook for hook in hooks if hook not in HOOKS]
        if unknown:
            raise ValueError(
                f"on={unknown!r}: not Lightning callback hooks; name hooks less their "
                f"'on_', e.g. 'validation_end', 'train_epoch_end' (all: {sorted(HOOKS)})"
            )
        self._metrics = normalize(metrics)
        self._filename = filename
        self._save_checkpoints = save_checkpoints
        self._warned: set[str] = set()
        self._reporting = False
        for hook in hooks:  # Lightning calls getattr(callback, "on_<hook>")
            setattr(self, f"on_{hook}", self._hook)

    def _hook(self, trainer: Trainer, *args: Any, **kwargs: Any) -> None:
        if trainer.sanity_checking or self._reporting:
            return  # the sanity check is not an iteration; a save may call hooks
        metrics = self._metrics_of(trainer)
        if not metrics:
            return
        self._reporting = True
        try:
            if self._save_checkpoints:
                path = self._filename
                report_saved(
                    type(self)._report,
                    metrics,
                    lambda directory: trainer.save_checkpoint(os.path.join(directory, path)),
                )
            else:
                type(self)._report(metrics, None)
        finally:
            self._reporting = False

    def _metrics_of(self, trainer: Trainer) -> dict[str, Any]:
        logged = trainer.callback_metrics
        if not self._metrics:
            return {name: _plain(value) for name, value in logged.items()}
        wanted = (
            self._metrics
            if isinstance(self._metrics, dict)
            else {name: name for name in self._metrics}
        )
        missing = sorted(theirs for theirs in wanted.values() if theirs not in logged)
        new = set(missing) - self._warned
        if new:
            self._warned |= new
            log.warning(
                "Lightning has not logged %s (it logged %s): the report callback leaves "
                "them out; log them with self.log(...) in the LightningModule",
                sorted(new),
                sorted(logged),
            )
        return {ours: _plain(logged[theirs]) for ours, theirs in wanted.items() if theirs in logged}


def _plain(value: Any) -> Any:
    """A logged tensor as a Python number."""
    return value.item() if hasattr(value, "item") else value
