"""The journal's JSON: standard JSON (RFC 8259) in, the same values out.

Python's json writes NaN and infinities as the bare words ``NaN`` and ``Infinity``,
which strict parsers (JavaScript's ``JSON.parse``, jq, Go, serde) refuse. A NaN or
infinite float is written as ``{"$float": "NaN" | "Infinity" | "-Infinity"}`` instead
(:data:`FLOAT_TAG`) and read back as the float it was. A tagged object, not a bare
string, so that a string "NaN" the trainable reported stays a string. Values with no JSON
form (numpy scalars and arrays) are converted; anything else becomes its ``repr``.

Results are encoded once each, when reported: the common case (no NaN) costs what
``json`` costs, and only a value the encoder refuses is walked.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping
from typing import Any

from orchestrator.core.results import json_spelling

__all__ = ["FLOAT_TAG", "dumps", "loads", "untag"]


def _json_default(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        with contextlib.suppress(Exception):
            return item()
    tolist = getattr(value, "tolist", None)  # numpy arrays
    if callable(tolist):
        with contextlib.suppress(Exception):
            return tolist()
    return repr(value)


_ENCODER = json.JSONEncoder(default=_json_default, separators=(",", ":"), allow_nan=False)
#: A NaN or infinite float in the journal: ``{"$float": "NaN" | "Infinity" | "-Infinity"}``.
#: Standard JSON has no such numbers (``NaN`` and ``Infinity`` are Python's extension,
#: which strict parsers refuse), and a tagged object reads back as the float it was,
#: where a bare string would be taken for a string the trainable reported.
FLOAT_TAG = "$float"
_SPELLED = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_TAG_TEXT = f'"{FLOAT_TAG}"'
_MAX_DEPTH = 100


def dumps(value: Any) -> str:
    """Standard JSON for ``value`` (non-finite floats tagged: :data:`FLOAT_TAG`)."""
    # One encoder for all: json.dumps with options builds a new one per call, which
    # costs more than encoding a small result dict.
    try:
        return _ENCODER.encode(value)
    except ValueError:  # a NaN or an infinity (rare): only then walk the value
        return _ENCODER.encode(_tag_floats(value, 0))


def loads(data: str | bytes) -> Any:
    """Read what :func:`dumps` wrote (tagged floats back to floats); also journals of
    earlier versions, which wrote ``NaN`` and ``Infinity`` bare."""
    if isinstance(data, bytes):
        tagged = _TAG_TEXT.encode() in data
    else:
        tagged = _TAG_TEXT in data
    return json.loads(data, object_hook=untag) if tagged else json.loads(data)


def _tag_floats(value: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return value  # a reference cycle: the encoder says so
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else {FLOAT_TAG: json_spelling(value)}
    if isinstance(value, (str, int)) or value is None:  # bool is an int
        return value
    if isinstance(value, Mapping):
        return {k: _tag_floats(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tag_floats(v, depth + 1) for v in value]
    if isinstance(value, float):
        return _tag_floats(float(value), depth)
    converted = _json_default(value)  # numpy values may hold a NaN too
    return converted if isinstance(converted, str) else _tag_floats(converted, depth + 1)


def untag(obj: dict[str, Any]) -> Any:
    """A JSON object as read (a ``json`` ``object_hook``): a tagged non-finite float as
    the float it was, any other object as it is."""
    if len(obj) == 1 and FLOAT_TAG in obj:
        number = _SPELLED.get(obj[FLOAT_TAG])
        if number is not None:
            return number
    return obj
