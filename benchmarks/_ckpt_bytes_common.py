"""Shared pieces of ``bench_checkpoint_bytes``: the model every system checkpoints, the
stamps its trainable leaves, and how bytes on a local disk are counted.

The model (:class:`ModelSteps`, written once; each system subclasses it with its own
``Trainable``) has two parts, both written as *safetensors* files (an 8-byte header
length, a JSON header padded to 8 bytes, then each tensor's bytes at a fixed offset; the
format is simple enough to write by hand, so no dependency):

* a **frozen** part: the bytes of one shared file that the parent writes once (a
  pretrained backbone for PBT, the base model for fine-tuning). Every trial reads the
  same file, so the part is byte-for-byte the same in every checkpoint of every trial;
* a **changing** part (a head for PBT, an adapter for fine-tuning): fresh bytes at every
  step, so no two checkpoints share it, except an exploited trial's first one.

``layout="files"`` writes each part to a file of its own (``frozen.safetensors``,
``changing.safetensors``); ``layout="one"`` writes one ``model.safetensors`` holding both,
frozen first, as ``torch.save``/``save_file`` of one state dict would. One file is the
harder case for storage that splits files into fixed-size chunks: the header shifts the
tensors off the chunk boundaries, so the chunks that straddle the changing part change
too. A small ``trainer_state.json`` (iteration, lr, score) changes in every checkpoint.

Stamps: the trainable appends one JSON line per event (``save_start``, ``save_end``,
``load_start``, ``load_end``) to ``<stamp_dir>/<pid>.jsonl``, with its trial id, its
iteration and ``time.time()``, so the driver's hooks and the trainable share one clock.
"""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

#: Every system starts its own Ray with this many CPUs.
NUM_CPUS = 2
#: The manifest that marks one of our committed checkpoint directories.
OUR_MANIFEST = ".trialflow-manifest.json"

_FROZEN: dict[str, bytes] = {}  # the shared file's bytes, read once per worker process


def frozen_bytes(path: str) -> bytes:
    if path not in _FROZEN:
        _FROZEN[path] = Path(path).read_bytes()
    return _FROZEN[path]


