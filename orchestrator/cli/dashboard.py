"""``dashboard``: a live, read-only web view of the experiments in a storage.

``python -m orchestrator dashboard --storage S [--name N] [--host H] [--port P]``
prints the page's URL as its first line and serves until Ctrl-C. It reads journals
through :mod:`orchestrator.views.dashboard` (no Ray, no trial code, no unpickling) and
writes nothing to storage. It listens on 127.0.0.1 unless ``--host`` says otherwise,
and then warns that the page has no authentication.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.cli import args as cli_args
from orchestrator.cli.args import EXIT_OK
from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["configure_dashboard", "handle_dashboard"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8266


def configure_dashboard(parser: argparse.ArgumentParser) -> None:
    cli_args.add_storage_args(parser, default_name=None, ray=False)
    parser.add_argument(
        "--name",
        default=None,
        help="open on this experiment (the page still lists the others in the storage)",
    )
    cli_args.add_storage_option_arg(parser)
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"the address to listen on (default {DEFAULT_HOST}: this machine only; "
        "another address makes the experiments readable by anyone who reaches it)",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"the port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
    )


def handle_dashboard(args: argparse.Namespace, console: Console) -> int:
    try:
        import aiohttp  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            "the dashboard needs aiohttp; install it with pip install 'trialflow[dashboard]'"
        ) from err
    root = cli_args.results_root(args.storage)
    options = cli_args.storage_options(args.storage_option)
    name = args.name
    if name is None and "://" not in root and os.path.isfile(os.path.join(root, JOURNAL_KEY)):
        # --storage named an experiment, not the folder of experiments: serve its folder.
        root, name = os.path.dirname(root), os.path.basename(root)
    try:
        asyncio.run(_serve(root, options, args.host, args.port, name))
    except KeyboardInterrupt:
        print("trialflow dashboard: stopped", file=sys.stderr)
    return EXIT_OK


async def _serve(
    root: str, options: Mapping[str, Any], host: str, port: int, name: str | None
) -> None:
    import storage
    from orchestrator.views.dashboard import running

    async with contextlib.AsyncExitStack() as stack:
        try:
            store = storage.open_storage(root, **options)
            stack.push_async_callback(store.aclose)
            await store.open()
        except storage.BucketNotFound as err:
            if "://" not in root:
                raise ConfigError(f"no directory {root}; check --storage") from err
            raise ConfigError(f"cannot read {root}: {err}; check --storage") from err
        except (storage.UnsupportedURI, storage.MissingDriver) as err:
            raise ConfigError(f"cannot read {root}: {err}; check --storage") from err
        try:
            served = await stack.enter_async_context(
                running(store, host=host, port=port, name=name)
            )
        except OSError as err:
            raise ConfigError(
                f"cannot listen on {host}:{port}: {err.strerror or err}; choose another "
                "--port (0 picks a free one) or --host"
            ) from err
        url = served.url
        if host in ("0.0.0.0", "::"):
            url = url.replace(f"//{host}:", f"//{socket.gethostname()}:", 1)
        print(f"trialflow dashboard: {url}", flush=True)
        print(f"serving the experiments in {root} (read-only); Ctrl-C stops it", flush=True)
        if not served.dashboard.loopback_only:
            print(
                f"trialflow dashboard: warning: listening on {host}:{served.port} without "
                f"authentication: anyone who can reach it can read every experiment in {root}",
                file=sys.stderr,
                flush=True,
            )
        await asyncio.Event().wait()


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port
