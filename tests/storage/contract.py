"""The storage contract, as one test class every driver's test module subclasses.

A subclass supplies three fixtures:

- ``store``: an opened :class:`storage.Storage` on a fresh, empty location;
- ``raw``: a :class:`Raw` that reads and writes that same location *without* the driver
  (the filesystem, boto3, or plain HTTP against the emulator), so the driver is checked
  by something other than itself;
- ``reopen``: ``async (**options) -> Storage`` opening the same location with other
  options (closed by the fixture).

Tests that need a network (retries through a breaking proxy) live in
:class:`NetworkContract`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar, Protocol

import pytest

from storage import (
    MANIFEST_NAME,
    IntegrityError,
    InvalidKey,
    Manifest,
    NotFound,
    RetryPolicy,
    Storage,
    StorageError,
    TransientError,
    UnsupportedFile,
)
from storage.blobs import DEDUP_ENV
from storage.schemes import driver_class, scheme_named

from ..support.servers import FAKE_SECRET, FlakyProxy

Flaky = Callable[..., Awaitable[tuple[Storage, FlakyProxy]]]

MiB = 1 << 20

Reopen = Callable[..., Awaitable[Storage]]


class Raw(Protocol):
    def read(self, key: str) -> bytes: ...
    def write(self, key: str, data: bytes) -> None: ...
    def list(self) -> list[str]:
        """Every key under the store's root, reserved temporary names included."""

    def orphans(self) -> list[str]:
        """Leftovers of unfinished uploads (multipart uploads, staging directories)."""


def make_tree(root: Path, big: int) -> dict[str, bytes]:
    files = {
        "a.bin": os.urandom(1000),
        "sub/b.txt": b"hello\n" * 100,
        "sub/deep/empty": b"",
        "big.bin": os.urandom(big),
        "odd name #1.txt": "ünïcode".encode(),
    }
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return files


def read_tree(root: Path) -> dict[str, bytes]:
    out = {}
    for p in root.rglob("*"):
        if p.is_file():
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


BAD_KEYS = ["/abs", "../up", "a/../b", "a/./b", "a\x00b", "a//b", ".trialflow-tmp-x"]


