"""Population-based training (Jaderberg et al., https://arxiv.org/abs/1711.09846).

Every ``perturbation_interval`` of ``time_attr`` (boundaries at its multiples, none before
``burn_in_period``) a trial in the worst ``quantile_fraction`` of the population is told
to *exploit* one in the best ``quantile_fraction``: restart from that donor's newest
persisted checkpoint with the donor's config, *explored* (mutated). Asynchronous by
default (each trial is decided as it reaches its boundary); ``synch=True`` waits for the
whole population at each boundary and decides for everyone at once.

Asynchronous PBT still keeps its population together: a trial that reaches a boundary
more than ``max_lead`` intervals ahead of a live trial waits there (keeping its actor)
until that one catches up. Ranking a trial against others means comparing trials at
about the same point of training; without the bound, trials that train fast (or start
first: a worker process takes about a second to start) can finish before the last ones
begin, and PBT degenerates into independent runs that never exploit each other. Ray
Tune's asynchronous PBT has no such bound; ``max_lead=None`` is that behaviour.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from orchestrator.schedulers.base import (
    Continue,
    Decision,
    Exploit,
    Hold,
    Pause,
    Population,
    Resume,
    ResumeQueue,
    Scheduler,
    SchedulerDisplay,
    TrialInfo,
    is_live,
    rng_state,
    set_rng_state,
)
from orchestrator.schedulers.mutations import explore
from orchestrator.schedulers.pbt_checks import check_pbt_options


def _quantiles(scores: Sequence[tuple[str, float]], fraction: float) -> tuple[list[str], list[str]]:
    """(lower, upper): the ids of the worst and of the best ``fraction`` of ``scores``.

    Ray Tune's rounding: ``ceil(len * fraction)`` trials each, at most half the
    population; both empty with fewer than 2 trials. Ties rank by trial id.
    """
    ranked = [tid for tid, _ in sorted(scores, key=lambda e: (e[1], e[0]))]  # worst first
    if len(ranked) <= 1:
        return [], []
    num = int(math.ceil(len(ranked) * fraction))
    if num > len(ranked) / 2:
        num = len(ranked) // 2
    return ranked[:num], ranked[len(ranked) - num :]


class PBT(Scheduler):
    """Population-based training, with Ray Tune's PopulationBasedTraining's arguments.

    Decisions (async): Exploit, or nothing. A trial ranks by its score at its newest
    boundary (NaN worst) among the live trials, as in Ray Tune (a trial not decided at a
    boundary yet ranks by its newest result; one without a result does not rank): newest
    results would compare trials at different points of training, the ones ahead
    looking better for being ahead. A trial that exploits ranks from then on by the score
    of the state it took over (the donor checkpoint's result, else the donor's rank
    score) until its next boundary. Ray Tune keeps ranking it by its score from before:
    a state that no longer exists, at the bottom, where it shields the next trials to
    arrive from the lower quantile; ranking the population as it now is gives more
    exploits, and better scores (see the README's Benchmarks). Donors are picked at
    random (seeded) from the upper quantile among those whose ``checkpoint`` holds their
    current state (not None, and saved after the state their own last exploit gave
    them); none such: nothing yet, and the trial is decided again at its next result
    until its next boundary
    (Ray Tune saves its donors at the boundary, synchronously; ours persist in the
    background, so a trial first at a boundary would otherwise find no donor there).
    The explored config is a deep copy of the donor's with each key of
    ``hyperparam_mutations`` mutated (see :meth:`explore`), then ``custom_explore_fn``.
    Checkpoints are only read from the population at decision time: PBT works best when
    trials persist a checkpoint at each boundary (``next_decision_at`` names them). The
    exploiting trial goes on from the donor's checkpoint, so the boundaries up to that
    checkpoint's time count as passed for it.

    A trial more than ``max_lead`` boundaries ahead of a live, unpaused trial of the
    population is held at its boundary (Hold; it keeps its actor) and released (Continue)
    by the first call that finds no trial that far behind it any more; ``on_idle``
    (the engine found the held trials waiting on trials that make no progress: not
    started for lack of resources, say) releases them all and stops waiting for those
    laggards until they report again.

    Decisions (synch): Hold each trial at the boundary (Pause instead while another trial
    waits for a slot or is paused: it may need the resources); once every live trial has
    arrived (``on_idle``: those present), Exploit for the lower quantile that has a donor
    and Continue (held) or Resume (paused) for the rest (the last arriving trial:
    Exploit or nothing).

    ``lineage`` has one entry per exploit: ``trial_id``, ``time`` (its time_attr value),
    ``donor_id``, ``donor_checkpoint_iteration``, ``old_config`` (the trial's config before
    the exploit) and ``new_config``.
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        burn_in_period: float = 0.0,
        hyperparam_mutations: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        perturbation_factors: tuple[float, ...] = (1.2, 0.8),
        custom_explore_fn: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
        synch: bool = False,
        seed: int | None = None,
        max_lead: int | None = 1,
    ) -> None:
        super().__init__(time_attr, metric, mode)
        check_pbt_options(
            perturbation_interval=perturbation_interval,
            burn_in_period=burn_in_period,
            hyperparam_mutations=hyperparam_mutations,
            quantile_fraction=quantile_fraction,
            resample_probability=resample_probability,
            perturbation_factors=perturbation_factors,
            custom_explore_fn=custom_explore_fn,
            max_lead=max_lead,
        )
        self.perturbation_interval = perturbation_interval
        self.burn_in_period = burn_in_period
        self.hyperparam_mutations: Mapping[str, Any] = hyperparam_mutations or {}
        self.quantile_fraction = quantile_fraction
        self.resample_probability = resample_probability
        self.perturbation_factors = tuple(perturbation_factors)
        self.custom_explore_fn = custom_explore_fn
        self.synch = synch
        self.max_lead = max_lead
        self.lineage: list[dict[str, Any]] = []
        self._rng = random.Random(seed)
        # The first boundary index (boundary k is at k * perturbation_interval) past burn-in.
        self._first = max(1, math.ceil(burn_in_period / perturbation_interval - 1e-9))
        self._last_k: dict[str, int] = {}  # trial id -> boundary index last decided
        self._barrier = self._first  # synch: the boundary index everyone waits at
        self._arrived: dict[str, tuple[float, float]] = {}  # synch: id -> (time, score)
        self._pending = ResumeQueue()
        self._held_at_barrier: set[str] = set()  # synch: arrived trials told to Hold
        self._held: dict[str, int] = {}  # async: id -> the boundary index it waits at
        # Laggards that on_idle stopped waiting for, until they report again.
        self._absent: set[str] = set()
        # id -> the time of the checkpoint its last exploit restored (the start of its line)
        self._exploited_at: dict[str, float] = {}
        # async: id -> its score at the last boundary it was decided at (what it ranks by)
        self._boundary_scores: dict[str, float] = {}
        # async: lower-quantile trials that found no donor: decided again at each result
        self._retrying: set[str] = set()

    def _index(self, time: float) -> int:
        """How many boundaries lie at or below ``time`` (with a float tolerance)."""
        return math.floor(time / self.perturbation_interval + 1e-9)

    # -- events ---------------------------------------------------------------------

    def on_trial_result(
        self, trial: TrialInfo, result: Mapping[str, Any], population: Population
    ) -> list[Decision]:
        time, score = self._time_of(result), self._score_of(result)
        if time is None or score is None:
            return []
        tid, k = trial.trial_id, self._index(time)
        if not self.synch:
            self._held.pop(tid, None)  # it reports: it runs
            self._absent.discard(tid)
            mine = self._decide_async(trial, time, score, k, population)
            return mine + self._release_held(population, tid, k)
        self._pending.discard(tid)
        decisions: dict[str, Decision] = {}
        if tid in self._arrived:
            decisions[tid] = Pause(tid)  # re-reported while waiting: it waits on
        elif k >= self._barrier:
            self._arrived[tid] = (time, score)
            self._last_k[tid] = k
            decisions[tid] = self._wait_at_barrier(tid, population)
            self._release(population, trial, decisions, force=False)
        return self._out(decisions, population)

    def _decide_async(
        self,
        trial: TrialInfo,
        time: float,
        score: float,
        k: int,
        population: Population,
    ) -> list[Decision]:
        tid = trial.trial_id
        self._retrying.discard(tid)
        passed = self._last_k.get(tid, 0)
        if k < self._first or k <= passed:
            return []
        self._last_k[tid] = k
        self._boundary_scores[tid] = score
        scores = [(tid, score)]
        for other, info in population.items():
            other_score = self._rank_score(info)
            if other != tid and is_live(info) and other_score is not None:
                scores.append((other, other_score))
        lower, upper = _quantiles(scores, self.quantile_fraction)
        if tid not in lower:
            return self._hold_if_ahead(tid, k, population)
        exploit = self._exploit(tid, trial.config, time, upper, population)
        if exploit is None:
            # No donor has a persisted checkpoint yet (theirs for this boundary are
            # still uploading): ask again at the next result, up to the next boundary.
            self._last_k[tid] = passed
            self._retrying.add(tid)
            return self._hold_if_ahead(tid, k, population)
        return [exploit]

    def on_trial_complete(
        self, trial: TrialInfo, result: Mapping[str, Any] | None, population: Population
    ) -> list[Decision]:
        return self._leave(trial.trial_id, population)

    def on_trial_error(self, trial: TrialInfo, population: Population) -> list[Decision]:
        return self._leave(trial.trial_id, population)

    def on_idle(self, population: Population) -> list[Decision]:
        """Synch: release the barrier with the trials waiting at it. Async: release the
        held trials, and wait no more for the trials they waited for until they report."""
        if self.synch:
            return self._released(population, force=True)
        if not self._held or self.max_lead is None:
            return []
        threshold = max(self._held.values()) - self.max_lead
        self._absent.update(t for t in self._laggards(population, threshold) if t not in self._held)
        released, self._held = list(self._held), {}
        return [Continue(tid) for tid in sorted(released)]

    # -- keeping the population together (async) ----------------------------------------

    def _counts(self, info: TrialInfo | None) -> bool:
        """Whether ``info``'s trial is one the others wait for: live, not paused (it
        moves only when told), not given up on."""
        return is_live(info) and info.state != "PAUSED" and info.trial_id not in self._absent

    def _progress(self, info: TrialInfo) -> int:
        """The boundary index of the trial's newest result (0: none yet)."""
        time = self._time_of(info.last_result)
        return self._index(time) if time is not None else 0

    def _laggards(self, population: Population, threshold: int) -> Iterator[str]:
        """The counted trials whose newest result is short of boundary ``threshold``."""
        for tid, info in population.items():
            if self._counts(info) and self._progress(info) < threshold:
                yield tid

    def _hold_if_ahead(self, tid: str, k: int, population: Population) -> list[Decision]:
        """Hold ``tid`` at boundary ``k`` while a trial is more than ``max_lead`` behind."""
        if self.max_lead is None:
            return []
        if any(other != tid for other in self._laggards(population, k - self.max_lead)):
            self._held[tid] = k
            return [Hold(tid)]
        return []

    def _release_held(
        self, population: Population, reporter: str | None = None, k: int = 0
    ) -> list[Decision]:
        """Continue for every held trial no counted trial is too far behind any more
        (``reporter`` is at boundary ``k``: its snapshot may predate the result)."""
        if not self._held or self.max_lead is None:
            return []
        floor: int | None = None
        for tid, info in population.items():
            if tid == reporter:
                progress = k
            elif self._counts(info):
                progress = self._progress(info)
            else:
                continue
            floor = progress if floor is None else min(floor, progress)
        released: list[Decision] = []
        for tid, waits_at in list(self._held.items()):
            if tid == reporter:
                continue
            if (
                not is_live(population.get(tid))
                or floor is None
                or floor >= waits_at - self.max_lead
            ):
                del self._held[tid]
                released.append(Continue(tid))
        return released

    def next_decision_at(self, trial: TrialInfo) -> float | None:
        current = self._current_time(trial)
        if trial.trial_id in self._retrying:
            return math.nextafter(current, math.inf)  # its very next result
        k = max(self._index(current) + 1, self._last_k.get(trial.trial_id, 0) + 1, self._first)
        if self.synch:
            k = max(k, self._barrier)
        return k * self.perturbation_interval

    # -- exploit and explore --------------------------------------------------------

    def _leave(self, trial_id: str, population: Population) -> list[Decision]:
        self._pending.discard(trial_id)
        self._arrived.pop(trial_id, None)
        self._held_at_barrier.discard(trial_id)
        self._retrying.discard(trial_id)
        self._held.pop(trial_id, None)
        self._absent.discard(trial_id)
        return self._released(population, force=False) + self._release_held(population)

    def _released(self, population: Population, force: bool) -> list[Decision]:
        decisions: dict[str, Decision] = {}
        if self.synch:
            self._release(population, None, decisions, force)
        return self._out(decisions, population)

    def _out(self, decisions: dict[str, Decision], population: Population) -> list[Decision]:
        return list(decisions.values()) + self._pending.flush(population, skip=decisions)

    def _release(
        self,
        population: Population,
        reporter: TrialInfo | None,
        decisions: dict[str, Decision],
        force: bool,
    ) -> None:
        """Synch: decide for every arrived trial once all live ones have (or ``force``)."""
        reporter_id = reporter.trial_id if reporter is not None else None
        for tid in list(self._arrived):
            if tid != reporter_id and not is_live(population.get(tid)):
                del self._arrived[tid]
        if not self._arrived:
            return
        if not force:
            if any(is_live(i) and t not in self._arrived for t, i in population.items()):
                return
        arrived, self._arrived = self._arrived, {}
        self._barrier = max(self._barrier, *(self._index(t) for t, _ in arrived.values())) + 1
        lower, upper = _quantiles([(t, s) for t, (_, s) in arrived.items()], self.quantile_fraction)
        for tid in sorted(arrived):
            decisions.pop(tid, None)
            info = reporter if tid == reporter_id else population.get(tid)
            if tid in lower and info is not None:
                exploit = self._exploit(tid, info.config, arrived[tid][0], upper, population)
                if exploit is not None:
                    self._held_at_barrier.discard(tid)
                    decisions[tid] = exploit
                    continue
            if tid == reporter_id:
                continue  # it is running: no decision means Continue
            if tid in self._held_at_barrier:
                self._held_at_barrier.discard(tid)
                decisions[tid] = Continue(tid)
            elif info is not None and info.state == "PAUSED":
                decisions[tid] = Resume(tid)
            else:
                self._pending.add(tid)  # its pause has not landed yet

    def _wait_at_barrier(self, tid: str, population: Population) -> Decision:
        """Synch: Hold the trial at the barrier (it keeps its actor: no save, no new
        actor, no restore when the barrier opens), or Pause it when another trial waits
        for a slot or is paused, which may need the resources it holds."""
        for other, info in population.items():
            if other != tid and info.state in ("PENDING", "PAUSED"):
                return Pause(tid)
        self._held_at_barrier.add(tid)
        return Hold(tid)

    def _exploit(
        self,
        trial_id: str,
        old_config: Mapping[str, Any],
        time: float,
        upper: list[str],
        population: Population,
    ) -> Exploit | None:
        donors = []
        for tid in upper:
            info = population.get(tid)
            if tid != trial_id and info is not None and self._current_checkpoint(info):
                donors.append(info)
        if not donors:
            return None
        donor = self._rng.choice(donors)
        new_config = self.explore(donor.config)
        # The trial goes on from the donor's checkpoint, a new line: the boundaries up to
        # there are behind it, the ones after it are to be decided (again, when the
        # donor's checkpoint is older than the trial's own time), as Ray Tune hands it
        # the donor's last perturbation time.
        restored = self._checkpoint_time(donor.checkpoint)
        if restored is not None:
            self._last_k[trial_id] = self._index(restored)
            self._exploited_at[trial_id] = restored
        inherited = self._score_at(donor)
        if inherited is not None:
            self._boundary_scores[trial_id] = inherited
        self.lineage.append(
            {
                "trial_id": trial_id,
                "time": time,
                "donor_id": donor.trial_id,
                "donor_checkpoint_iteration": getattr(donor.checkpoint, "iteration", None),
                "old_config": copy.deepcopy(dict(old_config)),
                "new_config": copy.deepcopy(new_config),
            }
        )
        return Exploit(trial_id, donor.trial_id, donor.checkpoint, new_config)

    def _rank_score(self, info: TrialInfo) -> float | None:
        """What the trial ranks by (async): its score at its newest boundary, else its
        newest result's; None: it does not rank."""
        score = self._boundary_scores.get(info.trial_id)
        return score if score is not None else self._score_of(info.last_result)

    def _score_at(self, donor: TrialInfo) -> float | None:
        """The score of the state an exploit of ``donor`` hands over: its checkpoint's
        result, else the donor's own rank score."""
        metrics = getattr(donor.checkpoint, "metrics", None)
        score = self._score_of(metrics) if isinstance(metrics, Mapping) else None
        return score if score is not None else self._rank_score(donor)

    def _current_checkpoint(self, info: TrialInfo) -> bool:
        """Whether the trial's newest persisted checkpoint holds its current state. After
        an exploit its newest results are the donor's line, but until it saves again its
        newest checkpoint is its own from before: a clone of that would get the state
        the trial was just told to give up."""
        if info.checkpoint is None:
            return False
        since = self._exploited_at.get(info.trial_id)
        if since is None:
            return True
        saved = self._checkpoint_time(info.checkpoint)
        return saved is not None and saved > since

    def _checkpoint_time(self, checkpoint: Any) -> float | None:
        if self.time_attr == "training_iteration":
            return self._time_of({"training_iteration": getattr(checkpoint, "iteration", None)})
        metrics = getattr(checkpoint, "metrics", None)
        return self._time_of(metrics) if isinstance(metrics, Mapping) else None

    def explore(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A mutated deep copy of ``config`` (draws from the scheduler's seeded RNG).

        Per key of ``hyperparam_mutations``: a list/tuple resamples with
        ``resample_probability`` (or when the value is not in it), else moves one step
        left or right (clipped at the ends); a domain (``.sample(rng)``) or a function
        resamples with ``resample_probability`` (or when the value is no number), else
        scales the value by a random one of ``perturbation_factors``, ints rounded back
        to ints and bools kept bools; a dict recurses. Then ``custom_explore_fn``.
        """
        return explore(
            config,
            self.hyperparam_mutations,
            self._rng,
            self.resample_probability,
            self.perturbation_factors,
            self.custom_explore_fn,
        )

    # -- state ----------------------------------------------------------------------

    def display(self) -> SchedulerDisplay:
        return SchedulerDisplay(lineage=tuple(self.lineage))

    def state_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "mode": self.mode,
            "rng": rng_state(self._rng),
            "last_k": dict(self._last_k),
            "barrier": self._barrier,
            "arrived": {tid: list(v) for tid, v in self._arrived.items()},
            "pending": self._pending.to_list(),
            "held_at_barrier": sorted(self._held_at_barrier),
            "held": dict(self._held),
            "absent": sorted(self._absent),
            "exploited_at": dict(self._exploited_at),
            "boundary_scores": dict(self._boundary_scores),
            "retrying": sorted(self._retrying),
            "lineage": copy.deepcopy(self.lineage),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.metric, self.mode = state["metric"], state["mode"]
        set_rng_state(self._rng, state["rng"])
        self._last_k = dict(state["last_k"])
        self._barrier = state["barrier"]
        self._arrived = {tid: (v[0], v[1]) for tid, v in state["arrived"].items()}
        self._pending.load(state["pending"])
        self._held_at_barrier = set(state.get("held_at_barrier", []))
        self._held = dict(state.get("held", {}))
        self._absent = set(state.get("absent", []))
        self._exploited_at = dict(state.get("exploited_at", {}))
        self._boundary_scores = dict(state.get("boundary_scores", {}))
        self._retrying = set(state.get("retrying", []))
        self.lineage = copy.deepcopy(state["lineage"])
