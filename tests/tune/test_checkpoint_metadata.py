"""``Checkpoint.set_metadata`` on a checkpoint in local storage changes that checkpoint
only: its files may be hard links shared with other checkpoints of the same content."""

from __future__ import annotations

from pathlib import Path

from orchestrator.tune.checkpoint import Checkpoint
from storage import LocalStorage


def test_set_metadata_changes_no_other_checkpoint(tmp_path: Path) -> None:
    src, root = tmp_path / "src", tmp_path / "root"
    src.mkdir()
    root.mkdir()
    (src / ".metadata.json").write_text('{"epoch": 1}' + " " * (70 << 10))  # a blob
    st = LocalStorage(str(root))
    for key in ("t/checkpoint_1", "u/checkpoint_1"):
        assert st.put_small_checkpoint(src, key) is not None
    ours = Checkpoint.from_directory(root / "t/checkpoint_1")
    ours.update_metadata({"note": "mine"})
    assert ours.get_metadata() == {"epoch": 1, "note": "mine"}
    assert Checkpoint.from_directory(root / "u/checkpoint_1").get_metadata() == {"epoch": 1}
