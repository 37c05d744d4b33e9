"""A sweep of distributed trials on a real 3-node cluster: 4 trials under ASHA, each a
``TorchTrainer`` of 2 workers (gloo on CPU, a linear model on synthetic data made here)
whose gang (Train's placement group, ``SPREAD``) may span nodes. Rank 0's metrics and
checkpoints arrive as each trial's results and checkpoints, persisted by the
experiment's storage and collected by its retention (on local storage: S3 is shown by
``tests/train/test_ray_train.py``); the ranks really communicate (an all-reduce); ASHA stops
trials early (its journaled decisions); and 4 gangs of 2 CPUs on a cluster that holds 3
(the head's 4 CPUs and two 1-CPU nodes, the trials' own actors asking for none) never
hang: no more gangs are placed at once than fit, trials waiting (for their gate, or for
their gang in Train) hold nothing and stall nobody, and all end TERMINATED. A trial
whose own actor holds CPUs is told to give them up (the callback's warning).

ASHA's decisions must not hang on timing: the best trial (``score`` 4) reports first,
because the others wait in their function, holding no gang, until the driver has its
first result (a hook opens their gate). The second trial to reach rung 1 is then below
the rung's cutoff whatever the order, so at least one trial stops there.

Every node of a ``cluster_utils`` cluster shares this machine's disk, so Train's own
storage (``RunConfig(storage_path)``, where it persists rank 0's checkpoints before the
trial copies them) is a ``tmp_path``; on a real cluster it must be a shared path or a
URI, as Ray Train itself asks.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray.train.torch")

from orchestrator import Orchestrator, Trial, TrialState  # noqa: E402
from orchestrator.schedulers import ASHA  # noqa: E402
from orchestrator.search import grid  # noqa: E402

from ..support.cluster import wait_until_dead  # noqa: E402
from ..support.journal_files import head_trials  # noqa: E402
from ..support.observe import wait_for  # noqa: E402
from ..support.train_gang import DRIVER, ON_HEAD, gang_trial, held  # noqa: E402
from ..support.train_runs import (  # noqa: E402
    TRAIN_TIMEOUT_S,
    report_epoch,
    saved_epoch,
    wait_gangs_released,
)
from ..support.trainables import Recorder, assert_failure_free_history  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

#: Two added nodes of 1 CPU beside the head's 4: three gangs of two 1-CPU workers fit.
NODE = {"num_cpus": 1, "object_store_memory": 96 * 1024**2}
GANGS_THAT_FIT = 3
SCORES = [4.0, 3.0, 2.0, 1.0]  # the best first; the others wait for its first result
EPOCHS = 4  # ASHA's max_t: rungs at epochs 1 and 2
#: Seconds a held trial waits for its gate before it fails (the best trial's first
#: result: a Train start-up and one epoch; 160 s on the loaded machine, at load 40).
GATE_TIMEOUT_S = float(TRAIN_TIMEOUT_S)


@pytest.fixture(scope="module")
def three_nodes(ray_cluster: Any) -> Iterator[list[Any]]:
    """The two 1-CPU nodes added to the session's head for this module (a node's start
    and its death being noticed cost seconds each: the module's tests share them; the
    node-loss test, last, takes one away)."""
    nodes = [ray_cluster.add_node(**NODE) for _ in range(2)]
    ray_cluster.wait_for_nodes()
    try:
        yield nodes
    finally:
        for node in nodes:
            if node in ray_cluster.worker_nodes:
                ray_cluster.remove_node(node, allow_graceful=True)
        wait_until_dead([node.node_id for node in nodes])


def sweep_loop(config: dict[str, Any]) -> None:
    """Each Train worker: DDP over a linear model, one small batch an epoch; the
    metric ASHA judges is the config's ``score``."""
    import ray.train
    import ray.train.torch
    import torch
    import torch.distributed as dist

    context = ray.train.get_context()
    rank = context.get_world_rank()
    torch.manual_seed(0)
    model = ray.train.torch.prepare_model(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(rank)
    inputs = torch.randn(16, 4, generator=data)
    targets = inputs @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    # The gang's nodes (Train's node rank goes by IP: every node here has the same).
    nodes: list[Any] = [None, None]
    dist.all_gather_object(nodes, ray.get_runtime_context().get_node_id())
    for epoch in range(config["epochs"]):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        ranks = torch.tensor([float(rank + 1)])
        dist.all_reduce(ranks)  # 1 + 2 with two workers
        metrics = {
            "epoch": epoch + 1,
            "score": config["score"],
            "loss": loss.item(),
            "ranks": ranks.item(),
            "nodes": len(set(nodes)),
        }
        state = {"epoch": epoch + 1, "model": model.module.state_dict()}
        report_epoch(metrics, state if rank == 0 else None)


def sweep_trial(config: dict[str, Any]) -> None:
    """The trial's function: a held trial waits for its gate (holding nothing: its
    actor asks for no CPU and it has no gang yet), then drives a 2-worker Train run."""
    import ray.train
    from ray.train.torch import TorchTrainer

    from orchestrator.integrations.ray_train import TrialReportCallback

    if config["score"] != config["best"]:
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not os.path.exists(config["gate"]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the gate {config['gate']} did not open")
            time.sleep(0.1)
    TorchTrainer(
        sweep_loop,
        train_loop_config=config,
        scaling_config=ray.train.ScalingConfig(num_workers=2, placement_strategy="SPREAD"),
        run_config=ray.train.RunConfig(
            storage_path=config["train_storage"],
            callbacks=[TrialReportCallback()],
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=1),
        ),
    ).fit()


class OpenGate:
    """Opens the held trials' gate once the driver has the best trial's first result."""

    def __init__(self, gate: Path, best: float) -> None:
        self.gate, self.best = gate, best

    async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
        if result.get("score") == self.best:
            self.gate.touch()


class GangWatch:
    """Counts the placement groups placed at once (a thread polling Ray's table): Train
    makes one per worker group and the engine makes none, so this is gangs."""

    def __init__(self) -> None:
        self.most_placed = 0
        self.waited = 0  # polls that saw a gang waiting while others were placed
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> GangWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        from ray.util import placement_group_table

        while not self._done.wait(0.2):
            states = [g["state"] for g in placement_group_table().values()]
            placed = states.count("CREATED")
            self.most_placed = max(self.most_placed, placed)
            if placed and "PENDING" in states:
                self.waited += 1


async def run_sweep(
    tmp_path: Path, storage: str, scores: list[float], **options: Any
) -> tuple[Any, GangWatch, list[dict[str, Any]]]:
    gate = tmp_path / "gate"
    config = {
        "score": grid(scores),
        "best": max(scores),
        "epochs": EPOCHS,
        "gate": str(gate),
        "train_storage": str(tmp_path / "train"),
    }
    with GangWatch() as watch:
        async with Orchestrator(
            storage=storage, name="gangs", hooks=[OpenGate(gate, max(scores))], **options
        ) as orch:
            result = await orch.sweep(
                sweep_trial,
                config,
                metric="score",
                mode="max",
                scheduler=ASHA(max_t=EPOCHS, grace_period=1, reduction_factor=2),
                resources={"cpu": 0},  # the trial's own function holds no CPU
                keep_checkpoints=1,
                max_concurrent_trials=len(scores),
            )
            await asyncio.sleep(0.5)  # background GC
    journal = orch_journal(storage)
    return result, watch, journal


def orch_journal(storage: str) -> list[dict[str, Any]]:
    return head_trials(Path(storage) / "gangs")


def assert_sweep(result: Any, watch: GangWatch, scores: list[float]) -> dict[float, Trial]:
    """What every variant shows; returns the trials by score."""
    trials = {t.config["score"]: t for t in result.trials}
    assert sorted(trials) == sorted(scores)
    for trial in trials.values():
        assert trial.state is TrialState.TERMINATED, trial.error
        assert trial.num_failures == 0
        epochs = [r["epoch"] for r in trial.results]
        assert epochs == list(range(1, len(epochs) + 1)), epochs  # rank 0's, in order
        assert [r["training_iteration"] for r in trial.results] == epochs
        assert all(r["ranks"] == 3.0 for r in trial.results)  # the all-reduce
        # Kept as asked: the newest only, the newest result's.
        assert [c.iteration for c in trial.checkpoints] == [len(epochs)], trial.checkpoints
    ends = {score: len(t.results) for score, t in trials.items()}
    assert ends[max(scores)] == EPOCHS, ends  # the best ran to max_t
    assert min(ends.values()) < EPOCHS, ends  # ASHA stopped some early
    assert any(r["nodes"] == 2 for t in trials.values() for r in t.results)  # spanned nodes
    assert watch.most_placed <= GANGS_THAT_FIT, watch.most_placed
    wait_gangs_released()
    return trials


@pytest.mark.timeout(TRAIN_TIMEOUT_S)
@pytest.mark.usefixtures("three_nodes")
async def test_an_asha_sweep_of_train_runs_on_local_storage(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    result, watch, journal = await run_sweep(tmp_path, str(runs), SCORES)
    trials = assert_sweep(result, watch, SCORES)
    for trial in trials.values():
        latest = trial.latest_checkpoint
        assert latest is not None and saved_epoch(latest.path) == len(trial.results)
        trial_dir = Path(latest.path).parent
        kept = sorted(p.name for p in trial_dir.iterdir() if p.name.startswith("checkpoint_"))
        assert kept == [Path(latest.path).name], kept  # the older ones collected
    # ASHA's decisions, as the journal records them: who stopped each trial, where.
    for trial, entry in zip(result.trials, journal, strict=True):
        events = [e for e in entry.get("events", []) if e["kind"] == "stop"]
        assert events == [
            {
                "kind": "stop",
                "iteration": len(trial.results),
                "by": "ASHA",
                "metric": "score",
                "value": trial.config["score"],
            }
        ], events


def builds_a_callback(config: dict[str, Any]) -> None:
    """A trial's function that builds the callback (no Train run) and reports what the
    callback logged."""
    import logging

    from orchestrator import report
    from orchestrator.integrations.ray_train import TrialReportCallback

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("orchestrator.integrations.ray_train")
    logger.addHandler(handler)
    try:
        TrialReportCallback()
    finally:
        logger.removeHandler(handler)
    report({"said": " | ".join(said)})


@pytest.mark.usefixtures("ray_local")
async def test_a_train_trial_holding_cpus_is_told_to_give_them_up(tmp_path: Path) -> None:
    """Trials whose actors hold the CPUs their gangs need wait for ever (Ray Tune's
    documented deadlock): the callback says so in the trial that holds some."""
    async with Orchestrator(storage=tmp_path, name="holding") as orch:
        holding = orch.add_trial(builds_a_callback, {}, resources={"cpu": 0.5})
        free = orch.add_trial(builds_a_callback, {}, resources={"cpu": 0})
        await orch.run()
    said = holding.results[0]["said"]
    assert f"trial {holding.id} holds {{'CPU': 0.5}}" in said, said
    assert "resources={'cpu': 0}" in said
    assert free.results[0]["said"] == ""


@pytest.mark.timeout(TRAIN_TIMEOUT_S)
async def test_a_lost_node_fails_the_gang_once_and_it_resumes_on_the_nodes_left(
    tmp_path: Path, ray_cluster: Any, three_nodes: list[Any]
) -> None:
    """A node holding one worker of a running gang is removed: Train's run fails once for
    the whole gang (Train's own ``FailureConfig(max_failures)`` stays 0), the trial fails
    once and restarts from its newest persisted checkpoint on the nodes left; another
    trial running meanwhile is untouched. The gang's two workers are on two nodes
    (``STRICT_SPREAD``); the trial's actor, and with it Train's controller, on the head,
    so the node lost holds a worker only. Last in the module: it takes a node away."""
    hold = str(tmp_path / "go")  # the gang waits there after 2 epochs, the other trial at 5
    marks = tmp_path / "marks"
    marks.mkdir()
    config = {
        "epochs": 4,
        "name": "gang",
        "holds": {"*": [2, hold]},
        "placement": "STRICT_SPREAD",
        "train_storage": str(tmp_path / "train"),
    }
    async with Orchestrator(storage=tmp_path / "runs", name="nodes", max_failures=3) as orch:
        trial = orch.add_trial(gang_trial, config, resources={**DRIVER, **ON_HEAD})
        other = orch.add_trial(
            Recorder,
            {"delay": 0.05, "hold_at": 5, "fast_after": hold, "marks": str(marks)},
            stop={"training_iteration": 20},
            checkpoint_every=5,
            resources={"cpu": 0.25, **ON_HEAD},
        )
        runner = asyncio.create_task(orch.run())

        def ready() -> bool:
            newest = trial.latest_checkpoint
            return (
                held(hold, "gang") == 2
                and newest is not None
                and newest.iteration == 2
                and other.iteration == 5
            )

        await wait_for(ready, timeout=TRAIN_TIMEOUT_S - 120)
        gang_nodes = trial.results[-1]["nodes"]
        assert len(set(gang_nodes)) == 2, gang_nodes
        doomed = next(node for node in three_nodes if node.node_id in gang_nodes)
        await asyncio.to_thread(ray_cluster.remove_node, doomed, False)
        await wait_for(lambda: trial.num_failures > 0, timeout=120)
        Path(hold).touch()
        await asyncio.wait_for(runner, timeout=300)

    assert trial.state is TrialState.TERMINATED, trial.error
    assert trial.num_failures == 1, trial.errors  # once for the gang, not once per worker
    epochs = [r["epoch"] for r in trial.results]
    assert epochs == [1, 2, 3, 4], epochs  # no gap, no repeat across the restart
    assert [r["training_iteration"] for r in trial.results] == epochs
    assert [r["start"] for r in trial.results] == [0, 0, 2, 2]  # from its newest checkpoint
    resumed_on = trial.results[2]["nodes"]
    assert len(set(resumed_on)) == 2 and doomed.node_id not in resumed_on, resumed_on
    assert all(r["ranks"] == 3.0 for r in trial.results)
    # The other trial went on through it all in its one process.
    assert other.state is TrialState.TERMINATED and other.num_failures == 0, other.errors
    assert_failure_free_history(other, 20)
    assert (marks / f"{other.id}.setups").read_text() == "x"
    assert len({r["pid"] for r in other.results}) == 1
    await asyncio.to_thread(wait_gangs_released)
