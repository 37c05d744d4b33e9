"""What the command line offers, read from its parser (for the registry tests: every
registered scheduler or searcher kind is a choice of its option)."""

from __future__ import annotations

import argparse


def option_choices(parser: argparse.ArgumentParser, option: str) -> list[str]:
    """The choices of ``option`` (``"--scheduler"``) in every command of ``parser``."""
    found: list[str] = []
    for action in parser._actions:  # argparse keeps no public list of them
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += option_choices(sub, option)
        elif option in action.option_strings:
            found += list(action.choices or ())
    return found
