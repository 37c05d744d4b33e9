"""Checkpoint bytes: content-addressed checkpoints (ours) against today's full copies
(ours with ``TRIALFLOW_CHECKPOINT_DEDUP=0``) and Ray Tune, in one run (issue 36, item 2).

Workloads (every system runs the same model, ``_ckpt_bytes_common.ModelSteps``):

* **pbt**: PBT over ``--trials`` (8) trials, a checkpoint every iteration, ``--pbt-iterations``
  (8) iterations, a perturbation every ``--interval`` (2). The model has a frozen part of
  ``--frozen`` (48 MiB: a pretrained backbone, the same bytes in every trial) and a part of
  ``--head`` (4 MiB) that changes at every step. An exploit restores the donor's
  checkpoint;
* **finetune**: a sweep of ``--trials`` (8) trials (a grid over ``lr``) fine-tuning one
  base model of ``--base`` (64 MiB), saved unchanged with every checkpoint, plus an
  adapter of ``--adapter`` (1 MiB) that changes at every step; ``--ft-iterations`` (4).

Each model is checkpointed in two **layouts** (``--layouts``): ``files``, each part a
safetensors file of its own, and ``one``, both parts in one safetensors file (frozen
first), whose header shifts the tensors off any fixed chunk boundary: the harder case
for object storage that stores large files by fixed-size chunks.

Storage (``--storages``): a local directory, and S3 (an emulator started here on a free
loopback port, ``_moto_counting.py``); Ray Tune on S3 through a pyarrow
``S3FileSystem(endpoint_override=...)``. Every checkpoint is kept (ours
``keep_checkpoints=None``, Tune ``num_to_keep=None``).

**Bytes written to storage** (the figure the targets are on), whatever is deleted later
(ours deletes a PBT trial's checkpoints that an exploit abandoned; Tune keeps them):

* S3: the size of every object the emulator stored (each PUT, each completed multipart
  upload; a server-side copy would count too), summed over the run's prefix;
* local: every file version the run created under the storage root, each once: the
  files of each committed checkpoint, seen by ours' ``on_checkpoint`` hook in the
  checkpoint's directory (committed by a rename, so complete), and every file at the
  end (Tune deletes nothing, so its end state is all it wrote). A file is ``(device,
  inode, mtime)``: hard links to one blob count once, a new file reusing a deleted
  file's inode counts again.

Both include the experiment's records (journal, results, logs), which are small beside
the checkpoints; the "ckpt" column counts checkpoint files and blobs alone. Also shown:
the bytes held at the end of the workload (S3: listing the prefix; local: each inode
once).

**Latency** (ours against today; target <= 1.05x). *Save*: from the trainable's
``save_checkpoint`` start to the driver's ``on_checkpoint`` hook for that checkpoint
(written, hashed, stored, known to the driver), for every checkpoint of the workload
(all trials at once; Tune's the same way through ``Callback.on_checkpoint``, shown
without a target: Tune uploads inside the trainable's save, ours in the background) and
for the probe's saves (one trial alone). *Restore*: a probe after the workload, one more
trial restoring the workload's newest checkpoints one at a time with ``Trial.restore``
(from the call to its return: fetched, verified, loaded, training again), then saving
once it has trained a step. The probe's bytes are not counted. Tune has no call that
restores a running trial, so it has no probe.

Each run is a fresh child process with its own Ray (2 CPUs); systems are interleaved and
their order flips every repeat. Medians over repeats, [min-max] where there are several.

Usage::

    python -m benchmarks.bench_checkpoint_bytes                # full sizes, both layouts
    python -m benchmarks.bench_checkpoint_bytes --quick        # PBT, small sizes: 6 runs
    python -m benchmarks.bench_checkpoint_bytes --workloads pbt --storages s3 --repeat 3
    python -m benchmarks.bench_checkpoint_bytes --restore-only   # restores alone, no Ray

``--restore-only`` times restores (and saves) of the PBT model at the storage level,
ours and today's paired in time over ``--pairs`` rounds (``_ckpt_bytes_restore.py``).

Figures go to stdout and to ``benchmarks/out/checkpoint_bytes.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._ckpt_bytes_report import print_report, summarize
from ._core_common import settle, steal_seconds
from ._restore_common import AWS_ENV, BUCKET
from ._shared import end_process, wait_serving, write_figures
from ._sweep_common import OUT_DIR, run_child_module
from .bench_function_ckpt import _s3_usage
from .bench_restore import _empty_prefix, _free_port, _s3_client, parse_size

OUT = OUT_DIR / "checkpoint_bytes.json"
SYSTEMS = ("ours", "today", "tune")
WORKLOADS = ("pbt", "finetune")
#: The switch to today's full copies (issue 36's design).
DEDUP_ENV = "TRIALFLOW_CHECKPOINT_DEDUP"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_checkpoint_bytes", description=__doc__.split("\n\n")[0]
    )
    add = parser.add_argument
    add("--quick", action="store_true", help="PBT only, 4 trials, small models, layout one")
    add("--workloads", default=None, help="pbt,finetune (quick: pbt)")
    add("--storages", default="local,s3")
    add("--layouts", default=None, help="one,files (quick: one)")
    add("--systems", default=",".join(SYSTEMS))
    add("--trials", type=int, default=None, help="trials per workload (8; quick 4)")
    add("--pbt-iterations", type=int, default=None, help="PBT iterations (8; quick 4)")
    add("--ft-iterations", type=int, default=None, help="fine-tuning iterations (4; quick 3)")
    add("--interval", type=int, default=2, help="PBT perturbation interval (iterations)")
    add("--frozen", default=None, help="PBT frozen part (48M; quick 16M)")
    add("--head", default=None, help="PBT changing part (4M; quick 1M)")
    add("--base", default=None, help="fine-tuning base (64M; quick 16M)")
    add("--adapter", default=None, help="fine-tuning adapter (1M; quick 256K)")
    add("--step-s", type=float, default=None, help="seconds a step sleeps (0.5; quick 0.2)")
    add("--cpu", type=float, default=0.25, help="CPUs per trial")
    add("--restores", type=int, default=None, help="restores in the probe (6; quick 3)")
    add("--seed", type=int, default=0)
    add("--repeat", type=int, default=1, help="runs per system and cell")
    add("--cooldown", type=float, default=3.0, help="seconds of rest before each run")
    add("--rest-ratio", type=float, default=0.0, help="rest >= this x the previous run")
    add("--settle", type=float, default=20.0, help="most seconds to wait for a quiet machine")
    add("--timeout", type=float, default=1800, help="seconds per run")
    add("--out", type=Path, default=OUT)
    add("--restore-only", action="store_true", help="restores alone, no Ray (see above)")
    add("--pairs", type=int, default=None, help="restore-only: rounds (60; quick 20)")
    add("--checkpoints", type=int, default=None, help="restore-only: to restore (8; quick 4)")
    add(
        "--keepalive",
        action="store_true",
        help="restore-only: serve the S3 emulator with keep-alive connections (gunicorn)",
    )
    args = parser.parse_args(argv)
    q = args.quick
    args.trials = args.trials or (4 if q else 8)
    args.pbt_iterations = args.pbt_iterations or (4 if q else 8)
    args.ft_iterations = args.ft_iterations or (3 if q else 4)
    args.frozen = parse_size(args.frozen or ("16M" if q else "48M"))
    args.head = parse_size(args.head or ("1M" if q else "4M"))
    args.base = parse_size(args.base or ("16M" if q else "64M"))
    args.adapter = parse_size(args.adapter or ("256K" if q else "1M"))
    args.step_s = args.step_s if args.step_s is not None else (0.2 if q else 0.5)
    args.restores = args.restores if args.restores is not None else (3 if q else 6)
    args.layouts = _names(parser, args.layouts or ("one" if q else "one,files"), ("one", "files"))
    args.workloads = _names(parser, args.workloads or ("pbt" if q else "pbt,finetune"), WORKLOADS)
    args.storages = _names(parser, args.storages, ("local", "s3"))
    args.systems = _names(parser, args.systems, SYSTEMS)
    args.pairs = args.pairs or (20 if q else 60)
    args.checkpoints = args.checkpoints or (4 if q else 8)
    if args.repeat < 1 or args.trials < 2:
        parser.error("--repeat must be >= 1 and --trials >= 2")
    return args


def _names(parser: argparse.ArgumentParser, text: str, allowed: tuple[str, ...]) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = sorted(set(names) - set(allowed))
    if bad or not names:
        parser.error(f"unknown or no name(s) {bad} in {text!r}; choose from {allowed}")
    return names


# -- the S3 emulator, counting what it stores -------------------------------------------


@contextlib.contextmanager
def counting_moto(
    log_path: Path, request_log: Path | None = None, *, keepalive: bool = False
) -> Iterator[str]:
    """``_moto_counting.py`` on a free loopback port, with the benchmark's bucket; each
    object it stores is a line of ``log_path`` (each request it serves one of
    ``request_log``, if given). ``keepalive``: served by gunicorn, whose connections
    stay open between requests as S3's do, instead of moto's own werkzeug server,
    which closes each after one response."""

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    launcher = Path(__file__).with_name("_moto_counting.py")
    env = dict(os.environ, BENCH_MOTO_PUT_LOG=str(log_path))
    if request_log is not None:
        env["BENCH_MOTO_REQUEST_LOG"] = str(request_log)
    out = open(log_path.with_suffix(".out"), "wb")  # noqa: SIM115 - the server's output
    if keepalive:
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        cmd = [gunicorn, "-k", "gthread", "--threads", "16", "--keep-alive", "75"]
        cmd += ["--no-control-socket", "-b", f"127.0.0.1:{port}"]
        cmd += ["--chdir", str(launcher.parent), f"{launcher.stem}:app"]
    else:
        cmd = [sys.executable, str(launcher), "-H", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        # A loaded machine imports moto slowly.
        wait_serving(proc, url, 120, "the S3 emulator", out.name)
        _s3_client(url).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        end_process(proc)
        out.close()


def stored_since(
    log_path: Path, offset: int, prefix: str, before: float | None
) -> tuple[int, dict[str, int]]:
    """(new offset, the objects and bytes stored) from the emulator's log after
    ``offset``, for keys under ``prefix`` stored before ``before`` (the restore probe's
    start); a key stored twice counts twice."""
    from ._ckpt_bytes_common import is_checkpoint_path

    with open(log_path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    totals = {"objects_written": 0, "bytes_written": 0, "checkpoint_bytes_written": 0}
    start = f"{BUCKET}/{prefix}/"
    for line in data.decode().splitlines():
        t, key, size = line.split("\t")
        if not key.startswith(start) or (before is not None and float(t) >= before):
            continue
        totals["objects_written"] += 1
        totals["bytes_written"] += int(size)
        if is_checkpoint_path(key[len(start) :]):
            totals["checkpoint_bytes_written"] += int(size)
    return offset + len(data), totals


# -- the runs ----------------------------------------------------------------------------


def _model(
    args: argparse.Namespace, workload: str, layout: str, files: dict[str, str]
) -> dict[str, Any]:
    if workload == "pbt":
        return {
            "frozen_path": files["pbt"],
            "frozen_name": "backbone",
            "changing_name": "head",
            "changing_size": args.head,
            "layout": layout,
        }
    return {
        "frozen_path": files["finetune"],
        "frozen_name": "base",
        "changing_name": "adapter",
        "changing_size": args.adapter,
        "layout": layout,
    }


def _env(system: str) -> dict[str, str | None]:
    env: dict[str, str | None] = dict(AWS_ENV)
    env[DEDUP_ENV] = "0" if system == "today" else None
    return env


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.restore_only:
        from . import _ckpt_bytes_restore

        return _ckpt_bytes_restore.main(args)
    cells = [(w, lay, st) for w in args.workloads for lay in args.layouts for st in args.storages]
    total = len(cells) * len(args.systems) * args.repeat
    print(
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} "
        f"CPUs; {total} runs",
        flush=True,
    )
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-bytes-") as work:
        files = {
            "pbt": os.path.join(work, "backbone.bin"),
            "finetune": os.path.join(work, "base.bin"),
        }
        for name, size in (("pbt", args.frozen), ("finetune", args.base)):
            Path(files[name]).write_bytes(os.urandom(size))  # the shared pretrained weights
        log_path = Path(work, "stored.log")
        log_path.touch()
        with contextlib.ExitStack() as stack:
            url = stack.enter_context(counting_moto(log_path)) if "s3" in args.storages else ""
            runner = _Runner(args, total)
            offset = 0
            for attempt in range(args.repeat):
                for cell in cells:
                    order = args.systems if attempt % 2 == 0 else list(reversed(args.systems))
                    for system in order:
                        figures, offset = _run(
                            args, runner, cell, system, files, url, log_path, offset, work
                        )
                        figures["repeat"] = attempt
                        runs.append(figures)
                        _write(args, runs)
    print_report(args, summarize(args, runs))
    print(f"\nload average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"figures written to {args.out}")
    return 0 if all(r.get("ok") for r in runs) else 1


def _run(
    args: argparse.Namespace,
    runner: _Runner,
    cell: tuple[str, str, str],
    system: str,
    files: dict[str, str],
    url: str,
    log_path: Path,
    offset: int,
    work: str,
) -> tuple[dict[str, Any], int]:
    workload, layout, storage = cell
    run_dir = tempfile.mkdtemp(prefix=f"{system}-", dir=work)
    root, stamps = os.path.join(run_dir, "storage"), os.path.join(run_dir, "stamps")
    os.makedirs(root)
    os.makedirs(stamps)
    prefix = f"bytes-{uuid.uuid4().hex[:8]}"
    spec = {
        "system": system,
        "workload": workload,
        "storage": storage,
        "layout": layout,
        "model": _model(args, workload, layout, files),
        "trials": args.trials,
        "iterations": args.pbt_iterations if workload == "pbt" else args.ft_iterations,
        "interval": args.interval,
        "step_s": args.step_s,
        "cpu": args.cpu,
        "restores": args.restores,
        "seed": args.seed,
        "root": root,
        "stamp_dir": stamps,
        "prefix": prefix,
        "endpoint": url,
        "env": {**_env(system), "TRIALFLOW_BLOB_CACHE": os.path.join(run_dir, "node-blobs")},
    }
    label = f"{workload} {layout} {storage}: {system}"
    figures = runner.run("_ckpt_bytes_child", spec, label)
    if storage == "s3":
        offset, stored = stored_since(log_path, offset, prefix, figures.get("t_probe"))
        figures.update(stored)
        if "bytes_held" not in figures:  # ours lists it before its restore probe
            try:
                figures["objects_held"], figures["bytes_held"] = _s3_usage(url, prefix)
            except Exception as err:  # noqa: BLE001 - a figure, not the run
                figures["s3_error"] = repr(err)
        _empty_prefix(url, prefix)
    shutil.rmtree(run_dir, ignore_errors=True)
    if figures.get("ok"):
        print(
            f"    written {figures.get('bytes_written', 0) / (1 << 20):,.0f} MiB "
            f"(held {figures.get('bytes_held', 0) / (1 << 20):,.0f} MiB), "
            f"{figures.get('checkpoints_persisted')} checkpoints, "
            f"{figures.get('exploits')} exploits, run {figures.get('run_s', 0):.1f} s",
            flush=True,
        )
    return figures, offset


class _Runner:
    """Runs children one after another, resting ``--cooldown`` seconds (and at least
    ``--rest-ratio`` x the previous run) and then until the machine is quiet, for at
    most ``--settle`` seconds: on a machine others load, it may never be."""

    def __init__(self, args: argparse.Namespace, total: int) -> None:
        self.args, self.total, self.done, self.previous_s = args, total, 0, 0.0

    def run(self, module: str, spec: dict[str, Any], label: str) -> dict[str, Any]:
        self.done += 1
        print(f"[{self.done}/{self.total}] {label}...", end=" ", flush=True)
        rest = max(self.args.cooldown, self.args.rest_ratio * self.previous_s)
        busy = settle(cooldown=rest, timeout=self.args.settle)
        load = os.getloadavg()
        steal0 = steal_seconds()
        started = time.monotonic()
        figures = run_child_module(module, spec, self.args.timeout)
        self.previous_s = time.monotonic() - started
        figures.update(
            spec=spec,
            label=label,
            loadavg_before=list(load),
            busy_before=busy,
            steal_s=steal_seconds() - steal0,
            process_s=self.previous_s,
        )
        status = "ok" if figures.get("ok") else f"FAILED: {figures.get('error', '?')}"
        print(
            f"{status}; load before {load[0]:.1f}, steal {figures['steal_s']:.1f} s, "
            f"{self.previous_s:.1f} s",
            flush=True,
        )
        return figures


def _write(args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    write_figures(args.out, "checkpoint_bytes", vars(args), summarize(args, runs), runs)


if __name__ == "__main__":
    sys.exit(main())
