"""The TensorBoard logger keeps torch out of the driver (issue 36).

``import tensorboardX`` imports torch (its ``SummaryWriter``), some 260 MiB of the
driver's memory for the few protobuf classes the logger writes. The logger loads only
the submodules it uses; a later ``import tensorboardX`` by anyone else still works.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import sys
from pathlib import Path
from orchestrator.views.loggers.tensorboard import TensorBoardWriter

out = Path(sys.argv[1])
writer = TensorBoardWriter(out, lambda name: None)
writer.write([{"training_iteration": 1, "loss": 0.5}])
writer.end({"lr": 0.1}, {"training_iteration": 1, "loss": 0.5})
print("torch" in sys.modules, "tensorboardX" in sys.modules)
import tensorboardX
print(tensorboardX.SummaryWriter.__name__, len(list(out.iterdir())))
"""


def test_the_logger_writes_events_without_importing_torch(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False", "SummaryWriter", "1"]
