"""Headless Chromium driven over the Chrome DevTools protocol, in pure Python.

Chromium (Debian's ``chromium`` package) starts with ``--remote-debugging-port=0`` and
writes the port it chose to ``DevToolsActivePort`` in its profile directory; aiohttp's
websocket client then speaks the protocol: one page target, attached in flat mode,
``Runtime.evaluate`` to read the page, ``Page.captureScreenshot`` to picture it. Script
exceptions, console errors and failed loads are collected in :attr:`Page.errors`.

Used by the browser test and by ``tools/dashboard_screenshots.py``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["CHROMIUM_FLAGS", "Browser", "BrowserError", "Page", "chromium_path", "launched"]

#: Headless, quiet, nothing fetched from outside, a profile of its own.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--hide-scrollbars",
)
#: Seconds Chromium may take to start on a loaded 2-core machine.
START_TIMEOUT_S = 60.0


class BrowserError(RuntimeError):
    """Chromium could not be started or answered a command with an error."""


def chromium_path() -> str | None:
    """The Chromium executable on this machine, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One Chromium process and its DevTools connection."""

    def __init__(self, proc: subprocess.Popen[bytes], profile: str) -> None:
        self._proc = proc
        self._profile = profile
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._pages: dict[str, Page] = {}
        self._reader: asyncio.Task[None] | None = None

    async def _connect(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        marker = Path(self._profile) / "DevToolsActivePort"
        while True:
            if self._proc.poll() is not None:
                raise BrowserError(f"chromium exited at start (status {self._proc.returncode})")
            if marker.exists():
                lines = marker.read_text().split()
                if len(lines) >= 2:
                    break
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium did not open DevTools within {START_TIMEOUT_S} s")
            await asyncio.sleep(0.1)
        port, path = lines[0], lines[1]
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            if "id" in data:
                future = self._waiting.pop(data["id"], None)
                if future is not None and not future.done():
                    if "error" in data:
                        future.set_exception(BrowserError(str(data["error"])))
                    else:
                        future.set_result(data.get("result", {}))
            elif data.get("sessionId") in self._pages:
                self._pages[data["sessionId"]].on_event(data["method"], data.get("params", {}))
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(BrowserError("the DevTools connection closed"))

    async def send(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        assert self._ws is not None
        ident = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if kw.get("session"):
            message["sessionId"] = kw["session"]
        await self._ws.send_str(json.dumps(message))
        return await asyncio.wait_for(future, kw.get("timeout", 60.0))

    async def new_page(self, width: int = 1400, height: int = 1000) -> Page:
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        attached = await self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        page = Page(self, attached["sessionId"], width, height)
        self._pages[page.session] = page
        for domain in ("Page", "Runtime", "Log"):
            await page.send(f"{domain}.enable")
        await page.resize(width, height)
        return page

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self.send("Browser.close", timeout=10.0)
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait(timeout=30)
        shutil.rmtree(self._profile, ignore_errors=True)


class Page:
    """One tab: evaluate script, wait for a condition, take a screenshot."""

    def __init__(self, browser: Browser, session: str, width: int, height: int) -> None:
        self.browser = browser
        self.session = session
        self.width, self.height = width, height
        self.errors: list[str] = []

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            args = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
            self.errors.append("console.error: " + " ".join(args))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())

    async def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await self.browser.send(method, params, session=self.session)

    async def resize(self, width: int, height: int) -> None:
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", {"url": url})

    async def evaluate(self, expression: str) -> Any:
        reply = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression!r} raised: {reply['exceptionDetails']}")
        return reply.get("result", {}).get("value")

    async def wait_for(self, expression: str, timeout: float = 60.0, what: str = "") -> Any:
        """The value of ``expression`` once it is truthy (polled every 50 ms; an
        expression that throws, as one may while the page loads, counts as falsy)."""
        deadline = time.monotonic() + timeout
        last: Any = None
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
        while time.monotonic() < deadline:
            last = await self.evaluate(guarded)
            if last:
                return last
            await asyncio.sleep(0.05)
        raise AssertionError(
            f"waited {timeout} s for {what or expression!r}; last value {last!r}; "
            f"page errors: {self.errors}"
        )

    async def screenshot(self, path: Path, *, full_page: bool = True, max_height: int = 0) -> None:
        """A PNG of the page (its whole height with ``full_page``, at most
        ``max_height`` pixels when that is given)."""
        if full_page:
            height = int(await self.evaluate("document.documentElement.scrollHeight"))
            await self.resize(self.width, min(height, max_height) if max_height else height)
            await asyncio.sleep(0.3)  # a resize reflows the charts
        shot = await self.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))
        if full_page:
            await self.resize(self.width, self.height)


@contextlib.asynccontextmanager
async def launched(executable: str | None = None) -> AsyncIterator[Browser]:
    """A headless Chromium for the block (a new, temporary profile)."""
    executable = executable or chromium_path()
    if executable is None:
        raise BrowserError("no chromium on PATH (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="trialflow-chromium-")
    proc = subprocess.Popen(
        [
            executable,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its helpers die with it (killpg)
    )
    browser = Browser(proc, profile)
    try:
        await browser._connect()
        yield browser
    finally:
        await browser.close()
