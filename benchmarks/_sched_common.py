"""The dynamics ``bench_schedulers`` gives both systems' trainables, and its event log.

Both systems' trainables call the functions here, so their trials behave identically:

* ASHA: trial ``i`` follows a known learning curve, ``value(t) = plateau * (1 -
  exp(-rate * t))`` (mode max), with ``(rate, plateau)`` the ``i``-th of a list drawn
  once, from a fixed seed, by the parent (:func:`asha_curves`); its true final value is
  ``value(max_t)``.
* PBT: the toy problem of Ray's ``tune/examples/pbt_example.py``
  (``PBTBenchmarkExample``), step for step (:func:`pbt_toy_step`).
* Every PBT trainable appends one line per event (``setup``, ``reset``, ``load``,
  ``result``) to a log file of its process: ``trial_id event iteration time.time()
  [source]``, ``source`` (for a ``load``) being the trial that saved the checkpoint.
  :func:`exploit_latencies` reads them back: an exploit is a ``load`` of another
  trial's checkpoint; its latency is from the trial's last result before the load (the
  result on which PBT decided) to its first result after it. A ``load`` of the trial's
  own checkpoint is no exploit (Ray Tune's PBT pauses trials at a boundary while
  another is paused, and resumes them from their own checkpoints): those are counted.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

MAX_T, GRACE, RF = 81, 1, 3


def asha_curves(n: int, seed: int) -> list[list[float]]:
    """``n`` learning curves ``[rate, plateau]``: rate log-uniform in [0.005, 0.5] (slow
    starters that end high exist, and fast ones that end low), plateau uniform in [0, 1]."""
    rng = random.Random(seed)
    lo, hi = math.log(0.005), math.log(0.5)
    return [[math.exp(rng.uniform(lo, hi)), rng.uniform(0.0, 1.0)] for _ in range(n)]


def curve_value(curve: Sequence[float], t: float) -> float:
    rate, plateau = curve
    return plateau * (1.0 - math.exp(-rate * t))


def true_rank(curves: Sequence[Sequence[float]], index: int, max_t: float = MAX_T) -> int:
    """1 + how many trials end truly better at ``max_t`` than trial ``index`` (1: best)."""
    finals = [curve_value(c, max_t) for c in curves]
    return 1 + sum(1 for v in finals if v > finals[index])


def pbt_toy_step(
    accuracy: float,
    lr: float,
    uniform: Callable[[], float] | None = None,
    normal: Callable[[], float] | None = None,
) -> tuple[float, dict[str, Any]]:
    """One step of ``PBTBenchmarkExample``: the new accuracy and the step's metrics.

    The accuracy rises fastest at the optimal lr, a triangle wave in the accuracy
    (0.001 at 0, 0.01 at 100, 0.001 at 200); an lr more than 3x off the optimum lowers
    it; Gaussian noise (sd 2) is added. Unseeded, as in the example (``random.random``
    and ``np.random.normal``), unless ``uniform`` and ``normal`` (a standard normal)
    are given: ``sim_pbt`` seeds its own.
    """
    if uniform is None:
        uniform = random.random
    if normal is None:
        import numpy as np

        normal = np.random.normal

    midpoint, q_tolerance, noise_level = 100, 3, 2
    if accuracy < midpoint:
        optimal_lr = 0.01 * accuracy / midpoint
    else:
        optimal_lr = 0.01 - 0.01 * (accuracy - midpoint) / midpoint
    optimal_lr = min(0.01, max(0.001, optimal_lr))
    q_err = max(lr, optimal_lr) / min(lr, optimal_lr)
    if q_err < q_tolerance:
        accuracy += (1.0 / q_err) * uniform()
    elif lr > optimal_lr:
        accuracy -= (q_err - q_tolerance) * uniform()
    accuracy += noise_level * normal()
    accuracy = max(0, accuracy)
    metrics = {
        "mean_accuracy": accuracy,
        "cur_lr": lr,
        "optimal_lr": optimal_lr,
        "q_err": q_err,
        "done": accuracy > midpoint * 2,
    }
    return accuracy, metrics


class EventLog:
    """One process's event log in ``log_dir`` (line-buffered appends: microseconds)."""

    _files: dict[str, Any] = {}

    @classmethod
    def write(
        cls, log_dir: str, trial_id: str, event: str, iteration: int, source: str = ""
    ) -> None:
        t = time.time()
        fh = cls._files.get(log_dir)
        if fh is None:
            fh = open(os.path.join(log_dir, f"{os.getpid()}.log"), "a", buffering=1)
            cls._files[log_dir] = fh
        fh.write(f"{trial_id} {event} {iteration} {t:.6f} {source}".rstrip() + "\n")


Event = tuple[float, str, int, str]  # (t, event, iteration, source)


def read_events(log_dir: str) -> dict[str, list[Event]]:
    """Every trial's events, oldest first."""
    events: dict[str, list[Event]] = {}
    for name in os.listdir(log_dir):
        with open(os.path.join(log_dir, name)) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) in (4, 5):
                    trial, event, iteration, t = parts[:4]
                    source = parts[4] if len(parts) == 5 else ""
                    entry = (float(t), event, int(iteration), source)
                    events.setdefault(trial, []).append(entry)
    for trial_events in events.values():
        trial_events.sort()
    return events


def exploit_latencies(log_dir: str) -> tuple[list[dict[str, Any]], int]:
    """One entry per exploit, and how many loads were of the trial's own checkpoint.

    An entry has ``latency_s`` (the trial's last result before the load to its first
    after it), split into ``to_load_s`` and ``load_to_result_s``; ``config_to_load_s``
    is the part of ``to_load_s`` from ``reset_config`` (or a new actor's ``setup``) to
    ``load_checkpoint`` (fetching the checkpoint, mostly); ``path`` is ``reset`` when
    the trial's actor took the new config by ``reset_config``, ``new actor`` when a
    fresh trainable was set up for it, else ``-``; ``rollback`` is True when the
    donor's checkpoint is older than the trial's last result."""
    out = []
    own = 0
    for trial, events in read_events(log_dir).items():
        last: tuple[float, int] | None = None
        pending: dict[str, Any] | None = None
        path, t_config = "-", None
        for t, event, iteration, source in events:
            if event == "result":
                if pending is not None:
                    pending.update(
                        iteration_after=iteration,
                        rollback=iteration - 1 < pending["iteration_before"],
                        latency_s=t - pending["t_before"],
                        load_to_result_s=t - pending["t_load"],
                    )
                    out.append(pending)
                    pending = None
                last, path, t_config = (t, iteration), "-", None
            elif event in ("reset", "setup"):
                path = "reset" if event == "reset" else "new actor"
                t_config = t
            elif event == "load" and source == trial:
                own += 1
            elif event == "load" and last is not None and pending is None:
                pending = {
                    "trial": trial,
                    "donor": source,
                    "t_before": last[0],
                    "iteration_before": last[1],
                    "t_load": t,
                    "to_load_s": t - last[0],
                    "config_to_load_s": None if t_config is None else t - t_config,
                    "path": path,
                }
    return out, own
