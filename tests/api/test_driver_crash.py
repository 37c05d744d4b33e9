"""A driver SIGKILLed together with the Ray it started, then resumed by a new process
on another Ray (the session's cluster, started once for every test: new node ids), on
local storage with default options: what a laptop user sees after a crash. Finished
trials are never run again; the others continue from their newest journaled checkpoint,
found on disk where the journal says."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.journal_format import JOURNAL_KEY

from ..support import REPO_ROOT
from ..support.drivers import kill_with_its_ray, read_journal
from ..support.processes import end_tree

ROOT = REPO_ROOT

COMMON = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.path.insert(0, {root!r})
    from orchestrator import Orchestrator
    from tests.support.trainables import Recorder, counting
    """
)

#: The first driver starts its own Ray (no address: a private local one). Its journal
#: interval is long, so only the urgent write of a trial's end can journal it in time.
FIRST = COMMON + textwrap.dedent(
    """
    async def main():
        async with Orchestrator(storage={storage!r}, name="crash", journal_interval=30,
                                num_cpus=2) as orch:
            orch.add_trial(Recorder, {{"delay": 0.3, "marks": {marks!r}}},
                           stop={{"training_iteration": 3}}, checkpoint_every=1,
                           resources={{"cpu": 0.25}}, trial_id="short")
            for i in range(3):
                # Slow until the test has killed this driver, then fast.
                orch.add_trial(Recorder, {{"delay": 0.1, "marks": {marks!r},
                                           "fast_after": {marks!r} + "/fast"}},
                               stop={{"training_iteration": 200}}, checkpoint_every=5,
                               resources={{"cpu": 0.25}}, trial_id=f"long{{i}}")
            orch.add_trial(counting, {{"delay": 0.1, "every": 5, "marks": {fn_marks!r},
                                       "fast_after": {marks!r} + "/fast"}},
                           stop={{"count": 200}}, resources={{"cpu": 0.25}}, trial_id="fn")
            await orch.run()
    asyncio.run(main())
    """
)

#: A first driver whose journal has no regular write after its first for two minutes
#: (``journal_interval``): only a trial's end and a checkpoint persisted can have the
#: journal written before the test kills it. Its hook notes both, as the driver learns
#: of them, in ``events``.
BOUND = COMMON + textwrap.dedent(
    """
    class Events:
        def on_trial_complete(self, trial):
            self.note(f"end {{trial.id}}")

        def on_checkpoint(self, trial, checkpoint):
            self.note(f"checkpoint {{trial.id}} {{checkpoint.iteration}}")

        def note(self, line):
            with open({events!r}, "a") as f:
                f.write(line + "\\n")

    async def main():
        async with Orchestrator(storage={storage!r}, name="crash", journal_interval=120,
                                num_cpus=2, hooks=[Events()]) as orch:
            orch.add_trial(Recorder, {{"delay": 0.2, "marks": {marks!r}}},
                           stop={{"training_iteration": 6}}, checkpoint_every=3,
                           resources={{"cpu": 0.25}}, trial_id="short")
            orch.add_trial(Recorder, {{"delay": 0.3, "marks": {marks!r},
                                       "fast_after": {marks!r} + "/fast"}},
                           stop={{"training_iteration": 400}}, checkpoint_every=2,
                           resources={{"cpu": 0.25}}, trial_id="long")
            await orch.run()
    asyncio.run(main())
    """
)

SECOND = COMMON + textwrap.dedent(
    """
    async def main():
        async with Orchestrator(storage={storage!r}, name="crash", resume=True,
                                ray_address={address!r}) as orch:
            before = {{t.id: t.state.value for t in orch.trials}}
            resumes_at = {{t.id: t.latest_checkpoint and t.latest_checkpoint.iteration
                          for t in orch.trials}}
            await orch.run()
        report = {{t.id: {{"before": before[t.id], "state": t.state.value,
                          "resumes_at": resumes_at[t.id],
                          "error": str(t.error), "results": t.results}} for t in orch.trials}}
        with open({report!r}, "w") as f:
            json.dump(report, f)
    asyncio.run(main())
    """
)


LONG = ("long0", "long1", "long2", "fn")


