"""The dashboard's server over HTTP (no browser): the API's payloads, the live stream,
and the safety rules (GET only, loopback Host only, no request path reaches the
filesystem, a damaged journal is a message and never a 500, nothing written)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.core.machine import TrialState
from orchestrator.views.dashboard import RunningDashboard, running
from storage import LocalStorage

from ..support.dashboard_events import LIVE_TIMEOUT_S, next_event
from .journals import CountingStorage, Run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def experiments(tmp_path: Path) -> dict[str, Run]:
    """``tmp_path`` holds ``good`` (two trials with results, one failed) and
    ``broken`` (a head cut short)."""
    good = tmp_path / "good"
    good.mkdir()
    run = Run(LocalStorage(str(good)), ["t1", "t2"], name="good")
    for i in range(3):
        run.report("t1", loss=1.0 / (i + 1), acc=float("nan") if i == 2 else 0.5)
        run.report("t2", loss=2.0, acc=0.25)
    run.end("t2", TrialState.ERROR, "trial t2: ValueError: the loss diverged\nTraceback...")
    await run.write()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / JOURNAL_KEY).write_text('{"format": 2, "trials": [{"id": "x"')
    (tmp_path / "not-an-experiment").mkdir()
    return {"good": run}


@pytest.fixture
async def server(tmp_path: Path, experiments: dict[str, Run]) -> AsyncIterator[RunningDashboard]:
    async with running(CountingStorage(str(tmp_path)), port=0) as served:
        yield served


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def base(server: RunningDashboard) -> str:
    return f"http://127.0.0.1:{server.port}"


async def get_json(http: aiohttp.ClientSession, url: str, status: int = 200) -> Any:
    async with http.get(url) as response:
        assert response.status == status, await response.text()
        assert response.headers["Content-Type"].startswith("application/json")
        return await response.json()


async def test_the_experiments_are_listed_damaged_ones_with_their_message(
    server: RunningDashboard, http: aiohttp.ClientSession
) -> None:
    data = await get_json(http, f"{base(server)}/api/experiments")
    found = {e["name"]: e for e in data["experiments"]}
    assert set(found) == {"good", "broken"}
    assert found["good"]["states"] == {"ERROR": 1, "RUNNING": 1} and not found["good"]["problem"]
    assert "truncated" in found["broken"]["problem"]


async def test_an_experiments_payload(
    server: RunningDashboard, http: aiohttp.ClientSession
) -> None:
    data = await get_json(http, f"{base(server)}/api/experiments/good?metric=acc&mode=max")
    rows = {r["id"]: r for r in data["trials"]}
    assert list(rows) == ["t1", "t2"]
    assert rows["t1"]["value"] == "NaN"  # its newest acc: shown as reported, never best
    assert rows["t2"]["error"].startswith("trial t2: ValueError: the loss diverged")
    assert data["series"]["t1"] == {"from": 0, "x": [1, 2, 3], "y": [0.5, 0.5, None]}
    assert data["best"]["trial"] == "t2"  # t1's NaN has no standing
    loss = await get_json(http, f"{base(server)}/api/experiments/good?metric=loss&mode=min")
    assert loss["best"]["trial"] == "t1" and loss["best"]["value"] == pytest.approx(1 / 3)
    assert data["config_keys"] == ["lr"] and {"acc", "loss"} <= set(data["metrics"])


async def test_no_trial_is_best_by_a_guessed_mode(
    server: RunningDashboard, http: aiohttp.ClientSession, experiments: dict[str, Run]
) -> None:
    url = f"{base(server)}/api/experiments/good"
    # No sweep ranks anything: a metric is shown, but no trial is called best (by max,
    # the highest loss would be: t2's 2.0).
    for query in ("", "?metric=loss", "?metric=loss&mode=sideways"):
        data = await get_json(http, url + query)
        assert data["metric"] in ("acc", "loss") and data["mode"] is None, query
        assert data["best"] is None, query
    listed = await get_json(http, f"{base(server)}/api/experiments")
    good = next(e for e in listed["experiments"] if e["name"] == "good")
    assert good["metric"] is None and good["best"] is None
    chosen = await get_json(http, f"{url}?metric=loss&mode=min")
    assert chosen["best"]["trial"] == "t1"
    # A sweep that ranks loss by min: its mode is the page's and the list's.
    run = experiments["good"]
    run.journal.set_extras(lambda: {"sweeps": [{"metric": "loss", "mode": "min"}]})
    run.journal.touch()
    await run.write()
    deadline = asyncio.get_running_loop().time() + LIVE_TIMEOUT_S
    while (data := await get_json(http, url))["mode"] is None:
        assert asyncio.get_running_loop().time() < deadline, "the sweep was never read"
        await asyncio.sleep(0.1)
    assert (data["metric"], data["mode"], data["best"]["trial"]) == ("loss", "min", "t1")
    assert (await get_json(http, f"{url}?metric=acc"))["mode"] is None


async def test_a_damaged_experiment_is_a_message_not_an_error(
    server: RunningDashboard, http: aiohttp.ClientSession
) -> None:
    data = await get_json(http, f"{base(server)}/api/experiments/broken")
    assert "truncated" in data["summary"]["problem"] and data["trials"] == []
    async with http.get(f"{base(server)}/experiments/broken") as response:
        assert response.status == 200 and "text/html" in response.headers["Content-Type"]


async def test_a_new_result_is_streamed(
    server: RunningDashboard, http: aiohttp.ClientSession, experiments: dict[str, Run]
) -> None:
    first = await get_json(http, f"{base(server)}/api/experiments/good?metric=loss")
    url = f"{base(server)}/api/experiments/good/stream?metric=loss&since={first['since']}"
    async with http.get(url, timeout=aiohttp.ClientTimeout(total=LIVE_TIMEOUT_S * 2)) as stream:
        assert stream.headers["Content-Type"] == "text/event-stream"
        run = experiments["good"]
        run.report("t1", loss=0.125)
        await run.write()
        event = await asyncio.wait_for(next_event(stream, "delta"), LIVE_TIMEOUT_S)
    assert event["version"] > first["version"]
    assert event["series"]["t1"] == {"from": 3, "x": [4], "y": [0.125]}  # only what is new
    assert [r["id"] for r in event["trials"]] == ["t1"]


async def test_a_page_from_another_reading_is_sent_everything_again(
    server: RunningDashboard, http: aiohttp.ClientSession
) -> None:
    """A browser reconnecting to a restarted server sends an event id of the old one:
    its versions mean nothing here, so it is told to fetch everything again."""
    first = await get_json(http, f"{base(server)}/api/experiments/good")
    version = first["version"]
    url = f"{base(server)}/api/experiments/good/stream"
    async with http.get(url, headers={"Last-Event-ID": f"0ther-{version}"}) as stream:
        event = await asyncio.wait_for(next_event(stream, "reset"), LIVE_TIMEOUT_S)
    assert event == {"version": version}


# -- safety ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "HEAD"])
async def test_only_get_is_answered(
    server: RunningDashboard, http: aiohttp.ClientSession, method: str
) -> None:
    for path in ("/", "/api/experiments", "/api/experiments/good"):
        async with http.request(method, f"{base(server)}{path}") as response:
            assert response.status == 405, (method, path)


@pytest.mark.parametrize(
    "path",
    [
        "/static/../server.py",
        "/static/%2e%2e/server.py",
        "/static/..%2fserver.py",
        "/static/vendor/../../server.py",
        "/static//etc/passwd",
        "/api/experiments/..",
        "/api/experiments/%2e%2e",
        "/api/experiments/..%2f..%2fetc",
        "/api/experiments/not-an-experiment",
        "/api/experiments/good%2f..%2fbroken",
    ],
)
async def test_no_request_path_reaches_the_filesystem(
    server: RunningDashboard, http: aiohttp.ClientSession, path: str
) -> None:
    store = server.dashboard.catalog._store
    assert isinstance(store, CountingStorage)
    before = len(store.reads)
    async with http.get(f"{base(server)}{path}") as response:
        assert response.status in (404, 400), (path, response.status)
        assert "server.py" not in await response.text()
    assert all(k.split("/")[0] in ("good", "broken") for k in store.reads[before:])


async def test_the_bundled_chart_library_and_its_license_are_served(
    server: RunningDashboard, http: aiohttp.ClientSession
) -> None:
    for path in ("/static/vendor/uPlot.iife.min.js", "/static/vendor/uPlot.LICENSE"):
        async with http.get(f"{base(server)}{path}") as response:
            assert response.status == 200
    async with http.get(f"{base(server)}/static/vendor/uPlot.LICENSE") as response:
        assert "MIT License" in await response.text()


async def test_pages_load_nothing_from_elsewhere_and_forbid_framing(
    server: RunningDashboard, http: aiohttp.ClientSession
) -> None:
    for path in ("/", "/experiments/good"):
        async with http.get(f"{base(server)}{path}") as response:
            html = await response.text()
            assert "http://" not in html and "https://" not in html and "//cdn" not in html
            assert "default-src 'self'" in response.headers["Content-Security-Policy"]
            assert response.headers["X-Frame-Options"] == "DENY"


async def test_a_foreign_host_name_is_refused_on_loopback(
    server: RunningDashboard, http: aiohttp.ClientSession
) -> None:
    """A page on another site that rebinds its name to 127.0.0.1 cannot read it."""
    url = f"{base(server)}/api/experiments"
    async with http.get(url, headers={"Host": f"attacker.example:{server.port}"}) as response:
        assert response.status == 403
    for host in ("localhost", "127.0.0.1", "[::1]"):
        async with http.get(url, headers={"Host": f"{host}:{server.port}"}) as response:
            assert response.status == 200, host


async def test_nothing_is_written_to_storage(
    tmp_path: Path, server: RunningDashboard, http: aiohttp.ClientSession
) -> None:
    def snapshot() -> dict[str, tuple[int, int]]:
        return {
            str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in tmp_path.rglob("*")
            if p.is_file()
        }

    before = snapshot()
    for path in ("/api/experiments", "/api/experiments/good", "/api/experiments/broken"):
        await get_json(http, f"{base(server)}{path}")
    assert snapshot() == before


# -- the command ----------------------------------------------------------------------


#: Seconds the command may take to end after Ctrl-C on a loaded machine.
EXIT_TIMEOUT_S = 60.0


def start_command(
    *args: str, preexec_fn: Callable[[], None] | None = None
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "dashboard", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        preexec_fn=preexec_fn,
    )


@contextlib.asynccontextmanager
async def command(*args: str, **options: Any) -> AsyncIterator[subprocess.Popen[str]]:
    """The dashboard command, killed when the block leaves it running (a failed
    assertion, or an exit that never came)."""
    proc = start_command(*args, **options)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            await asyncio.to_thread(proc.communicate, timeout=EXIT_TIMEOUT_S)


async def interrupt(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl-C, sent once the command said it serves; what it printed after."""
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.to_thread(proc.communicate, timeout=EXIT_TIMEOUT_S)
    return out, err


