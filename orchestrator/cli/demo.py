"""``python -m orchestrator demo``: a real, small hyperparameter sweep with a failure.

Eight (or ``--trials``) :class:`~orchestrator.cli.demo_model.DigitsMLP` trials with different
learning rates, hidden sizes, weight decays and batch sizes train on the local Ray,
checkpointing every few iterations. Midway, one trial's actor is killed from an
``on_trial_result`` hook; the orchestrator restores it from its newest checkpoint and it
finishes with the others. Everything on screen comes from hooks: a live table (or, with
``--no-live`` or without a terminal, one line per event), then a final table, best
validation accuracy first.

The exit status is 0 when every trial ends TERMINATED and, unless ``--no-kill``, the
killed trial recovered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import ray
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from orchestrator.api.orchestrator import Orchestrator
from orchestrator.api.trial import Trial
from orchestrator.cli.present import elapsed_line, fixed, state_text
from orchestrator.core.best import finite as number
from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.machine import TrialState

__all__ = [
    "BASE_CONFIGS",
    "THREAD_ENV_VARS",
    "ActorKiller",
    "Board",
    "DemoOptions",
    "Row",
    "demo_main",
    "final_rows",
    "run_demo",
    "sweep_configs",
    "trial_table",
]

#: The sweep: every trial takes the next of these (cycling, with a new seed, past 8).
BASE_CONFIGS: tuple[Mapping[str, Any], ...] = (
    {"lr": 0.1, "hidden": 64, "weight_decay": 1e-4, "batch_size": 32},
    {"lr": 0.03, "hidden": 128, "weight_decay": 1e-4, "batch_size": 32},
    {"lr": 0.3, "hidden": 32, "weight_decay": 1e-3, "batch_size": 64},
    {"lr": 0.01, "hidden": 64, "weight_decay": 0.0, "batch_size": 16},
    {"lr": 0.1, "hidden": 0, "weight_decay": 1e-4, "batch_size": 32},
    {"lr": 0.001, "hidden": 32, "weight_decay": 1e-4, "batch_size": 32},
    {"lr": 0.05, "hidden": 128, "weight_decay": 3e-2, "batch_size": 64},
    {"lr": 0.003, "hidden": 16, "weight_decay": 0.0, "batch_size": 16},
)

#: Numerical libraries get one thread per actor: 8 actors share 2 cores.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class DemoOptions:
    trials: int = 8
    iterations: int = 30
    checkpoint_every: int | None = None  # None: about 6 checkpoints per trial
    kill: bool = True
    live: bool | None = None  # None: live when stdout is a terminal
    storage: str | None = None
    name: str | None = None  # None: demo-<timestamp>
    cpu_per_trial: float = 0.25
    epochs_per_iter: int = 2
    address: str | None = None  # None: a private local Ray (see raystart.ensure_ray)

    def banner(self) -> str:
        text = (
            f"trialflow demo: {self.trials} MLPs x {self.iterations} iterations of SGD on "
            f"sklearn digits, checkpoint every {self.every}, {self.cpu_per_trial:g} CPU each"
        )
        if self.kill:
            text += f"; one actor is killed at iteration {self.kill_at}"
        return text

    @property
    def every(self) -> int:
        if self.checkpoint_every is not None:
            return self.checkpoint_every
        return max(2, self.iterations // 6) if self.iterations >= 4 else 1

    @property
    def kill_at(self) -> int:
        """The iteration at which one actor is killed: midway, just past a checkpoint,
        so the restore visibly rolls back a little work."""
        every = self.every
        target = max(every + 1, self.iterations // 2 + 1)
        if target % every == 0 and every > 1:
            target += 1
        return min(target, max(1, self.iterations - 1))


def sweep_configs(n: int, epochs_per_iter: int = 2) -> list[dict[str, Any]]:
    configs = []
    for i in range(n):
        base = BASE_CONFIGS[i % len(BASE_CONFIGS)]
        configs.append({**base, "seed": i // len(BASE_CONFIGS), "epochs_per_iter": epochs_per_iter})
    return configs


# ----------------------------------------------------------------------------- board


@dataclass
class Row:
    """One trial's line in a table: learned from hooks while running (``Board``), read
    from the trial's records at the end (:func:`final_rows`)."""

    trial: Trial
    iteration: int = 0
    train_loss: float | None = None
    val_accuracy: float | None = None
    best_accuracy: float | None = None
    checkpoint: int | None = None
    failures: int = 0
    awaiting_recovery: bool = False
    recovered: int = 0


