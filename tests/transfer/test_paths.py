"""Path sanitizing: the gate between names from the wire and the disk."""

from __future__ import annotations

import pytest

from transfer.errors import UnsafePathError
from transfer.paths import check_relpath, check_tree


@pytest.mark.parametrize("path", ["a", "a/b", "dir/file.txt", "données/日本", ".hidden", "a..b"])
def test_canonical_relative_paths_pass(path: str) -> None:
    assert check_relpath(path) == path


@pytest.mark.parametrize(
    "path", ["", "/etc/passwd", "..", "../x", "a/../../x", "a/./b", "a//b", "a/", "./a", "a\x00b"]
)
def test_everything_else_is_rejected(path: str) -> None:
    with pytest.raises(UnsafePathError):
        check_relpath(path)


def test_tree_requires_parents_to_be_directories_of_the_tree() -> None:
    check_tree(["a", "a/b"], ["a/b/f", "top"], {"a/l": "b/f"})
    with pytest.raises(UnsafePathError, match="not a directory"):
        check_tree([], ["a/f"], {})
    with pytest.raises(UnsafePathError, match="listed twice"):
        check_tree(["a"], ["a"], {})


def test_no_entry_may_hide_below_a_symlink() -> None:
    # A link "out" -> ".." plus a file "out/x" would write beside the target.
    with pytest.raises(UnsafePathError):
        check_tree([], ["out/x"], {"out": "."})


@pytest.mark.parametrize(
    "links",
    [
        {"l": "/etc"},
        {"l": ".."},
        {"d/l": "../.."},
        {"l": "a/../../x"},
        # Each link alone stays inside, the chain escapes: deep/l -> root, then "..".
        {"deep/dir/l": "../..", "m": "deep/dir/l/.."},
        {"l1": "l2", "l2": "l1"},
    ],
)
def test_symlinks_resolving_outside_the_tree_are_rejected(links: dict[str, str]) -> None:
    dirs = ["d", "deep", "deep/dir", "a"]
    with pytest.raises(UnsafePathError):
        check_tree(dirs, [], links)


def test_symlinks_inside_the_tree_pass() -> None:
    check_tree(["a", "a/b"], ["a/b/f"], {"l": "a/b/f", "a/up": "../a/b", "a/b/x": "../../l"})