async def test_the_command_prints_its_url_first_and_stops_on_ctrl_c(
    tmp_path: Path, experiments: dict[str, Run], http: aiohttp.ClientSession
) -> None:
    async with command("--storage", str(tmp_path), "--name", "good", "--port", "0") as proc:
        assert proc.stdout is not None
        first = await asyncio.to_thread(proc.stdout.readline)
        assert first.startswith("trialflow dashboard: http://127.0.0.1:"), first
        url = first.split()[-1]
        assert url.endswith("/experiments/good")
        async with http.get(url) as response:
            assert response.status == 200
        _, err = await interrupt(proc)
    assert proc.returncode == 0, err
    assert "without authentication" not in err


async def test_another_host_is_served_with_a_warning(tmp_path: Path) -> None:
    async with command("--storage", str(tmp_path), "--host", "0.0.0.0", "--port", "0") as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = await asyncio.to_thread(proc.stdout.readline)
        assert "http://" in first
        warning = await asyncio.to_thread(proc.stderr.readline)
        assert "without authentication" in warning and str(tmp_path) in warning
        await interrupt(proc)
    assert proc.returncode == 0


def _pending_ctrl_c(ignored: bool) -> Callable[[], None]:
    """Popen's preexec_fn: the child starts with SIGINT blocked (as a child of Ray's
    processes has it), maybe ignored too (a shell's background job), and a Ctrl-C
    already pending: one that came before the process could answer it."""

    def prepare() -> None:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        os.kill(os.getpid(), signal.SIGINT)

    return prepare


