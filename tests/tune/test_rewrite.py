"""The import rewrite that moves a Ray Tune script onto orchestrator.tune changes only
import lines, and every name Tune's examples import from ray.tune exists here."""

from __future__ import annotations

import ast
import importlib

import pytest

from benchmarks.tune_examples import EXAMPLES, NEEDS_FRAMEWORK, examples_dir, rewrite


def test_only_import_lines_change() -> None:
    source = "from ray import tune\nimport ray\nx = 'from ray import tune'\n"
    source += "  from ray.tune.schedulers import ASHAScheduler\nimport ray.tune.search as s\n"
    assert rewrite(source).splitlines() == [
        "from orchestrator import tune",
        "import ray",
        "x = 'from ray import tune'",
        "  from orchestrator.tune.schedulers import ASHAScheduler",
        "import orchestrator.tune.search as s",
    ]


def test_every_example_is_listed_as_runnable_or_needing_a_framework() -> None:
    shipped = {p.stem for p in examples_dir().glob("*.py") if p.stem not in ("__init__", "utils")}
    shipped |= {p.name for p in examples_dir().iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert shipped == set(EXAMPLES) | set(NEEDS_FRAMEWORK)


@pytest.mark.parametrize("name", EXAMPLES)
def test_what_each_example_imports_from_tune_is_here(name: str) -> None:
    original = (examples_dir() / f"{name}.py").read_text()
    rewritten = rewrite(original)
    changed = [
        (a, b) for a, b in zip(original.splitlines(), rewritten.splitlines(), strict=True) if a != b
    ]
    assert changed and all(a.lstrip().startswith(("from ray", "import ray")) for a, _ in changed)
    for node in ast.walk(ast.parse(rewritten)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("orchestrator"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.import_module(
                    f"{node.module}.{alias.name}"
                ), f"{name}: {node.module}.{alias.name}"
