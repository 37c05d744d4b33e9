"""Result dicts that share their keys: what a result costs while the driver keeps it.

A finished trial keeps its last result for the whole experiment (``Trial.last_result``,
the sweep's ranking, ``ResultGrid``), and a sweep's ten thousand trials report the same
names (issue 36: ten thousand trials in constant memory). A plain dict of seven entries
holds its own table of keys and hashes, some 270 bytes; CPython lets the dicts of one
class's instances share one table of keys (a *split* dict, PEP 412), each holding only
its values: some 130 bytes. :func:`result_dict` builds a result as such a dict, one class
per sequence of names. It is an ordinary ``dict`` in every way (type, equality, order,
mutation: a key added out of order or a deletion just gives that dict a table of its
own); an interpreter without split dicts builds a plain one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["result_dict"]

#: Sequences of names seen, each with the class whose instances' dicts share them. Few
#: per experiment (a trainable reports the same names); past this many, the oldest
#: is forgotten (a process that runs many kinds of trainables keeps sharing).
MAX_SHAPES = 64

_classes: dict[tuple[Any, ...], type] = {}


class _Result:
    """An instance's dict shares its keys with its class's other instances'."""


def result_dict(metrics: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A new dict of ``metrics``, then ``extra`` (which overrides a key of ``metrics`` in
    its place), in that order, sharing its keys with the other results of the same
    names. On the loop only."""
    shape = (*metrics, *extra)
    cls = _classes.get(shape)
    if cls is None:
        for oldest in list(_classes)[: max(0, len(_classes) - MAX_SHAPES + 1)]:
            del _classes[oldest]  # its results keep their class; new ones get a new one
        cls = _classes[shape] = type("Result", (_Result,), {})
    result: dict[str, Any] = cls().__dict__
    for key, value in metrics.items():
        result[key] = value
    for key, value in extra.items():
        result[key] = value
    return result
