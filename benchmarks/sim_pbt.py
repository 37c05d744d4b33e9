"""PBT on the ``pbt_example`` toy, simulated without Ray: our PBT against Ray Tune's rules.

Why this exists: the toy is so noisy that the real benchmark (``bench_schedulers --only
pbt``) needs some 20 runs a side to see a 15% change in the median best score, at half a
minute a Tune run. Here the real, sans-IO :class:`orchestrator.schedulers.PBT` decides
for a simulated population of 8 trials x 200 steps (the same toy steps,
``_sched_common.pbt_toy_step``, seeded), and so does :class:`TuneRules`, Ray Tune's
asynchronous PBT rules re-implemented from ``ray/tune/schedulers/pbt.py``, under the
same timing: 200 seeded runs a variant in seconds.

The timing model, in units of one step: the trials start spread uniformly over
``start_spread`` steps (worker start-up), each with its own speed and a jitter per
step; a checkpoint is taken at every boundary and persists ``persist_delay`` later; an
exploit restarts the trial ``restart`` later. Decisions are instantaneous and exact (a
trial waits at its decision points, as in the engine). Not modelled: result buffering,
driver overhead, and Tune's pause of a trial at a boundary while another is paused (a
variant with it moved Tune's figure by 2).

A lens, not the benchmark: the README's figures are bench_schedulers'. The two agree on
the direction of every change tried, not on levels (real Tune scored above its
simulation). Wall time here is in steps.

Usage::

    python -m benchmarks.sim_pbt                        # ours and tune, 200 seeds each
    python -m benchmarks.sim_pbt ours ours:max_lead=0 ours:synch=True tune --runs 300
"""

from __future__ import annotations

import argparse
import ast
import heapq
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.schedulers import (
    PBT,
    Continue,
    Decision,
    Exploit,
    Hold,
    Pause,
    Resume,
    Scheduler,
    Stop,
    TrialInfo,
)
from orchestrator.schedulers.mutations import mutate
from orchestrator.search import uniform

from ._sched_common import pbt_toy_step

TRIALS, ITERATIONS, INTERVAL = 8, 200, 20
METRIC = "mean_accuracy"
START_CONFIG = {"lr": 0.0001, "some_other_factor": 1}
MUTATIONS = {"lr": uniform(0.0001, 0.02), "some_other_factor": [1, 2]}


@dataclass(frozen=True)
class Timing:
    start_spread: float = 45.0  # ours on 2 cores: 0.6 s of worker start-up, 13 ms steps
    speed_spread: float = 0.2  # each trial's speed factor: exp(uniform(-s, s))
    jitter: float = 0.3  # each step's duration: speed * exp(normal(0, jitter))
    persist_delay: float = 3.0
    restart: float = 2.5  # ours with reset_config: 35 ms


@dataclass(frozen=True)
class SimCheckpoint:
    trial_id: str
    iteration: int
    accuracy: float

    @property
    def metrics(self) -> dict[str, Any]:
        return {"training_iteration": self.iteration, METRIC: self.accuracy}


@dataclass
class SimTrial:
    trial_id: str
    speed: float
    config: dict[str, Any] = field(default_factory=lambda: dict(START_CONFIG))
    accuracy: float = 0.0
    iteration: int = 0
    state: str = "RUNNING"
    checkpoint: SimCheckpoint | None = None
    last_result: dict[str, Any] | None = None
    held: bool = False
    generation: int = 0  # bumped to cancel the step in flight

    def info(self) -> TrialInfo:
        return TrialInfo(
            self.trial_id,
            self.config,
            self.state,
            self.iteration,
            self.last_result,
            self.checkpoint,
        )


@dataclass(frozen=True)
class Outcome:
    best: float  # the best final accuracy
    exploits: int
    wall: float  # steps until the last trial ended


