"""The API reference (docs/reference/) documents every public name: each name of
``orchestrator.__all__``, ``orchestrator.tune.__all__``, ``storage.__all__`` and
``transfer.__all__`` has its ``::: package.Name`` block there. (``make docs`` fails on a
block whose name the code lacks; this fails on a public name the reference lacks.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import orchestrator
import orchestrator.tune
import storage
import transfer

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference"


def documented() -> set[str]:
    found: set[str] = set()
    for page in REFERENCE.glob("*.md"):
        found |= set(re.findall(r"^::: ([\w.]+)$", page.read_text(), re.MULTILINE))
    return found


@pytest.mark.parametrize("package", [orchestrator, orchestrator.tune, storage, transfer])
def test_every_public_name_is_in_the_api_reference(package: object) -> None:
    prefix = package.__name__  # type: ignore[attr-defined]
    names = {f"{prefix}.{name}" for name in package.__all__}  # type: ignore[attr-defined]
    missing = sorted(names - documented())
    assert not missing, f"add to docs/reference/: {', '.join(missing)}"


def test_every_relative_link_of_the_readme_exists() -> None:
    """README.md is read on the forge, outside the site's strict build: its links to
    docs/ pages and ARCHITECTURE.md are checked here (the anchor's file, not the anchor)."""
    root = REFERENCE.parent.parent
    text = (root / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    missing = [t for t in local if not (root / t).exists()]
    assert not missing, f"README.md links to missing files: {', '.join(missing)}"
