"""A trial's options as one value (``orchestrator.core.options``): checked once, where
built, with errors that name the call; no Ray, no event loop."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.core.options import TrialOptions, call_options
from orchestrator.errors import ConfigError


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"checkpoint_every": -1}, "add_trial: checkpoint_every must be >= 0"),
        ({"checkpoint_every": True}, "add_trial: checkpoint_every must be an int >= 0"),
        ({"max_failures": -2}, "add_trial: max_failures must be an int >= -1"),
        ({"result_buffer": 0}, "add_trial: result_buffer must be an int >= 1"),
        ({"keep_checkpoints": 0}, "keep_checkpoints must be a positive integer"),
        ({"checkpoint_score": ("loss", "low")}, "checkpoint_score must be a"),
        ({"resources": {"cpu": -1}}, "add_trial: resource 'cpu' must be a number >= 0"),
        ({"resources": [1]}, "add_trial: resources must be a dict"),
        ({"stop": {1: 3}}, "add_trial: stop keys must be metric names"),
        ({"stop": {"loss": "low"}}, "add_trial: stop threshold for 'loss'"),
    ],
)
def test_a_bad_option_is_refused_where_the_options_are_built(
    given: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        TrialOptions(**given, where="add_trial")


def test_checked_once_and_kept_as_checked() -> None:
    options = TrialOptions(stop={"training_iteration": 3}, resources={"cpu": 1, "gpu": 0})
    assert options.resources == {"cpu": 1.0, "gpu": 0.0}
    assert all(type(v) is float for v in options.resources.values())  # type: ignore[union-attr]
    bound = options.criterion.for_trial("t1")
    assert bound.trial_id == "t1" and bound.thresholds == (("training_iteration", 3.0),)
    assert TrialOptions(**options.keywords()) == options


def test_resources_as_a_function_of_the_config_are_called_and_checked_per_config() -> None:
    options = TrialOptions(resources=lambda config: {"cpu": config["n"]}, where="sweep 's'")
    assert options.for_config({"n": 2}).resources == {"cpu": 2.0}
    with pytest.raises(ConfigError, match="sweep 's': resource 'cpu' must be a number"):
        options.for_config({"n": -1})
    with pytest.raises(ConfigError, match="resources function raised KeyError"):
        options.for_config({})
    plain = TrialOptions(resources={"cpu": 1})
    assert plain.for_config({"n": 2}) is plain


def test_a_call_takes_the_value_or_its_keywords_never_both() -> None:
    shared = TrialOptions(checkpoint_every=5, max_failures=2)
    assert call_options("add_trial", shared, checkpoint_every=0, max_failures=None) is shared
    built = call_options("add_trial", None, checkpoint_every=5, max_failures=2)
    assert built == shared
    with pytest.raises(ConfigError, match="either as options=.* not both .*checkpoint_every"):
        call_options("add_trial", shared, checkpoint_every=3, max_failures=None)
    with pytest.raises(ConfigError, match="options must be an orchestrator.TrialOptions"):
        call_options("add_trial", {"checkpoint_every": 3}, checkpoint_every=0)  # type: ignore[arg-type]