@pytest.mark.parametrize("ignored", [False, True], ids=["blocked", "blocked-and-ignored"])
async def test_a_ctrl_c_during_start_up_ends_the_command(tmp_path: Path, ignored: bool) -> None:
    async with command(
        "--storage", str(tmp_path), "--port", "0", preexec_fn=_pending_ctrl_c(ignored)
    ) as proc:
        out, err = await asyncio.to_thread(proc.communicate, timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 130 and "interrupted" in err, (out, err)
    assert "http://" not in out and "Traceback" not in err


async def test_a_missing_storage_is_a_usage_error(tmp_path: Path) -> None:
    async with command("--storage", str(tmp_path / "nowhere"), "--port", "0") as proc:
        out, err = await asyncio.to_thread(proc.communicate, timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 2 and f"no directory {tmp_path / 'nowhere'}" in err, (out, err)


async def test_a_port_in_use_is_a_usage_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        async with command("--storage", str(tmp_path), "--port", str(port)) as proc:
            out, err = await asyncio.to_thread(proc.communicate, timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 2, (out, err)
    assert f"cannot listen on 127.0.0.1:{port}" in err and "--port" in err
    assert "http://" not in out


async def test_storage_naming_an_experiment_serves_its_folder_open_on_it(
    tmp_path: Path, experiments: dict[str, Run]
) -> None:
    async with command("--storage", str(tmp_path / "good"), "--port", "0") as proc:
        assert proc.stdout is not None
        first = await asyncio.to_thread(proc.stdout.readline)
        assert first.rstrip().endswith("/experiments/good"), first
        serving = await asyncio.to_thread(proc.stdout.readline)
        assert f"serving the experiments in {tmp_path} " in serving, serving
        await interrupt(proc)
    assert proc.returncode == 0
