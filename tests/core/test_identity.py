"""Which journaled trial an ``add_trial`` call of a resumed experiment adopts: the rule
of ``orchestrator.core.identity``, on plain data (no Ray, no storage)."""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np
import pytest

from orchestrator.actor.function import wrap_function
from orchestrator.core.identity import (
    Identity,
    JournaledIdentity,
    TrialMatcher,
    config_identity,
    journaled_identity,
    trainable_identity,
    warn_new_trial,
)
from orchestrator.errors import ConfigError

from ..support.trainables import Counter, Recorder, counting

COUNTER = trainable_identity(Counter)


def ident(config: dict[str, Any], trainable: str = COUNTER) -> Identity:
    return Identity(trainable, config_identity(config))


def journaled(trial_id: str, config: dict[str, Any], *, named: bool = False) -> JournaledIdentity:
    return JournaledIdentity(trial_id, ident(config), named)


def test_the_nth_call_of_a_trainable_and_config_adopts_the_nth_such_trial() -> None:
    matcher = TrialMatcher(
        [
            journaled("a0", {"rate": 1}),
            journaled("b0", {"rate": 2}),
            journaled("a1", {"rate": 1}),
        ]
    )
    # Interleaved differently from the journal: each config keeps its own count.
    assert matcher.match(ident({"rate": 2}), None) == "b0"
    assert matcher.match(ident({"rate": 1}), None) == "a0"
    assert matcher.match(ident({"rate": 1}), None) == "a1"
    assert matcher.match(ident({"rate": 1}), None) is None  # a third: a new trial
    assert matcher.match(ident({"rate": 2}), None) is None
    assert matcher.match(ident({"rate": 1}, "mod:Other"), None) is None  # another trainable


def test_a_named_trial_is_adopted_by_its_id_only() -> None:
    matcher = TrialMatcher(
        [journaled("given", {"rate": 1}, named=True), journaled("g0", {"rate": 1})]
    )
    assert matcher.match(ident({"rate": 1}), None) == "g0"  # never the named one
    assert matcher.match(ident({"rate": 1}), None) is None
    assert matcher.match(ident({"rate": 1}), "given") == "given"
    assert matcher.match(ident({"rate": 1}), "unknown") is None  # a new trial of that id


def test_a_call_naming_a_trial_with_another_config_or_twice_is_an_error() -> None:
    matcher = TrialMatcher([journaled("t", {"rate": 1}, named=True), journaled("g0", {"rate": 1})])
    with pytest.raises(ConfigError, match=r"trial t: the journal holds it as .*\"rate\": 1.*gives"):
        matcher.match(ident({"rate": 2}), "t")
    with pytest.raises(ConfigError, match="trial t: .*trainable"):
        matcher.match(ident({"rate": 1}, "mod:Other"), "t")
    assert matcher.match(ident({"rate": 1}), "t") == "t"
    with pytest.raises(ConfigError, match=r"already adopted"):
        matcher.match(ident({"rate": 1}), "t")
    # A generated id, already adopted by an unnamed call, named by a later one: ambiguous.
    assert matcher.match(ident({"rate": 1}), None) == "g0"
    with pytest.raises(
        ConfigError, match=r"trial g0: add_trial call #6 .*add_trial call #5 already"
    ):
        matcher.match(ident({"rate": 1}), "g0")


def test_a_generated_trial_named_first_is_not_adopted_again_by_order() -> None:
    matcher = TrialMatcher([journaled("g0", {"rate": 1}), journaled("g1", {"rate": 1})])
    assert matcher.match(ident({"rate": 1}), "g0") == "g0"
    assert matcher.match(ident({"rate": 1}), None) == "g1"
    assert matcher.match(ident({"rate": 1}), None) is None


def test_a_trial_whose_spec_was_lost_is_adopted_by_its_id_with_any_spec() -> None:
    lost = journaled_identity("x", {"id": "x", "spec_lost": True})
    matcher = TrialMatcher([lost])
    assert matcher.match(ident({"rate": 1}), None) is None
    assert matcher.match(ident({"rate": 9}), "x") == "x"


def test_configs_compare_as_the_journal_stores_them() -> None:
    assert config_identity({"a": 1, "b": [1, 2]}) == config_identity({"b": (1, 2), "a": 1})
    assert config_identity({"lr": np.float64(0.1)}) == config_identity({"lr": 0.1})
    assert config_identity({"x": {"y": 1, "z": 2}}) == config_identity({"x": {"z": 2, "y": 1}})
    assert config_identity({"a": 1}) != config_identity({"a": 1.5})
    assert config_identity({(1, 2): "tuple keys"}) == config_identity({(1, 2): "tuple keys"})


def test_trainables_are_named_by_module_and_qualname() -> None:
    assert COUNTER == "tests.support.trainables:Counter"
    assert trainable_identity(Recorder) != COUNTER
    # A function, wrapped or not (or through partial), is named after itself.
    assert trainable_identity(counting) == "tests.support.trainables:counting"
    assert trainable_identity(wrap_function(counting)) == "tests.support.trainables:counting"
    assert trainable_identity(wrap_function(functools.partial(counting))) == trainable_identity(
        counting
    )


def test_journaled_identities_of_older_journals() -> None:
    spec = {"trainable": "tests.support.trainables:Counter", "config": {"rate": 1}}
    generated = journaled_identity("Counter_1a2b3c_00001", spec)
    assert generated.identity == ident({"rate": 1}) and not generated.named
    assert journaled_identity("mine", spec).named  # not a generated id: it was given
    assert journaled_identity("Counter_1a2b3c_00001", spec, swept=True).named
    new = {**spec, "trainable_name": "tests.support.trainables:Counter", "trial_id_given": True}
    assert journaled_identity("Counter_1a2b3c_00001", new).named


def test_a_trainable_journaled_at_a_path_it_moved_from_is_the_same_trainable() -> None:
    """A script resumed after the demo's model moved passes it from its new module: the
    call adopts the trial journaled under the old path, not a twin from scratch."""
    from orchestrator.cli.demo_model import DigitsMLP

    spec = {"trainable": "orchestrator.demo_model:DigitsMLP", "config": {"lr": 0.1}}
    spec["trainable_name"] = spec["trainable"]
    journaled_trial = journaled_identity("DigitsMLP_1a2b3c_00000", spec)
    matcher = TrialMatcher([journaled_trial])
    call = Identity(trainable_identity(DigitsMLP), config_identity({"lr": 0.1}))
    assert matcher.match(call, None) == "DigitsMLP_1a2b3c_00000"


def test_a_new_trial_is_said_with_what_the_call_may_have_meant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    matcher = TrialMatcher([journaled("a0", {"rate": 1})])
    assert matcher.match(ident({"rate": 5}), None) is None
    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        warn_new_trial(matcher, "Counter_ffffff_00001", ident({"rate": 5}))
    (record,) = caplog.records
    assert "trial Counter_ffffff_00001" in record.message
    assert "matches no journaled trial: added as a new trial" in record.message
    assert "no call adopted: a0" in record.message
