"""Missing credentials and missing drivers are said at once, with the remedy; the HTTP
libraries' unretrieved connection errors stay out of the log."""

from __future__ import annotations

import asyncio
import gc
import logging
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from storage import NoCredentials, open_storage, quiet_sdk_noise


@pytest.fixture
def no_cloud_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "STORAGE_EMULATOR_HOST",
        "GCE_METADATA_HOST",
        "GCE_METADATA_ROOT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws, no ~/.config/gcloud
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role here


@pytest.mark.usefixtures("no_cloud_credentials")
@pytest.mark.parametrize(
    ("uri", "remedy"),
    [
        ("s3://some-bucket/exp", "AWS_ACCESS_KEY_ID"),
        ("gs://some-bucket/exp", "GOOGLE_APPLICATION_CREDENTIALS"),
    ],
)
async def test_no_credentials_is_said_at_once(uri: str, remedy: str) -> None:
    started = time.monotonic()
    with pytest.raises(NoCredentials) as caught:
        async with open_storage(uri):
            pass
    assert time.monotonic() - started < 10  # not a retry budget spent on a metadata host
    message = str(caught.value)
    assert "credentials found" in message and remedy in message and uri in message


def test_a_missing_driver_names_the_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['aiobotocore'] = None\n"
        "from storage import open_storage\n"
        "try:\n    open_storage('s3://b/p')\n"
        "except Exception as err:\n    print(type(err).__name__, err)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "MissingDriver" in out.stdout and "pip install 'trialflow[s3]'" in out.stdout


async def test_unretrieved_connection_errors_of_http_tasks_are_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def drops_connection() -> None:
        raise aiohttp.ClientConnectionResetError("Cannot write to closing transport")

    async def raises_a_bug() -> None:
        raise KeyError("a real bug")

    loop = asyncio.get_running_loop()
    gc.collect()  # what earlier tests on the session's loop left is not this test's
    previous = quiet_sdk_noise(loop)
    try:
        with caplog.at_level(logging.DEBUG):
            for coro in (drops_connection(), raises_a_bug()):
                task = loop.create_task(coro)
                await asyncio.sleep(0.01)
                del task, coro
                gc.collect()
    finally:
        loop.set_exception_handler(previous)
    ours = ("drops_connection", "raises_a_bug")  # not an earlier test's task, collected now
    errors = [
        r
        for r in caplog.records
        if r.levelno >= logging.ERROR and any(name in r.getMessage() for name in ours)
    ]
    assert len(errors) == 1 and "a real bug" in str(errors[0].exc_info or errors[0].getMessage())
    assert any("HTTP library task failed" in r.getMessage() for r in caplog.records)
