"""The registry of searchers: every registered kind is exported, offered by the command
line and named by the Tune facade, and keeps its suggestions through the journal (a
fresh one given its state suggests what the old one would have)."""

from __future__ import annotations

import importlib
import pickle

import pytest

from orchestrator import search
from orchestrator.cli.main import build_parser
from orchestrator.search import SearcherKind, SearchSpace, register_searcher, searcher_kinds

from ..support.cli_options import option_choices

SPACE = {
    "lr": search.loguniform(1e-4, 1e-1),
    "n": search.choice([1, 2, 3]),
}


def test_every_kind_is_exported_and_offered() -> None:
    for kind in searcher_kinds():
        assert getattr(search, kind.cls.__name__) is kind.cls, kind.name
        assert kind.cls.__name__ in search.__all__, kind.name
    offered = sorted(set(option_choices(build_parser(), "--searcher")))
    assert offered == sorted(kind.name for kind in searcher_kinds() if kind.command_line)


def test_the_tune_facade_names_every_kind() -> None:
    for kind in searcher_kinds():
        for path in kind.tune_classes:
            module, _, name = f"search.{path}".rpartition(".")
            facade = importlib.import_module(f"orchestrator.tune.{module}")
            assert name in facade.__all__ and issubclass(getattr(facade, name), kind.cls), path


@pytest.mark.parametrize("kind", searcher_kinds(), ids=lambda kind: kind.name)
def test_every_kind_keeps_its_suggestions_through_the_journal(kind: SearcherKind) -> None:
    if kind.name == "optuna":
        pytest.importorskip("optuna")

    def fresh() -> search.Searcher:
        searcher = kind.cls(seed=7)  # type: ignore[call-arg]  # as the command line builds it
        searcher.setup(SearchSpace(SPACE), metric="loss", mode="min", num_samples=4, seed=None)
        return searcher

    old = fresh()
    for n in range(3):
        config = old.suggest(f"t{n}")
        assert config is not None
        old.on_trial_complete(f"t{n}", {"loss": float(config["lr"]), "training_iteration": 1})
    new = fresh()
    new.set_state(pickle.loads(pickle.dumps(old.get_state())))
    assert [new.suggest(f"u{n}") for n in range(3)] == [old.suggest(f"u{n}") for n in range(3)]


def test_a_registered_kind_must_be_a_searcher() -> None:
    with pytest.raises(TypeError, match="not a Searcher"):
        register_searcher(SearcherKind("bad", dict, "no"))  # type: ignore[arg-type]
