"""The restore workloads under Ray Tune, same Ray (run in a child process).

Tune is used as documented: class ``Trainable``, ``Tuner`` with
``FailureConfig(max_failures=...)``; the faults are injected from a side thread of the
driver by SIGKILL of the trial actors' pids (reported in their results). Tune's
``Callback`` hooks give the driver-side times (``on_trial_recover``: failure detected,
``on_checkpoint``: checkpoint registered); the way back is timed by the same trainable
stamps as for the orchestrator (new actor set up, load started/ended, first step).
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
import traceback
from typing import Any

import ray
from ray import tune

from ._restore_common import (
    BUCKET,
    NUM_CPUS,
    Payload,
    first_after,
    read_stamps,
    s3_filesystem,
    victims_breakdown,
)
from ._restore_ours import _breakdown, _throughput_figures
from ._shared import init_private_ray


class TuneRestore(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        config = config.get("cfg", config)  # grid_search over whole configs nests them
        self.p = Payload(config)
        self.every = int(config.get("every", 0))
        self.trivial = bool(config.get("trivial", False))

    def step(self) -> dict[str, Any]:
        if self.trivial:
            return {"t": time.time()}
        result = self.p.step(self.iteration + 1)
        if self.every and (self.iteration + 1) % self.every == 0:
            result["should_checkpoint"] = True
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        self.p.save(checkpoint_dir, self.iteration)

    def load_checkpoint(self, checkpoint_dir: Any) -> None:
        self.p.load(checkpoint_dir)


class TuneClock(tune.Callback):
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.pids: dict[str, int] = {}
        self.tags: dict[str, str] = {}
        self.checkpoints: dict[str, list[tuple[float, int | None]]] = {}
        self.recovers: dict[str, list[float]] = {}
        self.healthy_t: list[float] = []
        self.results = 0

    # Tuner pickles its run config (for resuming); locks do not pickle, and nothing
    # but this process's driver ever uses the clock.
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Condition()

    def on_trial_result(
        self, iteration: int, trials: Any, trial: Any, result: dict, **info: Any
    ) -> None:
        with self.lock:
            self.results += 1
            # Tune adds "pid" to every result itself; only the victims report "i".
            if "i" in result:
                self.pids[trial.trial_id] = int(result["pid"])
                cfg = trial.config.get("cfg", trial.config)
                self.tags[trial.trial_id] = cfg.get("tag", "")
            elif "t" in result:
                self.healthy_t.append(float(result["t"]))
            self.lock.notify_all()

    def on_checkpoint(
        self, iteration: int, trials: Any, trial: Any, checkpoint: Any, **info: Any
    ) -> None:
        with self.lock:
            self.checkpoints.setdefault(trial.trial_id, []).append(
                (time.time(), self.pids.get(trial.trial_id))
            )
            self.lock.notify_all()

    def on_trial_recover(self, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        with self.lock:
            self.recovers.setdefault(trial.trial_id, []).append(time.time())
            self.lock.notify_all()

    def on_trial_error(self, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        self.on_trial_recover(iteration, trials, trial)

    def until(self, done: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"timed out waiting for Tune: {self.results} results, "
                        f"{len(self.healthy_t)} healthy, victims seen {len(self.pids)}, "
                        f"checkpointed {len(self.checkpoints)}, recovers {len(self.recovers)}"
                    )
                self.lock.wait(min(left, 0.2))


def _run_config(
    spec: dict[str, Any],
    tmp: str,
    clock: TuneClock,
    stop: threading.Event,
    max_failures: int,
    keep: int | None,
) -> tune.RunConfig:
    kwargs: dict[str, Any] = {}
    if spec["storage"] == "s3":
        kwargs["storage_path"] = f"{BUCKET}/{spec['prefix']}"
        kwargs["storage_filesystem"] = s3_filesystem(spec["endpoint"])
    else:
        kwargs["storage_path"] = os.path.join(tmp, "storage")
    return tune.RunConfig(
        name="restore",
        stop=_should_stop,
        failure_config=tune.FailureConfig(max_failures=max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=keep),
        callbacks=[clock],
        verbose=0,
        **kwargs,
    )


#: Set by the side thread when it is done; a module-level stopper pickles by reference.
STOP = threading.Event()


def _should_stop(trial_id: str, result: dict[str, Any]) -> bool:
    return STOP.is_set()


def _init_ray() -> None:
    init_private_ray(NUM_CPUS)


def _fit_with(
    side: Any, tuner: tune.Tuner, stop: threading.Event
) -> tuple[Any, BaseException | None]:
    """Run ``side()`` in a thread while ``tuner.fit()`` runs here; stop Tune after it."""
    failure: list[BaseException] = []

    def body() -> None:
        try:
            side()
        except BaseException as err:  # noqa: BLE001 - reported by the child
            traceback.print_exc()
            failure.append(err)
        finally:
            stop.set()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    grid = tuner.fit()
    thread.join(timeout=60)
    return grid, (failure[0] if failure else None)


def latency(spec: dict[str, Any]) -> dict[str, Any]:
    timeout = float(spec.get("timeout", 600))
    with tempfile.TemporaryDirectory(prefix="bench-restore-tune-") as tmp:
        stamp_dir = os.path.join(tmp, "stamps")
        os.makedirs(stamp_dir)
        _init_ray()
        clock = TuneClock()
        stop = STOP
        kills: list[dict[str, Any]] = []
        config = {
            "size": spec["size"],
            "stamp_dir": stamp_dir,
            "tag": "t0",
            "step_s": spec["step_s"],
            "every": spec["every"],
        }
        tuner = tune.Tuner(
            tune.with_resources(TuneRestore, {"cpu": 1}),
            param_space=config,
            tune_config=tune.TuneConfig(num_samples=1),
            run_config=_run_config(spec, tmp, clock, stop, spec["kills"] + 2, 1),
        )

        def side() -> None:
            killed: set[int] = set()
            for _ in range(spec["kills"]):
                # A checkpoint registered by the driver, taken by the live actor.
                clock.until(
                    lambda: any(
                        pid is not None and pid not in killed
                        for cps in clock.checkpoints.values()
                        for _, pid in cps
                    ),
                    timeout,
                )
                with clock.lock:
                    (trial_id,) = clock.pids
                    pid = clock.pids[trial_id]
                    n_recover = len(clock.recovers.get(trial_id, []))
                t_kill = time.time()
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
                deadline = time.monotonic() + timeout
                while first_after(read_stamps(stamp_dir, "t0"), "first_step", t_kill, pid) is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError("Tune did not bring the trial back")
                    time.sleep(0.01)
                with clock.lock:
                    recovers = clock.recovers.get(trial_id, [])
                    t_error = recovers[n_recover] if len(recovers) > n_recover else None
                kills.append({"t_kill": t_kill, "pid": pid, "t_error": t_error})

        grid, failure = _fit_with(side, tuner, stop)
        errors = sum(grid[i].error is not None for i in range(len(grid)))
        ray.shutdown()
        stamps = read_stamps(stamp_dir, "t0")
    for k in kills:
        k.update(_breakdown(stamps, k))
        # Tune has no "running again" hook: its first step on the new actor stands in.
        k["running_s"] = k.get("first_step_s")
        if k.get("t_error") is not None and k["running_s"] is not None:
            k["detect_to_running_s"] = k["t_kill"] + k["running_s"] - k["t_error"]
    return {
        "ok": failure is None and len(kills) == spec["kills"],
        "error": None if failure is None else repr(failure),
        "tune_errors": errors,
        "kills": kills,
    }


def throughput(spec: dict[str, Any]) -> dict[str, Any]:
    timeout = float(spec.get("timeout", 600))
    n_h, n_v = spec["healthy"], spec["victims"]
    with tempfile.TemporaryDirectory(prefix="bench-restore-tune-") as tmp:
        stamp_dir = os.path.join(tmp, "stamps")
        os.makedirs(stamp_dir)
        _init_ray()
        clock = TuneClock()
        stop = STOP
        configs = [{"trivial": True, "tag": f"h{i}"} for i in range(n_h)] + [
            {
                "size": spec["size"],
                "stamp_dir": stamp_dir,
                "tag": f"v{i}",
                "step_s": spec["step_s"],
                "every": spec["every"],
            }
            for i in range(n_v)
        ]
        tuner = tune.Tuner(
            tune.with_resources(TuneRestore, {"cpu": spec["cpu"]}),
            param_space={"cfg": tune.grid_search(configs)},
            tune_config=tune.TuneConfig(num_samples=1, max_concurrent_trials=n_h + n_v),
            run_config=_run_config(spec, tmp, clock, stop, 3, 1),
        )
        times: dict[str, Any] = {}

        def side() -> None:
            t0 = time.time()
            clock.until(
                lambda: len(clock.checkpoints) >= n_v and len(clock.healthy_t) >= n_h * 5,
                timeout,
            )
            times["t0"], times["t_ready"] = t0, time.time()
            time.sleep(spec["baseline_s"])
            with clock.lock:
                pids = {clock.tags[tid]: pid for tid, pid in clock.pids.items()}
            order = [f"v{i}" for i in range(n_v)]
            times["pids"] = [pids[tag] for tag in order]
            t_kill = time.time()
            for pid in times["pids"]:
                os.kill(pid, signal.SIGKILL)
            times["t_kill"] = t_kill
            deadline = time.monotonic() + timeout
            while True:
                firsts = [
                    first_after(read_stamps(stamp_dir, tag), "first_step", t_kill, pid)
                    for tag, pid in zip(order, times["pids"], strict=True)
                ]
                if all(firsts) or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            times["firsts"] = [f["t"] if f else None for f in firsts]
            times["victims"] = victims_breakdown(stamp_dir, order, times["pids"], t_kill)
            time.sleep(spec["post_s"])
            times["t_end"] = time.time()
            with clock.lock:
                times["stamps"] = list(clock.healthy_t)
                times["detect_s"] = sorted(r[-1] - t_kill for tid, r in clock.recovers.items())

        grid, failure = _fit_with(side, tuner, stop)
        errors = sum(grid[i].error is not None for i in range(len(grid)))
        ray.shutdown()
    if failure is not None or "t_end" not in times:
        return {"ok": False, "error": repr(failure)}
    figures = _throughput_figures(
        spec,
        stamps=times["stamps"],
        t0=times["t0"],
        t_ready=times["t_ready"],
        t_kill=times["t_kill"],
        firsts=times["firsts"],
        t_end=times["t_end"],
        extra={
            "tune_errors": errors,
            "detect_s": times["detect_s"],
            "victims": times["victims"],
        },
    )
    return figures
