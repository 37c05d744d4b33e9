"""The ``json`` logger: ``params.json``, ``params_history.jsonl`` and ``result.json``,
in Ray Tune's layout (so its readers, e.g. ``pandas.read_json(lines=True)``, work)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.core.trial_logs import ABANDONED_FILE, PARAMS_HISTORY_FILE, RESULT_FILE
from orchestrator.views.loggers.files import IterationFile, write_atomic
from orchestrator.views.loggers.ops import TRAINING_ITERATION
from orchestrator.views.loggers.values import dumps

__all__ = ["JsonWriter", "PARAMS_HISTORY_FILE", "RESULT_FILE"]

PARAMS_FILE = "params.json"


class JsonWriter:
    """``result.json``: one JSON object per line, the result dict as reported.
    ``params.json``: the trial's current config (indented, sorted keys), replaced
    atomically when it changes. ``params_history.jsonl``: one line
    ``{"iteration": k, "config": {...}}`` per config, the first at iteration 0; ``k``
    is the last iteration before the config took effect. ``result.abandoned.json``:
    the lines a rollback took out of ``result.json`` (an abandoned run's results), in
    the order they left it; created by the first rollback."""

    def __init__(self, directory: Path, touched: Callable[[str], None]) -> None:
        self._dir = directory
        self._touched = touched
        self._results = IterationFile(directory / RESULT_FILE)

    def reset(self, config: Mapping[str, Any]) -> None:
        self._write_params(config)
        history = self._dir / PARAMS_HISTORY_FILE
        history.write_text(dumps({"iteration": 0, "config": config}) + "\n", encoding="utf-8")
        self._touched(PARAMS_HISTORY_FILE)
        self._results.start()
        self._touched(RESULT_FILE)

    def reopen(self) -> None:
        """Carry on with the files as they are on disk (the trial was forgotten when it
        ended, and came back)."""
        self._results.load(0, lambda line: int(json.loads(line)[TRAINING_ITERATION]))

    def write(self, results: Sequence[Mapping[str, Any]]) -> None:
        self._results.append(
            [(r[TRAINING_ITERATION], (dumps(r) + "\n").encode("utf-8")) for r in results]
        )
        self._touched(RESULT_FILE)

    def rollback(self, iteration: int) -> None:
        dropped = self._results.cut(iteration)
        if dropped:  # an abandoned run's results: kept, never deleted
            with open(self._dir / ABANDONED_FILE, "ab") as f:
                f.write(dropped)
            self._touched(ABANDONED_FILE)
            self._touched(RESULT_FILE)

    def config_changed(self, iteration: int, config: Mapping[str, Any]) -> None:
        self._write_params(config)
        with open(self._dir / PARAMS_HISTORY_FILE, "a", encoding="utf-8") as f:
            f.write(dumps({"iteration": iteration, "config": config}) + "\n")
        self._touched(PARAMS_HISTORY_FILE)

    def end(self, config: Mapping[str, Any], last_result: Mapping[str, Any] | None) -> None:
        self._results.close()

    def flush(self) -> None:
        self._results.flush()

    def close(self) -> None:
        self._results.close()

    def _write_params(self, config: Mapping[str, Any]) -> None:
        write_atomic(self._dir / PARAMS_FILE, dumps(config, indent=2).encode("utf-8"))
        self._touched(PARAMS_FILE)
