"""What a case is given: the system under test, named as a user's script names it."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

#: Every case, by its id (``file::behaviour``), in the order they are declared.
CASES: dict[str, Callable[[System], None]] = {}

PACKAGES = {"tune": "ray.tune", "ours": "orchestrator.tune"}


def case(source: str) -> Callable[[Callable[[System], None]], Callable[[System], None]]:
    """Register a case under ``source::function name`` (``source``: Tune's test file or
    docs page it follows)."""

    def register(fn: Callable[[System], None]) -> Callable[[System], None]:
        CASES[f"{source}::{fn.__name__.removeprefix('case_')}"] = fn
        return fn

    return register


@dataclass
class System:
    """One system: ``tune`` is the module a script imports as ``tune``; ``tmp`` a fresh
    directory per case (the run's storage)."""

    name: str
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tune-compat-")))

    @property
    def tune(self) -> ModuleType:
        return importlib.import_module(PACKAGES[self.name])

    def mod(self, sub: str) -> ModuleType:
        """``ray.tune.<sub>`` on Tune, ``orchestrator.tune.<sub>`` on ours."""
        return importlib.import_module(f"{PACKAGES[self.name]}.{sub}")

    def fresh(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="tune-compat-"))

    def run_config(self, name: str = "exp", **kwargs: Any) -> Any:
        kwargs.setdefault("verbose", 0)
        return self.tune.RunConfig(name=name, storage_path=str(self.tmp), **kwargs)

    def tuner(
        self,
        trainable: Any,
        param_space: dict[str, Any] | None = None,
        *,
        name: str = "exp",
        tune_config: Any = None,
        **run: Any,
    ) -> Any:
        return self.tune.Tuner(
            trainable,
            param_space=param_space or {},
            tune_config=tune_config,
            run_config=self.run_config(name, **run),
        )

    def fit(self, trainable: Any, param_space: dict[str, Any] | None = None, **kw: Any) -> Any:
        return self.tuner(trainable, param_space, **kw).fit()

    def marker(self, name: str) -> str:
        """A path shared by the driver and its trials (one machine), for "the first
        attempt fails" and counters."""
        return os.path.join(self.tmp, f"marker-{name}")


def raises(
    kind: type[BaseException] | tuple[type[BaseException], ...], fn: Callable[[], Any]
) -> BaseException:
    """Run ``fn``; it must raise ``kind`` (else AssertionError)."""
    try:
        fn()
    except kind as err:
        return err
    raise AssertionError(f"expected {kind} from {fn}")
