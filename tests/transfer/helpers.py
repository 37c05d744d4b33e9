"""Trees to copy and a way to compare them, shared by the transfer tests."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

UNICODE_NAME = "données-ü-日本-🚀.txt"


def make_tree(root: Path, big_size: int = 300_000) -> None:
    """Nested folders, empty files, unicode names, one symlink, one big file."""
    (root / "a" / "b" / "c").mkdir(parents=True, exist_ok=True)
    (root / "empty-dir").mkdir(exist_ok=True)
    (root / "a" / "empty.bin").write_bytes(b"")
    (root / "a" / "b" / "c" / "empty2").write_bytes(b"")
    (root / "a" / UNICODE_NAME).write_text("unicode ✓\n", encoding="utf-8")
    (root / "a" / "b" / "small.json").write_text('{"step": 3}')
    (root / "big.bin").write_bytes(os.urandom(big_size))
    (root / "exec.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "exec.sh", 0o755)
    os.symlink("a/b/small.json", root / "latest.json")


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Relative path -> (kind, content digest or link text), plus file modes."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", "")
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = ("file", f"{digest}:{oct(path.stat().st_mode & 0o777)}")
    return out


def siblings(target: Path) -> list[str]:
    """Hidden staging leftovers next to ``target``."""
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}."))
