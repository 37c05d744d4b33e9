"""Small trainables and checks shared by the integration tests (importable by Ray workers)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator import Trainable, Trial
from storage import MANIFEST_NAME


def assert_failure_free_history(trial: Trial, final: int | None = None) -> None:
    """Results are 1..N (N = ``final`` when given) without gaps or repeats, and the
    counter's state matches: what a run without any failure would have recorded."""
    its = [r["training_iteration"] for r in trial.results]
    expected = list(range(1, (final if final is not None else len(its)) + 1))
    assert its == expected, (trial.id, its[-10:])
    assert all(r["count"] == r["training_iteration"] for r in trial.results)


def kill_worker(pid: int) -> None:
    """SIGKILL the Ray worker process ``pid`` (a trial's actor), as a crash would.

    Refuses any other process: a pid read from an old result may have been reused by
    then, and killing the test runner or a raylet by mistake ends the whole session
    without a word.
    """
    import psutil

    if pid in {os.getpid(), *(p.pid for p in psutil.Process().parents())}:
        raise AssertionError(f"refusing to kill pid {pid}: the test process or its parent")
    try:
        title = " ".join(psutil.Process(pid).cmdline())
    except psutil.NoSuchProcess:
        raise ProcessLookupError(pid) from None
    if not title:  # exiting: a zombie has no command line any more
        raise ProcessLookupError(pid)
    agent = title.startswith(("ray::DashboardAgent", "ray::RuntimeEnv"))
    if agent or not title.startswith("ray::"):
        raise AssertionError(f"refusing to kill pid {pid}: not a Ray worker ({title[:120]!r})")
    os.kill(pid, signal.SIGKILL)


class Counter(Trainable):
    """Counts steps; its state is the count, so a restore is easy to check.

    Config: ``delay`` (seconds per step; none once the file ``fast_after`` names
    exists), ``hold_at`` (after that many steps, wait until ``fast_after`` exists: a
    driver cannot finish the trial before its test lets it), ``fail_at`` (the step that
    raises), and
    ``padding_files`` (empty files added to each checkpoint: more than
    ``storage.local.SMALL_FILES`` make it too big to commit in place, so its node's
    persister uploads it).
    """

    def setup(self, config: dict[str, Any]) -> None:
        self.count = 0
        self.delay = float(config.get("delay", 0.0))
        self.fast_after = config.get("fast_after")
        self.fail_at = config.get("fail_at")

    def step(self) -> dict[str, Any]:
        if self.count == self.config.get("hold_at"):
            while not os.path.exists(self.fast_after):
                time.sleep(0.05)
        if self.delay and not (self.fast_after and os.path.exists(self.fast_after)):
            time.sleep(self.delay)
        self.count += 1
        if self.fail_at is not None and self.count == self.fail_at:
            raise RuntimeError(f"planned failure at {self.count}")
        return {"count": self.count, "score": float(self.count % 7)}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "state.json"), "w") as fh:
            json.dump({"count": self.count}, fh)
        for i in range(int(self.config.get("padding_files", 0))):
            open(os.path.join(checkpoint_dir, f"padding{i}"), "w").close()

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "state.json")) as fh:
            self.count = json.load(fh)["count"]


class SeesItsCheckpoints(Counter):
    """A Counter whose every step reports whether its previous iteration's checkpoint
    was already committed under ``config["trial_dir"]`` (saves every iteration)."""

    def step(self) -> dict[str, Any]:
        previous = os.path.join(self.config["trial_dir"], f"checkpoint_{self.count:06d}")
        committed = self.count == 0 or os.path.exists(os.path.join(previous, MANIFEST_NAME))
        return {**super().step(), "previous_committed": committed}


class AsyncCounter(Counter):
    """The same, with async methods."""

    async def setup(self, config: dict[str, Any]) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        super().setup(config)

    async def step(self) -> dict[str, Any]:  # type: ignore[override]
        await asyncio.sleep(self.delay)
        self.count += 1
        return {"count": self.count, "score": 0.0}


class BadStep(Counter):
    def step(self) -> Any:
        return 42


class BadSetup(Counter):
    def setup(self, config: dict[str, Any]) -> None:
        raise ValueError("setup refuses this config")


class BadLoad(Counter):
    def load_checkpoint(self, checkpoint_dir: str) -> None:
        raise OSError("cannot read checkpoint")


class NotATrainable:
    def step(self) -> dict[str, Any]:
        return {}