def whole_lines(path: Path) -> list[bytes]:
    """The lines of a JSON-lines log that parse (a kill may cut the last one)."""
    if not path.exists():
        return []
    lines = []
    for line in path.read_bytes().splitlines():
        try:
            json.loads(line)
        except ValueError:
            continue
        lines.append(line)
    return lines


def logged_past_journal(storage: Path, trials: dict[str, Any]) -> bool:
    """Whether a trial's result.json holds a row after its newest journaled checkpoint:
    the resume runs those steps again, and must keep the logged ones (issue 31)."""
    for trial_id in LONG:
        lines = whole_lines(storage / "crash" / trial_id / "result.json")
        saved = [c["iteration"] for c in trials.get(trial_id, {}).get("checkpoints", [])]
        if lines and json.loads(lines[-1])["training_iteration"] > max(saved, default=0):
            return True
    return False


async def resume_in_a_second_driver(
    storage: Path, report: Path, address: str, env: dict[str, str]
) -> dict[str, Any]:
    """Run ``SECOND`` (a new driver resuming the experiment on ``address``) to its end;
    the trials it reported, by id."""
    script = SECOND.format(
        root=str(ROOT), storage=str(storage), report=str(report), address=address
    )
    second = await asyncio.create_subprocess_exec(sys.executable, "-c", script, env=env, cwd=ROOT)
    try:
        assert await asyncio.wait_for(second.wait(), 240) == 0
    finally:
        await end_tree(second)
    return dict(json.loads(report.read_text()))


async def test_a_driver_killed_with_its_ray_resumes_in_a_new_process(
    tmp_path: Path, ray_cluster: Any
) -> None:
    marks, storage, report = tmp_path / "marks", tmp_path / "store", tmp_path / "report.json"
    fn_marks = tmp_path / "fn-marks"  # the function trial's
    marks.mkdir()
    fn_marks.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = FIRST.format(
        root=str(ROOT), storage=str(storage), marks=str(marks), fn_marks=str(fn_marks)
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=str(ROOT))
    journal = storage / "crash" / JOURNAL_KEY
    first_seen: float | None = None
    short_seen: float | None = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            assert proc.poll() is None, "the first driver ended before it could be killed"
            trials = read_journal(journal)
            if trials is None:
                continue
            first_seen = first_seen or time.monotonic()
            if short_seen is None and trials.get("short", {}).get("state") == "TERMINATED":
                # Journaled by the urgent write at its end: the next regular write
                # would come only 30 s after the first.
                short_seen = time.monotonic()
                assert short_seen - first_seen < 25
            # On a busy machine the short trial can end before the others' workers are
            # up; the kill must find every one of them running.
            started = (fn_marks / "runs").exists() and all(
                (marks / f"long{i}.setups").exists() for i in range(3)
            )
            if short_seen is not None and started and logged_past_journal(storage, trials):
                assert all(trials[t]["state"] != "TERMINATED" for t in ("long0", "long1", "fn"))
                break
        else:
            pytest.fail("the short trial's end never reached the journal, or a trial never started")
    finally:
        kill_with_its_ray(proc)
    (marks / "fast").touch()  # the long trials need not be slow any more
    logged = {t: whole_lines(storage / "crash" / t / "result.json") for t in LONG}

    trials = await resume_in_a_second_driver(storage, report, ray_cluster.address, env)
    assert set(trials) == {"short", "long0", "long1", "long2", "fn"}
    assert trials["short"]["before"] == "TERMINATED"
    assert (marks / "short.setups").read_text() == "x"  # ran no step after the kill
    finals = [("short", 3), ("long0", 200), ("long1", 200), ("long2", 200), ("fn", 200)]
    for trial_id, final in finals:
        trial = trials[trial_id]
        assert trial["state"] == "TERMINATED", trial["error"]
        its = [r["training_iteration"] for r in trial["results"]]
        assert its == list(range(1, final + 1)), (trial_id, its[-5:])
        assert all(r["count"] == r["training_iteration"] for r in trial["results"])
    for i in range(3):
        assert (marks / f"long{i}.setups").read_text() == "xx"  # one restart each
    # The function started once per driver, the second time from its newest checkpoint.
    starts = [line for line in (fn_marks / "runs").read_text().split() if line.startswith("start")]
    assert len(starts) == 2 and starts[0] == "start:0", starts
    resumed_from = int(starts[1].split(":")[1])
    assert resumed_from % 5 == 0
    assert all(r["resumed_from"] == resumed_from for r in trials["fn"]["results"][resumed_from:])
    # The logs lost no row (issue 31): each line the killed driver logged is in the new
    # result.json or in a copy the resume kept aside (the rows after the checkpoint a
    # trial restarted from, which it ran again).
    for trial_id, lines in logged.items():
        folder = storage / "crash" / trial_id
        now = set(whole_lines(folder / "result.json"))
        for kept in folder.glob("result.json.kept-*"):
            now.update(whole_lines(kept))
        assert [line for line in lines if line not in now] == [], trial_id


