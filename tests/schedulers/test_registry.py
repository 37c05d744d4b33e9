"""The registry of schedulers is what the front ends offer: the command line's
``--scheduler`` and the Ray Tune facade's classes list every registered kind (and a
kind registered once shows up there; its run and dashboard: ``tests/engine/
test_scheduler_registry.py``)."""

from __future__ import annotations

import pytest

import orchestrator.tune.schedulers as tune_schedulers
from orchestrator.cli.main import build_parser
from orchestrator.schedulers import SchedulerKind, register_scheduler, scheduler_kinds
from orchestrator.tune.schedulers.base import TuneScheduler

from ..support.cli_options import option_choices


def test_the_command_line_offers_every_kind() -> None:
    offered = option_choices(build_parser(), "--scheduler")
    assert offered, "no --scheduler option found"
    wanted = [kind.name for kind in scheduler_kinds() if kind.command_line]
    assert sorted(set(offered)) == sorted(wanted)


def test_the_tune_facade_names_every_kind() -> None:
    for kind in scheduler_kinds():
        for name in kind.tune_classes:
            cls = getattr(tune_schedulers, name)
            assert name in tune_schedulers.__all__, name
            assert issubclass(cls, kind.cls) and issubclass(cls, TuneScheduler), name


def test_a_registered_kind_must_be_a_scheduler() -> None:
    with pytest.raises(TypeError, match="not a Scheduler"):
        register_scheduler(SchedulerKind("bad", dict, "no"))  # type: ignore[arg-type]
