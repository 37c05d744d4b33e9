"""The rows of a rich table printed by the CLI, as plain dicts."""

from __future__ import annotations

import re


def table(stdout: str, title: str) -> list[dict[str, str]]:
    """The rows, as ``{column: cell}``, of the rich table whose title starts with
    ``title``."""
    _, sep, tail = stdout.partition(title)
    assert sep, f"no table {title!r} in the output:\n{stdout}"
    header: list[str] = []
    found: list[dict[str, str]] = []
    for line in tail.splitlines()[1:]:
        if line.startswith(("┏", "┡", "└")):
            if line.startswith("└"):
                break
            continue
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if not header:
            header = cells
        elif len(cells) == len(header):
            found.append(dict(zip(header, cells, strict=True)))
    return found
