"""A sweep's document in the journal's head costs its live trials, not every trial it
made (issue 36): it counts its trials (their ids follow) and lists only the ones its
searcher has not heard the end of. A resumed sweep derives the rest: it claims every
trial it made, sealed or not, tells its searcher of none twice and runs exactly the
trials it had not made. Format 3's lists (``created``, ``trials``, ``told``) still
resume the same, and are written back in the short form."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, TrialState
from orchestrator.core.codec import unpickle_b64
from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY
from orchestrator.core.sweep_doc import (
    compact,
    created_ids,
    not_told_ids,
    sweep_trial_id,
    told_ids,
)
from orchestrator.schedulers import ASHA
from orchestrator.search import RandomSearch, uniform

from ..support.fake_engine import MakeOrchestrator
from ..support.trainables import Counter

#: What the recording searcher heard, across the sessions of one test (one process).
TOLD: list[str] = []
REPORTED: list[str] = []


class Recording(RandomSearch):
    """RandomSearch that notes every trial it is told the end of, and every result."""

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        REPORTED.append(trial_id)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        TOLD.append(trial_id)


def _args(num_samples: int, fast_after: Path) -> dict[str, Any]:
    return {
        "num_samples": num_samples,
        "metric": "score",
        "mode": "max",
        "max_concurrent_trials": 2,
        "stop": {"training_iteration": 2},
        "resources": {"cpu": 0.25},
        "seed": 1,
        "name": "s",
    }


def _space(fast_after: Path) -> dict[str, Any]:
    return {"x": uniform(0, 1), "delay": 0.5, "fast_after": str(fast_after)}


async def _all_sealed(orch: Orchestrator, head: Path) -> dict[str, Any]:
    """Journal writes until every trial is settled and the head holds no trial's part:
    every one is in a sealed object. The head as it is then. (The journal's own writer
    writes, asked by ``touch``: a ``flush`` beside it could race it.)"""
    journal = orch._exp.journal
    assert journal is not None
    deadline = time.monotonic() + 120
    while True:
        journal.touch()
        await asyncio.sleep(0.05)
        doc: dict[str, Any] = json.loads(head.read_text())
        if doc["trials"] == [] and all(t.state.is_settled for t in orch.trials):
            return doc
        assert time.monotonic() < deadline, "timed out waiting for the trials to be sealed"


def _sweep_doc(head: dict[str, Any]) -> dict[str, Any]:
    (doc,) = head["sweeps"]
    return dict(doc)


async def _sweep_bytes(tmp_path: Path, orchestrator: MakeOrchestrator, n: int) -> int:
    """The bytes of the sweep's document in the head, once its ``n`` trials are sealed
    (its searcher's state and pickled call aside: they do not name trials)."""
    fast = tmp_path / "fast"
    fast.touch()
    name = f"n{n}"
    async with orchestrator(storage=tmp_path, name=name, progress=False) as orch:
        await orch.sweep(Counter, _space(fast), **_args(n, fast))  # type: ignore[arg-type]
        head = await _all_sealed(orch, tmp_path / name / JOURNAL_KEY)
    doc = _sweep_doc(head)
    assert doc["created_count"] == n and doc["not_told"] == []
    rest = {k: v for k, v in doc.items() if k not in ("searcher_state", "call")}
    return len(json.dumps(rest))


async def test_a_sweeps_part_of_the_head_does_not_grow_with_its_sealed_trials(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    few = await _sweep_bytes(tmp_path, orchestrator, 3)
    many = await _sweep_bytes(tmp_path, orchestrator, 24)
    # One digit more in each of num_samples, total and created_count ("24" for "3"),
    # and nothing a trial adds (format 3 listed each three times: 30 bytes a trial).
    assert many - few <= 3, (few, many)


def _to_format_3(experiment: Path) -> None:
    """Rewrite the head (and its backup) as format 3 wrote a sweep: every trial listed."""
    head = json.loads((experiment / JOURNAL_KEY).read_text())
    for doc in head["sweeps"]:
        created, told = created_ids(doc), sorted(told_ids(doc))
        del doc["created_count"], doc["not_told"]
        doc.update(created=created, trials=created, told=told)
    head["format"] = 3
    for key in (JOURNAL_KEY, BACKUP_KEY):
        (experiment / key).write_text(json.dumps(head))


@pytest.mark.parametrize("format_3", [False, True], ids=["format-4", "format-3"])
async def test_a_resumed_sweep_claims_its_sealed_trials_tells_none_twice_and_runs_the_rest(
    tmp_path: Path, orchestrator: MakeOrchestrator, format_3: bool
) -> None:
    TOLD.clear()
    REPORTED.clear()
    fast, total = tmp_path / "fast", 10
    experiment = tmp_path / "exp"
    async with orchestrator(storage=tmp_path, name="exp", progress=False) as orch:
        task = asyncio.ensure_future(
            orch.sweep(Counter, _space(fast), searcher=Recording(), **_args(total, fast))  # type: ignore[arg-type]
        )
        deadline = time.monotonic() + 120
        while sum(t.state is TrialState.TERMINATED for t in orch.trials) < 2:
            assert time.monotonic() < deadline and not task.done()
            await asyncio.sleep(0.02)
        task.cancel()  # the sweep's call goes away; its running trials end after it
        with pytest.raises(asyncio.CancelledError):
            await task
        fast.touch()
        head = await _all_sealed(orch, experiment / JOURNAL_KEY)
        first = {t.id: [r["training_iteration"] for r in t.results] for t in orch.trials}
    made = len(first)
    assert 2 <= made < total
    assert list(first) == [sweep_trial_id("s", i) for i in range(made)]
    doc = _sweep_doc(head)
    assert "created" not in doc and "told" not in doc and "trials" not in doc
    assert doc["created_count"] == made
    # Those that ended once the call had gone are the ones not told (none twice below).
    assert sorted(doc["not_told"]) == sorted(set(first) - set(TOLD))
    told_first = list(TOLD)
    if format_3:
        _to_format_3(experiment)
    REPORTED.clear()
    async with orchestrator(storage=tmp_path, name="exp", progress=False, resume=True) as orch:
        result = await orch.sweep(
            Counter,  # type: ignore[arg-type]
            _space(fast),
            searcher=Recording(),
            **_args(total, fast),
        )
    head = json.loads((experiment / JOURNAL_KEY).read_text())
    ids = [sweep_trial_id("s", i) for i in range(total)]
    assert [t.id for t in result.trials] == ids  # every one claimed, in its order
    assert sorted(TOLD) == ids, TOLD  # each told once, across both sessions
    assert set(told_first) <= set(TOLD[: len(told_first)])
    assert set(REPORTED) == set(ids[made:])  # only the trials it had not made ran
    for trial in result.trials:
        assert trial.state is TrialState.TERMINATED
        assert [r["training_iteration"] for r in trial.results] == [1, 2]
    doc = _sweep_doc(head)
    assert head["format"] >= 4 and "created" not in doc and "told" not in doc
    assert doc["created_count"] == total and doc["not_told"] == []


def test_format_3_documents_read_and_compact_to_the_same_trials() -> None:
    ids = [sweep_trial_id("s", i) for i in range(4)]
    old = {"name": "s", "created": ids, "trials": ids, "told": ids[:2], "finished": False}
    short = compact(old)
    assert short == {"name": "s", "finished": False, "created_count": 4, "not_told": ids[2:]}
    assert created_ids(short) == created_ids(old) == ids
    assert told_ids(short) == told_ids(old) == set(ids[:2])
    assert not_told_ids(short) == not_told_ids(old) == set(ids[2:])
    untold = {"name": "s", "created": ids}  # listed, none told
    assert compact(untold)["not_told"] == ids and not told_ids(untold)
    odd = {"name": "s", "created": ["a", "b"], "told": ["a"]}  # not a sweep's names
    assert compact(odd) == odd


async def test_a_schedulers_state_is_pickled_again_only_after_a_call_to_it(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """ASHA's state is O(trials) (every trial's record at each rung): a write while the
    scheduler was asked nothing reuses the last pickle, and the pickle is never stale."""
    fast = tmp_path / "fast"
    fast.touch()
    args = {**_args(6, fast), "scheduler": ASHA(max_t=2, grace_period=1, reduction_factor=2)}
    async with orchestrator(storage=tmp_path, name="asha", progress=False) as orch:
        await orch.sweep(Counter, _space(fast), **args)  # type: ignore[arg-type]
        sweep = orch._exp.sweeps["s"]
        doc = sweep.journal_doc()
        state = sweep._scheduler_state
        assert state is not None
        assert unpickle_b64(doc["scheduler_state"]) == args["scheduler"].state_dict()
        pickled = state.pickles
        for _ in range(3):
            assert sweep.journal_doc()["scheduler_state"] == doc["scheduler_state"]
        assert state.pickles == pickled  # nothing asked of it since: not pickled again
        assert len(unpickle_b64(doc["scheduler_state"])["trials"]) == 6
