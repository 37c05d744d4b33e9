"""Metrics a trial's first result must report (its stop criterion's, a sweep's), checked
by the state machine: no Ray, no asyncio."""

from __future__ import annotations

from orchestrator.core.events import ActorReady, Failure, Launch, TrainResult
from orchestrator.core.machine import TrialMachine, TrialPolicy, TrialState


def running(required: dict[str, str]) -> TrialMachine:
    machine = TrialMachine("t", TrialPolicy(required_metrics=required))
    machine.handle(Launch())
    machine.handle(ActorReady(machine.generation))
    return machine


def test_a_missing_metric_names_what_uses_it_the_trial_and_the_keys_reported() -> None:
    machine = running({"val_los": "the sweep's metric", "acc": "its stop criterion's metric"})
    machine.handle(TrainResult(machine.generation, ({"val_loss": 0.5, "acc": 1},)))
    assert machine.state is TrialState.ERROR
    message = str(machine.error)
    assert message.startswith("trial t: its first result does not report the sweep's metric ")
    assert "'val_los'" in message and "'acc'" not in message.split("(")[0]
    assert "(it reported 'val_loss', 'acc', 'training_iteration', 'trial_id')" in message
    assert "strict_metrics=False" in message and "stop criterion" not in message


def test_a_nested_metric_is_found_in_nested_results() -> None:
    machine = running({"eval/loss": "the sweep's metric"})
    machine.handle(TrainResult(machine.generation, ({"eval": {"loss": 0.5}},)))
    assert machine.state is TrialState.RUNNING


def test_only_the_first_result_is_checked() -> None:
    machine = running({"loss": "the sweep's metric"})
    machine.handle(TrainResult(machine.generation, ({"loss": 0.5},)))
    machine.handle(TrainResult(machine.generation, ({"other": 1},)))
    assert machine.state is TrialState.RUNNING
    assert not any(isinstance(e, Failure) for e in machine.errors)