@dataclass
class Board:
    """The sweep's progress, kept up to date by hooks and rendered by rich.

    It is both a hook object and a rich renderable (``__rich__``): the live display
    re-renders it a few times a second from its own thread, so hooks only assign fields
    and append to lists; nothing here blocks or awaits.
    """

    iterations: int
    line_mode: bool
    console: Console
    started: float = field(default_factory=time.monotonic)
    rows: dict[str, Row] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    failed_at: dict[str, int] = field(default_factory=dict)  # the last failure's iteration
    killed: set[str] = field(default_factory=set)  # trials whose actor the demo killed

    def add(self, trial: Trial) -> None:
        """Show ``trial`` (before the display starts: the renderer reads ``rows``)."""
        self.rows[trial.id] = Row(trial)

    @property
    def trials(self) -> list[Trial]:
        return [row.trial for row in self.rows.values()]

    # -- hooks ---------------------------------------------------------------------

    async def on_trial_start(self, trial: Trial) -> None:
        if self.line_mode:
            self._line(f"{trial.id} started  {_config_text(trial.config)}")

    async def on_trial_result(self, trial: Trial, result: Mapping[str, Any]) -> None:
        row = self.rows[trial.id]
        row.iteration = int(result["training_iteration"])
        row.train_loss = number(result.get("train_loss"))
        row.val_accuracy = number(result.get("val_accuracy"))
        if row.val_accuracy is not None:
            row.best_accuracy = max(row.best_accuracy or 0.0, row.val_accuracy)
        if row.awaiting_recovery and row.iteration == 1:  # no checkpoint: started over
            row.awaiting_recovery = False
            row.recovered += 1
            self._message(f"{trial.id}: {self._failure_text(trial.id)} -> restarted from scratch")

    async def on_checkpoint(self, trial: Trial, checkpoint: Checkpoint) -> None:
        row = self.rows[trial.id]
        row.checkpoint = checkpoint.iteration
        if self.line_mode:
            self._line(
                f"{trial.id} iter {checkpoint.iteration:>3}/{self.iterations}  "
                f"train_loss {fixed(number(checkpoint.metrics.get('train_loss')), 4)}  "
                f"val_acc {fixed(number(checkpoint.metrics.get('val_accuracy')), 4)}  "
                "checkpoint saved"
            )

    async def on_trial_error(self, trial: Trial, error: BaseException) -> None:
        row = self.rows[trial.id]
        row.failures += 1
        row.awaiting_recovery = True
        row.checkpoint = None
        # Hooks of one trial run in order, so row.iteration is the last reported one.
        self.failed_at[trial.id] = row.iteration
        text = _first_line(error).removeprefix(f"trial {trial.id}: ")
        self._message(f"{trial.id}: failure {row.failures}: {text}")

    async def on_trial_restore(self, trial: Trial, checkpoint: Checkpoint) -> None:
        row = self.rows[trial.id]
        row.checkpoint = checkpoint.iteration
        row.iteration = checkpoint.iteration
        if row.awaiting_recovery:
            row.awaiting_recovery = False
            row.recovered += 1
            self._message(
                f"{trial.id}: {self._failure_text(trial.id)} -> restored from checkpoint "
                f"at iteration {checkpoint.iteration}"
            )
        else:
            self._message(f"{trial.id}: restored checkpoint at iteration {checkpoint.iteration}")

    async def on_trial_complete(self, trial: Trial) -> None:
        if self.line_mode:
            row = self.rows[trial.id]
            self._line(
                f"{trial.id} finished at iteration {row.iteration}  "
                f"val_acc {fixed(row.val_accuracy, 4)}"
            )

    # -- what the kill hook tells us ------------------------------------------------

    def note_kill(self, trial: Trial, iteration: int) -> None:
        self.killed.add(trial.id)
        self._message(f"{trial.id}: killing its actor at iteration {iteration} (demo)")

    def _failure_text(self, trial_id: str) -> str:
        what = "actor killed" if trial_id in self.killed else "failed"
        self.killed.discard(trial_id)
        return f"{what} at iteration {self.failed_at.get(trial_id, '?')}"

    # -- output ----------------------------------------------------------------------

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _line(self, text: str) -> None:
        elapsed_line(self.console, self.started, text)

    def _message(self, text: str) -> None:
        self.messages.append(text)
        if self.line_mode:
            self._line(text)

    def __rich__(self) -> RenderableType:
        table = trial_table(
            [(row, row.trial.state) for row in self.rows.values()],
            iterations=self.iterations,
            title=f"trialflow demo: {len(self.rows)} trials on digits  ({self._elapsed():.0f} s)",
        )
        counts: dict[str, int] = {}
        for row in self.rows.values():
            counts[row.trial.state.value] = counts.get(row.trial.state.value, 0) + 1
        summary = "  ".join(f"{state}: {n}" for state, n in sorted(counts.items()))
        parts: list[RenderableType] = [table, Text(summary, style="dim")]
        parts += [Text(m, style="yellow") for m in list(self.messages)[-6:]]
        return Group(*parts)