def pass_gate(gate: str | None, passes: int, trial_id: str) -> None:
    """Let ``passes`` trials through the gate directory ``gate``, hold any other until
    ``<gate>/open`` exists (after writing ``<gate>/<trial_id>.held``).

    A test that kills a driver mid-sweep gates the trials' first steps so that no more
    than ``passes`` can finish, and so that the sweep cannot end, before the kill, however
    fast or slow the machine. A pass is a file created exclusively, so two trials never
    take the same one."""
    if not gate or os.path.exists(os.path.join(gate, "open")):
        return
    for i in range(passes):
        try:
            os.close(os.open(os.path.join(gate, f"pass-{i}"), os.O_CREAT | os.O_EXCL))
            return
        except FileExistsError:
            continue
    open(os.path.join(gate, f"{trial_id}.held"), "w").close()
    while not os.path.exists(os.path.join(gate, "open")):
        time.sleep(0.05)


class Recorder(Counter):
    """A counter that reports its process id and notes every setup in a directory
    (``marks``); with ``fail_once_at`` its step raises there, the first time only; with
    ``gate`` (a directory), its step after ``gate_at`` steps (default 0: its first) waits
    at :func:`pass_gate` unless it is one of the first ``gate_passes`` (default 0)."""

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        marks = config.get("marks")
        if marks:
            with open(os.path.join(marks, f"{self.trial_id}.setups"), "a") as fh:
                fh.write("x")

    def step(self) -> dict[str, Any]:
        if self.count == int(self.config.get("gate_at", 0)):
            passes = int(self.config.get("gate_passes", 0))
            pass_gate(self.config.get("gate"), passes, self.trial_id)
        result = super().step()
        result["pid"] = os.getpid()
        fail_once_at = self.config.get("fail_once_at")
        if fail_once_at is not None and self.count == fail_once_at:
            flag = os.path.join(self.config["marks"], f"{self.trial_id}.failed")
            if not os.path.exists(flag):
                open(flag, "w").close()
                raise RuntimeError(f"planned one-off failure at {self.count}")
        return result


def setups(marks: Path) -> dict[str, str]:
    """Each trial's setups a :class:`Recorder` noted in ``marks``: one ``x`` a setup."""
    return {p.name.removesuffix(".setups"): p.read_text() for p in marks.glob("*.setups")}


class Tripwire(Counter):
    """A Counter whose process dies at step ``trip_at`` while the file ``tripwire``
    exists (it removes the file first, so once): a test arms the crash when it wants
    one, e.g. only after a rollback has taken the count below ``trip_at`` again."""

    def step(self) -> dict[str, Any]:
        result = super().step()
        wire = self.config.get("tripwire")
        if wire and self.count == self.config.get("trip_at"):
            try:
                os.remove(wire)
            except FileNotFoundError:
                return result
            self.crash()
        return result

    def crash(self) -> None:
        """End the worker process at once, as a crash does."""
        os._exit(1)


class Objective(Recorder):
    """A Recorder whose ``loss`` depends on its config (``x``, ``y``) and falls with
    training: ``(x - 0.3)^2 + (y + 0.2)^2 + 1 / iteration``. ``score`` is ``-loss``."""

    def step(self) -> dict[str, Any]:
        result = super().step()
        x, y = float(self.config.get("x", 0.0)), float(self.config.get("y", 0.0))
        loss = (x - 0.3) ** 2 + (y + 0.2) ** 2 + 1.0 / self.count
        result.update(loss=loss, score=-loss)
        return result


# -- function trainables (orchestrator.actor.function) ----------------------------------------


def counting(config: dict[str, Any]) -> None:
    """A training function that counts its reports; the count is its checkpointed state.

    Config: ``every`` (report a checkpoint every N reports; 0: never), ``epochs`` (then
    return; absent: go on until stopped), ``delay`` (seconds per report),
    ``fast_after`` (a path: no delay once it exists), ``padding_files`` (extra empty
    files per checkpoint), ``marks`` (a directory: each run appends
    ``start:<count restored>`` and, from its ``finally``, ``finally`` to
    ``<marks>/runs``), ``fail_once_at`` (the count that raises, the first time only),
    ``plateau`` (then results have ``acc = plateau * (1 - 0.9**count)``, :class:`Curve`'s
    learning curve), ``gate`` and ``gate_at`` (after that count, wait at
    :func:`pass_gate` until ``<gate>/open`` exists). Every result has ``count``, ``pid``
    and ``resumed_from``.
    """
    from orchestrator import get_checkpoint, report

    start = _restored_count(get_checkpoint())
    _note(config, f"start:{start}")
    try:
        fast_after = config.get("fast_after")
        for count in range(start + 1, int(config.get("epochs") or 10**9) + 1):
            if count - 1 == config.get("gate_at"):
                pass_gate(config["gate"], 0, str(os.getpid()))
            if not (fast_after and os.path.exists(fast_after)):
                time.sleep(float(config.get("delay", 0.0)))
            _maybe_fail(config, count)
            metrics: dict[str, Any] = {"count": count, "pid": os.getpid(), "resumed_from": start}
            if "plateau" in config:
                metrics["acc"] = float(config["plateau"]) * (1 - 0.9**count)
            every = int(config.get("every", 0))
            if every and count % every == 0:
                with tempfile.TemporaryDirectory() as d:
                    _write_state(d, count, int(config.get("padding_files", 0)))
                    report(metrics, checkpoint=d)
                    assert os.listdir(d) == [], "report() left the checkpoint's files here"
            else:
                report(metrics)
    finally:
        _note(config, "finally")


