"""The pieces ``repair`` merges with, on plain data: segments replayed with holes kept
in place (rollbacks included), a hole filled from the sources by iteration, what no
source holds named with the iterations around it, and the logs read back."""

from __future__ import annotations

from typing import Any

from orchestrator.journal.recovery import Lost, Recovered, merge_trial, ranges
from orchestrator.journal.sources import (
    read_csv_log,
    read_json_log,
    replay_with_holes,
    segment_damage,
)
from orchestrator.views.loggers.csvfile import CsvWriter
from orchestrator.views.loggers.jsonfile import JsonWriter


def row(i: int, run: str = "a") -> dict[str, Any]:
    return {"training_iteration": i, "loss": 1 / i, "run": run, "nested": {"x": i}}


def test_a_lost_segment_leaves_a_hole_and_the_rows_after_it_keep_their_place() -> None:
    parts = [  # the first segment (rows 1-3) is lost; then a rollback to 4
        {"trial": "t", "from": 3, "rows": [row(4), row(5), row(6)]},
        {"trial": "t", "from": 4, "rows": [row(5, "b")]},
    ]
    (rows,) = replay_with_holes(parts).values()
    assert rows == [None, None, None, row(4), row(5, "b")]


def test_a_hole_is_filled_by_iteration_from_the_most_trusted_source() -> None:
    positional = [None, None, None, row(4), row(5)]
    sources = [
        ("t/result.json", {2: row(2), 3: row(3), 5: row(5, "stale"), 6: row(6)}),
        ("checkpoints", {1: row(1)}),
        ("t/progress.csv", {1: row(1, "csv"), 2: row(2, "csv")}),
    ]
    rows, recovered, lost = merge_trial("t", positional, sources)
    assert rows == [row(1), row(2), row(3), row(4), row(5), row(6)]
    assert recovered == [
        Recovered("t", "t/result.json", (2, 3, 6)),  # 6: past the journal's end
        Recovered("t", "checkpoints", (1,)),
    ]
    assert recovered[0].line() == "trial t: iterations 2-3, 6 recovered from t/result.json"
    assert lost == []


def test_what_no_source_holds_is_lost_and_said_where() -> None:
    positional = [row(1), None, None, row(4), None]  # results_count 5: the last is gone too
    rows, _, lost = merge_trial("t", positional, [("log", {2: row(2)})])
    assert [r["training_iteration"] for r in rows] == [1, 2, 4]
    assert lost == [Lost("t", 1, 1, 4), Lost("t", 1, 4, None)]
    assert lost[0].line() == (
        "trial t: LOST 1 result(s) (after iteration 1 and before iteration 4): no surviving "
        "object holds them"
    )
    assert lost[1].line().startswith("trial t: LOST 1 result(s) (after iteration 4)")


def test_rows_between_two_consecutive_journal_rows_are_not_taken() -> None:
    """A log row that falls between two rows the journal has side by side is of
    another run (one the journal rolled back): it is not put in."""
    rows, recovered, _ = merge_trial("t", [row(1), row(3)], [("log", {2: row(2)})])
    assert rows == [row(1), row(3)] and recovered == []


def test_rows_out_of_iteration_order_are_kept_by_position() -> None:
    """A trainable that reports its own ``training_iteration`` out of order: nothing is
    merged by iteration (two rows of one iteration would become one)."""
    positional = [row(1), row(1, "again"), None, row(2)]
    rows, recovered, lost = merge_trial("t", positional, [("log", {3: row(3)})])
    assert rows == [row(1), row(1, "again"), row(2)]
    assert recovered == [] and lost == [Lost("t", 1, None, None)]


def test_ranges() -> None:
    assert ranges([5, 1, 2, 3, 9, 10]) == "1-3, 5, 9-10"


def test_the_logs_read_back_as_the_loggers_wrote_them(tmp_path: Any) -> None:
    results = [row(i) for i in range(1, 4)]
    for writer in (JsonWriter(tmp_path, lambda name: None), CsvWriter(tmp_path, lambda n: None)):
        writer.reset({"lr": 0.1})
        writer.write(results)
        writer.end({"lr": 0.1}, results[-1])
    rows, problem = read_json_log((tmp_path / "result.json").read_bytes())
    assert problem is None and rows == {r["training_iteration"]: r for r in results}
    rows, problem = read_csv_log((tmp_path / "progress.csv").read_bytes())
    assert problem is None and rows == {r["training_iteration"]: r for r in results}

    data = (tmp_path / "result.json").read_bytes()
    rows, problem = read_json_log(data[:-10])
    assert sorted(rows) == [1, 2] and problem is not None and "is truncated" in problem
    rows, problem = read_json_log(bytes(len(data)))
    assert rows == {} and problem == f"is all zero bytes ({len(data)} bytes): its contents are lost"
    rows, problem = read_json_log(b"[1, 2]\n" + data)
    assert len(rows) == 3 and problem == "has 1 line(s) that are not results (1)"


def test_a_damaged_segment_says_whose_results_it_held() -> None:
    data = (
        b'{"trial":"a","from":0,"rows":[{"training_iteration":1}]}\n'
        b'{"trial":"b","from":3,"rows":[{"training_iteration":4},{"trai'
    )
    damage = segment_damage(data)
    assert damage is not None
    what, held = damage
    assert what.startswith("is truncated")
    assert held == "trial a: 1 result(s) read; trial b: results from #4 on cut off"
    assert segment_damage(None) == ("is missing", "")
    garbage = segment_damage(b"\x89garbage" * 5)  # no line break: still not "truncated"
    assert garbage is not None and garbage[0].startswith("has a damaged line 1 (at byte 0)")
    assert segment_damage(bytes(9)) == (
        "is all zero bytes (9 bytes): its contents are lost",
        "nothing readable",
    )