class Simulation:
    """One run: a population, an event queue, and the scheduler's decisions carried out."""

    def __init__(self, scheduler: Scheduler, seed: int, timing: Timing) -> None:
        self.scheduler, self.timing = scheduler, timing
        self.rng = random.Random(seed * 7919 + 1)
        spread = timing.speed_spread
        self.trials = {
            f"t{i}": SimTrial(f"t{i}", math.exp(self.rng.uniform(-spread, spread)))
            for i in range(TRIALS)
        }
        self.queue: list[tuple[float, int, str, str, Any]] = []
        self.seq = 0
        self.exploits = 0
        for trial in self.trials.values():
            self._step_at(self.rng.uniform(0, timing.start_spread), trial)

    def _push(self, at: float, kind: str, trial_id: str, payload: Any) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (at, self.seq, kind, trial_id, payload))

    def _step_at(self, at: float, trial: SimTrial) -> None:
        duration = trial.speed * math.exp(self.rng.gauss(0, self.timing.jitter))
        self._push(at + duration, "step", trial.trial_id, trial.generation)

    def population(self) -> dict[str, TrialInfo]:
        return {tid: t.info() for tid, t in self.trials.items()}

    def run(self) -> Outcome:
        now = 0.0
        while self.queue:
            now, _, kind, tid, payload = heapq.heappop(self.queue)
            trial = self.trials[tid]
            if kind == "persist":
                trial.checkpoint = payload
            elif trial.state != "TERMINATED" and payload == trial.generation:
                self._step(now, trial)
            if not any(kind == "step" for _, _, kind, _, _ in self.queue):
                if not self._apply(now, self.scheduler.on_idle(self.population())):
                    break  # nothing would ever move again
        return Outcome(max(t.accuracy for t in self.trials.values()), self.exploits, now)

    def _step(self, now: float, trial: SimTrial) -> None:
        trial.accuracy, _ = pbt_toy_step(
            trial.accuracy, trial.config["lr"], self.rng.random, lambda: self.rng.gauss(0, 1)
        )
        trial.iteration += 1
        trial.last_result = {"training_iteration": trial.iteration, METRIC: trial.accuracy}
        if trial.iteration % INTERVAL == 0:
            ckpt = SimCheckpoint(trial.trial_id, trial.iteration, trial.accuracy)
            self._push(now + self.timing.persist_delay, "persist", trial.trial_id, ckpt)
        if trial.iteration >= ITERATIONS or trial.accuracy > 200:
            trial.state = "TERMINATED"
            pop = self.population()
            self._apply(now, self.scheduler.on_trial_complete(pop[trial.trial_id], None, pop))
            return
        pop = self.population()
        decisions = self.scheduler.on_trial_result(pop[trial.trial_id], trial.last_result, pop)
        generation = trial.generation
        self._apply(now, decisions)
        if not trial.held and trial.generation == generation and trial.state == "RUNNING":
            self._step_at(now, trial)

    def _apply(self, now: float, decisions: Sequence[Decision]) -> bool:
        """Carry the decisions out; whether any set a trial moving."""
        moved = False
        for decision in decisions:
            trial = self.trials[decision.trial_id]
            if trial.state == "TERMINATED":
                continue
            if isinstance(decision, (Hold, Pause)):
                trial.held = True
                if isinstance(decision, Pause):
                    trial.state = "PAUSED"
                continue
            if isinstance(decision, Stop):
                trial.state = "TERMINATED"
                continue
            delay = 0.0
            if isinstance(decision, Exploit):
                self.exploits += 1
                ckpt = decision.checkpoint
                trial.config = dict(decision.config)
                trial.accuracy, trial.iteration = ckpt.accuracy, ckpt.iteration
                delay = self.timing.restart
            elif isinstance(decision, Resume):
                delay = self.timing.restart
            elif not (isinstance(decision, Continue) and trial.held):
                continue
            trial.held, trial.state = False, "RUNNING"
            trial.generation += 1
            self._step_at(now + delay, trial)
            moved = True
        return moved


