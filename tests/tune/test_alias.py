"""``orchestrator.tune.install()``: ``ray.tune`` resolves to the facade (checked in fresh
interpreters: the alias is for a whole process), ``uninstall()`` gives Ray's back, and
a trainable pickled in an aliased driver carries the marker that installs it in the
trial's worker. Also what libraries that call Ray Tune need of the facade: a
``with_parameters`` wrapped by a function of theirs, ``CLIReporter``,
``HyperBandForBOHB`` importable."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator import tune
from orchestrator.tune import TuneUnsupported

ROOT = Path(__file__).resolve().parents[2]

ROUND_TRIP = """\
import importlib.util, sys
import orchestrator.tune as ours
ours.install(); ours.install()  # again: a no-op
import ray, ray.tune, ray.tune.schedulers
from ray.tune import CLIReporter
from ray.tune.schedulers import ASHAScheduler, HyperBandForBOHB
assert ray.tune is ours and ray.tune.schedulers is ours.schedulers
assert ours.__spec__.name == "orchestrator.tune"  # the module's own spec, kept
assert ours.schedulers.__spec__.name == "orchestrator.tune.schedulers"
assert importlib.util.find_spec("ray.tune") is not None  # how libraries probe for Tune
ours.uninstall()
assert "ray.tune" not in sys.modules and not hasattr(ray, "tune")
import ray.tune as theirs
assert theirs is not ours and theirs.__file__.startswith(ray.__path__[0]), theirs
from orchestrator.errors import ConfigError
try:
    ours.install()
except ConfigError as err:
    print(err)
"""


def python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180
    )


def test_install_aliases_ray_tune_and_uninstall_gives_rays_back() -> None:
    done = python(ROUND_TRIP)
    assert done.returncode == 0, done.stderr
    assert "ray.tune (Ray's own) is already imported" in done.stdout
    assert "python -m orchestrator tune" in done.stdout


MARKER = """\
import pickle
from ray import cloudpickle
import orchestrator.tune as ours
from orchestrator.tune.adapters import FunctionAdapter, engine_trainable
from orchestrator.tune.context import RunInfo

def train(config):
    pass

class Stepper(ours.Trainable):
    def step(self):
        return {}

info = RunInfo("run", "/tmp/run", "train")
plain = cloudpickle.dumps(FunctionAdapter(train, info, {}))
ours.install()
marked = cloudpickle.dumps(FunctionAdapter(train, info, {}))
marked_class = cloudpickle.dumps(engine_trainable(Stepper, info, {}))
ours.uninstall()
assert b"_install_in_worker" not in plain
assert b"_install_in_worker" in marked and b"_install_in_worker" in marked_class
assert marked.index(b"_install_in_worker") < marked.index(b"train")  # loaded first
pickle.loads(marked)
pickle.loads(marked_class)
assert not ours.alias.installed()  # a driver is not a Ray worker: left as it was
print("ok")
"""


def test_an_aliased_drivers_trainables_carry_the_marker_for_their_workers() -> None:
    done = python(MARKER)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"]


def count(config: dict[str, Any], data: list[int]) -> dict[str, int]:
    return {"n": len(data) + config["x"]}


def wrapped_by_a_library(data: list[int]) -> Any:
    """As Hugging Face's ``run_hp_search_ray`` wraps ``with_parameters``."""
    trainable = tune.with_parameters(count, data=data)

    @functools.wraps(trainable)
    def outer(config: dict[str, Any]) -> Any:
        return trainable(config)

    return outer


def test_with_parameters_wrapped_by_a_function_is_called_with_its_objects() -> None:
    outer = wrapped_by_a_library(list(range(1000)))
    assert outer.__name__ == "count"
    assert not {"params", "inner", "data"} & set(vars(outer))  # nothing copied onto it
    assert outer({"x": 1}) == {"n": 1001}


@pytest.mark.usefixtures("ray_local")
def test_once_put_a_wrapped_with_parameters_pickles_references() -> None:
    from ray import cloudpickle

    from orchestrator.tune.adapters import unwrap

    data = list(range(200_000))
    outer = wrapped_by_a_library(data)
    assert len(cloudpickle.dumps(outer)) > 200_000  # not put yet: the objects
    user, params, _ = unwrap(outer)
    assert user is outer and params == {}
    blob = cloudpickle.dumps(outer)
    assert len(blob) < 20_000  # references: each trial fetches the objects
    assert cloudpickle.loads(blob)({"x": 1}) == {"n": 200_001}


def test_cli_reporter_is_the_built_in_table_and_other_reporters_are_refused() -> None:
    reporter = tune.CLIReporter(metric_columns=["objective"])
    reporter.add_metric_column("eval_loss")
    assert reporter.metric_columns == ["objective", "eval_loss"]
    assert tune.RunConfig(progress_reporter=reporter).progress_reporter is reporter

    class Printing(tune.CLIReporter):
        def report(self, trials: Any, done: bool, *sys_info: str) -> None:
            pass

    with pytest.raises(TuneUnsupported, match=r"its own report\(\).*Callback"):
        tune.RunConfig(progress_reporter=Printing())
    with pytest.raises(TuneUnsupported, match=r"progress_reporter=...\) given a object"):
        tune.RunConfig(progress_reporter=object())
    with pytest.raises(TuneUnsupported, match="JupyterNotebookReporter"):
        from orchestrator.tune.progress_reporter import JupyterNotebookReporter  # noqa: F401


def test_hyperband_for_bohb_imports_for_isinstance_and_refuses_to_be_built() -> None:
    from orchestrator.tune.schedulers import ASHAScheduler, HyperBandForBOHB

    assert not isinstance(ASHAScheduler(), HyperBandForBOHB)
    with pytest.raises(TuneUnsupported, match="HyperBandForBOHB.*HyperBandScheduler"):
        HyperBandForBOHB(metric="loss", mode="min")


EVERY_MODULE = """\
import importlib, pkgutil
import orchestrator.tune as tune
for module in pkgutil.walk_packages(tune.__path__, "orchestrator.tune."):
    try:
        importlib.import_module(module.name)
    except Exception:
        pass  # a framework that is not installed here
print(type(tune.run).__name__)
"""


def test_importing_every_facade_module_leaves_tune_run_the_function() -> None:
    """``tune.run`` is loaded on first use; a submodule of that name (``tune/run.py``,
    before it moved to Tune's own path ``tune/tune.py``) replaced it with the module as
    soon as anything imported it."""
    done = python(EVERY_MODULE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "function"
