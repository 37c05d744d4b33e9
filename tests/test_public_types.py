"""The public API passes ``mypy --strict``: a user's strictly typed script must not
inherit ``Any`` (or an error) from our signatures.

Checked: ``orchestrator/__init__.py`` (what it exports) and ``orchestrator/api/``. The
modules they import are followed for types but not reported on (``--follow-imports=
silent``): the engine talks to untyped Ray, and ``make typecheck`` covers it. The
cache is kept in the repository's ``.mypy_cache`` (ignored by git), apart from the
one ``make typecheck`` uses, so a second run takes seconds instead of a minute.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_public_api_passes_mypy_strict() -> None:
    pytest.importorskip("mypy")
    command = [
        sys.executable,
        "-m",
        "mypy",
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
