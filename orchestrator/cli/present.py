"""What the commands print: trial tables, cells, event lines.

Shared by ``run`` and ``resume`` (live :class:`Trial` handles), ``show`` (journal
records) and the demo, so a trial looks the same whichever command shows it. rich is
imported by the functions that draw, not by this module: building the parser must stay
cheap, and the demo's workers import the package this module is in.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from orchestrator.core.best import finite, value_of

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from orchestrator.api.trial import Trial
    from orchestrator.core.checkpoints import Checkpoint

__all__ = [
    "BOOKKEEPING",
    "STATE_STYLE",
    "EventPrinter",
    "TrialRow",
    "cell",
    "config_text",
    "elapsed_line",
    "fixed",
    "results_table",
    "state_text",
    "states_text",
    "time_text",
    "trials_table",
]

#: Result keys the orchestrator adds; not worth a column.
BOOKKEEPING = frozenset({"training_iteration", "trial_id", "time_this_iter_s"})
#: At most this many metric columns (the sort metric first).
MAX_METRIC_COLUMNS = 5

STATE_STYLE: Mapping[str, str] = {
    "RUNNING": "green",
    "TERMINATED": "blue",
    "ERROR": "bold red",
    "RESTORING": "yellow",
    "STARTING": "cyan",
    "PAUSED": "magenta",
}


@dataclass(frozen=True)
class TrialRow:
    """A trial as a table shows it, whether from a live trial or from the journal."""

    id: str
    config: Mapping[str, Any]
    state: str
    iteration: int
    failures: int
    last: Mapping[str, Any]
    extra: Mapping[str, str] = field(default_factory=dict)  # more columns, after the fixed
    results: Sequence[Mapping[str, Any]] = ()  # its history (default: only ``last``)

    def value(self, metric: str) -> Any:
        """The trial's value of ``metric``: its newest result reporting it."""
        return value_of(self.results or [self.last], metric)


def trials_table(
    rows: Sequence[TrialRow], metric: str | None, mode: str, *, title: str, finished: bool = True
) -> Table:
    """One row per trial; sorted by ``metric`` (best first by the rule of
    :mod:`orchestrator.core.best`; no finite value: last) when given.

    Columns: trial, config, state, iter, failures, the rows' ``extra`` ones, then
    ``metric`` and other numeric keys of the last results (at most
    :data:`MAX_METRIC_COLUMNS`). ``finished``: a state other than TERMINATED is shown
    as a problem (the run is over), else in its live colour.
    """
    from rich.table import Table

    ordered = list(rows)
    if metric is not None:
        sign = -1.0 if mode == "max" else 1.0

        def key(row: TrialRow) -> float:
            value = finite(row.value(metric))
            return sign * value if value is not None else math.inf

        ordered.sort(key=key)  # stable: the first of equals stays first, as best.pick_best
    metrics: list[str] = [metric] if metric else []
    for row in rows:
        for name, value in row.last.items():
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            if numeric and name not in BOOKKEEPING and name not in metrics:
                metrics.append(name)
    metrics = metrics[:MAX_METRIC_COLUMNS]
    extra = list(dict.fromkeys(name for row in rows for name in row.extra))
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in ("trial", "config", "state", "iter", "failures", *extra):
        table.add_column(
            column, justify="left" if column in ("trial", "config", "state") else "right"
        )
    for name in metrics:
        table.add_column(name, justify="right")
    for row in ordered:
        table.add_row(
            row.id,
            config_text(row.config),
            state_text(row.state, finished=finished),
            str(row.iteration),
            str(row.failures),
            *(row.extra.get(name, "") for name in extra),
            *(
                cell(row.value(name) if name == metric else _lookup(row.last, name))
                for name in metrics
            ),
        )
    return table


def results_table(trials: Sequence[Trial], metric: str | None, mode: str) -> Table:
    """The final table of ``run`` and ``resume``: one row per trial, best first by
    ``metric`` when given."""
    rows = [
        TrialRow(
            t.id,
            t.config,
            t.state.value,
            t.iteration,
            t.num_failures,
            t.last_result or {},
            results=t.results,
        )
        for t in trials
    ]
    return trials_table(rows, metric, mode, title="final results")


class EventPrinter:
    """A hook: one line per trial start, failure, restore and end."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started = time.monotonic()

    async def on_trial_start(self, trial: Trial) -> None:
        elapsed_line(self.console, self.started, f"{trial.id} started  {config_text(trial.config)}")

    async def on_trial_error(self, trial: Trial, error: BaseException) -> None:
        text = str(error).removeprefix(f"trial {trial.id}: ")
        elapsed_line(self.console, self.started, f"{trial.id} failure {trial.num_failures}: {text}")

    async def on_trial_restore(self, trial: Trial, checkpoint: Checkpoint) -> None:
        elapsed_line(
            self.console,
            self.started,
            f"{trial.id} restored from checkpoint at iteration {checkpoint.iteration}",
        )

    async def on_trial_complete(self, trial: Trial) -> None:
        elapsed_line(
            self.console, self.started, f"{trial.id} finished at iteration {trial.iteration}"
        )


def elapsed_line(console: Console, started: float, text: str) -> None:
    """``[  12.3s] text``: seconds since ``started`` (monotonic), printed as is."""
    elapsed = time.monotonic() - started
    console.print(f"[{elapsed:6.1f}s] {text}", markup=False, highlight=False)


def state_text(state: str, *, finished: bool = False) -> Text:
    from rich.text import Text

    if finished:
        return Text(state, style="blue" if state == "TERMINATED" else "bold red")
    return Text(state, style=STATE_STYLE.get(state, ""))


def states_text(counts: Mapping[str, int]) -> str:
    """``2 TERMINATED, 1 ERROR``: live states first, as the progress display lists them."""
    from orchestrator.views.progress import STATE_ORDER

    def rank(state: str) -> tuple[int, str]:
        return (STATE_ORDER.index(state) if state in STATE_ORDER else len(STATE_ORDER), state)

    return ", ".join(f"{counts[state]} {state}" for state in sorted(counts, key=rank))


def config_text(config: Mapping[str, Any]) -> str:
    return json.dumps(config, default=str)


def cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def fixed(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def time_text(stamp: float | None) -> str:
    """A wall-clock time (seconds since the epoch) in local time, or "-"."""
    if stamp is None:
        return "-"
    return datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")


def _lookup(result: Mapping[str, Any], name: str) -> Any:
    """``result[name]``, or for ``a/b`` the nested value (what ``--metric a/b`` means)."""
    from orchestrator.core.best import metric_value

    return result[name] if name in result else metric_value(result, name)
