"""Small misuses a new user makes, each answered with what happened and what to do:
``run_sync()`` in a notebook, a blank experiment name, a storage path that is a file.
(``sys.exit()`` in a trainable: ``tests/engine/test_misuse_run.py``.)"""

from __future__ import annotations

import gc
import warnings
from pathlib import Path
from typing import Any

import pytest

from orchestrator import ConfigError, Orchestrator

QUIET: dict[str, Any] = {"progress": False, "loggers": []}


async def test_run_sync_inside_a_running_loop_says_to_await(tmp_path: Path) -> None:
    """As in a Jupyter cell: our error, saying what to write, and no "never awaited"
    warning from a coroutine that was made and dropped."""
    orch = Orchestrator(storage=tmp_path, name="nb", **QUIET)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ConfigError) as info:
            orch.run_sync()
        gc.collect()
    assert "inside a running event loop" in str(info.value)
    assert "`async with orch: trials = await orch.run()`" in str(info.value)
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    assert not (tmp_path / "nb").exists()  # nothing started


@pytest.mark.parametrize("name", [" ", "", "exp ", " exp", "a\tb", "\n"])
def test_a_blank_or_padded_experiment_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="experiment name must be a non-empty str"):
        Orchestrator(storage=tmp_path, name=name)


def test_a_name_with_inner_spaces_is_fine(tmp_path: Path) -> None:
    assert Orchestrator(storage=tmp_path, name="my exp").name == "my exp"


@pytest.mark.parametrize("where", ["storage", "name"])
async def test_a_storage_path_that_is_a_file_is_named_as_such(tmp_path: Path, where: str) -> None:
    afile = tmp_path / "results.txt"
    afile.write_text("mine")
    if where == "storage":  # <file>/exp cannot be created
        orch = Orchestrator(storage=afile, name="exp", **QUIET)
    else:  # <dir>/results.txt is the experiment's directory, and a file
        orch = Orchestrator(storage=tmp_path, name="results.txt", **QUIET)
    # Said before anything is opened, by the experiment's own check (the storage driver
    # would say NotADirectory; the storage library's own tests check that).
    with pytest.raises(ConfigError) as info:
        async with orch:
            pass
    message = str(info.value)
    assert "is a file, not a directory" in message and str(afile) in message
    assert "Not a directory" not in message
    assert afile.read_text() == "mine"
