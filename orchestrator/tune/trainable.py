"""Ray Tune's class API: ``tune.Trainable``.

A user subclasses it exactly as on Tune: ``setup(config)``, ``step()`` returning a dict,
``save_checkpoint(checkpoint_dir)`` writing files there and returning None (or returning
a dict, which is pickled into the directory), ``load_checkpoint(checkpoint)`` receiving
that dict or the directory, ``reset_config(new_config)``, ``cleanup()``; and reads
``self.config``, ``self.iteration``/``self.training_iteration`` (steps done),
``self.trial_id``, ``self.trial_name``, ``self.logdir``. A result may carry
``SHOULD_CHECKPOINT`` (a checkpoint right after it) or ``done`` (the trial ends).

The engine hosts it through :class:`~orchestrator.tune.adapters.ClassAdapter`, which
builds the object, counts its iterations and translates its checkpoints.
"""

from __future__ import annotations

import contextvars
import copy
from typing import Any

from orchestrator.tune.error import unsupported

__all__ = ["Trainable"]

#: What the adapter hands the object it is building (its owner, context and the objects
#: of ``with_parameters``); Tune's __init__ signature has no room for them.
building: contextvars.ContextVar[tuple[Any, Any, dict[str, Any]] | None] = contextvars.ContextVar(
    "trialflow_tune_building", default=None
)


class Trainable:
    """Ray Tune's ``Trainable`` (see the module docstring)."""

    def __init__(self, config: dict[str, Any] | None = None, storage: Any = None, **_: Any) -> None:
        built = building.get()
        if built is None:
            raise unsupported(
                f"building {type(self).__name__}(...) by hand (Tune's Trainable.train()/"
                "save()/restore() outside a run)",
                "pass the class to tune.Tuner; for a quick check, call its setup() and "
                "step() on an object you make with __new__",
            )
        self._owner, self._context, params = built
        self.config: dict[str, Any] = dict(config or {})
        self.setup(copy.deepcopy(self.config), **params)

    # -- what the trial knows ------------------------------------------------------------

    @property
    def iteration(self) -> int:
        """Steps done so far (0 during the first ``step()``), restored with checkpoints."""
        return int(self._owner.iteration)

    @property
    def training_iteration(self) -> int:
        return self.iteration

    @property
    def trial_id(self) -> str:
        return str(self._context.trial_id)

    @property
    def trial_name(self) -> str:
        return str(self._context.trial_name)

    @property
    def logdir(self) -> str:
        """A local directory for the trial's own files."""
        return str(self._context.trial_dir)

    @property
    def trial_resources(self) -> dict[str, float]:
        return dict(self._context.info.resources or {"cpu": 1.0})

    # -- what a subclass implements ---------------------------------------------------------

    def setup(self, config: dict[str, Any]) -> None:
        """Build the model, load data... (once per trial, before any step)."""

    def step(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any] | None:
        raise NotImplementedError(
            f"{type(self).__name__} must implement save_checkpoint() to be checkpointed"
        )

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} must implement load_checkpoint() to be restored"
        )

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return False

    def cleanup(self) -> None:
        """Release what setup took (the trial ended, or pauses)."""

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> Any:
        return None

    # -- Tune's driving methods, which the engine owns here ----------------------------------

    def train(self) -> Any:
        raise unsupported("Trainable.train()", "pass the class to tune.Tuner(...).fit()")

    def save(self, *args: Any, **kwargs: Any) -> Any:
        raise unsupported("Trainable.save()", "return SHOULD_CHECKPOINT in a result")

    def restore(self, *args: Any, **kwargs: Any) -> Any:
        raise unsupported("Trainable.restore()", "use tune.Tuner.restore(path, trainable)")

    def stop(self) -> None:
        raise unsupported("Trainable.stop()", "implement cleanup(); the engine stops trials")
