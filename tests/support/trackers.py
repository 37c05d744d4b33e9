"""Reading back what MLflow and W&B stored, as plain data, for the tracker tests; and a
tracking server that accepts connections and never answers.

MLflow is read through its own client. W&B's offline runs are ``.wandb`` files: a
7-byte header (``:W&B``, a magic number, a version), then LevelDB's log format (32 KiB
blocks of records: a 4-byte checksum, a 2-byte length, a 1-byte type, the bytes; a
protobuf ``Record`` may span records) read here with W&B's own protobuf classes, since
W&B no longer ships a Python reader.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_BLOCK = 32 * 1024
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


@dataclass
class StoredRun:
    run_id: str
    name: str
    status: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    group: str = ""
    #: metric -> [(step, value)] in the order stored
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    segments: int = 1  # W&B: how many offline files (processes) hold the run

    def steps(self, key: str) -> list[int]:
        return [step for step, _ in self.metrics.get(key, [])]


# -- MLflow ------------------------------------------------------------------------------


def read_mlflow(uri: str, experiment: str) -> dict[str, StoredRun]:
    """The experiment's runs by their ``trial_id`` tag (each trial's metric history in
    step order; a doubled step would show twice)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no MLflow experiment {experiment!r} at {uri}"
    runs: dict[str, StoredRun] = {}
    for run in client.search_runs([found.experiment_id], max_results=1000):
        trial_id = run.data.tags.get("trial_id", "")
        assert trial_id not in runs, f"two MLflow runs for trial {trial_id}"
        stored = runs[trial_id] = StoredRun(
            run.info.run_id,
            run.info.run_name,
            run.info.status,
            dict(run.data.params),
            dict(run.data.tags),
        )
        for key in run.data.metrics:
            history = client.get_metric_history(run.info.run_id, key)
            ordered = sorted(history, key=lambda m: (m.step, m.timestamp))
            stored.metrics[key] = [(int(m.step), float(m.value)) for m in ordered]
    return runs


# -- W&B ---------------------------------------------------------------------------------


def wandb_records(path: Path) -> Iterator[Any]:
    """The protobuf ``Record`` s of one ``.wandb`` file, in order."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    pos, pending = _HEADER, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # a block's tail too short for a record header: zeros
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:
            pos += left  # padding to the end of the block
            continue
        if pos + 7 + length > len(data):
            return  # a record still being written (or cut short by a killed process)
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (_FULL, _FIRST):
            pending = chunk
        else:
            pending += chunk
        if kind in (_FULL, _LAST):
            record = pb.Record()
            record.ParseFromString(pending)
            yield record
            pending = b""


def read_wandb(directory: Path, timeout: float = 60.0) -> dict[str, StoredRun]:
    """The offline runs under ``directory/wandb`` by run id, each process's file in
    the order written (a resumed run has one ``offline-run-*`` folder per process).

    W&B's service writes the files after ``run.finish()`` returns: this waits (up to
    ``timeout``) until each run's last file holds its exit record (an earlier file of
    the run may have none: its process was killed)."""
    deadline = time.monotonic() + timeout
    while True:
        runs, complete = read_wandb_now(directory)
        if complete or time.monotonic() > deadline:
            assert complete, f"a W&B run under {directory} has no exit record yet"
            return runs
        time.sleep(0.2)


def read_wandb_now(directory: Path) -> tuple[dict[str, StoredRun], bool]:
    """What the offline files hold now (a file being written is read up to its last
    whole record), and whether each run's last file has its exit record."""
    runs: dict[str, StoredRun] = {}
    exited_last: dict[str, bool] = {}
    # The folders are named by the time their process started the run: in order.
    for path in sorted((directory / "wandb").glob("offline-run-*/run-*.wandb")):
        run: StoredRun | None = None
        exited = False
        for record in wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                info = record.run
                run = runs.get(info.run_id)
                if run is None:
                    run = runs[info.run_id] = StoredRun(
                        info.run_id, info.display_name, group=info.run_group
                    )
                else:
                    run.segments += 1
                _config(run, info.config.update)
            elif run is None:
                continue
            elif kind == "config":
                _config(run, record.config.update)
            elif kind == "history":
                row = {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in record.history.item
                }
                step = int(row.pop("_step", record.history.step.num))
                for key, value in row.items():
                    if not key.startswith("_") and isinstance(value, (int, float)):
                        run.metrics.setdefault(key, []).append((step, float(value)))
            elif kind == "exit":
                exited = True
                run.status = "FINISHED" if record.exit.exit_code == 0 else "FAILED"
        if run is not None:
            exited_last[run.run_id] = exited
        else:
            exited_last[str(path)] = False  # its run record is not written yet
    return runs, all(exited_last.values())


def _config(run: StoredRun, items: Any) -> None:
    for item in items:
        key = item.key or "/".join(item.nested_key)
        value = json.loads(item.value_json)
        if isinstance(value, dict) and set(value) <= {"value", "desc"}:
            value = value.get("value")
        run.params[key] = value


# -- a tracker that hangs ------------------------------------------------------------------


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """``http://127.0.0.1:<port>``: accepts every connection and never answers; ended
    (listener and connections closed) when the block exits."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, name="silent-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for conn in held:
            conn.close()
