"""plot_metric: the figure's artists checked before saving, then the PNG decoded."""

from __future__ import annotations

import builtins
import math
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from orchestrator.errors import ConfigError
from orchestrator.views.plotting import BEST_LINEWIDTH, LINEWIDTH, plot_metric


def trial(trial_id: str, values: list[float], **extra: Any) -> dict[str, Any]:
    results = [
        {"loss": v, "training_iteration": i, "trial_id": trial_id}
        for i, v in enumerate(values, start=1)
    ]
    return {"id": trial_id, "results": results, **extra}


def lines_of(figure: Any, trial_id: str) -> list[Any]:
    return [line for line in figure.axes[0].get_lines() if line.get_gid() == trial_id]


def marks(figure: Any, kind: str) -> list[tuple[float, float]]:
    (collection,) = [c for c in figure.axes[0].collections if c.get_gid() == f"event:{kind}"]
    return [tuple(p) for p in collection.get_offsets().tolist()]


EXPERIMENT = [
    trial("a", [3.0, 2.0, 1.5, 1.2], state="TERMINATED"),
    trial(
        "b",
        [4.0, 2.5, 0.9, 0.8, 0.7],
        events=[
            {"kind": "failure", "iteration": 3, "error": "boom"},
            {"kind": "restore", "iteration": 2},
            {"kind": "exploit", "iteration": 4, "donor": "a"},
        ],
    ),
    trial("c", [5.0, 4.0, math.nan], state="ERROR", events=[{"kind": "restore", "iteration": 9}]),
    {"id": "d", "results": [{"acc": 0.5, "training_iteration": 1}]},  # no loss: skipped
]


def test_one_line_per_trial_with_the_best_thicker_and_labelled() -> None:
    figure = plot_metric(EXPERIMENT, "loss", "min")
    axes = figure.axes[0]
    assert len(axes.get_lines()) == 3
    assert [len(lines_of(figure, t)) for t in "abcd"] == [1, 1, 1, 0]
    (best,) = lines_of(figure, "b")
    assert best.get_linewidth() == BEST_LINEWIDTH
    assert {lines_of(figure, t)[0].get_linewidth() for t in "ac"} == {LINEWIDTH}
    assert list(best.get_xdata()) == [1, 2, 3, 4, 5]
    assert list(best.get_ydata()) == [4.0, 2.5, 0.9, 0.8, 0.7]
    assert lines_of(figure, "c")[0].get_linestyle() == "--"  # an ERROR trial
    legend = [t.get_text() for t in axes.get_legend().get_texts()]
    assert legend == ["best: b (loss=0.7)", "exploit (1)", "failure (1)", "restore (2)"]


def test_events_are_marked_on_their_trials_line() -> None:
    figure = plot_metric(EXPERIMENT, "loss", "min")
    assert marks(figure, "failure") == [(3.0, 0.9)]
    assert marks(figure, "exploit") == [(4.0, 0.8)]
    # c's restore at 9 is after its last result, which is NaN: at its last finite value.
    assert marks(figure, "restore") == [(2.0, 2.5), (9.0, 4.0)]
    markers = {c.get_gid(): c.get_paths()[0] for c in figure.axes[0].collections}
    assert len({p.vertices.tobytes() for p in markers.values()}) == 3  # distinct shapes


def test_mode_max_is_the_default_and_nested_metrics_are_found() -> None:
    trials = [
        {
            "id": "x",
            "results": [
                {"eval": {"acc": v}, "training_iteration": i} for i, v in [(1, 0.2), (2, 0.9)]
            ],
        },
        {
            "id": "y",
            "results": [
                {"eval": {"acc": v}, "training_iteration": i} for i, v in [(1, 0.95), (2, 0.5)]
            ],
        },
    ]
    figure = plot_metric(trials, "eval/acc", title="accuracy")
    assert lines_of(figure, "x")[0].get_linewidth() == BEST_LINEWIDTH  # by the last value
    assert lines_of(figure, "y")[0].get_linewidth() == LINEWIDTH
    assert figure.axes[0].get_title() == "accuracy"
    assert len(figure.axes[0].collections) == 0  # no events, no markers


def test_the_png_decodes_at_a_sensible_size(tmp_path: Path) -> None:
    path = tmp_path / "loss.png"
    plot_metric(EXPERIMENT, "loss", "min", path=str(path))
    image = matplotlib.image.imread(path)
    height, width, channels = image.shape
    assert (width, height) == (900, 550) and channels in (3, 4)
    assert image[..., :3].std() > 0.05  # not a blank canvas


def test_a_metric_nobody_reported_names_what_they_did() -> None:
    with pytest.raises(ConfigError, match=r"'accuracy'.*acc, loss, training_iteration, trial_id"):
        plot_metric(EXPERIMENT, "accuracy")
    with pytest.raises(ConfigError, match="mode"):
        plot_metric(EXPERIMENT, "loss", "lowest")


def test_without_matplotlib_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ConfigError, match=r"pip install 'trialflow\[cli\]'"):
        plot_metric(EXPERIMENT, "loss")