class ActorKiller:
    """Kills, once, the actor of the first trial to report ``at_iteration`` or later with
    a checkpoint already persisted, so the demo shows a restore, not a restart.

    Checkpoints persist in the background: a fast trial can report iteration 7 before
    its checkpoint of iteration 6 is committed. Killed then, it would (rightly) start
    over from scratch.
    """

    def __init__(self, at_iteration: int, board: Board) -> None:
        self.at_iteration = at_iteration
        self.board = board
        self.victim: str | None = None

    async def on_trial_result(self, trial: Trial, result: Mapping[str, Any]) -> None:
        if self.victim is not None or result["training_iteration"] < self.at_iteration:
            return
        actor = trial.actor
        if actor is None or trial.state is not TrialState.RUNNING:
            return  # finished meanwhile: the next trial to get here is the victim
        if not trial.checkpoints:
            return  # nothing persisted yet: a later result (or another trial) will do
        self.victim = trial.id
        self.board.note_kill(trial, int(result["training_iteration"]))
        ray.kill(actor)


# ----------------------------------------------------------------------------- tables


def trial_table(rows: Sequence[tuple[Row, TrialState]], *, iterations: int, title: str) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("trial")
    for name in ("lr", "hidden", "decay", "batch"):
        table.add_column(name, justify="right")
    table.add_column("state")
    table.add_column("iter", justify="right")
    table.add_column("train loss", justify="right")
    table.add_column("val acc", justify="right")
    table.add_column("best", justify="right")
    table.add_column("ckpt", justify="right")
    table.add_column("failures", justify="right")
    for row, state in rows:
        cfg = row.trial.config
        hidden = int(cfg.get("hidden", 0))
        table.add_row(
            row.trial.id,
            f"{cfg.get('lr', 0):g}",
            str(hidden) if hidden else "-",
            f"{cfg.get('weight_decay', 0):g}",
            str(cfg.get("batch_size", "")),
            state_text(state.value),
            f"{row.iteration}/{iterations}",
            fixed(row.train_loss, 4),
            fixed(row.val_accuracy, 4),
            fixed(row.best_accuracy, 4),
            "-" if row.checkpoint is None else str(row.checkpoint),
            Text(str(row.failures), style="bold red" if row.failures else ""),
        )
    return table


def final_rows(board: Board) -> list[tuple[Row, TrialState]]:
    """Rows from each trial's recorded results (not the hooks' view), best first."""
    rows = []
    for trial in board.trials:
        row = Row(trial, failures=trial.num_failures)
        last = trial.last_result or {}
        row.iteration = trial.iteration
        row.train_loss = number(last.get("train_loss"))
        row.val_accuracy = number(last.get("val_accuracy"))
        accs = [number(r.get("val_accuracy")) for r in trial.results]
        row.best_accuracy = max((a for a in accs if a is not None), default=None)
        latest = trial.latest_checkpoint
        row.checkpoint = latest.iteration if latest is not None else None
        rows.append((row, trial.state))
    rows.sort(key=lambda rs: -(rs[0].val_accuracy if rs[0].val_accuracy is not None else -1.0))
    return rows


# ----------------------------------------------------------------------------- run


def demo_main(options: DemoOptions, console: Console) -> int:
    """Start Ray, run the sweep, stop Ray; returns the process exit status."""
    from orchestrator.cli.common import ray_session
    from orchestrator.cli.demo_model import load_digits_split

    started = time.monotonic()
    console.print(options.banner(), highlight=False)
    # Load (and cache, for the actors) the digits while Ray starts: importing
    # scikit-learn takes a while.
    with ThreadPoolExecutor(1, thread_name_prefix="digits") as pool:
        loading = pool.submit(load_digits_split)
        with ray_session(options.address, env={var: "1" for var in THREAD_ENV_VARS}):
            console.print(f"Ray is up ({time.monotonic() - started:.1f} s)", highlight=False)
            loading.result()
            return asyncio.run(run_demo(options, console, started))


