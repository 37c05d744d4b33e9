"""The dashboard's web server: aiohttp, read-only, one storage root.

aiohttp rather than Starlette with uvicorn: Ray already depends on it (so the
``[dashboard]`` extra installs nothing new where Ray is), it is one library for the
server, static files and streaming responses, and the browser test drives Chromium over
its websocket client.

Routes (all GET; any other method is 405):

``/`` and ``/experiments/<name>``
    The two pages (static HTML; their scripts read the API).
``/static/<file>``
    The pages' scripts, styles and the bundled uPlot: a fixed table of the package's
    files, so no request path reaches the filesystem.
``/api/experiments``
    Every experiment's summary.
``/api/experiments/<name>?metric=&mode=&x=``
    One experiment's page data (see :mod:`.payloads`), with its ``version``.
``/api/experiments/<name>/stream?metric=&mode=&x=&since=``
    Server-sent events: a ``delta`` whenever the journal has something new since
    ``since`` (or the ``Last-Event-ID`` a reconnecting browser sends), a ``reset``
    when the page must fetch everything again, a comment every
    :data:`KEEPALIVE_S` seconds otherwise.

Safety: it binds 127.0.0.1 unless told otherwise, and then answers only requests whose
``Host`` is a loopback name (a web page elsewhere cannot read it through DNS
rebinding); experiment names are looked up among the listed experiments, never used as
paths; a damaged journal is a message in the payload, never an error status; every
response forbids framing and sniffing, and the pages load nothing from elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from orchestrator.views.dashboard.catalog import Catalog
from orchestrator.views.dashboard.json_values import to_browser
from orchestrator.views.dashboard.live import Watch
from orchestrator.views.dashboard.payloads import DEFAULT_X, delta, experiment
from orchestrator.views.dashboard.tail import JournalTail
from storage import Storage

__all__ = ["KEEPALIVE_S", "Dashboard", "RunningDashboard", "running"]

log = logging.getLogger("orchestrator.views.dashboard")

STATIC = Path(__file__).resolve().parent / "static"
#: Seconds between two comments on an idle event stream (a proxy or a browser that
#: hears nothing for long may drop it).
KEEPALIVE_S = 15.0
#: The longest metric or key name taken from a query.
MAX_PARAM = 300
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
}
#: By suffix, not by the platform's table: a module script served as anything but
#: JavaScript is refused by the browser.
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
}
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def static_files() -> dict[str, Path]:
    """Every file the pages may load, by its URL path under ``/static/``."""
    files = {}
    for path in sorted(STATIC.rglob("*")):
        if path.is_file():
            files[path.relative_to(STATIC).as_posix()] = path
    return files


class Dashboard:
    """The application over one storage root."""

    def __init__(self, store: Storage, *, loopback_only: bool) -> None:
        self.catalog = Catalog(store)
        self.loopback_only = loopback_only
        self._watches: dict[str, Watch] = {}
        self._static = static_files()
        self._closing = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        get = app.router.add_get
        get("/", self._page("index.html"), allow_head=False)
        get("/experiments/{name}", self._page("experiment.html"), allow_head=False)
        get("/static/{path:.+}", self._static_file, allow_head=False)
        get("/api/experiments", self._experiments, allow_head=False)
        get("/api/experiments/{name}", self._experiment, allow_head=False)
        get("/api/experiments/{name}/stream", self._stream, allow_head=False)
        app.on_shutdown.append(self._shutdown)
        return app

    # -- guard ----------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.loopback_only and _host_name(request.host) not in LOOPBACK_NAMES:
            return _json({"error": "this dashboard answers on its loopback address only"}, 403)
        try:
            response = await handler(request)
        except Refused as err:
            response = _json({"error": str(err)}, err.status)
        except web.HTTPException as err:  # aiohttp's 404 and 405: as JSON, with our headers
            response = _json({"error": err.reason}, err.status)
            if "Allow" in err.headers:
                response.headers["Allow"] = err.headers["Allow"]
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception:  # a bug: say so without a traceback page
            log.exception("dashboard: %s %s", request.method, request.path)
            response = _json({"error": "internal error (see the server's log)"}, 500)
        if not response.prepared:
            response.headers.update(SECURITY_HEADERS)
        return response

    # -- pages ----------------------------------------------------------------------

    def _page(self, name: str) -> Handler:
        path = STATIC / name

        async def page(request: web.Request) -> web.StreamResponse:
            return web.FileResponse(path, headers={"Cache-Control": "no-cache"})

        return page

    async def _static_file(self, request: web.Request) -> web.StreamResponse:
        path = self._static.get(request.match_info["path"])
        if path is None:
            return _json({"error": "no such file"}, 404)
        kind = CONTENT_TYPES.get(path.suffix, "text/plain; charset=utf-8")
        return web.FileResponse(path, headers={"Cache-Control": "no-cache", "Content-Type": kind})

    # -- the API --------------------------------------------------------------------

    async def _experiments(self, request: web.Request) -> web.StreamResponse:
        found = await self.catalog.summaries()
        return _json(
            {
                "root": self.catalog.uri,
                "problem": self.catalog.problem,
                "experiments": found,
            }
        )

    async def _experiment(self, request: web.Request) -> web.StreamResponse:
        name, tail = await self._tail(request)
        await tail.refresh(results=True, fresh_within=0.2)
        metric, mode, x = _choice(request)
        payload = experiment(name, tail, metric, mode, x)
        payload["version"] = tail.version
        payload["since"] = f"{tail.epoch}-{tail.version}"  # what the stream takes
        return _json(payload)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        name, tail = await self._tail(request)
        metric, mode, x = _choice(request)
        since = _since(request.headers.get("Last-Event-ID") or request.query.get("since"), tail)
        watch = self._watches.get(name)
        if watch is None:
            watch = self._watches[name] = Watch(tail)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
                **SECURITY_HEADERS,
            }
        )
        await response.prepare(request)
        await response.write(b"retry: 2000\n\n")
        async with watch.watching():
            while not self._closing.is_set():
                change = tail.changes_since(since)
                if change is None:
                    since = tail.version
                    await _event(response, "reset", tail, {"version": since})
                elif change.version > since:
                    payload = delta(name, tail, change, metric, mode, x)
                    payload["version"] = since = change.version
                    await _event(response, "delta", tail, payload)
                if not await watch.wait_beyond(since, KEEPALIVE_S):
                    await response.write(b": keepalive\n\n")
        return response

    async def _tail(self, request: web.Request) -> tuple[str, JournalTail]:
        name = request.match_info["name"]
        tail = await self.catalog.tail(name)
        if tail is None:
            raise Refused(
                404,
                f"no experiment named {name!r} in {self.catalog.uri} (the experiments page "
                "lists those there)",
            )
        return name, tail

    async def _shutdown(self, app: web.Application) -> None:
        self._closing.set()
        for watch in self._watches.values():
            watch.wake()
            await watch.aclose()


# -- running ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunningDashboard:
    """A dashboard being served: its URL (of the experiment named at start, if any)."""

    url: str
    host: str
    port: int
    dashboard: Dashboard


@contextlib.asynccontextmanager
async def running(
    store: Storage, *, host: str = "127.0.0.1", port: int = 0, name: str | None = None
) -> AsyncIterator[RunningDashboard]:
    """Serve the experiments under ``store`` on ``host:port`` (0: a free port) while
    the block runs. ``OSError`` when the address cannot be bound."""
    loopback = _is_loopback(host)
    dashboard = Dashboard(store, loopback_only=loopback)
    runner = web.AppRunner(dashboard.app(), access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    try:
        sock = _bound_socket(host, port)
        site = web.SockSite(runner, sock)
        await site.start()
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        path = f"/experiments/{_quote(name)}" if name else "/"
        yield RunningDashboard(f"http://{shown}:{bound}{path}", host, bound, dashboard)
    finally:
        await runner.cleanup()


def _bound_socket(host: str, port: int) -> socket.socket:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    """The name in a ``Host`` header, without its port."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


