"""Ray Tune's ``CLIReporter`` (``ray.tune.progress_reporter``), as the facade's built-in
live table: ``RunConfig(progress_reporter=CLIReporter(...))`` or ``tune.run(...,
progress_reporter=...)`` shows the table, as without it.

Libraries pass one without asking (Hugging Face's ``hyperparameter_search`` passes
``CLIReporter(metric_columns=["objective"])``), so it is taken rather than refused. Its
arguments are kept, readable, and change nothing: the table shows each trial's state,
iteration and the run's metric, whatever the columns asked. A subclass with its own
``report`` is refused where it is given (nothing would call it): a ``tune.Callback``'s
``on_trial_result`` sees every result instead.
"""

from __future__ import annotations

from typing import Any

from orchestrator.tune.error import unsupported
from orchestrator.tune.unsupported import getattr_for

__all__ = ["CLIReporter", "check_reporter"]


class CLIReporter:
    """Ray Tune's ``CLIReporter``, with its arguments (see the module docstring)."""

    def __init__(
        self,
        *,
        metric_columns: list[str] | dict[str, str] | None = None,
        parameter_columns: list[str] | dict[str, str] | None = None,
        total_samples: int | None = None,
        max_progress_rows: int = 20,
        max_error_rows: int = 20,
        max_column_length: int = 20,
        max_report_frequency: int = 5,
        infer_limit: int = 3,
        print_intermediate_tables: bool | None = None,
        metric: str | None = None,
        mode: str | None = None,
        sort_by_metric: bool = False,
    ) -> None:
        self.metric_columns = metric_columns
        self.parameter_columns = parameter_columns
        self.total_samples = total_samples
        self.max_progress_rows = max_progress_rows
        self.max_error_rows = max_error_rows
        self.max_column_length = max_column_length
        self.max_report_frequency = max_report_frequency
        self.infer_limit = infer_limit
        self.print_intermediate_tables = print_intermediate_tables
        self.metric = metric
        self.mode = mode
        self.sort_by_metric = sort_by_metric

    def add_metric_column(self, metric: str, representation: str | None = None) -> None:
        columns = self.metric_columns
        if isinstance(columns, dict):
            columns[metric] = representation or metric
        else:
            self.metric_columns = [*(columns or []), metric]

    def add_parameter_column(self, parameter: str, representation: str | None = None) -> None:
        columns = self.parameter_columns
        if isinstance(columns, dict):
            columns[parameter] = representation or parameter
        else:
            self.parameter_columns = [*(columns or []), parameter]

    def set_search_properties(self, metric: str | None, mode: str | None) -> bool:
        self.metric = metric or self.metric
        self.mode = mode or self.mode
        return True

    def set_total_samples(self, total_samples: int) -> None:
        self.total_samples = total_samples


def check_reporter(reporter: Any, where: str) -> None:
    """Refuse a progress reporter the built-in table cannot stand for (``where``: the
    argument as written, ``RunConfig(progress_reporter=...)``)."""
    if reporter is None:
        return
    instead = (
        "the live progress table is built in (verbose=0 hides it); a tune.Callback's "
        "on_trial_result sees every result"
    )
    if not isinstance(reporter, CLIReporter):
        raise unsupported(f"{where} given a {type(reporter).__name__}", instead)
    mro = type(reporter).__mro__
    for cls in mro[: mro.index(CLIReporter)]:
        own = [m for m in ("report", "should_report") if m in vars(cls)]
        if own:
            raise unsupported(f"{where} given a reporter with its own {own[0]}()", instead)


__getattr__ = getattr_for("progress_reporter")
