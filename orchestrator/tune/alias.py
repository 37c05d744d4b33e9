"""Ray Tune's module names as this facade's, for a script run unchanged
(``python -m orchestrator tune script.py``): once :func:`install` runs, importing
``ray.tune`` or ``ray.tune.X`` gives ``orchestrator.tune`` or ``orchestrator.tune.X``
(the same module objects, so pickles name the real modules). Only that process's
imports change; ``ray`` itself is untouched."""

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


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: Any = None
    ) -> ModuleSpec | None:
        if fullname != _SOURCE and not fullname.startswith(_SOURCE + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return importlib.import_module(_TARGET + spec.name[len(_SOURCE) :])

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
