"""Every storage argument is checked before Ray starts: a bad URI or option when the
``Orchestrator`` is built, a path that cannot hold the experiment or a missing bucket
when it is entered; each a clear error naming what is wrong, and Ray never started
(``ensure_ray`` refuses here, so a check that came after it would fail loudly)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

import orchestrator.engine.raystart
from orchestrator import ConfigError, Orchestrator
from storage import BucketNotFound, StorageError

from ..support.servers import BUCKET, aws_env, moto_url  # noqa: F401


@pytest.fixture(autouse=True)
def no_ray_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> bool:
        raise AssertionError("Ray was started before the storage arguments were checked")

    monkeypatch.setattr(orchestrator.engine.raystart, "ensure_ray", refuse)


async def enter(**kwargs: Any) -> None:
    async with Orchestrator(name="e", progress=False, **kwargs):
        pass


@pytest.mark.parametrize(
    ("storage", "options", "message"),
    [
        ("ftp://host/runs", {}, "unknown storage scheme 'ftp'"),
        ("{tmp}", {"endpoint_url": "http://x"}, r"storage_options 'endpoint_url' not taken by"),
        ("s3://bucket/p", {"bogus": 1}, r"storage_options 'bogus' not taken .* endpoint_url"),
        ("gs://bucket/p", {"bogus": 1}, r"storage_options 'bogus' not taken .* service_file"),
        ("{tmp}", {"part_size": 0}, r"bad storage_options for .*part_size"),
    ],
)
def test_a_bad_uri_or_option_is_refused_when_built(
    tmp_path: Path, storage: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Orchestrator(storage=storage.format(tmp=tmp_path), storage_options=options)


async def test_a_storage_path_that_is_a_file_is_refused_before_ray(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "e").write_text("the experiment's name is taken by a file")
    with pytest.raises(ConfigError, match=rf"storage path {tmp_path / 'runs' / 'e'} is a file"):
        await enter(storage=tmp_path / "runs")
    with pytest.raises(ConfigError, match=rf"cannot be created: {tmp_path / 'afile'} is a file"):
        await enter(storage=tmp_path / "afile" / "under")
    with pytest.raises(ConfigError, match=rf"cannot be created: {tmp_path / 'afile'} is a file"):
        await enter(storage=tmp_path / "afile", resume=True)


async def test_a_storage_path_nobody_may_write_is_refused_before_ray() -> None:
    # /proc/sys refuses new entries to everyone, root included (a chmod would not).
    with pytest.raises(ConfigError, match=r"storage path /proc/sys/e is not writable"):
        await enter(storage="/proc/sys")


async def test_a_missing_bucket_is_refused_before_ray(moto_url: str) -> None:  # noqa: F811
    with pytest.raises(BucketNotFound, match="does not exist"):
        await enter(
            storage=f"s3://{BUCKET}-nobody-made/p", storage_options={"endpoint_url": moto_url}
        )


@pytest.mark.usefixtures("aws_env")
async def test_an_unreachable_endpoint_is_one_error_before_ray() -> None:
    with socket.socket() as closed:  # bound, not listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
        with pytest.raises(StorageError) as info:
            await enter(storage="s3://bucket/runs", storage_options={"endpoint_url": endpoint})
    assert str(info.value).startswith(f"cannot reach the S3 endpoint {endpoint} ")
    assert str(info.value).endswith("[s3://bucket/runs/e]")
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize(
    "storage", ["C:\\Users\\me\\runs", "c:/Users/me/runs", "D:\\", "\\\\server\\share\\runs"]
)
def test_a_windows_path_is_refused_on_posix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="is a Windows path") as info:
        Orchestrator(storage=storage, name="e")
    assert f"storage {storage} is a Windows path" in str(info.value)
    assert "give a POSIX path" in str(info.value)
    assert list(tmp_path.iterdir()) == [], "a directory named like the Windows path was made"


def test_posix_paths_like_windows_ones_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A colon or a backslash further in is a legal POSIX name, meant as written.
    monkeypatch.chdir(tmp_path)
    for storage in (tmp_path / "C:", tmp_path / "runs\\a", "runs:C:\\x"):
        assert Orchestrator(storage=storage, name="e").storage_uri.endswith("/e")