class StorageContract:
    #: The registered scheme (:mod:`storage.schemes`) whose driver this class checks;
    #: ``tests/storage/test_schemes.py`` fails for a scheme that no contract class names.
    scheme: ClassVar[str]
    #: A size that forces a multipart / resumable upload with the ``store`` options.
    big_size: int = 12 * MiB
    #: Whether uploads buffer parts under the storage's byte budget.
    uses_budget: bool = True

    @pytest.fixture(autouse=True)
    def _full_copies(self, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
        """This suite checks the full-copy layout (files under the checkpoint's key) on
        every driver; a content-addressed driver's layout has ``BlobsContract``, whose
        tests (in the same test class) keep the default."""
        defined_in = request.function.__qualname__.split(".")[0]
        if defined_in in ("StorageContract", "NetworkContract"):
            monkeypatch.setenv(DEDUP_ENV, "0")

    def test_store_is_the_registered_driver(self, store: Storage) -> None:
        assert type(store) is driver_class(scheme_named(self.scheme, store.uri))

    # -- bytes ------------------------------------------------------------------------

    async def test_write_read_roundtrip(self, store: Storage, raw: Raw) -> None:
        await store.write_bytes("j/one", b"first")
        assert raw.read("j/one") == b"first"
        await store.write_bytes("j/one", b"second, longer")
        assert raw.read("j/one") == b"second, longer"
        assert await store.read_bytes("j/one") == b"second, longer"
        raw.write("j/two", b"from outside")
        assert await store.read_bytes("j/two") == b"from outside"
        await store.write_bytes("empty", b"")
        assert raw.read("empty") == b""
        assert await store.read_bytes("empty") == b""

    async def test_missing_key(self, store: Storage) -> None:
        with pytest.raises(NotFound) as info:
            await store.read_bytes("nope/missing")
        assert isinstance(info.value, FileNotFoundError)
        assert store.uri in str(info.value) and "nope/missing" in str(info.value)
        assert not await store.exists("nope/missing")

    async def test_exists_is_about_objects(self, store: Storage) -> None:
        await store.write_bytes("d/f", b"x")
        assert await store.exists("d/f")
        assert not await store.exists("d")

    async def test_list_is_path_like(self, store: Storage, raw: Raw) -> None:
        for k in ("a/1", "a/2/x", "ab/1", "b"):
            await store.write_bytes(k, k.encode())
        assert await store.list() == ["a/1", "a/2/x", "ab/1", "b"]
        assert await store.list("a") == ["a/1", "a/2/x"]
        assert await store.list("a/") == ["a/1", "a/2/x"]
        assert await store.list("b") == ["b"]
        assert await store.list("zzz") == []
        assert sorted(raw.list()) == ["a/1", "a/2/x", "ab/1", "b"]

    async def test_delete_is_recursive_and_idempotent(self, store: Storage, raw: Raw) -> None:
        for k in ("a/1", "a/2/x", "ab/1"):
            await store.write_bytes(k, b"x")
        await store.delete("a")
        assert await store.list() == ["ab/1"]
        assert raw.list() == ["ab/1"]
        await store.delete("a")  # nothing left: not an error
        await store.delete("ab/1")
        assert raw.list() == []
        with pytest.raises(InvalidKey):
            await store.delete("")

    @pytest.mark.parametrize("key", BAD_KEYS)
    async def test_bad_keys_rejected(
        self, store: Storage, raw: Raw, key: str, tmp_path: Path
    ) -> None:
        with pytest.raises(InvalidKey):
            await store.write_bytes(key, b"x")
        with pytest.raises(InvalidKey):
            await store.read_bytes(key)
        with pytest.raises(InvalidKey):
            await store.put_checkpoint(tmp_path, key)
        with pytest.raises(InvalidKey):
            await store.get_checkpoint(key, tmp_path / "out")
        with pytest.raises(InvalidKey):
            await store.list(key)
        with pytest.raises(InvalidKey):
            await store.write_bytes_if_absent(key, b"x")
        with pytest.raises(InvalidKey):
            await store.replace_bytes_if(key, b"x", "v")
        assert raw.list() == []

    def test_uri_for(self, store: Storage) -> None:
        full = store.uri_for("t1/ckpt")
        assert full.endswith("t1/ckpt") and full.startswith(store.uri)
        with pytest.raises(InvalidKey):
            store.uri_for("../x")

    # -- conditional writes -----------------------------------------------------------

    async def test_write_if_absent(self, store: Storage, raw: Raw) -> None:
        first = await store.write_bytes_if_absent("locks/a", b"first")
        assert first is not None and raw.read("locks/a") == b"first"
        assert await store.write_bytes_if_absent("locks/a", b"second") is None
        assert raw.read("locks/a") == b"first"
        assert await store.read_bytes_versioned("locks/a") == (b"first", first)
        # Its own bytes again (a retry whose first answer was lost) count as its write.
        assert await store.write_bytes_if_absent("locks/a", b"first") == first
        raw.write("locks/b", b"from outside")
        assert await store.write_bytes_if_absent("locks/b", b"mine") is None
        assert raw.read("locks/b") == b"from outside"
        assert await store.write_bytes_if_absent("empty", b"") is not None
        assert raw.read("empty") == b""
        assert await store.list() == ["empty", "locks/a", "locks/b"]

    async def test_replace_if(self, store: Storage, raw: Raw) -> None:
        one = await store.write_bytes_if_absent("lease", b"one")
        assert one is not None
        two = await store.replace_bytes_if("lease", b"two", one)
        assert two is not None and two != one and raw.read("lease") == b"two"
        assert await store.read_bytes_versioned("lease") == (b"two", two)
        assert await store.replace_bytes_if("lease", b"three", one) is None  # stale
        assert raw.read("lease") == b"two"
        raw.write("lease", b"changed outside")
        assert await store.replace_bytes_if("lease", b"four", two) is None
        assert raw.read("lease") == b"changed outside"
        assert await store.replace_bytes_if("missing", b"x", two) is None
        assert not await store.exists("missing")
        now = await store.read_bytes_versioned("lease")
        assert now.data == b"changed outside"
        assert await store.replace_bytes_if("lease", b"five", now.version) is not None
        assert raw.read("lease") == b"five"
        assert await store.list() == ["lease"]

    async def test_delete_if(self, store: Storage, raw: Raw) -> None:
        one = await store.write_bytes_if_absent("lease", b"one")
        assert one is not None
        two = await store.replace_bytes_if("lease", b"two", one)
        assert two is not None
        assert await store.delete_if("lease", one) is False
        assert raw.read("lease") == b"two"
        assert await store.delete_if("lease", two) is True
        assert await store.list() == []
        assert await store.delete_if("lease", two) is True  # already gone
        with pytest.raises(NotFound):
            await store.read_bytes_versioned("lease")
        assert await store.write_bytes_if_absent("lease", b"again") is not None

    async def test_racing_writers_one_wins(self, reopen: Reopen) -> None:
        """Separate clients race to create one key, then to replace one version."""
        stores = [await reopen() for _ in range(6)]

        async def race(what: str, write: Callable[[Storage, bytes], Awaitable[str | None]]) -> None:
            datas = [f"{what} by writer {i}".encode() for i in range(len(stores))]
            got = await asyncio.gather(*(write(st, d) for st, d in zip(stores, datas, strict=True)))
            winners = [d for d, v in zip(datas, got, strict=True) if v is not None]
            assert len(winners) == 1, winners
            assert await stores[0].read_bytes("race") == winners[0]

        await race("created", lambda st, data: st.write_bytes_if_absent("race", data))
        base = (await stores[0].read_bytes_versioned("race")).version
        await race("replaced", lambda st, data: st.replace_bytes_if("race", data, base))

    # -- directories ------------------------------------------------------------------

    async def test_upload_download_dir(self, store: Storage, raw: Raw, tmp_path: Path) -> None:
        files = make_tree(tmp_path / "src", self.big_size)
        entries = await store.upload_dir(tmp_path / "src", "dir")
        assert {e.path for e in entries} == set(files)
        for rel, data in files.items():
            assert raw.read(f"dir/{rel}") == data, rel
            entry = next(e for e in entries if e.path == rel)
            assert entry.sha256 == hashlib.sha256(data).hexdigest()
        got = await store.download_dir("dir", tmp_path / "dst")
        assert sorted(got) == sorted(files)
        assert read_tree(tmp_path / "dst") == files

    async def test_many_small_files(self, store: Storage, raw: Raw, tmp_path: Path) -> None:
        src = tmp_path / "src"
        src.mkdir()
        files = {f"f{i:03d}": os.urandom(512 + i) for i in range(150)}
        for name, data in files.items():
            (src / name).write_bytes(data)
        await store.put_checkpoint(src, "many")
        assert len(raw.list()) == 151
        await store.get_checkpoint("many", tmp_path / "dst")
        assert read_tree(tmp_path / "dst") == files

    # -- checkpoints ------------------------------------------------------------------

    async def test_checkpoint_roundtrip(self, store: Storage, raw: Raw, tmp_path: Path) -> None:
        files = make_tree(tmp_path / "src", self.big_size)
        manifest = await store.put_checkpoint(tmp_path / "src", "trial/ckpt_1")
        assert sorted(raw.list()) == sorted(
            [f"trial/ckpt_1/{r}" for r in files] + [f"trial/ckpt_1/{MANIFEST_NAME}"]
        )
        # The stored manifest describes what is really stored.
        stored = json.loads(raw.read(f"trial/ckpt_1/{MANIFEST_NAME}"))
        assert stored == manifest.to_dict()
        for entry in manifest.files:
            data = raw.read(f"trial/ckpt_1/{entry.path}")
            assert (len(data), hashlib.sha256(data).hexdigest()) == (entry.size, entry.sha256)
        # The manifest travels as plain JSON.
        again = Manifest.from_dict(json.loads(json.dumps(manifest.to_dict())))
        assert again == manifest
        assert manifest.uri == store.uri_for("trial/ckpt_1")
        got = await store.get_checkpoint("trial/ckpt_1", tmp_path / "dst")
        assert got == manifest
        assert read_tree(tmp_path / "dst") == files

    async def test_overwrite_checkpoint(self, store: Storage, raw: Raw, tmp_path: Path) -> None:
        (tmp_path / "v1").mkdir()
        (tmp_path / "v1" / "old").write_bytes(b"old")
        (tmp_path / "v1" / "same").write_bytes(b"1")
        (tmp_path / "v2").mkdir()
        (tmp_path / "v2" / "same").write_bytes(b"2")
        await store.put_checkpoint(tmp_path / "v1", "c")
        await store.put_checkpoint(tmp_path / "v2", "c")
        assert sorted(raw.list()) == [f"c/{MANIFEST_NAME}", "c/same"]
        await store.get_checkpoint("c", tmp_path / "out")
        assert read_tree(tmp_path / "out") == {"same": b"2"}

    async def test_list_checkpoints(self, store: Storage, raw: Raw, tmp_path: Path) -> None:
        (tmp_path / "src").mkdir()
        (tmp_path / "src" / "w").write_bytes(b"w")
        for key in ("exp/t1/c1", "exp/t1/c2", "exp/t2/deep/er/c1", "other/c"):
            await store.put_checkpoint(tmp_path / "src", key)
        raw.write("exp/t3/uncommitted/w", b"no manifest")
        assert await store.list_checkpoints() == [
            "exp/t1/c1",
            "exp/t1/c2",
            "exp/t2/deep/er/c1",
            "other/c",
        ]
        assert await store.list_checkpoints("exp/t1") == ["exp/t1/c1", "exp/t1/c2"]
        assert await store.list_checkpoints("exp/t") == []
        with pytest.raises(NotFound):
            await store.get_checkpoint("exp/t3/uncommitted", tmp_path / "x")

    async def test_delete_checkpoint(self, store: Storage, raw: Raw, tmp_path: Path) -> None:
        make_tree(tmp_path / "src", 1000)
        await store.put_checkpoint(tmp_path / "src", "t/c1")
        await store.put_checkpoint(tmp_path / "src", "t/c2")
        await store.delete_checkpoint("t/c1")
        assert await store.list_checkpoints() == ["t/c2"]
        assert all(k.startswith("t/c2/") for k in raw.list())
        with pytest.raises(NotFound):
            await store.get_checkpoint("t/c1", tmp_path / "x")
        await store.delete_checkpoint("t/c1")  # idempotent

    async def test_manifest_name_is_reserved(self, store: Storage, tmp_path: Path) -> None:
        (tmp_path / MANIFEST_NAME).write_bytes(b"{}")
        with pytest.raises(InvalidKey):
            await store.put_checkpoint(tmp_path, "c")

    async def test_missing_local_dir(self, store: Storage, tmp_path: Path) -> None:
        with pytest.raises(StorageError):
            await store.put_checkpoint(tmp_path / "nope", "c")

    async def test_a_link_out_of_the_checkpoint_is_never_followed(
        self, store: Storage, raw: Raw, tmp_path: Path
    ) -> None:
        secret = tmp_path / "secret.txt"
        secret.write_bytes(b"not the trial's")
        src = tmp_path / "src"
        src.mkdir()
        (src / "w").write_bytes(b"w")
        await store.put_checkpoint(src, "c")  # what exists stays as it is
        before = {k: raw.read(k) for k in raw.list()}
        for link, target in (("passwd", str(secret)), ("up", "../secret.txt")):
            (src / link).symlink_to(target)
            with pytest.raises(UnsupportedFile) as info:
                await store.put_checkpoint(src, "c2")
            message = str(info.value)
            assert f"{link!r} is a symbolic link to {target!r}, outside" in message
            assert "c2" in message  # where it was going
            (src / link).unlink()
        assert {k: raw.read(k) for k in raw.list()} == before
        assert raw.orphans() == []

    async def test_a_link_to_a_file_inside_is_stored_as_that_file(
        self, store: Storage, tmp_path: Path
    ) -> None:
        src = tmp_path / "src"
        (src / "sub").mkdir(parents=True)
        (src / "model.bin").write_bytes(b"weights")
        (src / "latest").symlink_to("model.bin")
        (src / "sub" / "alias").symlink_to("../model.bin")
        await store.put_checkpoint(src, "c")
        await store.get_checkpoint("c", tmp_path / "dst")
        assert read_tree(tmp_path / "dst") == {
            "model.bin": b"weights",
            "latest": b"weights",
            "sub/alias": b"weights",
        }
        assert not (tmp_path / "dst" / "latest").is_symlink()

    @pytest.mark.parametrize("odd", ["fifo", "link to a directory", "dangling link"])
    async def test_what_is_not_a_regular_file_is_refused_at_once(
        self, store: Storage, raw: Raw, tmp_path: Path, odd: str
    ) -> None:
        src = tmp_path / "src"
        (src / "d").mkdir(parents=True)
        (src / "w").write_bytes(b"w")
        await store.put_checkpoint(src, "c")
        before = {k: raw.read(k) for k in raw.list()}
        if odd == "fifo":
            os.mkfifo(src / "pipe")  # reading it would block the upload for ever
        elif odd == "link to a directory":
            (src / "pipe").symlink_to("d")
        else:
            (src / "pipe").symlink_to("gone")
        with pytest.raises(UnsupportedFile, match="'pipe' is a "):
            await asyncio.wait_for(store.put_checkpoint(src, "c"), 30)
        assert {k: raw.read(k) for k in raw.list()} == before
        assert raw.orphans() == []

    @pytest.mark.parametrize("how", ["same_size", "truncated", "missing"])
    async def test_corruption_detected(
        self, store: Storage, raw: Raw, tmp_path: Path, how: str
    ) -> None:
        files = make_tree(tmp_path / "src", 3000)
        await store.put_checkpoint(tmp_path / "src", "c")
        data = files["sub/b.txt"]
        if how == "same_size":
            raw.write("c/sub/b.txt", data[:-1] + b"X")
        elif how == "truncated":
            raw.write("c/sub/b.txt", data[:10])
        else:
            await store.delete("c/sub/b.txt")
        expected = NotFound if how == "missing" else IntegrityError
        with pytest.raises(expected) as info:
            await store.get_checkpoint("c", tmp_path / "dst")
        assert "sub/b.txt" in str(info.value)
        assert not (tmp_path / "dst" / "sub" / "b.txt").exists()
        leftovers = [p for p in (tmp_path / "dst").rglob("*") if ".trialflow-tmp-" in p.name]
        assert leftovers == []

    async def test_malformed_manifest(self, store: Storage, raw: Raw, tmp_path: Path) -> None:
        make_tree(tmp_path / "src", 10)
        await store.put_checkpoint(tmp_path / "src", "c")
        m = json.loads(raw.read(f"c/{MANIFEST_NAME}"))
        m["files"][0]["path"] = "../../etc/evil"
        raw.write(f"c/{MANIFEST_NAME}", json.dumps(m).encode())
        with pytest.raises(IntegrityError):
            await store.get_checkpoint("c", tmp_path / "dst")
        raw.write(f"c/{MANIFEST_NAME}", b"not json")
        with pytest.raises(IntegrityError):
            await store.get_checkpoint("c", tmp_path / "dst")
        assert not (tmp_path / "etc").exists()

    async def test_cancelled_put_leaves_nothing(
        self, store: Storage, raw: Raw, tmp_path: Path
    ) -> None:
        src = tmp_path / "src"
        src.mkdir()
        for i in range(40):
            (src / f"small{i:02d}").write_bytes(os.urandom(10_000))
        (src / "huge").write_bytes(os.urandom(self.big_size * 4))
        task = asyncio.ensure_future(store.put_checkpoint(src, "c"))
        for _ in range(2000):  # until the upload is visibly under way
            await asyncio.sleep(0.005)
            if await asyncio.to_thread(lambda: bool(raw.list() or raw.orphans())):
                break
        assert not task.done(), "upload finished before it could be cancelled"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await store.list_checkpoints() == []
        await asyncio.sleep(0)
        assert raw.orphans() == []
        assert MANIFEST_NAME not in " ".join(raw.list())
        # And the store is still usable afterwards.
        await store.put_checkpoint(src, "c")
        assert await store.list_checkpoints() == ["c"]

    async def test_closed_store(self, reopen: Reopen) -> None:
        st = await reopen()
        await st.aclose()
        await st.aclose()
        with pytest.raises(StorageError):
            await st.write_bytes("x", b"x")

    async def test_memory_is_bounded(self, reopen: Reopen, tmp_path: Path) -> None:
        """The byte budget caps buffered parts; observe it while a big file uploads."""
        if not self.uses_budget:
            pytest.skip("this driver copies through fixed-size buffers, not parts")
        st = await reopen(max_concurrency=2)
        (tmp_path / "src").mkdir()
        (tmp_path / "src" / "f").write_bytes(os.urandom(self.big_size * 2))
        peak = 0

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, st._budget.used)
                await asyncio.sleep(0)

        watcher = asyncio.ensure_future(watch())
        try:
            await st.put_checkpoint(tmp_path / "src", "c")
        finally:
            watcher.cancel()
        assert 0 < peak <= st.part_size * 2

    # -- what the orchestrator stores besides checkpoints ------------------------------

    async def test_experiment_journal_roundtrip(
        self, store: Storage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The journal's head and result segments through this driver: appends, a
        rollback, compactions into new bases and the sweep of unlisted segments."""
        import orchestrator.journal.writer as journal_module
        from orchestrator import Orchestrator
        from orchestrator.core.journal_format import JOURNAL_KEY, SEGMENTS_PREFIX
        from orchestrator.journal.reader import load

        from ..support.trainables import Counter

        monkeypatch.setattr(journal_module, "COMPACT_AFTER", 2)
        trial = Orchestrator(storage=tmp_path, name="exp").add_trial(Counter, trial_id="a")
        journal = journal_module.Journal(store, name="exp", interval=0.01)
        journal.track(trial._rt)
        expected: list[int] = []
        for n in range(6):
            journal.record_result(trial._rt, {"n": n})
            expected.append(n)
            if n == 3:
                journal.truncate(trial._rt, 2)
                del expected[2:]
            await journal.flush()
        loaded = await load(store)
        assert loaded is not None and [r["n"] for r in loaded[0].results] == expected
        head = json.loads(await store.read_bytes(JOURNAL_KEY))
        segments = await store.list(SEGMENTS_PREFIX)
        assert segments == sorted(head["segments"]) and 1 <= len(segments) <= 2


class NetworkContract:
    """Retries, through a proxy that breaks connections. Subclasses provide
    ``flaky``: ``async (**options) -> (Storage, FlakyProxy)``."""

    big_size: int = 12 * MiB
    #: Bytes after which an upload connection is cut: inside one part/chunk request.
    cut_at: int = 2 * MiB

    async def test_retries_dropped_connections(
        self, flaky: Flaky, caplog: pytest.LogCaptureFixture
    ) -> None:
        st, proxy = await flaky()
        await st.write_bytes("k", b"v1")
        proxy.break_all()
        proxy.drop_next = 2
        with caplog.at_level(logging.WARNING, logger="trialflow.storage"):
            await st.write_bytes("k", b"v2")
            assert await st.read_bytes("k") == b"v2"
        assert proxy.broken >= 2
        assert "retry" in caplog.text
        assert FAKE_SECRET not in caplog.text

    async def test_retries_cut_upload_and_download(
        self, flaky: Flaky, raw: Raw, tmp_path: Path
    ) -> None:
        st, proxy = await flaky()
        files = make_tree(tmp_path / "src", self.big_size)
        proxy.break_all()
        proxy.cut_up = self.cut_at  # dies in the middle of a part/chunk
        await st.put_checkpoint(tmp_path / "src", "c")
        assert proxy.broken == 1
        assert raw.read("c/big.bin") == files["big.bin"]
        proxy.break_all()
        proxy.cut_down = self.big_size // 2  # dies in the middle of the big download
        await st.get_checkpoint("c", tmp_path / "dst")
        assert proxy.broken == 2
        assert read_tree(tmp_path / "dst") == files

    async def test_gives_up_after_bounded_attempts(self, flaky: Flaky) -> None:
        st, proxy = await flaky(retry=RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02))
        await st.write_bytes("k", b"v")
        proxy.break_all()
        proxy.drop_next = 1000
        with pytest.raises(TransientError) as info:
            await st.read_bytes("k")
        assert "after 3 attempts" in str(info.value)
        assert st.uri in str(info.value)
        text = "".join(traceback.format_exception(info.value))
        assert FAKE_SECRET not in text
        proxy.reset()

    async def test_failed_put_leaves_nothing(self, flaky: Flaky, raw: Raw, tmp_path: Path) -> None:
        st, proxy = await flaky(retry=RetryPolicy(attempts=1))
        make_tree(tmp_path / "src", self.big_size)
        await st.write_bytes("warm", b"x")
        proxy.break_all()
        proxy.cut_up = self.cut_at
        proxy.cut_up_times = 1000  # beyond the HTTP client's own silent replays
        with pytest.raises(TransientError):
            await st.put_checkpoint(tmp_path / "src", "c")
        await asyncio.sleep(0.05)
        assert await st.list_checkpoints() == []
        assert [k for k in raw.list() if k.startswith("c/")] == []
        assert raw.orphans() == []
