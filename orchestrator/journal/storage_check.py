"""Every storage argument checked before Ray starts.

Starting Ray costs seconds; a storage mistake found after it (a path that is a file, a
directory nobody may write, an option the driver does not take) wasted them and, worse,
surfaced as a raw ``TypeError`` or ``FileExistsError`` from deep inside. The checks
here run when ``Orchestrator(...)`` is built (the driver and its options) and when it
is entered, before Ray (the local path); a missing bucket is found then too, by
opening the storage (:func:`orchestrator.engine.adoption.check_existing`).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import ConfigError

__all__ = ["check_local_path", "open_checked"]


def open_checked(uri: str, options: Mapping[str, Any], name: str) -> Any:
    """The (unopened) storage driver for ``uri`` built with ``options``; a bad URI, an
    option the driver does not take or a bad option value is a :class:`ConfigError`
    naming it (and the options the driver takes)."""
    import storage as storage_pkg

    try:
        return storage_pkg.open_storage(uri, **options)
    except storage_pkg.StorageError as err:
        raise ConfigError(f"experiment {name!r}: {err}") from err
    except TypeError as err:  # an unexpected keyword: an option this driver lacks
        unknown = [key for key in options if key not in _accepted(uri)]
        named = ", ".join(repr(k) for k in unknown) or "an option"
        raise ConfigError(
            f"experiment {name!r}: storage_options {named} not taken by the storage "
            f"driver for {uri} ({err}); it takes: {', '.join(sorted(_accepted(uri)))}"
        ) from err
    except ValueError as err:
        raise ConfigError(f"experiment {name!r}: bad storage_options for {uri}: {err}") from err


def _accepted(uri: str) -> set[str]:
    """The keyword options the driver for ``uri`` takes (its own and the common ones)."""
    import storage as storage_pkg
    from storage.schemes import driver_class, scheme_named

    name = uri.partition("://")[0].lower() if "://" in uri else "file"
    drivers: list[Any] = [storage_pkg.Storage]
    try:
        drivers.append(driver_class(scheme_named(name, uri), uri))
    except storage_pkg.StorageError:
        pass
    names: set[str] = set()
    for driver in drivers:
        for param in inspect.signature(driver.__init__).parameters.values():
            if param.kind is param.KEYWORD_ONLY:
                names.add(param.name)
    return names


def check_local_path(path: str, name: str) -> None:
    """The experiment's local directory ``path`` can be a directory this process may
    write: it is one (or does not exist yet), no part of it is a file, and the nearest
    existing directory is writable. Raises :class:`ConfigError` naming the path."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(
            f"experiment {name!r}: storage path {path} is a file, not a directory; "
            "pass the directory that should hold the experiment"
        )
    existing = path
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            break
        existing = parent
    if os.path.exists(existing) and not os.path.isdir(existing):
        raise ConfigError(
            f"experiment {name!r}: storage path {path} cannot be created: {existing} is a "
            "file, not a directory; choose another storage path"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"experiment {name!r}: storage path {path} is not writable: this process may "
            f"not write in {existing}; choose a writable storage path or fix its permissions"
        )