async def async_counting(config: dict[str, Any]) -> None:
    """:func:`counting` as an ``async def`` function (without marks or failures)."""
    from orchestrator import get_checkpoint, report

    start = _restored_count(get_checkpoint())
    for count in range(start + 1, int(config.get("epochs") or 10**9) + 1):
        await asyncio.sleep(float(config.get("delay", 0.0)))
        metrics = {"count": count, "pid": os.getpid(), "resumed_from": start}
        every = int(config.get("every", 0))
        if every and count % every == 0:
            with tempfile.TemporaryDirectory() as d:
                _write_state(d, count, 0)
                report(metrics, checkpoint=d)
        else:
            report(metrics)


def reports_a_list(config: dict[str, Any]) -> None:
    from orchestrator import report

    report([1, 2])  # type: ignore[arg-type]


def reports_a_missing_checkpoint(config: dict[str, Any]) -> None:
    from orchestrator import report

    report({"count": 1}, checkpoint=os.path.join(config["where"], "not-there"))


def never_reports(config: dict[str, Any]) -> None:
    return None


def _restored_count(checkpoint: str | None) -> int:
    if checkpoint is None:
        return 0
    with open(os.path.join(checkpoint, "state.json")) as fh:
        return int(json.load(fh)["count"])


def _write_state(directory: str, count: int, padding_files: int) -> None:
    with open(os.path.join(directory, "state.json"), "w") as fh:
        json.dump({"count": count}, fh)
    for i in range(padding_files):
        with open(os.path.join(directory, f"padding{i}"), "w") as fh:
            fh.write(f"{count}:{i}")


def _note(config: dict[str, Any], line: str) -> None:
    marks = config.get("marks")
    if marks:
        with open(os.path.join(marks, "runs"), "a") as fh:
            fh.write(line + "\n")


def _maybe_fail(config: dict[str, Any], count: int) -> None:
    if config.get("fail_once_at") == count:
        flag = os.path.join(config["marks"], "failed")
        if not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError(f"planned failure at {count}")


class Curve(Recorder):
    """A learning curve set by its config: ``acc`` at step t is
    ``plateau * (1 - 0.9**t)``, so a higher ``plateau`` is always better."""

    def step(self) -> dict[str, Any]:
        result = super().step()
        result["acc"] = float(self.config["plateau"]) * (1 - 0.9**self.count)
        return result


class Climber(Recorder):
    """PBT's toy: ``score`` grows by ``lr`` per step, so a higher ``lr`` wins; its state
    (the score) is checkpointed. ``reset_config`` takes a new ``lr`` in place."""

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        self.score = 0.0

    def step(self) -> dict[str, Any]:
        result = super().step()
        self.score += float(self.config["lr"])
        result.update(score=self.score, lr=self.config["lr"])
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        super().save_checkpoint(checkpoint_dir)
        with open(os.path.join(checkpoint_dir, "score.json"), "w") as fh:
            json.dump({"score": self.score}, fh)

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        super().load_checkpoint(checkpoint_dir)
        with open(os.path.join(checkpoint_dir, "score.json")) as fh:
            self.score = json.load(fh)["score"]

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return True


class StubbornClimber(Climber):
    """A Climber that cannot take a new config in place: a new actor takes it."""

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return False


class Announces(Counter):
    """A Counter that creates the file ``announce`` when it reaches step
    ``announce_at``: a test waits for that file, not for a guessed time, before it acts
    on a running trial."""

    def step(self) -> dict[str, Any]:
        result = super().step()
        if self.count == self.config.get("announce_at"):
            open(self.config["announce"], "w").close()
        return result


class StuckStep(Counter):
    """A step that never returns after ``stuck_after`` steps (it sleeps for days); each
    result carries the actor's ``pid``. Steps take ``delay`` seconds (default 0.05:
    longer than an adaptive slice, so each result reaches the driver on its own)."""

    def setup(self, config: dict[str, Any]) -> None:
        super().setup({"delay": 0.05, **config})
        self.stuck_after = int(config.get("stuck_after", 3))

    def step(self) -> dict[str, Any]:
        if self.count >= self.stuck_after:
            time.sleep(10**6)
        return {**super().step(), "pid": os.getpid()}