def notes(events: Path) -> list[list[str]]:
    """What the first driver's hook noted, in order: ``["end", trial]`` and
    ``["checkpoint", trial, iteration]``."""
    try:
        return [line.split() for line in events.read_text().splitlines()]
    except FileNotFoundError:
        return []


async def test_what_the_driver_knew_a_bound_before_its_death_is_kept(
    tmp_path: Path, ray_cluster: Any
) -> None:
    """With the journal's regular writes two minutes apart, the first driver learns that
    the short trial ended and, later, that the long one persisted a checkpoint: each
    reaches the journal within a generous minute (only the event can have asked for
    the write). The driver is killed as soon as the journal holds the checkpoint, then
    resumed: the short trial runs no step again and keeps its 6 results; the long one
    continues from that checkpoint or a newer one."""
    marks, storage, report = tmp_path / "marks", tmp_path / "store", tmp_path / "report.json"
    events = tmp_path / "events"
    marks.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = BOUND.format(
        root=str(ROOT), storage=str(storage), marks=str(marks), events=str(events)
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=str(ROOT))
    journal = storage / "crash" / JOURNAL_KEY

    async def until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := check()):
            assert proc.poll() is None, "the first driver ended before it could be killed"
            if time.monotonic() > deadline:
                held = {
                    tid: (t["state"], [c["iteration"] for c in t["checkpoints"]])
                    for tid, t in (read_journal(journal) or {}).items()
                }
                pytest.fail(f"{what} within {timeout:.0f} s (the journal holds {held})")
            await asyncio.sleep(0.05)
        return found

    def noted_checkpoint(events: Path) -> int:
        found = (int(n[2]) for n in notes(events) if n[:2] == ["checkpoint", "long"])
        return max(found, default=0)

    def long_checkpoints(trials: dict[str, Any] | None) -> list[int]:
        return [c["iteration"] for c in trials["long"]["checkpoints"]] if trials else []

    try:
        await until(lambda: ["end", "short"] in notes(events), "the short trial never ended", 180)
        trials = await until(
            lambda: (
                (t := read_journal(journal))
                and t.get("short", {}).get("state") == "TERMINATED"
                and t
            ),
            "the short trial's end was not journaled",
        )
        # A checkpoint the driver learns of after that write: only its own write can
        # journal it within the minute.
        after = max(long_checkpoints(trials), default=0)
        checkpoint = await until(
            lambda: (c := noted_checkpoint(events)) > after and c,
            "the long trial persisted no checkpoint",
        )
        await until(
            lambda: max(long_checkpoints(read_journal(journal)), default=0) >= checkpoint,
            f"the long trial's checkpoint {checkpoint} was not journaled",
        )
    finally:
        kill_with_its_ray(proc)
    (marks / "fast").touch()

    trials = await resume_in_a_second_driver(storage, report, ray_cluster.address, env)
    short, long = trials["short"], trials["long"]
    assert short["before"] == "TERMINATED"
    assert (marks / "short.setups").read_text() == "x"  # ran no step after the kill
    assert [r["training_iteration"] for r in short["results"]] == [1, 2, 3, 4, 5, 6]
    assert long["resumes_at"] >= checkpoint, (long["resumes_at"], checkpoint)
    assert long["state"] == "TERMINATED", long["error"]
    assert [r["training_iteration"] for r in long["results"]] == list(range(1, 401))
    assert (marks / "long.setups").read_text() == "xx"
