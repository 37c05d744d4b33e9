"""The restore workloads under trialflow's orchestrator (run in a child process).

``latency``: one trial with ``size``-byte checkpoints; after each persisted checkpoint
the driver SIGKILLs the actor and times the way back, by hooks (``on_trial_error``:
failure detected; ``on_trial_restore``: restored and RUNNING) and by the trainable's
own stamps (new actor set up, load started/ended, first step).

``throughput``: ``healthy`` trivial trials run beside ``victims`` trials with
``size``-byte checkpoints; once every victim has a checkpoint, and after a baseline
window, all victims are killed at the same moment. The healthy trials' result rate
while the victims restore is compared with their rate just before.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import signal
import tempfile
import time
from typing import Any

from orchestrator import Orchestrator, Trainable

from ._restore_common import (
    AWS_ENV,
    BUCKET,
    NUM_CPUS,
    Payload,
    first_after,
    rate_in,
    read_stamps,
    victims_breakdown,
)


def _sweep_scratch(trial_ids: list[str]) -> int:
    """Remove the actors' node-local scratch dirs that outlived them (a SIGKILLed actor
    cleans nothing up); return how many bytes they held."""
    leaked = 0
    scratch = os.path.join(tempfile.gettempdir(), "trialflow", "*")  # one dir per host
    for trial_id in trial_ids:
        for path in glob.glob(os.path.join(scratch, f"{trial_id}-g*")):
            for root, _, files in os.walk(path):
                for name in files:
                    with contextlib.suppress(OSError):
                        leaked += os.path.getsize(os.path.join(root, name))
            shutil.rmtree(path, ignore_errors=True)
    return leaked


class RestoreTrainable(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.p = Payload(config)

    def step(self) -> dict[str, Any]:
        return self.p.step(self.iteration + 1)

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        self.p.save(checkpoint_dir, self.iteration)

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        self.p.load(checkpoint_dir)


class Trivial(Trainable):
    def step(self) -> dict[str, Any]:
        return {"t": time.time()}


class Clock:
    """Hooks that timestamp what the experiment goes through (async: on the loop)."""

    def __init__(self) -> None:
        self.errors: dict[str, list[float]] = {}
        self.restores: dict[str, list[tuple[float, int]]] = {}
        self.checkpoints: dict[str, int] = {}
        self.changed = asyncio.Event()

    async def on_trial_error(self, trial: Any, error: BaseException) -> None:
        self.errors.setdefault(trial.id, []).append(time.time())
        self.changed.set()

    async def on_trial_restore(self, trial: Any, checkpoint: Any) -> None:
        self.restores.setdefault(trial.id, []).append((time.time(), checkpoint.iteration))
        self.changed.set()

    async def on_checkpoint(self, trial: Any, checkpoint: Any) -> None:
        self.checkpoints[trial.id] = max(self.checkpoints.get(trial.id, 0), checkpoint.iteration)
        self.changed.set()

    async def until(self, done: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out waiting for the experiment")
            try:
                await asyncio.wait_for(self.changed.wait(), min(left, 0.5))
            except asyncio.TimeoutError:
                pass


def _storage(spec: dict[str, Any], tmp: str) -> dict[str, Any]:
    if spec["storage"] == "s3":
        return {
            "storage": f"s3://{BUCKET}/{spec['prefix']}",
            "storage_options": {"endpoint_url": spec["endpoint"]},
            "runtime_env": {"env_vars": dict(AWS_ENV)},
        }
    return {"storage": os.path.join(tmp, "storage")}


async def latency(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["storage"] == "s3":
        os.environ.update(AWS_ENV)
    timeout = float(spec.get("timeout", 600))
    with tempfile.TemporaryDirectory(prefix="bench-restore-ours-") as tmp:
        stamp_dir = os.path.join(tmp, "stamps")
        os.makedirs(stamp_dir)
        clock = Clock()
        orch = Orchestrator(
            name="restore",
            max_failures=spec["kills"] + 2,
            keep_checkpoints=1,
            hooks=[clock],
            num_cpus=NUM_CPUS,
            log_to_driver=False,
            **_storage(spec, tmp),
        )
        kills: list[dict[str, Any]] = []
        async with orch:
            trial = orch.add_trial(
                RestoreTrainable,
                config={
                    "size": spec["size"],
                    "stamp_dir": stamp_dir,
                    "tag": "t0",
                    "step_s": spec["step_s"],
                },
                checkpoint_every=spec["every"],
                resources={"cpu": 1},
            )
            runner = asyncio.create_task(orch.run())
            restored_at = 0
            killed: set[int] = set()
            for _ in range(spec["kills"]):
                # A checkpoint newer than the one last restored, taken by the live actor.
                await clock.until(
                    lambda restored_at=restored_at: (
                        clock.checkpoints.get(trial.id, 0) > restored_at
                        and trial.last_result is not None
                        and trial.last_result["pid"] not in killed
                    ),
                    timeout,
                )
                assert trial.last_result is not None
                pid = int(trial.last_result["pid"])
                n_restores = len(clock.restores.get(trial.id, []))
                t_kill = time.time()
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
                await clock.until(
                    lambda n=n_restores: len(clock.restores.get(trial.id, [])) > n, timeout
                )
                t_restored, restored_at = clock.restores[trial.id][-1]
                t_error = clock.errors[trial.id][-1]
                kills.append(
                    {"t_kill": t_kill, "pid": pid, "t_error": t_error, "t_restored": t_restored}
                )
            # Let the first step after the last restore be stamped, then wrap up.
            await clock.until(
                lambda: trial.last_result is not None and trial.last_result["pid"] not in killed,
                timeout,
            )
            state = trial.state.value
            runner.cancel()
        stamps = read_stamps(stamp_dir, "t0")
    leaked = _sweep_scratch([trial.id])
    for k in kills:
        k.update(_breakdown(stamps, k))
    return {"ok": True, "state": state, "kills": kills, "scratch_leaked_bytes": leaked}


def _breakdown(stamps: list[dict[str, Any]], k: dict[str, Any]) -> dict[str, Any]:
    """Seconds from the kill to each step of the way back (stamps of the new actor)."""
    t = k["t_kill"]
    out: dict[str, Any] = {}
    for ev in ("setup", "load_start", "load_end", "first_step"):
        s = first_after(stamps, ev, t, not_pid=k["pid"])
        out[f"{ev}_s"] = None if s is None else s["t"] - t
    if "t_error" in k and k["t_error"] is not None:
        out["detect_s"] = k["t_error"] - t
    if "t_restored" in k and k["t_restored"] is not None:
        out["running_s"] = k["t_restored"] - t
        out["detect_to_running_s"] = k["t_restored"] - k["t_error"]
    return out


async def throughput(spec: dict[str, Any]) -> dict[str, Any]:
    timeout = float(spec.get("timeout", 600))
    with tempfile.TemporaryDirectory(prefix="bench-restore-ours-") as tmp:
        stamp_dir = os.path.join(tmp, "stamps")
        os.makedirs(stamp_dir)
        clock = Clock()
        orch = Orchestrator(
            name="restore-tp",
            max_failures=3,
            keep_checkpoints=1,
            hooks=[clock],
            num_cpus=NUM_CPUS,
            log_to_driver=False,
            **_storage(spec, tmp),
        )
        async with orch:
            healthy = [
                orch.add_trial(Trivial, resources={"cpu": spec["cpu"]})
                for _ in range(spec["healthy"])
            ]
            victims = [
                orch.add_trial(
                    RestoreTrainable,
                    config={
                        "size": spec["size"],
                        "stamp_dir": stamp_dir,
                        "tag": f"v{i}",
                        "step_s": spec["step_s"],
                    },
                    checkpoint_every=spec["every"],
                    resources={"cpu": spec["cpu"]},
                )
                for i in range(spec["victims"])
            ]
            t0 = time.time()
            runner = asyncio.create_task(orch.run())
            await clock.until(
                lambda: (
                    all(v.id in clock.checkpoints for v in victims)
                    and all(h.last_result is not None for h in healthy)
                ),
                timeout,
            )
            t_ready = time.time()
            await asyncio.sleep(spec["baseline_s"])
            pids = [int(v.last_result["pid"]) for v in victims]  # type: ignore[index]
            t_kill = time.time()
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            await clock.until(lambda: all(v.id in clock.restores for v in victims), timeout)
            t_hooks = time.time()
            # The window ends when the last victim has stepped again on its new actor.
            deadline = time.monotonic() + timeout
            while True:
                firsts = [
                    first_after(read_stamps(stamp_dir, f"v{i}"), "first_step", t_kill, pid)
                    for i, pid in enumerate(pids)
                ]
                if all(firsts) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(spec["post_s"])
            t_end = time.time()
            states = sorted({t.state.value for t in orch.trials})
            stamps = [t for h in healthy for t in (r["t"] for r in h.results)]
            steps = victims_breakdown(stamp_dir, [f"v{i}" for i in range(len(pids))], pids, t_kill)
            runner.cancel()
    leaked = _sweep_scratch([v.id for v in victims])
    return _throughput_figures(
        spec,
        stamps=stamps,
        t0=t0,
        t_ready=t_ready,
        t_kill=t_kill,
        firsts=[f["t"] if f else None for f in firsts],
        t_end=t_end,
        extra={
            "states": states,
            "restored_hooks_s": t_hooks - t_kill,
            "scratch_leaked_bytes": leaked,
            "victims": steps,
            "detect_s": sorted(
                clock.errors[v.id][-1] - t_kill for v in victims if v.id in clock.errors
            ),
        },
    )


def _throughput_figures(
    spec: dict[str, Any],
    *,
    stamps: list[float],
    t0: float,
    t_ready: float,
    t_kill: float,
    firsts: list[float | None],
    t_end: float,
    extra: dict[str, Any],
) -> dict[str, Any]:
    done = [f for f in firsts if f is not None]
    ok = len(done) == len(firsts)
    t_back = max(done) if done else t_end
    base = rate_in(stamps, t_kill - spec["baseline_s"], t_kill)
    during = rate_in(stamps, t_kill, t_back)
    after = rate_in(stamps, t_back, t_end)
    return {
        "ok": ok,
        "ready_s": t_ready - t0,
        "restore_window_s": t_back - t_kill,
        "victim_back_s": sorted(f - t_kill for f in done),
        "baseline_rate": base,
        "restore_rate": during,
        "after_rate": after,
        "fraction": during / base if during is not None and base else None,
        # The same against the window after the restores (the machine's load drifts).
        "fraction_vs_after": during / after if during is not None and after else None,
        **extra,
    }
