"""tools/check_layers.py holds on the repository: no import circle in orchestrator/,
storage/ or transfer/, no import of a higher layer, no private reach-in in the
libraries. (``make test`` runs the script too; this names the failure in pytest.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "check_layers.py"


def _checker():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("check_layers", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_layers", module)
    spec.loader.exec_module(module)
    return module


def test_no_import_circle_in_any_package() -> None:
    tool = _checker()
    edges = tool.graph()
    assert {m.split(".")[0] for m in edges} == {"orchestrator", "storage", "transfer"}
    assert tool.circles(edges) == []


def test_no_forbidden_import_and_no_private_reach_in() -> None:
    tool = _checker()
    assert tool.forbidden(tool.graph()) == []
    assert tool.private_reach(tool.modules()) == []
