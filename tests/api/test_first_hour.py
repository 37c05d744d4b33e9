"""What a newcomer gets wrong in the first hour, each answered at once and clearly: the
trial, key or URI named, the remedy given, and nothing lost. Here what needs real Ray
workers (a trainable they cannot import, their output's prefix) or no Ray at all; the
rest runs on the fake Ray (``tests/engine/test_first_hour.py``)."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from orchestrator import ConfigError, Orchestrator, Trainable, Trial, TrialState

from ..support.observe import wait_for
from ..support.trainables import Counter

pytestmark = pytest.mark.usefixtures("ray_local")

CPU = {"cpu": 0.25}


def test_a_config_value_that_cannot_reach_a_worker_is_named(tmp_path: Path) -> None:
    orch = Orchestrator(storage=tmp_path, name="c")
    with pytest.raises(ConfigError) as caught:
        orch.add_trial(Counter, {"lr": 0.1, "opt": {"lock": threading.Lock()}}, trial_id="t1")
    message = str(caught.value)
    assert "trial t1" in message and "'opt.lock'" in message and "setup()" in message
    assert orch.trials == []


async def test_a_trainable_the_workers_cannot_import_errors_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importable here, not in the workers (their sys.path lacks tmp_path)."""
    (tmp_path / "only_here.py").write_text(
        textwrap.dedent(
            """
            from orchestrator import Trainable

            class OnlyHere(Trainable):
                def step(self):
                    return {}
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from only_here import OnlyHere  # type: ignore[import-not-found]

    async with Orchestrator(storage=tmp_path / "s", name="i", max_failures=-1) as orch:
        trial = orch.add_trial(OnlyHere, resources=CPU)
        await asyncio.wait_for(orch.run(), 60)
    assert trial.state is TrialState.ERROR
    assert trial.num_failures == 1  # not retried, although max_failures=-1
    message = str(trial.error)
    assert trial.id in message and "module 'only_here'" in message
    assert "sys.path" in message and "runtime_env" in message
    sys.modules.pop("only_here", None)


def test_a_hook_with_a_wrong_signature_is_refused_when_given(tmp_path: Path) -> None:
    class Wrong:
        def on_trial_result(self, trial: Trial) -> None:
            pass

    with pytest.raises(ConfigError) as caught:
        Orchestrator(storage=tmp_path, name="h", hooks=[Wrong()])
    message = str(caught.value)
    assert "Wrong.on_trial_result" in message and "on_trial_result(trial, result)" in message


class Talks(Trainable):
    def step(self) -> dict[str, Any]:
        print("hello from step", flush=True)
        return {}


async def test_trainable_output_is_prefixed_with_its_trial(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    async with Orchestrator(storage=tmp_path, name="p") as orch:
        trial = orch.add_trial(Talks, stop={"training_iteration": 3}, resources=CPU)
        await orch.run()
        seen = ""

        def printed() -> bool:
            nonlocal seen
            seen += capfd.readouterr().out
            return "hello from step" in seen

        await wait_for(printed, 30)  # Ray forwards worker output in the background
    line = next(line for line in seen.splitlines() if "hello from step" in line)
    assert f"(trial {trial.id} pid=" in line
