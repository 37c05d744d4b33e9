"""How the journal keeps code and configs: pickles (base64) and import paths for
classes. Plain functions, no I/O; JSON is :mod:`orchestrator.core.json_codec`. Reading
back follows names that moved since (:mod:`orchestrator.core.moved`)."""

from __future__ import annotations

import base64
import importlib
from typing import Any

import cloudpickle

from orchestrator.core import moved

__all__ = ["class_path", "import_class", "pickle_b64", "unpickle_b64"]


def pickle_b64(value: Any) -> str:
    return base64.b64encode(cloudpickle.dumps(value)).decode("ascii")


def unpickle_b64(text: str) -> Any:
    return moved.loads(base64.b64decode(text))


def class_path(cls: type) -> str | None:
    module = getattr(cls, "__module__", "")
    qualname = getattr(cls, "__qualname__", "")
    if not module or module == "__main__" or "<locals>" in qualname:
        return None
    return f"{module}:{qualname}"


def import_class(path: str) -> Any:
    module_name, _, qualname = moved.resolve(path).partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj
