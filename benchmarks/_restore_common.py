"""Shared pieces of the restore benchmark: the payload a checkpoint carries, the
timestamps trainables leave behind, and the child's output protocol.

Both systems run the *same* trainable code (``Payload``): ``save`` writes one file of
``size`` bytes, ``load`` reads it back in full (8 MiB at a time, nothing kept). Each
trainable appends JSON lines to ``<stamp_dir>/<tag>.jsonl`` (``setup``, ``load_start``,
``load_end``, ``first_step`` after a load), stamped with ``time.time()`` and its pid,
so both systems' restore paths are timed by one clock and one rule.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

from . import _core_common as _core
from ._core_common import median

RESULT_MARKER = "@@restore-result "
#: Every system starts its own Ray with this many CPUs (same cluster for all).
NUM_CPUS = 2
CHUNK = 8 << 20
BUCKET = "trialflow-bench"
#: Credentials the emulator ignores.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIABENCHKEY00000000",
    "AWS_SECRET_ACCESS_KEY": "bench-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}

_BLOCK: bytes | None = None


def _block() -> bytes:
    global _BLOCK
    if _BLOCK is None:
        _BLOCK = os.urandom(CHUNK)
    return _BLOCK


class Payload:
    """What both systems' trainables do with their checkpoints."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.size = int(config.get("size", 0))
        self.stamp_dir = config.get("stamp_dir")
        self.tag = str(config.get("tag", "trial"))
        self.step_s = float(config.get("step_s", 0.0))
        self.loaded = False
        self.stamp("setup")

    def stamp(self, event: str, **extra: Any) -> None:
        if not self.stamp_dir:
            return
        line = json.dumps({"ev": event, "t": time.time(), "pid": os.getpid(), **extra})
        fd = os.open(
            os.path.join(self.stamp_dir, f"{self.tag}.jsonl"),
            os.O_WRONLY | os.O_CREAT | os.O_APPEND,
            0o644,
        )
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def step(self, i: int) -> dict[str, Any]:
        if self.loaded:
            self.loaded = False
            self.stamp("first_step", i=i)
        if self.step_s:
            time.sleep(self.step_s)
        return {"pid": os.getpid(), "t": time.time(), "i": i}

    def save(self, checkpoint_dir: str, i: int) -> None:
        with open(os.path.join(checkpoint_dir, "meta.json"), "w") as fh:
            json.dump({"i": i, "size": self.size}, fh)
        block = _block()
        left = self.size
        with open(os.path.join(checkpoint_dir, "state.bin"), "wb") as fh:
            while left > 0:
                n = min(left, len(block))
                fh.write(block[:n] if n < len(block) else block)
                left -= n

    def load(self, checkpoint_dir: str) -> int:
        self.stamp("load_start")
        with open(os.path.join(checkpoint_dir, "meta.json")) as fh:
            meta = json.load(fh)
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        got = 0
        with open(os.path.join(checkpoint_dir, "state.bin"), "rb", buffering=0) as fh:
            while n := fh.readinto(view):
                got += n
        if got != meta["size"]:
            raise RuntimeError(f"checkpoint holds {got} bytes, expected {meta['size']}")
        self.loaded = True
        self.stamp("load_end", bytes=got)
        return int(meta["i"])


def read_stamps(stamp_dir: str, tag: str) -> list[dict[str, Any]]:
    path = os.path.join(stamp_dir, f"{tag}.jsonl")
    try:
        with open(path) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []


def first_after(
    stamps: Sequence[dict[str, Any]], event: str, t: float, not_pid: int | None = None
) -> dict[str, Any] | None:
    for s in stamps:
        if s["ev"] == event and s["t"] >= t and s["pid"] != not_pid:
            return s
    return None


def victims_breakdown(
    stamp_dir: str, tags: Sequence[str], pids: Sequence[int], t_kill: float
) -> dict[str, Any]:
    """Per restore step, the median and the max over victims of seconds after the kill."""
    out: dict[str, Any] = {}
    stamps = [read_stamps(stamp_dir, tag) for tag in tags]
    for ev in ("setup", "load_start", "load_end", "first_step"):
        got = [first_after(st, ev, t_kill, pid) for st, pid in zip(stamps, pids, strict=True)]
        values = [g["t"] - t_kill for g in got if g is not None]
        out[f"{ev}_median_s"] = median(values)
        out[f"{ev}_max_s"] = max(values) if values else None
    return out


def rate_in(stamps: Sequence[float], start: float, end: float) -> float | None:
    if end <= start:
        return None
    return sum(1 for t in stamps if start <= t < end) / (end - start)


def emit(figures: dict[str, Any]) -> None:
    _core.emit(figures, RESULT_MARKER)


def parse_child_output(stdout: str) -> dict[str, Any] | None:
    return _core.parse_child_output(stdout, RESULT_MARKER)


def s3_filesystem(endpoint: str) -> Any:
    """A pyarrow S3 filesystem on the emulator (for Tune's ``storage_filesystem``)."""
    import pyarrow.fs

    host = endpoint.split("://", 1)[1]
    return pyarrow.fs.S3FileSystem(
        endpoint_override=host,
        scheme="http",
        access_key=AWS_ENV["AWS_ACCESS_KEY_ID"],
        secret_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        region=AWS_ENV["AWS_DEFAULT_REGION"],
    )
