"""The table of moved names (:mod:`orchestrator.core.moved`): every name an old journal
may hold loads from where it went, and every reader of stored pickles applies the table.

``tests/journal/test_old_journals.py`` resumes journals that old commits wrote; this file
lists, apart from the table, each name the modules that moved defined for users, so that
dropping an entry fails here even for a name those two journals do not hold (no module
is left at an old path to load it otherwise).
"""

from __future__ import annotations

import ast
import base64
import importlib
import pickle
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core import moved
from orchestrator.core.codec import import_class, unpickle_b64

ROOT = Path(__file__).resolve().parents[2]

#: ``old path -> where it is today``, written out by hand (not read from the table): the
#: public names of the modules that moved (their ``__all__`` then), and the Trainable
#: that ``orchestrator.actor.trial_actor`` defined between the two moves.
OLD_NAMES = {
    "orchestrator.stopping:StopCondition": "orchestrator.core.stopping:StopCondition",
    "orchestrator.function:FunctionTrainable": "orchestrator.actor.function:FunctionTrainable",
    "orchestrator.function:get_checkpoint": "orchestrator.actor.function:get_checkpoint",
    "orchestrator.function:is_function": "orchestrator.actor.function:is_function",
    "orchestrator.function:report": "orchestrator.actor.function:report",
    "orchestrator.function:wrap_function": "orchestrator.actor.function:wrap_function",
    "orchestrator.trainable:Trainable": "orchestrator.actor.trainable:Trainable",
    "orchestrator.actor.trial_actor:Trainable": "orchestrator.actor.trainable:Trainable",
    "orchestrator.demo_model:DigitsMLP": "orchestrator.cli.demo_model:DigitsMLP",
    "orchestrator.demo_model:load_digits_split": "orchestrator.cli.demo_model:load_digits_split",
}

#: Unpickling that reads no stored data: what the driver pickled a moment ago for a
#: trial's worker, a relay's frames between live processes, and a finished trial's
#: tombstone (sealed by this driver into its own temporary spill file).
LIVE_LOADS = {
    ("orchestrator/actor/trial_actor.py", "_load_payload"),
    ("orchestrator/integrations/relay.py", "_converse"),
    ("orchestrator/engine/tombstone.py", "load"),
}


def _now(path: str) -> Any:
    module, _, name = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _global_pickles(path: str) -> list[bytes]:
    """A pickle of just the name at ``path``, as protocol 0 writes it (``GLOBAL``) and
    as cloudpickle does (``STACK_GLOBAL``)."""
    module, _, name = path.partition(":")

    def short(text: str) -> bytes:
        data = text.encode()
        return b"\x8c" + bytes([len(data)]) + data

    return [
        f"c{module}\n{name}\n.".encode(),
        b"\x80\x04" + short(module) + short(name) + b"\x93.",
    ]


@pytest.mark.parametrize(("old", "new"), sorted(OLD_NAMES.items()))
def test_an_old_name_loads_what_is_at_its_new_path(old: str, new: str) -> None:
    target = _now(new)
    for data in _global_pickles(old):
        assert moved.loads(data) is target
    assert import_class(old) is target
    assert unpickle_b64(base64.b64encode(_global_pickles(old)[1]).decode()) is target


def test_every_entry_of_the_table_leads_to_a_name_that_exists_now() -> None:
    """An entry whose target moved again without the entry following is caught here."""
    for old, new in moved.MOVED.items():
        assert import_class(old) is _now(new)


def test_a_name_that_did_not_move_loads_as_pickle_loads_it() -> None:
    value = {"stop": moved.MOVED, "n": [1, 2.5]}
    assert moved.loads(pickle.dumps(value)) == value
    with pytest.raises(ModuleNotFoundError):
        moved.loads(b"corchestrator.nowhere\nThing\n.")


def _loads_in(path: Path) -> list[tuple[str, int]]:
    """``(enclosing function, line)`` of each ``pickle``/``cloudpickle`` ``load(s)`` call
    and each ``Unpickler(...)`` built in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            inner = child.name if function else where
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                owner = child.func.value
                if (
                    isinstance(owner, ast.Name)
                    and owner.id in ("pickle", "cloudpickle")
                    and child.func.attr in ("load", "loads", "Unpickler")
                ):
                    found.append((where, child.lineno))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_every_load_of_stored_pickles_follows_the_table() -> None:
    """A new reader of stored pickles (a journal field, a saved file) that calls
    ``pickle.loads`` itself would not find moved names: it uses ``moved.loads``."""
    bypassing = []
    for top in ("orchestrator", "storage", "transfer"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "orchestrator/core/moved.py":
                continue
            for where, line in _loads_in(path):
                if (rel, where) not in LIVE_LOADS:
                    bypassing.append(f"{rel}:{line} (in {where})")
    assert bypassing == []
