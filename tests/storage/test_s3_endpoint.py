"""An S3 endpoint that cannot be reached is one error, said at once: it names the
endpoint tried (and where it came from) or says that none is set, why the connection
failed and how to set the endpoint; no chained traceback, no warning per retry, and a
refused connection fails within seconds.

The endpoint is a real closed port on 127.0.0.1. Without an endpoint the driver asks
AWS: that case runs in a subprocess in a new network namespace (``unshare -n``), which
has no network but a loopback that is down, so not one packet leaves this machine; it
skips where namespaces cannot be made."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import StorageError, open_storage
from storage._s3_errors import aws_answered, unreachable_message

#: Far above the few seconds a refused connection takes with the default retries (six
#: attempts, backoff capped at 1.6 s); far below the minutes the issue measured.
BOUND_S = 60.0
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def closed_endpoint() -> Iterator[str]:
    """``http://127.0.0.1:<port>`` where nothing listens: the port is bound (so nothing
    else takes it meanwhile) but not listening, so a connection is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


def assert_one_line_error(err: BaseException) -> None:
    assert isinstance(err, StorageError)
    assert err.__cause__ is None and err.__suppress_context__, "no chained traceback"
    assert "\n" not in str(err)


@pytest.mark.usefixtures("aws_env")
async def test_a_wrong_endpoint_is_one_error_naming_it(
    closed_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trialflow.storage")
    start = time.monotonic()
    with pytest.raises(StorageError) as info:
        async with open_storage("s3://bucket/runs", endpoint_url=closed_endpoint):
            pass
    assert time.monotonic() - start < BOUND_S
    message = str(info.value)
    assert message.startswith(
        f"cannot reach the S3 endpoint {closed_endpoint} (from endpoint_url): connection refused;"
    )
    assert "endpoint_url" in message and "AWS_ENDPOINT_URL" in message
    assert message.endswith("[s3://bucket/runs]")
    assert_one_line_error(info.value)
    assert not caplog.records, "each retry was logged as a warning"


@pytest.mark.usefixtures("aws_env")
async def test_a_wrong_endpoint_from_the_environment_is_named_as_such(
    closed_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", closed_endpoint)
    with pytest.raises(StorageError, match=r"\(from AWS_ENDPOINT_URL\): connection refused"):
        await open_storage("s3://bucket/runs").open()


def test_the_message_without_an_endpoint_says_none_is_set_and_how_to_set_it() -> None:
    message = unreachable_message(
        None, None, "https://bucket.s3.amazonaws.com/", "its host name does not resolve"
    )
    assert message.startswith(
        "cannot reach S3: no endpoint is set, so AWS's https://bucket.s3.amazonaws.com/ was "
        "tried (its host name does not resolve); for an S3-compatible store"
    )
    assert "endpoint_url" in message and "AWS_ENDPOINT_URL" in message


def test_aws_refusing_without_an_endpoint_says_none_is_set() -> None:
    # Without network here the request cannot reach AWS: its answer's wording only.
    message = aws_answered("checking the bucket failed: InvalidAccessKeyId")
    assert message.startswith(
        "checking the bucket failed: InvalidAccessKeyId; no endpoint is set, so this is "
        "AWS's answer: for an S3-compatible store"
    )
    assert "endpoint_url" in message and "AWS_ENDPOINT_URL" in message


NO_ENDPOINT = """
import asyncio, time
from storage import StorageError, open_storage

async def main():
    start = time.monotonic()
    try:
        await open_storage("s3://bucket/runs").open()
    except StorageError as err:
        chained = err.__cause__ is not None or not err.__suppress_context__
        print(f"{time.monotonic() - start:.1f}|{chained}|{err}")

asyncio.run(main())
"""


def test_no_endpoint_and_no_network_is_one_error_saying_none_is_set(tmp_path: Path) -> None:
    if subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False).returncode:
        pytest.skip(
            "cannot make a network namespace here (unshare -n): no way to be sure "
            "asking AWS sends nothing out"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "PYTHONPATH"}
    env.update(
        PYTHONPATH=str(ROOT),
        HOME=str(tmp_path),  # no ~/.aws: no profile names an endpoint
        AWS_ACCESS_KEY_ID="AKIATESTKEYID0000000",
        AWS_SECRET_ACCESS_KEY="not-a-secret",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", NO_ENDPOINT],
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND_S * 2,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    took, chained, message = done.stdout.strip().split("|", 2)
    assert float(took) < BOUND_S and chained == "False"
    assert message.startswith("cannot reach S3: no endpoint is set, so AWS's https://"), message
    assert "amazonaws.com" in message and "AWS_ENDPOINT_URL" in message
    assert message.endswith("[s3://bucket/runs]") and "\n" not in message
    assert "retry" not in done.stderr, "the retries were logged"