def safetensors_header(tensors: Sequence[tuple[str, int]]) -> bytes:
    """The header of a safetensors file of uint8 tensors ``(name, size)``, in order: the
    length (u64, little-endian) then the JSON, padded with spaces to 8 bytes."""
    meta: dict[str, Any] = {}
    offset = 0
    for name, size in tensors:
        meta[name] = {"dtype": "U8", "shape": [size], "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(meta, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def write_safetensors(path: str, tensors: Sequence[tuple[str, bytes]]) -> None:
    with open(path, "wb") as fh:
        fh.write(safetensors_header([(name, len(data)) for name, data in tensors]))
        for _, data in tensors:
            fh.write(data)


def read_safetensors(path: str) -> dict[str, bytes]:
    with open(path, "rb") as fh:
        data = fh.read()
    (n,) = struct.unpack("<Q", data[:8])
    meta = json.loads(data[8 : 8 + n])
    base = 8 + n
    return {
        name: data[base + spec["data_offsets"][0] : base + spec["data_offsets"][1]]
        for name, spec in meta.items()
    }


class ModelSteps:
    """The trainable's body, shared by every system (see the module's docstring).

    Config: ``frozen_path``, ``frozen_name`` and ``changing_name`` (tensor names),
    ``changing_size`` (bytes), ``layout`` (``files`` | ``one``), ``lr``, ``step_s``
    (seconds a step sleeps, standing in for training), ``stamp_dir``."""

    config: Any
    iteration: Any
    trial_id: Any

    def setup(self, config: dict[str, Any]) -> None:
        self.frozen = frozen_bytes(config["frozen_path"])
        self.changing = os.urandom(int(config["changing_size"]))
        self.score = 0.0

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return True

    def step(self) -> dict[str, Any]:
        time.sleep(float(self.config.get("step_s", 0.0)))
        self.changing = os.urandom(len(self.changing))  # training changed it
        self.score += float(self.config["lr"])
        return {
            "score": self.score,
            "pid": os.getpid(),
            "dedup_env": os.environ.get("TRIALFLOW_CHECKPOINT_DEDUP", ""),
        }

    def _stamp(self, event: str) -> None:
        stamp_dir = self.config.get("stamp_dir")
        if not stamp_dir:
            return
        line = json.dumps(
            {"ev": event, "trial": str(self.trial_id), "it": int(self.iteration), "t": time.time()}
        )
        fd = os.open(
            os.path.join(stamp_dir, f"{os.getpid()}.jsonl"),
            os.O_WRONLY | os.O_CREAT | os.O_APPEND,
            0o644,
        )
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def save_checkpoint(self, checkpoint_dir: Any) -> None:
        self._stamp("save_start")
        d = str(checkpoint_dir)
        frozen = (self.config["frozen_name"], self.frozen)
        changing = (self.config["changing_name"], self.changing)
        if self.config["layout"] == "one":
            write_safetensors(os.path.join(d, "model.safetensors"), [frozen, changing])
        else:
            write_safetensors(os.path.join(d, "frozen.safetensors"), [frozen])
            write_safetensors(os.path.join(d, "changing.safetensors"), [changing])
        state = {"iteration": int(self.iteration), "lr": self.config["lr"], "score": self.score}
        with open(os.path.join(d, "trainer_state.json"), "w") as fh:
            json.dump(state, fh)
        self._stamp("save_end")

    def load_checkpoint(self, checkpoint_dir: Any) -> None:
        self._stamp("load_start")
        d = str(checkpoint_dir)
        if self.config["layout"] == "one":
            tensors = read_safetensors(os.path.join(d, "model.safetensors"))
        else:
            tensors = read_safetensors(os.path.join(d, "frozen.safetensors"))
            tensors.update(read_safetensors(os.path.join(d, "changing.safetensors")))
        if len(tensors[self.config["frozen_name"]]) != len(self.frozen):
            raise RuntimeError(f"{d}: the frozen part has the wrong size")
        self.changing = tensors[self.config["changing_name"]]
        with open(os.path.join(d, "trainer_state.json")) as fh:
            self.score = float(json.load(fh)["score"])
        self._stamp("load_end")


# -- what the stamps say --------------------------------------------------------------


def read_stamps(stamp_dir: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in Path(stamp_dir).glob("*.jsonl"):
        out.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return sorted(out, key=lambda s: s["t"])


def save_latencies(
    stamps: Sequence[dict[str, Any]], persisted: Iterable[tuple[str, int | None, float]]
) -> list[float]:
    """Seconds from ``save_checkpoint``'s start (the trainable's stamp) to the driver's
    hook saying that checkpoint is persisted, one per ``(trial, iteration, t_hook)``.

    A hook is matched to the trial's save at the same iteration when it names one, else
    to the trial's newest save that started before it."""
    starts: dict[str, list[dict[str, Any]]] = {}
    for s in stamps:
        if s["ev"] == "save_start":
            starts.setdefault(s["trial"], []).append(s)
    out = []
    for trial, iteration, t_hook in persisted:
        mine = [s for s in starts.get(trial, []) if s["t"] <= t_hook]
        same = [s for s in mine if iteration is not None and s["it"] == iteration]
        match = (same or mine or [None])[-1]
        if match is not None:
            out.append(t_hook - match["t"])
    return out


# -- bytes on a local disk ------------------------------------------------------------

#: A file version: (device, inode, mtime in ns). Hard links share all three, so a file
#: linked into many checkpoints counts once; a new file that reuses a deleted file's
#: inode number has another mtime, so it counts again.
FileId = tuple[int, int, int]


def scan(root: str, seen: dict[FileId, tuple[int, str]], committed_only: bool) -> None:
    """Add every file under ``root`` to ``seen`` (``FileId -> (size, path)``).

    ``committed_only``: only files inside our committed checkpoint directories (those
    holding the manifest, which a checkpoint gets by the rename that commits it), so a
    file still being written is never counted at a size it will not keep."""
    for dirpath, _dirs, files in os.walk(root):
        if committed_only and OUR_MANIFEST not in files:
            continue
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # deleted meanwhile
            seen.setdefault((st.st_dev, st.st_ino, st.st_mtime_ns), (st.st_size, path))


def held_bytes(root: str) -> tuple[int, int]:
    """(files, bytes) under ``root`` now, each inode once (``du``'s rule, apparent sizes)."""
    seen: dict[tuple[int, int], int] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_size
    return len(seen), sum(seen.values())


#: The names of the files a checkpoint of the model holds (and our manifest): a staged
#: checkpoint, not yet renamed to its key, holds them too.
CHECKPOINT_FILES = frozenset(
    {
        "model.safetensors",
        "frozen.safetensors",
        "changing.safetensors",
        "trainer_state.json",
        OUR_MANIFEST,
    }
)


def is_checkpoint_path(rel: str) -> bool:
    """Whether a key or relative path holds checkpoint bytes (a blob, a file of a
    checkpoint, staged or committed, ours or Tune's) rather than the experiment's
    records (journal, results, logs)."""
    parts = rel.replace(os.sep, "/").split("/")
    return parts[-1] in CHECKPOINT_FILES or any(
        p == ".blobs" or p.startswith("checkpoint_") for p in parts
    )
