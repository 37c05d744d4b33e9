"""Writes the experiments in this folder, with an OLD version of the code on the path.

Each experiment is an honest journal of that version: its pickles name the module paths
the code had then (``orchestrator.trainable``, ``orchestrator.stopping``,
``orchestrator.function``, ``orchestrator.demo_model``), which today's code knows only
through ``orchestrator.core.moved.MOVED``. Every trial is asked to pause once it has two
results and a checkpoint; it pauses after its third (the step in flight), with a
checkpoint of it, so resuming it has work left to do (up to ``n == 4``; the demo's model,
which this script cannot slow down, up to 50 iterations).

How they were made (from a clone of the repository)::

    mkdir -p /tmp/old_a /tmp/old_b
    git archive 57c4c42 | tar -x -C /tmp/old_a   # before the reshape into layers
    git archive e7560e2~1 | tar -x -C /tmp/old_b  # before the demo's model moved to cli/
    export WRITING_OLD_JOURNAL=1 OUT=$PWD/tests/journal/old_journals
    cd /tmp/old_a && PYTHONPATH=. python $OUT/write.py $OUT before_layers
    cd /tmp/old_b && PYTHONPATH=. python $OUT/write.py $OUT before_cli

Not a test module: it imports what those versions had and today's code has not.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from typing import Any

from orchestrator import Orchestrator, Trainable

try:  # a version with function trainables; their pickle names these by reference
    from orchestrator import get_checkpoint, report
except ImportError:
    get_checkpoint = report = None


def _slow_down(n: int) -> None:
    """While this script writes the journal, past the second result: so the driver's
    pause lands before the trial ends. Resumed, the trials run at full speed."""
    if n > 2 and os.environ.get("WRITING_OLD_JOURNAL"):
        time.sleep(2.0)


class Counter(Trainable):
    """Defined in ``__main__``: the journal pickles it by value, naming its base class
    by the module it had then."""

    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        _slow_down(self.n)
        return {"n": self.n}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "n"), "w") as f:
            f.write(str(self.n))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "n")) as f:
            self.n = int(f.read())


def count(config: dict[str, Any]) -> None:
    """A training function in ``__main__``: journaled as a pickled subclass of
    ``FunctionTrainable``, this function by value, and the ``report`` and
    ``get_checkpoint`` it calls by reference."""
    n = 0
    start = get_checkpoint()
    if start is not None:
        with open(os.path.join(start, "n")) as f:
            n = int(f.read())
    while True:
        n += 1
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "n"), "w") as f:
            f.write(str(n))
        _slow_down(n)
        report({"n": n}, checkpoint=d)


async def _pause_after_two(trial: Any) -> None:
    while len(trial.results) < 2 or trial.latest_checkpoint is None:
        await asyncio.sleep(0.01)
    await trial.pause()


async def main(root: str, name: str) -> None:
    orch = Orchestrator(storage=root, name=name, keep_checkpoints=2)
    # A stop given as a dict is journaled as a pickled ``orchestrator.stopping.StopCondition``.
    trials = [orch.add_trial(Counter, {"which": "class"}, stop={"n": 4}, checkpoint_every=1)]
    if report is not None:
        trials.append(orch.add_trial(count, {"which": "function"}, stop={"n": 4}))
    try:
        from orchestrator.demo_model import DigitsMLP

        if DigitsMLP.__module__ == "orchestrator.demo_model":
            config = {"hidden": 4, "epochs_per_iter": 1}
            stop = {"training_iteration": 50}
            trials.append(orch.add_trial(DigitsMLP, config, stop=stop, checkpoint_every=1))
    except ImportError:
        pass
    async with orch:
        running = asyncio.ensure_future(orch.run())
        await asyncio.gather(*(_pause_after_two(trial) for trial in trials))
        await running
    for trial in trials:
        print(trial.id, trial.state, trial.trainable_cls, trial.results[-1])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
