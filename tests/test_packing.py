"""``trials_per_worker``: trials sharing one actor process. The placement rules are
checked on their own; the rest on real Ray, killing real processes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, TrialState
from orchestrator.core.placement import Host, HostPool
from orchestrator.errors import ConfigError

from .trainables import Recorder, assert_failure_free_history, kill_worker

# -- placement, without Ray ----------------------------------------------------------


class FakeActors:
    """Carries out placement plans as the executor does: one actor per new host."""

    def __init__(self, pool: HostPool) -> None:
        self.pool = pool
        self.made: list[tuple[dict[str, float], int]] = []

    def place(self, trial_ids: list[str], resources: dict[str, float]) -> list[Host]:
        plan = self.pool.place(trial_ids, resources)
        for host in plan.new:
            self.made.append((dict(host.resources), host.capacity))
            self.pool.created(host, f"actor{len(self.made)}")
        return plan.hosts


def test_trials_starting_together_are_spread_evenly_over_as_few_actors_as_allowed() -> None:
    actors = FakeActors(HostPool(10))
    hosts = actors.place([f"t{i}" for i in range(12)], {"cpu": 0.1})
    assert actors.made == [({"cpu": 0.1}, 6), ({"cpu": 0.1}, 6)]
    assert [h.actor for h in hosts] == ["actor1"] * 6 + ["actor2"] * 6
    assert hosts[0].members == {f"t{i}" for i in range(6)}


def test_a_plan_names_the_hosts_to_create_and_creates_nothing_itself() -> None:
    pool = HostPool(2)
    plan = pool.place(["a", "b", "c"], {"cpu": 1})
    assert [h.capacity for h in plan.new] == [2, 1]
    assert all(h.actor is None for h in plan.new)  # the executor creates them
    assert plan.hosts == [plan.new[0], plan.new[0], plan.new[1]]
    pool.failed(plan.new[1])  # its actor could not be created
    assert not plan.new[1].alive and plan.new[1].free == 0
    assert plan.new[1] not in pool.place(["d"], {"cpu": 1}).hosts


def test_one_trial_per_worker_never_shares() -> None:
    actors = FakeActors(HostPool(1))
    first = actors.place(["a", "b"], {"cpu": 1})
    assert len({h.actor for h in first}) == 2
    assert actors.pool.leave(first[0], "a") is True  # its only trial: retire it
    again = actors.place(["a"], {"cpu": 1})
    assert again[0].actor == "actor3"


def test_an_idle_host_kept_for_reuse_goes_to_the_next_trial_with_its_resources() -> None:
    actors = FakeActors(HostPool(1, keep_idle=True))
    (host,) = actors.place(["a"], {"cpu": 1})
    assert actors.pool.leave(host, "a") is False  # kept, idle
    assert host.idle and actors.pool.idle_hosts() == [host]
    assert actors.place(["b"], {"cpu": 2})[0] is not host  # other resources: a new one
    assert actors.place(["c"], {"cpu": 1})[0] is host  # reused: no process start
    assert actors.made == [({"cpu": 1}, 1), ({"cpu": 2}, 1)]
    actors.pool.leave(host, "c")
    assert actors.pool.take_idle() == [host] and not host.alive
    assert actors.place(["d"], {"cpu": 1})[0] is not host  # retired: never again


def test_a_freed_slot_is_reused_and_a_retired_or_dead_actor_never_is() -> None:
    actors = FakeActors(HostPool(3))
    pool = actors.pool
    hosts = actors.place(["a", "b", "c"], {"cpu": 0.5})
    host = hosts[0]
    assert pool.leave(host, "a") is False
    assert actors.place(["a"], {"cpu": 0.5})[0] is host  # e.g. a restart after an exception
    assert actors.place(["d"], {"cpu": 0.5})[0] is not host  # full: a new actor
    # Other resources never share an actor.
    assert actors.place(["e"], {"cpu": 1.0})[0].actor not in {host.actor}
    pool.mark_dead(host)
    pool.leave(host, "b")
    assert host.free == 0
    assert actors.place(["b"], {"cpu": 0.5})[0] is not host
    for trial in ("a", "c"):
        pool.leave(host, trial)
    assert not host.alive


def test_trials_per_worker_must_be_a_positive_int() -> None:
    with pytest.raises(ConfigError, match="trials_per_worker"):
        Orchestrator(trials_per_worker=0)


# -- on real Ray ---------------------------------------------------------------------


@pytest.mark.usefixtures("ray_local")
async def test_packed_trials_share_processes_and_a_failing_step_fails_only_its_trial(
    tmp_path: Path,
) -> None:
    final = 30
    async with Orchestrator(
        storage=tmp_path, name="packed", max_failures=1, trials_per_worker=3, failure_backoff=0
    ) as orch:
        trials = [
            orch.add_trial(
                Recorder,
                {"delay": 0.01, "marks": str(tmp_path), "fail_once_at": 12 if i == 0 else None},
                stop={"training_iteration": final},
                checkpoint_every=5,
                resources={"cpu": 0.2},
            )
            for i in range(6)
        ]
        await orch.run()
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, (trial.id, trial.error)
        assert_failure_free_history(trial, final)
    assert trials[0].num_failures == 1
    assert all(t.num_failures == 0 for t in trials[1:])
    pids = {r["pid"] for t in trials for r in t.results}
    assert len(pids) == 2  # six trials, three to a process
    # The failed trial came back into its own process (its slot was free): no new one.
    assert len({r["pid"] for r in trials[0].results}) == 1


@pytest.mark.usefixtures("ray_local")
async def test_killing_a_shared_process_restores_each_of_its_trials(tmp_path: Path) -> None:
    final = 40
    killed: list[int] = []

    class KillOnce:
        def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            if result["training_iteration"] == 15 and not killed:
                killed.append(result["pid"])
                kill_worker(result["pid"])

    async with Orchestrator(
        storage=tmp_path,
        name="packed-kill",
        max_failures=1,
        trials_per_worker=4,
        failure_backoff=0,
        hooks=[KillOnce()],
    ) as orch:
        trials = [
            orch.add_trial(
                Recorder,
                {"delay": 0.02},
                stop={"training_iteration": final},
                checkpoint_every=5,
                resources={"cpu": 0.25},
            )
            for _ in range(4)
        ]
        await asyncio.wait_for(orch.run(), 120)
    assert killed
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, (trial.id, trial.error)
        assert trial.num_failures == 1  # all four lived in the killed process
        assert_failure_free_history(trial, final)
    after = {r["pid"] for t in trials for r in t.results if r["pid"] != killed[0]}
    # They fail together and restart together, in one new process (two if Ray reported
    # the deaths in two batches), not one process each.
    assert 1 <= len(after) <= 2, after
