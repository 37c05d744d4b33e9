"""What is wrong with a journal object, in words, for the page to show.

A journal's objects are replaced atomically, so a damaged one was damaged outside the
writer (a copy cut short, a disk that lost data, a hand edit). The dashboard never
answers such a journal with an error status: it names the object and the damage on the
experiment's page, and shows whatever it read before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.core.journal_format import SEGMENTS_PREFIX
from orchestrator.journal.damage import damage_of
from orchestrator.views.dashboard.json_values import parse

__all__ = ["HeadDamaged", "SegmentDamaged", "check_head", "describe", "parse_segment"]


class HeadDamaged(ValueError):
    """A head that cannot be used, and why (in words, after the head's name)."""


class SegmentDamaged(ValueError):
    """A result segment that cannot be read whole (the message names it)."""


def describe(data: bytes) -> str:
    """Why ``data`` is not one JSON document, in words (the journal's own diagnosis)."""
    return damage_of(data) or "cannot be read"


def check_head(data: bytes) -> dict[str, Any]:
    """The head ``data`` holds, checked enough to show: a JSON object with a ``trials``
    list of entries that each have a string ``id``, and ``segments`` (format 2) a list of
    keys under the results prefix. :class:`HeadDamaged` says what is wrong otherwise."""
    try:
        doc = parse(data)
    except ValueError:
        raise HeadDamaged(describe(data)) from None
    if not isinstance(doc, dict):
        raise HeadDamaged(f"is not a journal head (a JSON {type(doc).__name__})")
    version = doc.get("format", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise HeadDamaged(f"has a 'format' that is not a number: {version!r}")
    trials = doc.get("trials")
    if not isinstance(trials, list):
        raise HeadDamaged("is not a journal head: it has no 'trials' list")
    seen: set[str] = set()
    for index, entry in enumerate(trials):
        trial_id = entry.get("id") if isinstance(entry, Mapping) else None
        if not isinstance(trial_id, str) or not trial_id:
            raise HeadDamaged(f"has a damaged trial entry (#{index}): no trial id")
        if trial_id in seen:
            raise HeadDamaged(f"lists trial {trial_id!r} twice")
        seen.add(trial_id)
    segments = doc.get("segments", [])
    if not isinstance(segments, list) or not all(
        isinstance(k, str) and k.startswith(SEGMENTS_PREFIX + "/") for k in segments
    ):
        raise HeadDamaged(f"has a 'segments' field that is not a list of {SEGMENTS_PREFIX}/ keys")
    return doc


def parse_segment(data: bytes) -> tuple[list[tuple[str, int, list[Any]]], str | None]:
    """A result segment's lines as ``(trial, from, rows)``, up to the first damaged one,
    and what is wrong with that one (None: the segment is whole)."""
    parts: list[tuple[str, int, list[Any]]] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            part = parse(line)
            trial, first, rows = part["trial"], part["from"], part["rows"]
            if not isinstance(trial, str) or not isinstance(rows, list):
                raise TypeError("'trial' is not a string or 'rows' not a list")
            if isinstance(first, bool) or not isinstance(first, int) or first < 0:
                raise TypeError("'from' is not an index")
        except (ValueError, TypeError, KeyError) as err:
            what = describe(line) if isinstance(err, ValueError) else f"lacks a field: {err}"
            return parts, f"line {number} {what}"
        parts.append((trial, first, [r if isinstance(r, dict) else {} for r in rows]))
    return parts, None
