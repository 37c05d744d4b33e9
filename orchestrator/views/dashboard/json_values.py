"""JSON in from the journal, JSON out to the browser, numbers in between.

The journal writes a NaN or infinite float as ``{"$float": "NaN" | "Infinity" |
"-Infinity"}``; journals of earlier versions wrote Python's bare ``NaN`` and
``Infinity``. :func:`parse` reads both back as floats. The browser's ``JSON.parse``
accepts neither bare word: :func:`to_browser` writes a non-finite float as ``null``,
and a value the page shows as text goes through :func:`spell` first (``"NaN"``,
``"Infinity"``, ``"-Infinity"``).

orjson, when installed (the ``[dashboard]`` extra installs it), parses and writes about
five times faster than :mod:`json`: a journal of 200,000 results is read in a fifth of a
second. Without it, :mod:`json` does the same work.

Which value of a metric a trial stands by follows the project's rule for "best": its
newest result that reports the metric; a NaN or infinite value never counts (the trial
diverged), and its older values do not stand in for it. ``lookup``, ``finite`` and
``newest`` are :mod:`orchestrator.core.best`'s (``newest`` is its ``value_of``), and the
tag is :mod:`orchestrator.core.json_codec`'s: the pages read what the journal wrote.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.core.best import finite, lookup
from orchestrator.core.best import value_of as newest
from orchestrator.core.json_codec import FLOAT_TAG, untag
from orchestrator.core.results import json_spelling

orjson: Any
try:
    import orjson
except ImportError:  # pragma: no cover - the extra installs it
    orjson = None

__all__ = ["FLOAT_TAG", "finite", "lookup", "newest", "numbers", "parse", "spell", "to_browser"]

_TAG_BYTES = b'"' + FLOAT_TAG.encode() + b'"'
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=repr)
_MAX_DEPTH = 64


def parse(data: bytes) -> Any:
    """``data`` as JSON, tagged and bare non-finite floats read as floats. Raises
    ``ValueError`` (``json.JSONDecodeError`` or ``UnicodeDecodeError``) when it is not."""
    value: Any
    try:
        if orjson is None:
            raise ValueError("no orjson")
        value = orjson.loads(data)
    except ValueError:  # orjson refuses a bare NaN: json reads it (and words the damage)
        return json.loads(data, object_hook=untag if _TAG_BYTES in data else None)
    return _untag_all(value, 0) if _TAG_BYTES in data else value


def _untag_all(value: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return untag({k: _untag_all(v, depth + 1) for k, v in value.items()})
    if isinstance(value, list):
        return [_untag_all(v, depth + 1) for v in value]
    return value


def to_browser(value: Any) -> bytes:
    """``value`` as standard JSON (what ``JSON.parse`` takes): non-finite floats as
    ``null``; anything JSON cannot hold as its ``repr``."""
    if orjson is not None:
        try:
            return orjson.dumps(value, default=repr, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # an integer beyond 64 bits, say: json takes any
            pass
    try:
        return _ENCODER.encode(value).encode()
    except ValueError:  # a NaN or an infinity: only then walk the value
        return _ENCODER.encode(_nulls(value, 0)).encode()


def _nulls(value: Any, depth: int) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth > _MAX_DEPTH or isinstance(value, (str, int)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {k: _nulls(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nulls(v, depth + 1) for v in value]
    return value


def spell(value: Any) -> Any:
    """``value`` with a non-finite float as the text a page shows: ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return json_spelling(value)
    return value


def numbers(results: Sequence[Mapping[str, Any]], key: str) -> list[float | None]:
    """Each result's value of ``key`` when it is a finite number, else None (the
    charts' hot loop: 200,000 results in a few tens of milliseconds)."""
    if "/" in key:
        return [finite(lookup(result, key)) for result in results]
    values: list[Any] = [result.get(key) for result in results]
    # int (not bool, whose type is bool), or a float that is finite (inf - inf and NaN
    # minus itself are NaN, which equals nothing).
    return [
        v if (kind := type(v)) is int or (kind is float and v - v == 0) else None for v in values
    ]
