"""A training function for the Lightning callback's tests: a one-layer classifier on a
synthetic, seeded data set (no download), a few tiny epochs, resuming from the trial's
checkpoint (``ckpt_path``) when there is one.

Config: ``epochs``, ``on``, ``save`` (``save_checkpoints``), ``metrics``, ``filename``,
``fail_at``
and ``marks`` (raise once at the end of that epoch's validation, after its report: a
file in ``marks`` remembers it), ``facade`` (``orchestrator.tune``'s callback)."""

from __future__ import annotations

import os
from typing import Any


def lightning_train(config: dict[str, Any]) -> None:
    import lightning.pytorch as pl
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    if config.get("facade"):
        from orchestrator import tune
        from orchestrator.tune.integration.pytorch_lightning import (
            TuneReportCheckpointCallback as Callback,
        )

        checkpoint = tune.get_checkpoint()
        resume = checkpoint.path if checkpoint is not None else None
    else:
        from orchestrator import get_checkpoint
        from orchestrator.integrations.lightning import ReportCallback as Callback

        resume = get_checkpoint()

    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = (x.sum(dim=1) > 0).long()

    class Model(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 2)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            inputs, labels = batch
            loss = torch.nn.functional.cross_entropy(self.layer(inputs), labels)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            inputs, labels = batch
            logits = self.layer(inputs)
            self.log("val_loss", torch.nn.functional.cross_entropy(logits, labels))
            self.log("val_acc", (logits.argmax(dim=1) == labels).float().mean())

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.5)

    class FailOnce(pl.Callback):  # type: ignore[misc]
        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            if trainer.sanity_checking or config.get("fail_at") != trainer.current_epoch + 1:
                return
            flag = os.path.join(config["marks"], "failed")
            if not os.path.exists(flag):
                open(flag, "w").close()
                raise RuntimeError(f"planned failure in epoch {trainer.current_epoch + 1}")

    class Epoch(pl.Callback):  # type: ignore[misc]
        """Logs the epoch (1-based) and where this run started, for the tests."""

        def __init__(self) -> None:
            self.start: int | None = None

        def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            if self.start is None:
                self.start = trainer.current_epoch
            pl_module.log("epoch_1", float(trainer.current_epoch + 1))
            pl_module.log("resumed_from", float(self.start))

    data = TensorDataset(x, y)
    trainer = pl.Trainer(
        max_epochs=int(config["epochs"]),
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=1,
        callbacks=[
            Epoch(),
            Callback(
                metrics=config.get("metrics", ["val_loss", "val_acc", "epoch_1", "resumed_from"]),
                filename=config.get("filename", "checkpoint"),
                save_checkpoints=bool(config.get("save", True)),
                on=config.get("on", "validation_end"),
            ),
            FailOnce(),
        ],
    )
    filename = config.get("filename", "checkpoint")
    ckpt_path = os.path.join(resume, filename) if resume is not None else None
    trainer.fit(
        Model(),
        DataLoader(data, batch_size=16),
        DataLoader(data, batch_size=32),
        ckpt_path=ckpt_path,
    )