# -- responses -------------------------------------------------------------------------


def _json(payload: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=to_browser(payload),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


class Refused(Exception):
    """A request answered with an error status and a message (a JSON ``error``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _event(response: web.StreamResponse, kind: str, tail: JournalTail, payload: Any) -> None:
    """One server-sent event; its id (``<epoch>-<version>``, what a reconnecting
    browser sends back) names the reading too: another server's versions are not ours."""
    event_id = f"{tail.epoch}-{payload['version']}"
    await response.write(
        f"id: {event_id}\nevent: {kind}\ndata: ".encode() + to_browser(payload) + b"\n\n"
    )


def _choice(request: web.Request) -> tuple[str | None, str | None, str]:
    query = request.query
    metric = query.get("metric") or None
    mode = query.get("mode") if query.get("mode") in ("max", "min") else None
    x = query.get("x") or DEFAULT_X
    if metric is not None and len(metric) > MAX_PARAM or len(x) > MAX_PARAM:
        raise Refused(400, f"a metric name is at most {MAX_PARAM} characters")
    return metric, mode, x


def _since(text: str | None, tail: JournalTail) -> int:
    """The version a page has, from ``<epoch>-<version>``; -1 (send everything) when it
    is from another reading of the journal (a restarted server) or unreadable."""
    epoch, _, version = (text or "").rpartition("-")
    if epoch != tail.epoch or not version.isdigit():
        return -1
    return int(version)
