"""Helpers shared by the tests of every layer (fakes, trainables, waits, processes).

Test modules import helpers from here, never from one another: a helper two test files
need lives in this package. ``REPO_ROOT`` is the checkout's root, for subprocesses that
need it on their path or as their working directory (a test's own ``__file__`` depends
on how deep its folder is)."""

from __future__ import annotations

from pathlib import Path

#: The repository's root (the folder holding ``orchestrator/`` and ``tests/``).
REPO_ROOT = Path(__file__).resolve().parents[2]
