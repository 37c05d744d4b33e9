"""Where moved names went: the one table every reader of stored pickles applies.

A journal keeps a trial's code as pickles (its stop criterion, its config, a trainable
defined in a script, which names its base class) and as import paths
(``module:qualname``); a saved Tuner and a searcher's state are pickles too. Each names
modules as they were when it was written. When a module moves, its names go in
:data:`MOVED` instead of a module left behind at the old path: :func:`loads` (through
:class:`Unpickler`) and :func:`resolve` look there first, so a journal written before
the move still loads and resumes (``tests/journal/test_old_journals.py`` resumes two).

Moving anything a pickle may name (a class users subclass or pass, a function their
code calls, a stop criterion, a scheduler's or searcher's state) adds its old path here.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Mapping
from typing import IO, Any

__all__ = ["MOVED", "Unpickler", "load", "loads", "resolve"]

#: ``old module:qualname`` -> ``new module:qualname``, for every name a pickle or an
#: import path written by an earlier version may hold.
MOVED: Mapping[str, str] = {
    # The reshape into layers (c6fa93b) moved the stop criterion into core/ and the
    # function API into actor/; e04b945 moved Trainable out of the actor's module.
    "orchestrator.stopping:StopCondition": "orchestrator.core.stopping:StopCondition",
    "orchestrator.function:FunctionTrainable": "orchestrator.actor.function:FunctionTrainable",
    "orchestrator.function:get_checkpoint": "orchestrator.actor.function:get_checkpoint",
    "orchestrator.function:is_function": "orchestrator.actor.function:is_function",
    "orchestrator.function:report": "orchestrator.actor.function:report",
    "orchestrator.function:wrap_function": "orchestrator.actor.function:wrap_function",
    "orchestrator.trainable:Trainable": "orchestrator.actor.trainable:Trainable",
    "orchestrator.actor.trial_actor:Trainable": "orchestrator.actor.trainable:Trainable",
    # The demo's model moved into the CLI's package (e7560e2); journals name it by path.
    "orchestrator.demo_model:DigitsMLP": "orchestrator.cli.demo_model:DigitsMLP",
    "orchestrator.demo_model:load_digits_split": "orchestrator.cli.demo_model:load_digits_split",
}


def resolve(path: str) -> str:
    """Where the name at ``path`` (``module:qualname``) lives now."""
    return MOVED.get(path, path)


class Unpickler(pickle.Unpickler):
    """A pickle reader that finds moved names where they went."""

    def find_class(self, module: str, name: str) -> Any:
        module, _, name = resolve(f"{module}:{name}").partition(":")
        return super().find_class(module, name)


def loads(data: bytes) -> Any:
    """``pickle.loads`` (cloudpickle's too) for stored data: moved names are followed."""
    return Unpickler(io.BytesIO(data)).load()


def load(file: IO[bytes]) -> Any:
    """``pickle.load`` for stored data: moved names are followed."""
    return Unpickler(file).load()
