"""The user's base class: :class:`Trainable`.

A trainable is ordinary Python: ``setup``, ``step``, ``save_checkpoint`` and
``load_checkpoint``, each either a plain or an ``async def`` method. The trial actor
(:mod:`orchestrator.actor.trial_actor`) hosts it in a worker process. This module
imports nothing heavy: every user's module imports it, in the driver and in each worker.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

__all__ = ["Trainable", "is_trainable_class"]


class Trainable:
    """Subclass this and implement :meth:`step` (and the others as needed).

    Attributes set by the framework before :meth:`setup` runs: ``config`` (the trial's
    config dict), ``trial_id``, and ``iteration`` (completed steps, kept up to date,
    restored with checkpoints).
    """

    config: dict[str, Any]
    trial_id: str
    iteration: int

    def setup(self, config: dict[str, Any]) -> None | Awaitable[None]:
        """Build the model, load data... Called once per actor, before anything else."""
        return None

    def step(self) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """Run one training iteration and return its metrics as a dict."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def save_checkpoint(self, checkpoint_dir: str) -> None | Awaitable[None]:
        """Write everything needed to resume into ``checkpoint_dir`` (it exists, empty)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement save_checkpoint() to be checkpointed"
        )

    def load_checkpoint(self, checkpoint_dir: str) -> None | Awaitable[None]:
        """Restore the state that :meth:`save_checkpoint` wrote into ``checkpoint_dir``."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement load_checkpoint() to be restored"
        )

    def cleanup(self) -> None | Awaitable[None]:
        """Release resources when the trial stops or pauses (best effort)."""
        return None

    def reset_config(self, new_config: dict[str, Any]) -> bool | Awaitable[bool]:
        """Take ``new_config`` in place, without a new process (a PBT exploit restores
        another trial's checkpoint with an explored config). Return True if done (the
        framework then sets ``self.config`` and loads the checkpoint), False to have a
        new actor set up with it instead (the default)."""
        return False


def is_trainable_class(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, Trainable)
