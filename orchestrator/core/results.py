"""Results as plain data: what a trainable's ``step`` may return, and what is kept.

A result is journaled as JSON and read by loggers, schedulers and the CLI, so every
value is made JSON-ready once, when it is reported: numpy scalars become Python
numbers (``np.float32(0.5)`` -> ``0.5``), numpy arrays become (nested) lists, tuples
become lists, nested dicts are cleaned the same way. Anything else that JSON cannot
hold (an arbitrary object, a datetime) is kept as its ``repr`` and a warning names the
trial and the key, once per trial and key.

A NaN or infinite float is kept as reported (a stop criterion or a scheduler may act on
it), with a warning once per trial and key: it never counts as a trial's best
(:mod:`orchestrator.core.best`), and JSON files hold it as the string ``"NaN"``,
``"Infinity"`` or ``"-Infinity"`` (standard JSON has no such numbers; see
:mod:`orchestrator.views.loggers.values` and :mod:`orchestrator.journal.writer`).

The common case (str keys, plain int/float/str/bool/None values) costs one type check
per value, and a comparison per float.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("orchestrator")

SEP = "/"
"""Nested dicts are flattened with this separator (Ray Tune's convention)."""

_PLAIN = frozenset({int, float, str, bool, type(None)})
_INF = math.inf


def clean_result(result: dict[str, Any], warn: Callable[[str, Any], None]) -> None:
    """Make ``result`` JSON-ready in place; ``warn(key, value)`` for each value kept as
    its repr and each non-finite float (the caller says it once per trial and key)."""
    for key, value in result.items():
        kind = type(value)
        if kind is float:
            if not -_INF < value < _INF:  # NaN fails both comparisons
                warn(key, value)
        elif kind not in _PLAIN:
            result[key] = _clean(value, key, warn)


def _clean(value: Any, key: str, warn: Callable[[str, Any], None]) -> Any:
    if type(value) in _PLAIN:
        if type(value) is float and not -_INF < value < _INF:
            warn(key, value)
        return value
    if isinstance(value, dict):
        return {str(k): _clean(v, f"{key}.{k}", warn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v, key, warn) for v in value]
    if _is_numpy(value):
        converted = value.tolist() if hasattr(value, "shape") and value.shape else value.item()
        return _clean(converted, key, warn)
    for plain in (bool, int, float, str):  # subclasses (IntEnum, str enums...)
        if isinstance(value, plain):
            return _clean(plain(value), key, warn)
    warn(key, value)
    return repr(value)


def _is_numpy(value: Any) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "tolist")


class ResultWarnings:
    """Says once per trial and key that a value was kept as its repr, and once per trial
    and key that a value was NaN or infinite."""

    def __init__(self) -> None:
        self._said: set[tuple[str, str, bool]] = set()

    def for_trial(self, trial_id: str) -> Callable[[str, Any], None]:
        # Built per call, not kept per trial: a finished trial leaves nothing here
        # unless it was warned about (issue 36: the driver stays flat in N).
        return functools.partial(self._warn, trial_id)

    def _warn(self, trial_id: str, key: str, value: Any) -> None:
        non_finite = type(value) is float
        if (trial_id, key, non_finite) in self._said:
            return
        self._said.add((trial_id, key, non_finite))
        if non_finite:
            log.warning(
                "trial %s: result key %r is %r, not a finite number; it is kept as "
                "reported, never counts as the best value, and JSON files (logs, "
                'journal) hold it as the string "%s"',
                trial_id,
                key,
                value,
                json_spelling(value),
            )
            return
        log.warning(
            "trial %s: result key %r holds a %s, which results cannot keep (JSON); it "
            "is recorded as its repr. Report numbers, strings, lists or dicts (numpy "
            "values are converted)",
            trial_id,
            key,
            type(value).__name__,
        )


def json_spelling(value: float) -> str:
    """How JSON files spell a non-finite float: ``NaN``, ``Infinity`` or ``-Infinity``
    (Python's and JavaScript's own names, so ``float()`` and ``Number()`` read them)."""
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": 2}`` -> ``{"a/b": 1, "c": 2}``, in the row's key order.

    An empty nested dict is kept as the leaf value ``{}``, so no key ever disappears.
    """
    flat: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, name + SEP))
        else:
            flat[name] = value
    return flat
