"""Ray Tune's module names as this facade's, for code that imports ``ray.tune`` and
cannot be edited: a script run unchanged (``python -m orchestrator tune script.py``) or
a library that calls Ray Tune itself (Hugging Face's ``Trainer.hyperparameter_search(
backend="ray")``), after :func:`install`.

Once installed, importing ``ray.tune`` or ``ray.tune.X`` gives ``orchestrator.tune`` or
``orchestrator.tune.X`` (the same module objects, so pickles name the real modules), and
Ray's tracker integrations ``ray.air.integrations.mlflow`` and ``.wandb`` give
``orchestrator.tune.integration.mlflow`` and ``.wandb``. The rest of ``ray`` (``ray.air``,
``ray.train``) is untouched.

**The trials' workers too.** A library's training function often runs ``import ray.tune``
or reads ``ray.tune.report`` in the worker (Hugging Face's does both), where the
driver's imports do not reach. The facade's trainables pickled in an aliased driver
carry :func:`aliased_marker` first, which installs the alias in the Ray worker that
loads them, before the user's code is loaded. A worker of a driver without the alias
is left alone.

**Process-wide, by decision.** ``sys.modules`` holds one ``ray.tune`` per process, so
the alias cannot depend on who imports: Ray's own code that imports Ray Tune's
internals in the same process would get the facade and fail (Ray 2.60's Ray Train
imports ``ray.tune.experiment`` and ``ray.tune.trainable.trainable_fn_utils`` in
``fit()`` and ``ray.train.report``; RLlib). Such a script changes its import lines instead
(``from orchestrator import tune``). :func:`install` refuses a process that already
imported Ray Tune (a ``ConfigError``); :func:`uninstall` undoes it (tests).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import logging
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from orchestrator.errors import ConfigError

__all__ = ["aliased_marker", "install", "installed", "uninstall"]

log = logging.getLogger("orchestrator.tune")

_SOURCE, _TARGET = "ray.tune", "orchestrator.tune"
#: Single modules outside ``ray.tune`` that the facade also answers for.
_MODULES = {
    "ray.air.integrations.mlflow": "orchestrator.tune.integration.mlflow",
    "ray.air.integrations.wandb": "orchestrator.tune.integration.wandb",
}


def _aliased(name: str) -> bool:
    return name in _MODULES or name == _SOURCE or name.startswith(_SOURCE + ".")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: Any = None
    ) -> ModuleSpec | None:
        if _aliased(fullname):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        target = _MODULES.get(spec.name) or _TARGET + spec.name[len(_SOURCE) :]
        module = importlib.import_module(target)
        # The import system sets ``__spec__`` to the alias's: keep the module's own
        # (``importlib.reload``, ``find_spec`` of the real name read it).
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        own = getattr(module.__spec__, "loader_state", None)
        if isinstance(own, ModuleSpec):
            module.__spec__ = own  # already imported, under its own name


def installed() -> bool:
    """Whether ``ray.tune`` resolves to the facade in this process."""
    return any(isinstance(f, _Alias) for f in sys.meta_path)


def install() -> None:
    """Alias ``ray.tune`` to ``orchestrator.tune`` in this process and in the Ray workers
    of the trials it starts from now on (first on the path, so an installed Ray Tune is
    not imported). Call it before anything imports ``ray.tune``; again is a no-op."""
    if installed():
        return
    if _SOURCE in sys.modules and not sys.modules[_SOURCE].__name__.startswith(_TARGET):
        raise ConfigError(
            "ray.tune (Ray's own) is already imported in this process: call "
            "orchestrator.tune.install() before anything imports ray.tune (first thing in "
            "the script), or run it with 'python -m orchestrator tune script.py'"
        )
    sys.meta_path.insert(0, _Alias())


def uninstall() -> None:
    """Undo :func:`install` in this process: ``ray.tune`` imports are Ray's again (the
    facade's modules stay imported under their own names)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Alias)]
    for name in [n for n in sys.modules if _aliased(n)]:
        module = sys.modules[name]
        if getattr(module, "__name__", "").startswith(_TARGET):
            del sys.modules[name]
            parent, _, child = name.rpartition(".")
            if getattr(sys.modules.get(parent), child, None) is module:
                delattr(sys.modules[parent], child)


class _Marker:
    """Pickled as a call of :func:`_install_in_worker` (see :func:`aliased_marker`)."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _install_in_worker, ()


def aliased_marker() -> _Marker | None:
    """What a facade trainable pickles first: in an aliased driver a marker whose
    unpickling installs the alias in a Ray worker; None otherwise."""
    return _Marker() if installed() else None


def _install_in_worker() -> None:
    """Install the alias in this Ray worker (never in a driver, where it is the user's
    choice), and import ``ray.tune`` so that code holding the ``ray`` module reads
    ``ray.tune`` as the facade. A worker that already imported Ray's Tune keeps it, with
    a warning."""
    import ray

    if ray._private.worker.global_worker.mode != ray.WORKER_MODE:
        return None
    try:
        install()
    except ConfigError as err:
        log.warning("the trial's worker keeps Ray's own ray.tune: %s", err)
        return None
    importlib.import_module(_SOURCE)
    return None
