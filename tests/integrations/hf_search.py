"""A Hugging Face ``Trainer.hyperparameter_search(backend="ray")`` script, as a user writes
it (it imports ``ray.tune``), run by ``test_huggingface.py`` in its own driver process:
``hf_search.py OUT [--install] [--scheduler] [--fail-once]``. A tiny BERT built from a
config (no download) learns a synthetic task for a few steps per trial. ``--install``
activates the facade with ``orchestrator.tune.install()`` (else the test runs it under
``python -m orchestrator tune``); ``--scheduler`` adds an ``ASHAScheduler`` from
``ray.tune.schedulers``; ``--fail-once``: the first trial to reach step 3 raises there
(``max_failures=1``), so it restarts from its step-2 checkpoint as Hugging Face's
integration restores one. Prints one ``BEST {json}`` line."""

from __future__ import annotations

import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["WANDB_MODE"] = "disabled"

if "--install" in sys.argv:
    import orchestrator.tune

    orchestrator.tune.install()

import torch  # noqa: E402
from ray import tune  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

LENGTH = 8


class Synthetic(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Token sequences whose label is the parity of their first token."""

    def __init__(self, size: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 100, (size, LENGTH), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones(LENGTH, dtype=torch.long),
            "labels": self.ids[i, 0] % 2,
        }


def model_init(trial: object = None) -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=100,
        max_position_embeddings=LENGTH,
    )
    return BertForSequenceClassification(config)


def hp_space(trial: object) -> dict[str, object]:
    return {"learning_rate": tune.loguniform(1e-4, 1e-2), "seed": tune.choice([1, 2])}


class FailOnce(TrainerCallback):
    """Raises at step 3 in the first trial that gets there (a file decides, across the
    trials' processes), writing that trial's id into the file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def on_step_end(self, args: object, state: object, control: object, **kwargs: object) -> None:
        if getattr(state, "global_step", None) != 3:
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        with os.fdopen(fd, "w") as f:
            f.write(tune.get_context().get_trial_id())
        raise RuntimeError("failing once at step 3")


def main(out: str) -> None:
    args = TrainingArguments(
        output_dir=os.path.join(out, "trainer"),
        max_steps=4,
        per_device_train_batch_size=4,
        eval_strategy="steps",
        eval_steps=2,
        save_steps=2,
        logging_steps=2,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model_init=model_init,
        args=args,
        train_dataset=Synthetic(32, 0),
        eval_dataset=Synthetic(16, 1),
        callbacks=[FailOnce(os.path.join(out, "failed"))] if "--fail-once" in sys.argv else [],
    )
    # One trial at a time: the second reuses the first's worker, which imported torch and
    # transformers already (6-7 CPU seconds a process).
    extra: dict[str, object] = {"max_failures": 1, "max_concurrent_trials": 1}
    if "--scheduler" in sys.argv:
        from ray.tune.schedulers import ASHAScheduler

        extra["scheduler"] = ASHAScheduler(metric="objective", mode="min", max_t=10)
    best = trainer.hyperparameter_search(
        backend="ray",
        n_trials=2,
        hp_space=hp_space,
        direction="minimize",
        storage_path=os.path.join(out, "runs"),
        name="hf",
        keep_checkpoints_num=1,
        **extra,
    )
    summary = best.run_summary  # type: ignore[union-attr]
    print(
        "BEST "
        + json.dumps(
            {
                "run_id": best.run_id,  # type: ignore[union-attr]
                "objective": best.objective,  # type: ignore[union-attr]
                "hyperparameters": best.hyperparameters,  # type: ignore[union-attr]
                "summary": f"{type(summary).__module__}.{type(summary).__name__}",
                "path": summary.experiment_path,
                "tune": tune.__name__,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1])
