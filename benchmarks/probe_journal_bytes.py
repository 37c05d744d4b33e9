"""What one journal write stores, against the trials the experiment had (issue 36: "the
journal's write cost per result O(1) in N").

The journal's writer alone (no Ray, no loop, no sweep document), on local storage, fed
as a sweep feeds it: 8 trials live at a time; between two writes each of them reports 2
results and ends, and 8 new ones are added. Every write's bytes are counted (every
object: head and backup, segment, sealed object). Printed per N (trials ended in all):
the mean bytes of a write over the last tenth of the writes, the largest write, the
last head's size, and the bytes stored per result over the whole run.

Usage::

    python -m benchmarks.probe_journal_bytes                  # N = 1,000 / 4,000 / 10,000
    python -m benchmarks.probe_journal_bytes --sizes 1000 4000

Runs on any tree since the journal had ``Journal.flush`` (the same script measured the
tree before sealed objects, from an exported copy of it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

LIVE = 8
RESULTS = 2


class _Counted:
    """The journal's view of a storage: every write's size, by write."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.sizes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def write_bytes(self, key: str, data: bytes) -> None:
        self.sizes.append(len(data))
        await self.store.write_bytes(key, data)


async def measure(trials: int) -> dict[str, Any]:
    from orchestrator import Orchestrator, TrialState
    from orchestrator.core.journal_format import JOURNAL_KEY
    from orchestrator.journal.writer import Journal
    from storage import open_storage
    from tests.support.trainables import Counter

    with tempfile.TemporaryDirectory(prefix="probe-journal-") as tmp:
        orch = Orchestrator(storage=Path(tmp) / "unused", name="exp")
        async with open_storage(Path(tmp) / "store", create=True) as store:
            counted = _Counted(store)
            journal = Journal(counted, name="exp", interval=0.01)
            per_write: list[int] = []
            made = 0
            live: list[Any] = []
            while made < trials or live:
                while len(live) < LIVE and made < trials:
                    rt = orch.add_trial(Counter, trial_id=f"t{made:06d}")._rt
                    journal.track(rt)
                    live.append(rt)
                    made += 1
                for rt in live:
                    for step in range(RESULTS):
                        result = {"training_iteration": step + 1, "score": 0.5, "trial": rt.id}
                        rt.results.append(result)
                        journal.record_result(rt, result)
                    rt.machine._state = TrialState.TERMINATED
                    journal.changed(rt)
                live = []
                before = len(counted.sizes)
                await journal.flush()
                per_write.append(sum(counted.sizes[before:]))
            for _ in range(2):  # the last ones sealed
                before = len(counted.sizes)
                journal.touch()
                await journal.flush()
                per_write.append(sum(counted.sizes[before:]))
            head = len(await store.read_bytes(JOURNAL_KEY))
    tail = per_write[-max(1, len(per_write) // 10) :]
    return {
        "trials": trials,
        "writes": len(per_write),
        "kib_per_write_last_tenth": sum(tail) / len(tail) / 1024,
        "largest_write_kib": max(per_write) / 1024,
        "last_head_kib": head / 1024,
        "bytes_per_result": sum(per_write) / (trials * RESULTS),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 4_000, 10_000])
    args = parser.parse_args()
    for trials in args.sizes:
        row = asyncio.run(measure(trials))
        print(json.dumps(row), flush=True)
        print(
            f"N={trials}: {row['writes']} writes, {row['kib_per_write_last_tenth']:.1f} KiB a "
            f"write (last tenth), largest {row['largest_write_kib']:.1f} KiB, last head "
            f"{row['last_head_kib']:.1f} KiB, {row['bytes_per_result']:.0f} bytes stored "
            "per result",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
