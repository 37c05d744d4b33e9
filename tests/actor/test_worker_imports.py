"""What a trial worker imports: the trainable's module, and with it ``Orchestrator``.

Every trial worker unpickles the user's trainable class, which imports the user's
module, which usually does ``from orchestrator import Orchestrator, Trainable``. Starting
a worker is most of a short trial's cost, so that import must not load the driver's
machinery (loop, journal, storage...): it cost about 0.12 CPU-seconds per worker.
"""

from __future__ import annotations

import json
import subprocess
import sys

DRIVER_ONLY = (
    "orchestrator.engine.loop",
    "orchestrator.journal.writer",
    "orchestrator.core.machine",
    "orchestrator.api.trial",
    "orchestrator.engine.hooks",
    "orchestrator.engine.collector",
    "orchestrator.actor.persister",
    "storage",
    "transfer",
)


def test_importing_the_public_api_leaves_the_driver_machinery_unloaded() -> None:
    probe = (
        "import json, sys\n"
        "from orchestrator import Orchestrator, Trainable\n"
        "import orchestrator.actor.trial_actor\n"
        f"print(json.dumps([m for m in {list(DRIVER_ONLY)!r} if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
