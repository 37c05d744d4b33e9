"""The rules a resume applies to per-trial logs that hold more than the journal
(``orchestrator.core.trial_logs``, sans-IO), on plain bytes and rows."""

from __future__ import annotations

import math
from typing import Any

from orchestrator.core.trial_logs import (
    abandoned,
    csv_iterations,
    kept_name,
    log_key,
    lost_rows,
    result_rows,
    spans,
    with_rows,
)
from orchestrator.views.loggers.values import dumps


def row(i: int, **more: Any) -> dict[str, Any]:
    return {"training_iteration": i, "loss": 1.0 / i, **more}


def test_result_rows_reads_what_the_logger_wrote_and_skips_a_cut_line() -> None:
    written = [row(1), row(2, loss=float("nan"), deep={"x": [float("-inf")]}), row(3)]
    data = "".join(dumps(r) + "\n" for r in written).encode()
    cut = data + dumps(row(4))[:7].encode()  # the driver died mid-line
    got = result_rows(cut + b"\n[1, 2]\n{}\n")
    assert [r["training_iteration"] for r in got] == [1, 2, 3]
    assert math.isnan(got[1]["loss"]) and got[1]["deep"] == {"x": [float("-inf")]}
    assert got[0] == written[0] and got[2] == written[2]


def test_csv_iterations_reads_whole_rows_only() -> None:
    data = b"loss,training_iteration,x\n0.5,1,\n0.25,2,a\n0.1,3\n"
    assert csv_iterations(data) == [1, 2]
    assert csv_iterations(b"loss\n1\n") == [] and csv_iterations(b"") == []


def test_rows_the_journal_lost_are_those_up_to_its_newest_iteration() -> None:
    journal = [row(i) for i in range(84, 151)]
    logged = [row(i, source="log") for i in range(1, 161)]
    lost = lost_rows(journal, logged, bound=150)
    assert [r["training_iteration"] for r in lost] == list(range(1, 84))  # not 151..160
    merged = with_rows(journal, lost)
    assert [r["training_iteration"] for r in merged] == list(range(1, 151))
    assert merged[83] == journal[0]  # the journal's own rows are kept as they are
    again = [row(5, source="rerun")]  # an iteration logged twice: the later line wins
    assert lost_rows([], [row(5), *again], bound=9) == again


def test_abandoned_iterations_and_how_they_are_named() -> None:
    assert abandoned([1, 2, 3, 4, 5], [1, 2, 3]) == [4, 5]
    assert abandoned([1, 2], [1, 2, 3]) == []
    assert spans([1, 2, 3, 5, 7, 8, 83]) == "1-3, 5, 7-8, 83" and spans([]) == ""
    assert kept_name("result.json", 0) == "result.json.kept-19700101T000000Z"
    assert log_key("a/b", "result.json") == "a_b/result.json"
