"""Small misuses a new user makes, each answered with what happened and what to do:
``run_sync()`` in a notebook, a blank experiment name, a storage path that is a file,
``sys.exit()`` in a trainable, and messages that name their trial once."""

from __future__ import annotations

import asyncio
import gc
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from orchestrator import ConfigError, Orchestrator, Trainable, TrialState, report

QUIET: dict[str, Any] = {"progress": False, "loggers": []}
CPU = {"cpu": 0.25}


async def test_run_sync_inside_a_running_loop_says_to_await(tmp_path: Path) -> None:
    """As in a Jupyter cell: our error, saying what to write, and no "never awaited"
    warning from a coroutine that was made and dropped."""
    orch = Orchestrator(storage=tmp_path, name="nb", **QUIET)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ConfigError) as info:
            orch.run_sync()
        gc.collect()
    assert "inside a running event loop" in str(info.value)
    assert "`async with orch: trials = await orch.run()`" in str(info.value)
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    assert not (tmp_path / "nb").exists()  # nothing started


@pytest.mark.parametrize("name", [" ", "", "exp ", " exp", "a\tb", "\n"])
def test_a_blank_or_padded_experiment_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="experiment name must be a non-empty str"):
        Orchestrator(storage=tmp_path, name=name)


def test_a_name_with_inner_spaces_is_fine(tmp_path: Path) -> None:
    assert Orchestrator(storage=tmp_path, name="my exp").name == "my exp"


@pytest.mark.parametrize("where", ["storage", "name"])
async def test_a_storage_path_that_is_a_file_is_named_as_such(tmp_path: Path, where: str) -> None:
    afile = tmp_path / "results.txt"
    afile.write_text("mine")
    if where == "storage":  # <file>/exp cannot be created
        orch = Orchestrator(storage=afile, name="exp", **QUIET)
    else:  # <dir>/results.txt is the experiment's directory, and a file
        orch = Orchestrator(storage=tmp_path, name="results.txt", **QUIET)
    # Said before anything is opened, by the experiment's own check (the storage driver
    # would say NotADirectory; the storage library's own tests check that).
    with pytest.raises(ConfigError) as info:
        async with orch:
            pass
    message = str(info.value)
    assert "is a file, not a directory" in message and str(afile) in message
    assert "Not a directory" not in message
    assert afile.read_text() == "mine"


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


@pytest.mark.usefixtures("ray_local")
async def test_sys_exit_in_a_trainable_says_it_exited_and_each_message_names_its_trial_once(
    tmp_path: Path,
) -> None:
    stop = {"training_iteration": 5}
    async with Orchestrator(storage=tmp_path, name="exits", **QUIET) as orch:
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
