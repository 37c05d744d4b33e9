"""The delta decision: which files to send, which to keep, what disappears. Pure.

Given the source and target listings (and, for the few ambiguous files, checksums), the
plan says everything the sink must materialise. It does no I/O, so every rule here is
tested without Ray or a disk.

Rules, per source file: with ``delta`` off, send. Otherwise keep the target's copy when
size and mtime match (rsync's quick check; ``always_checksum`` turns it off) or when
size matches and the checksums are equal; send in every other case. With ``mirror``,
target entries absent from the source (and not excluded) disappear; without it they
stay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .listing import Entry, EntryKind
from .paths import check_tree

__all__ = ["Plan", "make_plan", "needs_checksum"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What the target tree will be. ``send`` order is the streaming order (file ids)."""

    dirs: tuple[Entry, ...]
    send: tuple[Entry, ...]
    keep: tuple[Entry, ...]
    links: tuple[Entry, ...]
    deleted: tuple[str, ...]  # target files and links that disappear (mirror only)
    mirror: bool
    exclude: tuple[str, ...] = ()

    @property
    def bytes_to_send(self) -> int:
        return sum(e.size for e in self.send)

    def validate(self) -> None:
        """Raise UnsafePathError unless the tree is safe to write below a root."""
        check_tree(
            (e.path for e in self.dirs),
            [e.path for e in self.send] + [e.path for e in self.keep],
            {e.path: e.link for e in self.links},
        )
        for e in self.send + self.keep:
            if e.kind is not EntryKind.FILE or e.size < 0:
                raise ValueError(f"plan entry {e.path!r} is not a regular file")


def _quick_equal(src: Entry, dst: Entry | None) -> bool:
    return dst is not None and dst.kind is EntryKind.FILE and dst.size == src.size


def needs_checksum(
    source: Sequence[Entry], target: Sequence[Entry], *, always_checksum: bool = False
) -> list[str]:
    """Files whose fate the stats cannot decide: same size, and (different mtime or
    ``always_checksum``). Only these are read on both sides before the copy."""
    tgt = {e.path: e for e in target}
    out = []
    for e in source:
        if e.kind is not EntryKind.FILE:
            continue
        d = tgt.get(e.path)
        if _quick_equal(e, d) and (always_checksum or d is None or d.mtime_ns != e.mtime_ns):
            out.append(e.path)
    return out


def make_plan(
    source: Sequence[Entry],
    target: Sequence[Entry],
    *,
    delta: bool = True,
    mirror: bool = False,
    always_checksum: bool = False,
    source_digests: Mapping[str, bytes] | None = None,
    target_digests: Mapping[str, bytes] | None = None,
    exclude: Sequence[str] = (),
) -> Plan:
    """Decide the copy. Digests are needed for the paths :func:`needs_checksum` named;
    a file whose digest is missing on either side is sent (never wrongly kept)."""
    tgt = {e.path: e for e in target}
    sd = source_digests or {}
    td = target_digests or {}
    dirs: list[Entry] = []
    send: list[Entry] = []
    keep: list[Entry] = []
    links: list[Entry] = []
    for e in source:
        if e.kind is EntryKind.DIR:
            dirs.append(e)
        elif e.kind is EntryKind.SYMLINK:
            links.append(e)
        else:
            d = tgt.get(e.path) if delta else None
            if d is not None and _quick_equal(e, d):
                if not always_checksum and d.mtime_ns == e.mtime_ns:
                    keep.append(e)
                    continue
                s_dig, t_dig = sd.get(e.path), td.get(e.path)
                if s_dig is not None and s_dig == t_dig:
                    keep.append(e)
                    continue
            send.append(e)
    deleted: tuple[str, ...] = ()
    if mirror:
        src_paths = {e.path for e in source}
        deleted = tuple(
            p for p, d in sorted(tgt.items()) if p not in src_paths and d.kind is not EntryKind.DIR
        )
    return Plan(
        dirs=tuple(dirs),
        send=tuple(send),
        keep=tuple(keep),
        links=tuple(links),
        deleted=deleted,
        mirror=mirror,
        exclude=tuple(exclude),
    )
