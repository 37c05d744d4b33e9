"""``options=TrialOptions(...)`` on ``add_trial`` and ``sweep``: the same trials as the
keywords it stands for, and a sweep's journaled call still holds the keywords (what a
resumed driver, old or new, calls ``sweep(**call)`` with)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import ConfigError, TrialState
from orchestrator.core.codec import unpickle_b64
from orchestrator.core.options import TrialOptions
from orchestrator.search import uniform

from ..support.fake_engine import MakeOrchestrator
from ..support.trainables import Counter
from .trainables import FakeObjective

CPU = {"cpu": 0.25}
KEYWORDS = {
    "stop": {"training_iteration": 4},
    "checkpoint_every": 2,
    "resources": CPU,
    "max_failures": 1,
    "keep_checkpoints": 1,
}


def _comparable(fields: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in fields.items() if not k.endswith("_pickle")}


async def test_options_as_one_value_make_the_same_trial_as_the_keywords(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    options = TrialOptions(**KEYWORDS)  # type: ignore[arg-type]
    async with orchestrator(storage=tmp_path, name="opts") as orch:
        by_value = orch.add_trial(Counter, {"a": 1}, trial_id="v", options=options)
        by_keywords = orch.add_trial(Counter, {"a": 1}, trial_id="k", **KEYWORDS)  # type: ignore[arg-type]
        await orch.run()
        specs = {t.id: orch._exp.trials[t.id].spec for t in (by_value, by_keywords)}
    assert _comparable(specs["v"].to_json()) == _comparable(specs["k"].to_json())
    assert by_value.state is by_keywords.state is TrialState.TERMINATED
    assert [r["training_iteration"] for r in by_value.results] == [1, 2, 3, 4]


async def test_a_sweeps_journaled_call_holds_the_keywords_of_its_options(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    options = TrialOptions(stop={"training_iteration": 2}, resources=CPU, max_failures=1)
    space = {"x": uniform(-1, 1), "y": uniform(-1, 1), "marks": str(tmp_path)}
    async with orchestrator(storage=tmp_path, name="sweep-opts") as orch:
        result = await orch.sweep(FakeObjective, space, 2, "loss", "min", options=options)
        (doc,) = orch._exp.journal_extras()["sweeps"]
    assert all(t.state is TrialState.TERMINATED and t.iteration == 2 for t in result.trials)
    call = unpickle_b64(doc["call"])
    assert "options" not in call
    assert {k: call[k] for k in options.keywords()} == options.keywords()


async def test_a_sweeps_bad_option_names_the_sweep_and_starts_nothing(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    space = {"x": uniform(-1, 1), "y": uniform(-1, 1), "marks": str(tmp_path)}
    async with orchestrator(storage=tmp_path, name="bad-opts") as orch:
        with pytest.raises(ConfigError, match="sweep 'tune': checkpoint_every must be >= 0"):
            await orch.sweep(FakeObjective, space, checkpoint_every=-1, name="tune")
        with pytest.raises(ConfigError, match="sweep 'tune': .*not both .*got max_failures"):
            await orch.sweep(
                FakeObjective, space, max_failures=2, options=TrialOptions(), name="tune"
            )
        assert orch.trials == []
