"""Path sanitizing: the only gate between names that came over the wire and the disk.

A listing (plan) and the chunks that follow it are data from another process; the sink
must be safe even if they were crafted. Paths are therefore accepted only in one
canonical form (relative, ``/``-separated, no empty, ``.`` or ``..`` components), the
tree must be self-consistent (every parent is a directory of the same tree, no entry
hides below a symlink), and symlinks must resolve inside the tree, following the other
symlinks of the tree, so no chain of links can point outside. Writes at the sink then
never follow a symlink (``O_NOFOLLOW``, symlinks created last), which closes the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .errors import UnsafePathError

__all__ = ["check_relpath", "check_tree", "parent_of"]

# Enough for any sane tree; a longer chain is a loop or an attack.
_MAX_LINK_HOPS = 40


def check_relpath(path: str) -> str:
    """Return ``path`` if it is a canonical relative path, else raise UnsafePathError."""
    if not isinstance(path, str) or not path:
        raise UnsafePathError(f"empty or non-string path {path!r} rejected")
    if "\x00" in path:
        raise UnsafePathError(f"path with a NUL byte rejected: {path!r}")
    if path.startswith("/"):
        raise UnsafePathError(f"absolute path rejected: {path!r}")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise UnsafePathError(f"non-canonical path rejected ('..', '.', '//'): {path!r}")
    return path


def parent_of(path: str) -> str:
    """The parent of a canonical relative path; ``""`` stands for the tree's root."""
    head, _, _ = path.rpartition("/")
    return head


def _resolve(start: list[str], link: str, links: Mapping[str, str], hops: int) -> list[str]:
    """Resolve ``link`` from directory ``start`` inside the virtual tree, following the
    tree's own symlinks; raise as soon as the walk would leave the root."""
    if hops > _MAX_LINK_HOPS:
        raise UnsafePathError(f"symlink chain too long or looping near {link!r}")
    if link.startswith("/"):
        raise UnsafePathError(f"symlink to an absolute path rejected: {link!r}")
    here = list(start)
    for part in link.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not here:
                raise UnsafePathError(f"symlink pointing outside the tree rejected: {link!r}")
            here.pop()
            continue
        here.append(part)
        target = links.get("/".join(here))
        if target is not None:
            here = _resolve(here[:-1], target, links, hops + 1)
    return here


def check_tree(dirs: Iterable[str], files: Iterable[str], links: Mapping[str, str]) -> None:
    """Check that a whole listing is safe to materialise below a root.

    ``links`` maps symlink paths to their (textual) targets. Raises UnsafePathError on
    the first problem; returns None when every entry is acceptable.
    """
    dir_set: set[str] = set()
    seen: set[str] = set()
    dir_list = sorted(dirs, key=lambda p: p.count("/"))
    for kind, paths in (("directory", dir_list), ("file", list(files)), ("symlink", links)):
        for path in paths:
            check_relpath(path)
            if path in seen:
                raise UnsafePathError(f"{kind} {path!r} listed twice")
            seen.add(path)
            parent = parent_of(path)
            if parent and parent not in dir_set:
                raise UnsafePathError(
                    f"{kind} {path!r} lies below {parent!r}, which is not a directory of "
                    "the tree (a symlinked or missing parent)"
                )
            if kind == "directory":
                dir_set.add(path)
    for path, target in links.items():
        if not isinstance(target, str) or not target or "\x00" in target:
            raise UnsafePathError(f"symlink {path!r} has an invalid target {target!r}")
        _resolve(parent_of(path).split("/") if parent_of(path) else [], target, links, 0)
