"""A sweep's document in the journal's head, as plain data: which trials it created
and which of them its searcher has heard the end of.

The head is rewritten at every write, so what a sweep puts there is paid at every
write (issue 36). A sweep names its trials ``<name>_00000``, ``<name>_00001``... in the
order it creates them, so its document need not list them: ``created_count`` says how
many, and the ids follow (:func:`created_ids`). Its searcher is told of nearly every
trial that ends, at once, so the document lists the opposite, the trials created and
not told yet (``not_told``): the live ones, and those that ended while the sweep's call
was not running. What a write stores for a sweep is so O(its live trials), not O(every
trial it ever made). Journals of format 3 and before list ``created`` (and ``trials``,
the same) and ``told`` in full; they are read as they are (:func:`created_ids`,
:func:`told_ids`) and written back in the short form (:func:`compact`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["compact", "created_ids", "not_told_ids", "sweep_trial_id", "told_ids"]


def sweep_trial_id(sweep: str, index: int) -> str:
    """The id of the ``index``-th trial (from 0) sweep ``sweep`` creates."""
    return f"{sweep}_{index:05d}"


def created_ids(doc: Mapping[str, Any]) -> list[str]:
    """The ids of the trials the sweep of ``doc`` created, in the order it created them."""
    if _listed(doc):
        listed = doc["created"] if isinstance(doc.get("created"), list) else doc["trials"]
        return [str(trial_id) for trial_id in listed]
    name = str(doc.get("name", ""))
    return [sweep_trial_id(name, i) for i in range(int(doc.get("created_count") or 0))]


def told_ids(doc: Mapping[str, Any]) -> set[str]:
    """The ids of the sweep's trials its searcher heard the end of."""
    if _listed(doc):
        return {str(trial_id) for trial_id in doc.get("told") or []}
    not_told = not_told_ids(doc)
    return {trial_id for trial_id in created_ids(doc) if trial_id not in not_told}


def not_told_ids(doc: Mapping[str, Any]) -> set[str]:
    """The ids of the sweep's trials its searcher has not heard the end of."""
    if _listed(doc):
        told = told_ids(doc)
        return {trial_id for trial_id in created_ids(doc) if trial_id not in told}
    return {str(trial_id) for trial_id in doc.get("not_told") or []}


def _listed(doc: Mapping[str, Any]) -> bool:
    """``doc`` is format 3's (and before): it lists every trial (``created``, and
    ``trials``, which earlier ones may hold alone)."""
    return isinstance(doc.get("created"), list) or isinstance(doc.get("trials"), list)


def compact(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` in the short form (a format-3 document's lists replaced by the count and
    the trials not told): what a resumed driver writes back for a sweep not run again."""
    if not _listed(doc):
        return dict(doc)
    created = created_ids(doc)
    short = {k: v for k, v in doc.items() if k not in ("created", "trials", "told")}
    if created != [sweep_trial_id(str(doc.get("name", "")), i) for i in range(len(created))]:
        return dict(doc)  # not named as sweeps name their trials: keep the lists
    short["created_count"] = len(created)
    short["not_told"] = sorted(not_told_ids(doc))
    return short