async def run_demo(options: DemoOptions, console: Console, started: float | None = None) -> int:
    """Run the sweep on the Ray this process is connected to; returns the exit status."""
    from orchestrator.cli.demo_model import DigitsMLP

    live = console.is_terminal if options.live is None else options.live
    name = options.name or "demo-" + datetime.now().strftime("%Y%m%d-%H%M%S")
    every = options.every
    started = time.monotonic() if started is None else started

    board = Board(options.iterations, line_mode=not live, console=console, started=started)
    killer = ActorKiller(options.kill_at, board) if options.kill else None
    orch = Orchestrator(
        storage=options.storage,
        name=name,
        max_failures=2,
        keep_checkpoints=2,
        checkpoint_score=("val_accuracy", "max"),
        hooks=[board, *([killer] if killer else [])],
        progress=False,  # the board is this demo's live table
    )
    configs = sweep_configs(options.trials, options.epochs_per_iter)
    console.print(f"checkpoints: {orch.storage_uri}", highlight=False, soft_wrap=True)

    # The board reports failures itself; the loop's warning would say it twice.
    loop_log = logging.getLogger("orchestrator.engine.loop")
    loop_level = loop_log.level
    loop_log.setLevel(logging.ERROR)
    try:
        async with orch:
            trials = [
                orch.add_trial(
                    DigitsMLP,
                    config,
                    stop={"training_iteration": options.iterations},
                    checkpoint_every=every,
                    resources={"cpu": options.cpu_per_trial},
                    trial_id=f"trial_{i:02d}",
                )
                for i, config in enumerate(configs)
            ]
            for trial in trials:
                board.add(trial)
            if live:
                # Transient: the final table replaces the live one; messages are kept.
                with Live(board, console=console, refresh_per_second=4, transient=True):
                    await orch.run()
                for message in board.messages:
                    console.print(message, style="yellow", highlight=False)
            else:
                await orch.run()
    finally:
        loop_log.setLevel(loop_level)
    elapsed = time.monotonic() - started

    rows = final_rows(board)
    console.print()
    console.print(
        trial_table(
            rows,
            iterations=options.iterations,
            title=f"final: {len(rows)} trials, best validation accuracy first",
        )
    )
    terminated = sum(1 for t in trials if t.state is TrialState.TERMINATED)
    failures = sum(t.num_failures for t in trials)
    recovered = sum(board.rows[t.id].recovered for t in trials)
    best_row, _ = rows[0]
    console.print(
        f"{terminated}/{len(trials)} trials TERMINATED; {failures} failure(s), "
        f"{recovered} recovered; {elapsed:.1f} s",
        highlight=False,
    )
    console.print(
        f"best: {best_row.trial.id} ({_config_text(best_row.trial.config)}) val_accuracy "
        f"{fixed(best_row.val_accuracy, 4)}",
        highlight=False,
    )
    console.print(f"checkpoints kept in {orch.storage_uri}", highlight=False, soft_wrap=True)
    _plot(trials, orch.storage_uri, console)
    console.print(
        f"logs of every trial: tensorboard --logdir {orch.storage_uri}",
        highlight=False,
        soft_wrap=True,
    )
    ok = terminated == len(trials)
    if options.kill and killer is not None and killer.victim is None:
        console.print("note: no trial reached the kill iteration while running", style="yellow")
    elif options.kill and recovered < 1:
        ok = False
    return 0 if ok else 1


# ----------------------------------------------------------------------------- helpers


def _plot(trials: Sequence[Trial], where: str, console: Console) -> None:
    """``demo.png`` in the experiment: validation accuracy of every trial, the best
    highlighted, the recovered trial's restore marked."""
    import os

    from orchestrator.errors import ConfigError
    from orchestrator.views.plotting import plot_metric

    path = os.path.join(where, "demo.png")
    data = [
        {"id": t.id, "results": t.results, "state": t.state.value, "events": t._rt.peek().events}
        for t in trials
    ]
    try:
        plot_metric(data, "val_accuracy", "max", path=path, title="demo: validation accuracy")
    except ConfigError as err:  # matplotlib missing: say so, the sweep stands
        console.print(f"no plot: {err}", style="yellow", highlight=False)
        return
    console.print(f"plot: {path}", highlight=False, soft_wrap=True)


def _config_text(config: Mapping[str, Any]) -> str:
    keys = ("lr", "hidden", "weight_decay", "batch_size")
    return " ".join(f"{k}={config[k]}" for k in keys if k in config)


def _first_line(error: BaseException) -> str:
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()[:160]
    return type(error).__name__
