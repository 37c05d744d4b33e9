"""Pauses a copy mid-way on one node, so a test can remove that node (or cancel the
copy) at a point the copy cannot pass, however fast the machine is.

Python runs ``sitecustomize`` at start-up; ``tests/transfer/test_cluster.py`` starts a
node with this directory first on ``PYTHONPATH`` and ``TRANSFER_TEST_GATE`` naming a
directory, so every worker of that node (and of no other) loads it. When such a worker
imports :mod:`transfer.source` or :mod:`transfer.sink`, the reading and the writing of
frames are wrapped: after ``TRANSFER_TEST_PAUSE_AFTER`` frames the worker creates
``<gate>/paused`` and waits until ``<gate>/go`` exists (or its node is removed). The
product has no hook for this: the test wraps the real classes in the real workers.
"""

from __future__ import annotations

import os

GATE = os.environ.get("TRANSFER_TEST_GATE")


def _gated(method, after: int, gate: str):  # type: ignore[no-untyped-def]
    import functools
    import time

    count = 0

    @functools.wraps(method)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal count
        count += 1
        if count > after:
            open(os.path.join(gate, "paused"), "a").close()
            while not os.path.exists(os.path.join(gate, "go")):
                time.sleep(0.05)
        return method(*args, **kwargs)

    return wrapper


if GATE:
    import importlib.abc
    import importlib.machinery
    import sys

    _WRAP = {
        "transfer.source": ("SourceReader", "read_into"),
        "transfer.sink": ("SinkWriter", "write"),
    }

    class _Gate(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
            if name not in _WRAP:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            load = spec.loader.exec_module
            cls_name, method = _WRAP[name]
            after = int(os.environ.get("TRANSFER_TEST_PAUSE_AFTER", "3"))

            def exec_module(module):  # type: ignore[no-untyped-def]
                load(module)
                cls = getattr(module, cls_name)
                setattr(cls, method, _gated(getattr(cls, method), after, GATE))

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, _Gate())
