"""Manifest version 2 (content-addressed checkpoints): each file's chunks are part of
the commit record and are checked like the rest of it when read back, since a manifest
may come from untrusted storage; version 1 reads as before."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from storage import IntegrityError, Manifest, ManifestEntry

A, B, C = "a" * 64, "b" * 64, "c" * 64


def v2() -> dict[str, Any]:
    return Manifest(
        key="t/c1",
        files=(ManifestEntry("w.bin", 10, C, (A, B, A)), ManifestEntry("empty", 0, C, ())),
        chunk_size=4,
    ).to_dict()


def test_version_2_round_trips_and_names_its_blobs() -> None:
    data = v2()
    assert data["version"] == 2 and data["chunk_size"] == 4
    assert data["files"][0]["chunks"] == [A, B, A]
    manifest = Manifest.from_dict(data)
    assert manifest.to_dict() == data
    assert manifest.blobs() == frozenset({A, B})
    assert manifest.version == 2


def test_version_1_is_read_as_before() -> None:
    data = Manifest(key="t/c1", files=(ManifestEntry("w.bin", 10, C),)).to_dict()
    assert data["version"] == 1 and "chunk_size" not in data
    assert "chunks" not in data["files"][0]
    manifest = Manifest.from_dict(data)
    assert manifest.chunk_size is None and manifest.blobs() == frozenset()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update(version=3), "unknown format/version"),
        (lambda d: d.pop("chunk_size"), "bad chunk_size"),
        (lambda d: d.update(chunk_size=0), "bad chunk_size"),
        (lambda d: d["files"][0].pop("chunks"), "bad chunks"),
        (lambda d: d["files"][0]["chunks"].pop(), "2 chunks do not cover the 10 bytes"),
        (lambda d: d["files"][0]["chunks"].append(A), "4 chunks do not cover"),
        (lambda d: d["files"][0]["chunks"].__setitem__(0, "../../x"), "bad chunks"),
        (lambda d: d["files"][0]["chunks"].__setitem__(0, A.upper()), "bad chunks"),
    ],
)
def test_a_malformed_version_2_is_refused(change: Any, says: str) -> None:
    data = copy.deepcopy(v2())
    change(data)
    with pytest.raises(IntegrityError, match=says):
        Manifest.from_dict(data)
