"""``trials_per_worker``: trials sharing one actor process. The placement rules are
checked on their own here; trials sharing processes that fail or are killed run on the
fake Ray (``tests/engine/test_failures.py``)."""

from __future__ import annotations

import pytest

from orchestrator import Orchestrator
from orchestrator.core.placement import Host, HostPool
from orchestrator.errors import ConfigError


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
