"""Ray Tune's module names as this facade's, for a script run unchanged
(``python -m orchestrator tune script.py``): once :func:`install` runs, importing
``ray.tune`` or ``ray.tune.X`` gives ``orchestrator.tune`` or ``orchestrator.tune.X``
(the same module objects, so pickles name the real modules), and Ray's tracker
integrations ``ray.air.integrations.mlflow`` and ``.wandb`` give
``orchestrator.tune.integration.mlflow`` and ``.wandb``. Only that process's imports
change; the rest of ``ray`` (``ray.air`` too) is untouched."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["install"]

_SOURCE, _TARGET = "ray.tune", "orchestrator.tune"
#: Single modules outside ``ray.tune`` that the facade also answers for.
_MODULES = {
    "ray.air.integrations.mlflow": "orchestrator.tune.integration.mlflow",
    "ray.air.integrations.wandb": "orchestrator.tune.integration.wandb",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: Any = None
    ) -> ModuleSpec | None:
        if fullname in _MODULES or fullname == _SOURCE or fullname.startswith(_SOURCE + "."):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        target = _MODULES.get(spec.name) or _TARGET + spec.name[len(_SOURCE) :]
        return importlib.import_module(target)

    def exec_module(self, module: ModuleType) -> None:
        return None  # already imported, under its own name


def install() -> None:
    """Alias ``ray.tune`` to ``orchestrator.tune`` in this process (first on the path, so
    an installed Ray Tune is not imported)."""
    if any(isinstance(f, _Alias) for f in sys.meta_path):
        return
    if _SOURCE in sys.modules and sys.modules[_SOURCE].__name__ != _TARGET:
        raise RuntimeError("ray.tune is already imported in this process; alias it first")
    sys.meta_path.insert(0, _Alias())
