"""Fixtures for the storage tests (and every test that needs a bucket): real emulators
on loopback, raw (non-driver) access to what they hold, and a TCP proxy that breaks
connections on demand.

The emulators run as subprocesses for the whole session on free ports; each test gets
a fresh prefix in a shared bucket, so tests stay independent without paying for a new
server each time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

BUCKET = "trialflow-test"
# Credentials the emulators ignore; the tests check they never show up in errors.
FAKE_KEY_ID = "AKIATESTKEYID0000000"
FAKE_SECRET = "s3cr3t-SHOULD-NEVER-APPEAR-in-messages"


def s3_runtime_env(**extra: str) -> dict[str, Any]:
    """A runtime environment that gives the trials' actors the S3 credentials (the
    session's Ray workers started before the emulator; its endpoint goes in
    ``storage_options``), with ``extra`` environment variables."""
    return {
        "env_vars": {
            "AWS_ACCESS_KEY_ID": FAKE_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": FAKE_SECRET,
            "AWS_DEFAULT_REGION": "us-east-1",
            **extra,
        }
    }


#: The GCS driver's options in the tests (the storage suite's and the dashboard's): parts
#: of 256 KiB, so a file of a few hundred KiB is a multi-part upload.
GCS_OPTIONS: dict[str, Any] = {"part_size": 256 * 1024, "max_concurrency": 4}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(cmd: list[str], url: str, log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "wb")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120  # a loaded machine imports moto slowly
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited: {log.read_text()[-2000:]}")
        try:
            requests.get(url, timeout=1)
            return proc
        except requests.RequestException:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{cmd[0]} did not start within 120 s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def aws_env() -> Iterator[None]:
    saved = {
        k: os.environ.get(k)
        for k in (
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_DEFAULT_REGION",
            "AWS_ENDPOINT_URL",
        )
    }
    os.environ.update(
        AWS_ACCESS_KEY_ID=FAKE_KEY_ID,
        AWS_SECRET_ACCESS_KEY=FAKE_SECRET,
        AWS_DEFAULT_REGION="us-east-1",
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def moto_url(tmp_path_factory: pytest.TempPathFactory, aws_env: None) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    launcher = str(Path(__file__).with_name("_moto_server.py"))  # atomic conditional writes
    proc = _start([sys.executable, launcher, "-H", "127.0.0.1", "-p", str(port)], url, log)
    try:
        s3 = boto3_client(url)
        s3.create_bucket(Bucket=BUCKET)
        yield url
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def moto_keepalive_url(tmp_path_factory: pytest.TempPathFactory, aws_env: None) -> Iterator[str]:
    """The S3 emulator served by gunicorn, whose connections stay open between requests
    as S3's do (moto's own server closes each after one response), with the bucket."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("moto-keepalive") / "gunicorn.log"
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    cmd = [gunicorn, "-k", "gthread", "--threads", "16", "--keep-alive", "75"]
    cmd += ["--no-control-socket", "-b", f"127.0.0.1:{port}"]
    cmd += ["--chdir", str(Path(__file__).parent), "_moto_server:app"]
    proc = _start(cmd, url, log)
    try:
        boto3_client(url).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def gcs_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("gcs") / "gcs.log"
    launcher = str(Path(__file__).with_name("_gcs_emulator.py"))  # adds a socket timeout
    cmd = [sys.executable, launcher, "start", "--host", "127.0.0.1", "--port", str(port)]
    cmd.append("--in-memory")
    proc = _start(cmd, url, log)
    try:
        r = requests.post(f"{url}/storage/v1/b", params={"project": "x"}, json={"name": BUCKET})
        r.raise_for_status()
        yield url
    finally:
        _stop(proc)


def boto3_client(url: str):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=FAKE_KEY_ID,
        aws_secret_access_key=FAKE_SECRET,
        region_name="us-east-1",
    )


def unique_prefix() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


# -- a TCP proxy that misbehaves on request ------------------------------------------


@dataclass
class FlakyProxy:
    """Forwards loopback TCP to a target. ``drop_next`` upcoming connections are closed
    at once; ``cut_up``/``cut_down`` (bytes) make the next connection die after that many
    bytes client->server / server->client. ``break_all()`` kills live connections so
    pooled clients must reconnect."""

    target_port: int
    port: int = 0
    drop_next: int = 0
    cut_up: int | None = None
    cut_down: int | None = None
    cut_up_times: int = 1
    accepted: int = 0
    broken: int = 0
    #: Bytes carried client->server (requests and what they upload), all connections.
    sent_up: int = 0

    def __post_init__(self) -> None:
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.break_all()
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def break_all(self) -> None:
        for w in list(self._writers):
            _abort(w)

    def reset(self) -> None:
        self.drop_next = 0
        self.cut_up = self.cut_down = None
        self.cut_up_times = 1
        self.break_all()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # stop() cancels live connections; nothing awaits this task
        finally:
            self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.drop_next > 0:
            self.drop_next -= 1
            self.broken += 1
            _abort(writer)
            return
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            _abort(writer)
            return
        self._writers.update((writer, up_w))
        try:
            await asyncio.gather(
                self._pipe(reader, up_w, "up", writer),
                self._pipe(up_r, writer, "down", up_w),
            )
        finally:
            self._writers.discard(writer)
            self._writers.discard(up_w)
            _abort(writer)
            _abort(up_w)

    async def _pipe(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        direction: str,
        other: asyncio.StreamWriter,
    ) -> None:
        """Copy bytes; a cut (armed until it fires once) kills the connection when this
        connection has carried that many bytes in ``direction``."""
        sent = 0
        with contextlib.suppress(OSError):
            while data := await src.read(65536):
                cut = self.cut_up if direction == "up" else self.cut_down
                if cut is not None and sent + len(data) >= cut:
                    if direction == "up":
                        self.cut_up_times -= 1
                        if self.cut_up_times <= 0:
                            self.cut_up, self.cut_up_times = None, 1
                    else:
                        self.cut_down = None
                    self.broken += 1
                    _abort(dst)
                    _abort(other)
                    return
                dst.write(data)
                sent += len(data)
                if direction == "up":
                    self.sent_up += len(data)
                await dst.drain()
        with contextlib.suppress(OSError):
            if dst.can_write_eof() and not dst.transport.is_closing():
                dst.write_eof()


def _abort(w: asyncio.StreamWriter) -> None:
    transport = w.transport
    if not transport.is_closing():
        transport.abort()


@pytest.fixture
async def proxy_to() -> AsyncIterator[list[FlakyProxy]]:
    """Factory-ish: tests append proxies via ``make_proxy``; all are stopped after."""
    proxies: list[FlakyProxy] = []
    yield proxies
    for p in proxies:
        await p.stop()
