"""``sys.exit()`` in a trainable, on the fake Ray: the trial fails saying its code
exited (its actor's process goes on: the fake would end it for a ``SystemExit`` that
escaped, as Ray ends a worker), and each message names its trial once. Moved from
``tests/api/test_misuse.py``: only the Ray under it changed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from orchestrator import Trainable, TrialState, report

from ..support.fake_engine import MakeOrchestrator

QUIET: dict[str, Any] = {"progress": False, "loggers": []}
CPU = {"cpu": 0.25}


class ExitsInStep(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        if self.n == 2:
            sys.exit(self.config["code"])
        return {"n": self.n}


class ReturnsNoDict(Trainable):
    def step(self) -> Any:
        return 3


def exits_in_function(config: dict[str, Any]) -> None:
    report({"n": 1})
    sys.exit(0)


def reports_no_dict(config: dict[str, Any]) -> None:
    report(3)  # type: ignore[arg-type]


async def test_sys_exit_in_a_trainable_says_it_exited_and_each_message_names_its_trial_once(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    stop = {"training_iteration": 5}
    async with orchestrator(storage=tmp_path, name="exits", **QUIET) as orch:
        zero = orch.add_trial(ExitsInStep, {"code": 0}, stop=stop, resources=CPU)
        three = orch.add_trial(ExitsInStep, {"code": 3}, stop=stop, resources=CPU)
        said = orch.add_trial(ExitsInStep, {"code": "bye"}, stop=stop, resources=CPU)
        function = orch.add_trial(exits_in_function, stop=stop, resources=CPU)
        no_dict = orch.add_trial(ReturnsNoDict, stop=stop, resources=CPU)
        function_no_dict = orch.add_trial(reports_no_dict, stop=stop, resources=CPU)
        await asyncio.wait_for(orch.run(), 120)
    expected = {
        zero: "ExitsInStep.step() exited: it called sys.exit(0) (exit code 0)",
        three: "ExitsInStep.step() exited: it called sys.exit(3) (exit code 3)",
        said: "ExitsInStep.step() exited: it called sys.exit('bye') (exit code 1)",
        function: "its function exits_in_function exited: it called sys.exit(0) (exit code 0)",
        no_dict: "ReturnsNoDict.step() raised TypeError: ReturnsNoDict.step() must return",
        function_no_dict: "reports_no_dict raised TypeError: report() takes a dict of metrics",
    }
    for trial, text in expected.items():
        message = str(trial.error)
        assert trial.state is TrialState.ERROR, message
        assert message.startswith(f"trial {trial.id}: "), message
        assert text in message, message
        assert message.count(trial.id) == 1, message
        assert "died" not in message, message
    assert [r["n"] for r in zero.results] == [1]  # the step before the exit stands
