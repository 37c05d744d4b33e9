"""Connecting to Ray: the one start-up path of the command line and the orchestrator.

There are three ways to get a Ray, and picking the wrong one is a quiet bug:

* Ray is already initialised in this process: use it, and never shut it down.
* An address (``"auto"``, ``host:port``, ``ray://...``) or ``$RAY_ADDRESS``: join that
  cluster. Failing to reach it is the user's to fix (a :class:`ConfigError`).
* Otherwise a *private* local Ray (``address="local"``, given or in ``$RAY_ADDRESS``:
  the same start either way): a bare ``ray.init()`` would join whichever local cluster
  was started last on this machine, maybe another program's. It starts without Ray's
  dashboard, which is ten Python processes (its head and nine modules) taking the CPUs
  from Ray's own start and then from the trials, on a cluster nobody else looks at.
  Ray waits a fixed time for its processes to come up, which an overloaded machine can
  exceed, so such a start is tried :data:`LOCAL_RAY_ATTEMPTS` times before
  :class:`RayStartError`.

Ray itself is imported only when :func:`ensure_ray` runs, so commands that never need it
(``ls``, ``show``, ``plot``) do not pay for it here.

An orchestrator starts Ray with :func:`start_ray`, in a thread: ``ray.init`` blocks for
seconds (more on a loaded machine), and the loop must keep renewing the experiment's
lease meanwhile, which was taken before Ray starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from orchestrator.errors import ConfigError, OrchestratorError

__all__ = ["LOCAL_RAY_ATTEMPTS", "RayStartError", "ensure_ray", "start_ray"]

log = logging.getLogger("orchestrator.engine.raystart")

#: Starting a local Ray on an overloaded machine can time out (Ray waits 30 s, fixed).
LOCAL_RAY_ATTEMPTS = 2


class RayStartError(OrchestratorError):
    """Ray could not be started or joined for a reason other than a bad address (not a
    usage error: the command line exits with status 1)."""


def ensure_ray(
    address: str | None,
    *,
    num_cpus: float | None = None,
    log_to_driver: bool = True,
    env: Mapping[str, str] | None = None,
) -> bool:
    """Make sure this process is connected to Ray; True if this call started (joined)
    it, so the caller must ``ray.shutdown()`` when done.

    ``env`` is set in this process first, so the workers of a local Ray inherit it (a
    running cluster's workers do not); it is not applied when Ray is already up.
    ``num_cpus`` sizes a private local Ray only. Raises :class:`ConfigError` when the
    cluster at ``address`` (or ``$RAY_ADDRESS``) cannot be reached, and
    :class:`RayStartError` when Ray fails otherwise.
    """
    import ray

    if ray.is_initialized():
        return False
    for key, value in (env or {}).items():
        os.environ[key] = value
    options: dict[str, Any] = {"log_to_driver": log_to_driver, "logging_level": logging.WARNING}
    if address is None and os.environ.get("RAY_ADDRESS", "").strip() == "local":
        address = "local"
    if address is None and os.environ.get("RAY_ADDRESS"):
        _join(None, os.environ["RAY_ADDRESS"], options)  # ray.init reads the variable
    elif address is not None and address != "local":
        _join(address, address, options)
    else:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private, local cluster
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        options.update(address="local", include_dashboard=False)
        if num_cpus is not None:
            options["num_cpus"] = int(num_cpus)
        _start_local(options)
    return True


async def start_ray(
    address: str | None,
    *,
    num_cpus: float | None = None,
    log_to_driver: bool = True,
    env: Mapping[str, str] | None = None,
) -> bool:
    """:func:`ensure_ray` in a worker thread, so the loop runs while Ray starts. A cancel
    waits for the start to end (it cannot be stopped midway), shuts down a Ray it
    started, and is raised then."""
    started = asyncio.ensure_future(
        asyncio.to_thread(
            _ensure_ray_quietly, address, num_cpus=num_cpus, log_to_driver=log_to_driver, env=env
        )
    )
    try:
        return await asyncio.shield(started)
    except asyncio.CancelledError:
        try:
            owned = await started
        except Exception:  # the start failed anyway: nothing to shut down
            owned = False
        if owned:
            await asyncio.to_thread(_shutdown_ray)
        _no_exit_hook_without_ray()
        raise


def _ensure_ray_quietly(address: str | None, **options: Any) -> bool:
    with _not_main_thread_warning():
        return ensure_ray(address, **options)


def _no_exit_hook_without_ray() -> None:
    """Drop Ray's exit hook when Ray is not up: it has nothing to shut down then, and run
    in a process that imported Ray but never started it, it makes an interrupted Python
    exit with status 1 instead of as interrupted (by SIGINT). A later ``ray.init`` in the
    process is still shut down by Ray's own node reaper."""
    import atexit

    import ray

    if not ray.is_initialized():
        atexit.unregister(ray.shutdown)


def _shutdown_ray() -> None:
    import ray

    ray.shutdown()


class _SigtermNotSet(logging.Filter):
    """Drops Ray's warning that a start off the main thread sets no SIGTERM handler: the
    orchestrator takes SIGTERM itself once Ray is up."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


@contextlib.contextmanager
def _not_main_thread_warning() -> Iterator[None]:
    logger = logging.getLogger("ray._private.worker")
    quiet = _SigtermNotSet()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _join(address: str | None, shown: str, options: dict[str, Any]) -> None:
    import ray

    try:
        ray.init(address=address, **options)
    except (ConnectionError, ValueError) as err:
        raise ConfigError(f"cannot connect to Ray at {shown!r}: {err}") from err
    except Exception as err:  # Ray raises bare Exceptions for a cluster that is not up
        ray.shutdown()
        raise RayStartError(f"could not join Ray at {shown!r}: {err}") from err


def _start_local(options: dict[str, Any]) -> None:
    import ray

    for attempt in range(1, LOCAL_RAY_ATTEMPTS + 1):
        try:
            ray.init(**options)
            return
        except Exception as err:  # Ray raises a bare Exception when its start times out
            ray.shutdown()
            if attempt == LOCAL_RAY_ATTEMPTS:
                raise RayStartError(
                    f"could not start a local Ray after {attempt} attempt(s): {err}"
                ) from err
            log.warning("a local Ray did not start (%s); trying again", err)
