"""Where experiments live: the default results directory and an experiment's URI under
a storage root. Plain functions (the command line uses them without importing Ray)."""

from __future__ import annotations

import os
import re

from orchestrator.errors import ConfigError

__all__ = ["DEFAULT_RESULTS_DIR", "experiment_uri", "results_root"]

DEFAULT_RESULTS_DIR = os.path.join("~", "trialflow_results")
#: A drive (C:\ or C:/) or a UNC share (\\server\share): on POSIX each is a legal but
#: surely unmeant relative name, a directory called so under the current one.
_WINDOWS_PATH = re.compile(r"[A-Za-z]:[\\/]|\\\\[^\\/]+\\")


def results_root(storage: str | os.PathLike[str] | None) -> str:
    """The storage root ``storage`` names: a URI as it is, a path made absolute; the
    default (``$TRIALFLOW_RESULTS_DIR``, else ``~/trialflow_results``) when None."""
    if storage is None:
        storage = os.environ.get("TRIALFLOW_RESULTS_DIR") or DEFAULT_RESULTS_DIR
    text = os.fspath(storage)
    if not isinstance(text, str):
        raise ConfigError(f"storage must be a path or URI string, got {storage!r}")
    if "://" in text:
        return text.rstrip("/")
    if os.name == "posix" and _WINDOWS_PATH.match(text):
        raise ConfigError(
            f"storage {text} is a Windows path; this system is POSIX, where it would name a "
            f"directory called so under {os.getcwd()}: give a POSIX path (e.g. "
            f"{os.path.join(os.path.expanduser('~'), 'runs')}) or an s3:// or gs:// URI"
        )
    return os.path.abspath(os.path.expanduser(text))


def experiment_uri(storage: str | os.PathLike[str] | None, name: str) -> str:
    """Where the experiment ``name`` lives under ``storage`` (see :func:`results_root`)."""
    root = results_root(storage)
    return f"{root}/{name}" if "://" in root else os.path.join(root, name)