class TuneRules(Scheduler):
    """Ray Tune's asynchronous PopulationBasedTraining, as its ``on_trial_result`` and
    ``_checkpoint_or_exploit`` decide: at a boundary a trial records its ``last_score``;
    an upper-quantile trial saves (here: its state now is its donor checkpoint), any
    other forgets its donor checkpoint; a lower-quantile one picks one donor at random
    from the upper quantile and skips the exploit if that donor has no checkpoint; the
    clone keeps its own ``last_score`` and takes the donor's perturbation time."""

    def __init__(self, seed: int) -> None:
        super().__init__("training_iteration", METRIC, "max")
        self.rng = random.Random(seed)
        self.last_score: dict[str, float] = {}
        self.last_perturbation: dict[str, float] = {}
        self.donor_checkpoint: dict[str, SimCheckpoint | None] = {}

    def on_trial_result(
        self, trial: TrialInfo, result: Mapping[str, Any], population: Mapping[str, TrialInfo]
    ) -> list[Decision]:
        tid, time = trial.trial_id, result["training_iteration"]
        if time - self.last_perturbation.get(tid, 0) < INTERVAL:
            return []
        self.last_score[tid], self.last_perturbation[tid] = result[METRIC], time
        ranked = sorted(  # ties in the order trials first reached a boundary, as Tune's
            (t for t in self.last_score if population[t].state != "TERMINATED"),
            key=self.last_score.__getitem__,
        )
        size = min(math.ceil(len(ranked) * 0.25), len(ranked) // 2) if len(ranked) > 1 else 0
        lower, upper = ranked[:size], ranked[len(ranked) - size :]
        here = SimCheckpoint(tid, time, result[METRIC])
        self.donor_checkpoint[tid] = here if tid in upper else None
        if tid not in lower:
            return []
        donor = self.rng.choice(upper)
        checkpoint = self.donor_checkpoint.get(donor)
        if checkpoint is None:
            return []
        config = mutate(population[donor].config, MUTATIONS, self.rng, 0.25, (1.2, 0.8))
        self.last_perturbation[tid] = self.last_perturbation[donor]
        return [Exploit(tid, donor, checkpoint, config)]

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def make_scheduler(variant: str, seed: int) -> Scheduler:
    """``tune``, ``ours`` or ``ours:key=value,...`` (PBT keyword arguments)."""
    name, _, rest = variant.partition(":")
    if name == "tune":
        return TuneRules(seed)
    if name != "ours":
        raise ValueError(f"unknown variant {variant!r}: ours, ours:key=value,... or tune")
    kwargs = {}
    for part in filter(None, rest.split(",")):
        key, _, value = part.partition("=")
        kwargs[key] = ast.literal_eval(value)
    return PBT(
        perturbation_interval=INTERVAL,
        metric=METRIC,
        mode="max",
        hyperparam_mutations=MUTATIONS,
        seed=seed,
        **kwargs,
    )


def simulate(variant: str, runs: int, timing: Timing | None = None) -> list[Outcome]:
    """One outcome per seed ``0 .. runs - 1``."""
    timing = timing or Timing()
    return [Simulation(make_scheduler(variant, seed), seed, timing).run() for seed in range(runs)]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("variants", nargs="*", default=["ours", "tune"])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--start-spread", type=float, default=Timing.start_spread)
    parser.add_argument("--persist-delay", type=float, default=Timing.persist_delay)
    args = parser.parse_args(argv)
    timing = Timing(start_spread=args.start_spread, persist_delay=args.persist_delay)
    print(f"{'variant':32} best: median [q25-q75]   exploits   wall (steps)")
    for variant in args.variants:
        outcomes = simulate(variant, args.runs, timing)
        bests = sorted(o.best for o in outcomes)
        q25, q75 = bests[len(bests) // 4], bests[(3 * len(bests)) // 4]
        exploits = statistics.mean(o.exploits for o in outcomes)
        wall = statistics.median(o.wall for o in outcomes)
        median = statistics.median(bests)
        print(f"{variant:32} {median:6.1f} [{q25:5.1f}-{q75:5.1f}]   {exploits:8.1f}   {wall:8.0f}")


if __name__ == "__main__":
    main()
