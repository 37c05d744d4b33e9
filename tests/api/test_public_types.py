"""The public API passes ``mypy --strict``: a user's strictly typed script must not
inherit ``Any`` (or an error) from our signatures.

Checked: ``orchestrator/__init__.py`` (what it exports) and ``orchestrator/api/``. The
modules they import are followed for types but not reported on (``--follow-imports=
silent``): the engine talks to untyped Ray, and ``make typecheck`` covers it. Packages
our code never imports, reached only through its dependencies' own imports (torch from
Ray's typing, SQLAlchemy and Alembic from Optuna's storages, ...), are not followed:
no type of theirs can reach our signatures, and following them was three quarters of
the check's time (torch alone ~1,400 modules). The cache is kept in the repository's
``.mypy_cache`` (ignored by git), apart from the one ``make typecheck`` uses, so a
second run takes seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..support import REPO_ROOT

REPO = REPO_ROOT

#: Packages no module of ``orchestrator``, ``storage`` or ``transfer`` imports.
NOT_OURS = ("torch", "sqlalchemy", "alembic", "databricks", "virtualenv", "cryptography")


def mypy_config(folder: Path) -> Path:
    """The project's ``pyproject.toml`` (its mypy settings) with one override more:
    do not follow :data:`NOT_OURS`."""
    modules = ", ".join(f'"{name}.*"' for name in NOT_OURS)
    override = f'\n[[tool.mypy.overrides]]\nmodule = [{modules}]\nfollow_imports = "skip"\n'
    config = folder / "pyproject.toml"
    config.write_text((REPO / "pyproject.toml").read_text() + override)
    return config


def test_no_package_left_unfollowed_is_imported_by_our_code() -> None:
    """What :data:`NOT_OURS` relies on: a package our code imports is followed."""
    for package in ("orchestrator", "storage", "transfer"):
        for source in (REPO / package).rglob("*.py"):
            for line in source.read_text().splitlines():
                words = line.split()
                if len(words) > 1 and words[0] in ("import", "from"):
                    assert words[1].split(".")[0] not in NOT_OURS, (source, line)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_public_api_passes_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(mypy_config(tmp_path)),
        "--strict",
        "--follow-imports=silent",
        "--cache-dir",
        str(REPO / ".mypy_cache" / "public-api-strict"),
        "orchestrator/__init__.py",
        "orchestrator/api",
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
