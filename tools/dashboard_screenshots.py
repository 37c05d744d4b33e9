"""Make the README's dashboard screenshots from real sweeps.

    python tools/dashboard_screenshots.py [--out docs]

Runs two small sweeps on the local Ray into a temporary storage (ASHA over a toy
learning curve, and PBT over a toy that climbs by its learning rate, checkpointed),
adds a damaged experiment, serves them with the dashboard, and saves what headless
Chromium shows: ``dashboard-experiments.png`` (the list), ``dashboard-asha.png`` (one
experiment: curves with ASHA's rungs, config against the metric, trials, stops),
``dashboard-pbt.png`` (PBT's lineage) and ``dashboard-damaged.png``. Takes about a
minute.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator import Orchestrator, Trainable  # noqa: E402
from orchestrator.schedulers import ASHA, PBT  # noqa: E402
from orchestrator.search import choice, loguniform, uniform  # noqa: E402
from orchestrator.views.dashboard import running  # noqa: E402
from storage import LocalStorage  # noqa: E402
from tests.dashboard.cdp import launched  # noqa: E402


class Curve(Trainable):
    """A learning curve: the loss falls towards a floor set by the learning rate (best
    near 1e-3) and the width, with noise."""

    def setup(self, config: dict[str, Any]) -> None:
        self.rng = random.Random(hash(json.dumps(config, sort_keys=True)))
        distance = abs(math.log10(config["lr"]) + 3)
        self.floor = 0.15 + 0.12 * distance + 0.04 * (config["width"] == 32)
        self.speed = 8 + 10 * config["dropout"]

    def step(self) -> dict[str, Any]:
        time.sleep(0.01)
        t = self.iteration + 1
        loss = self.floor + 1.6 * math.exp(-t / self.speed) + self.rng.gauss(0, 0.012)
        return {"loss": loss, "accuracy": 1 - loss / 2}


class Climber(Trainable):
    """PBT's toy: its score grows by ``lr`` a step (checkpointed), so a higher ``lr``
    wins; a new ``lr`` is taken in place."""

    def setup(self, config: dict[str, Any]) -> None:
        self.score = 0.0

    def step(self) -> dict[str, Any]:
        time.sleep(0.01)
        self.score += float(self.config["lr"]) * (1 - self.score / 200)
        return {"score": self.score}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        Path(checkpoint_dir, "score").write_text(str(self.score))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        self.score = float(Path(checkpoint_dir, "score").read_text())

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return True


async def experiments(root: Path) -> None:
    async with Orchestrator(storage=root, name="asha-curves", journal_interval=0.5) as orch:
        await orch.sweep(
            Curve,
            {
                "lr": loguniform(1e-5, 1e-1),
                "width": choice([32, 64, 128]),
                "dropout": uniform(0.0, 0.5),
            },
            num_samples=24,
            metric="loss",
            mode="min",
            scheduler=ASHA(max_t=60, grace_period=3, reduction_factor=3),
            max_concurrent_trials=8,
            resources={"cpu": 0.25},
            seed=7,
        )
    async with Orchestrator(storage=root, name="pbt-climb", journal_interval=0.5) as orch:
        await orch.sweep(
            Climber,
            {"lr": loguniform(0.05, 2.0)},
            num_samples=8,
            metric="score",
            mode="max",
            scheduler=PBT(
                perturbation_interval=10, hyperparam_mutations={"lr": loguniform(0.05, 2.0)}, seed=3
            ),
            stop={"training_iteration": 60},
            checkpoint_every=10,
            resources={"cpu": 0.25},
            seed=3,
        )
    damaged = root / "copied-badly"
    damaged.mkdir()
    head = (root / "pbt-climb" / "experiment_state.json").read_bytes()
    (damaged / "experiment_state.json").write_bytes(head[: len(head) // 3])


async def screenshots(root: Path, out: Path) -> None:
    async with running(LocalStorage(str(root)), port=0) as served, launched() as browser:
        base = f"http://127.0.0.1:{served.port}"
        page = await browser.new_page(1360, 900)
        for path, name, ready in (
            (
                "/",
                "experiments",
                "document.querySelectorAll('#experiments tr[data-experiment]').length === 3",
            ),
            ("/experiments/asha-curves", "asha", "document.body.dataset.ready === '1'"),
            ("/experiments/pbt-climb", "pbt", "document.body.dataset.ready === '1'"),
            ("/experiments/copied-badly", "damaged", "!document.getElementById('problem').hidden"),
        ):
            await page.goto(base + path)
            await page.wait_for(ready, 60)
            await asyncio.sleep(1.0)  # fonts and the charts' first frame
            await page.screenshot(out / f"dashboard-{name}.png", max_height=2400)
            print(f"wrote {out / f'dashboard-{name}.png'}", flush=True)
        if page.errors:
            raise SystemExit(f"the pages reported errors: {page.errors}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with tempfile.TemporaryDirectory(prefix="trialflow-shots-") as tmp:
        root = Path(tmp)
        args.out.mkdir(parents=True, exist_ok=True)
        asyncio.run(experiments(root))
        asyncio.run(screenshots(root, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
