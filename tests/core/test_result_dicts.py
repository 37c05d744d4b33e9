"""Result dicts that share their keys (``core/result_dicts.py``; issue 36, item 3)."""

from __future__ import annotations

import json
import pickle

import pytest

from orchestrator.core import result_dicts
from orchestrator.core.result_dicts import result_dict


def test_a_result_dict_is_a_plain_dict_of_its_metrics_then_the_extra_keys() -> None:
    result = result_dict({"training_iteration": 9, "loss": 0.5}, training_iteration=2, trial_id="t")
    assert type(result) is dict
    assert list(result.items()) == [("training_iteration", 2), ("loss", 0.5), ("trial_id", "t")]
    assert pickle.loads(pickle.dumps(result)) == result
    assert json.loads(json.dumps(result)) == result


def test_past_the_shapes_kept_the_oldest_is_forgotten_and_results_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(result_dicts, "MAX_SHAPES", 2)
    results = [result_dict({f"shape {i}": i}, trial_id="t") for i in range(5)]
    again = result_dict({"shape 0": 9}, trial_id="u")  # a forgotten shape, made anew
    assert [list(r.items()) for r in results] == [
        [(f"shape {i}", i), ("trial_id", "t")] for i in range(5)
    ]
    assert list(again.items()) == [("shape 0", 9), ("trial_id", "u")]
    monkeypatch.setattr(result_dicts, "MAX_SHAPES", 0)  # even with no room kept
    assert result_dict({"a": 1}, b=2) == {"a": 1, "b": 2}
