"""PBT on S3 (moto_server, through a proxy that counts the bytes sent up), under the fake
Ray: each trial's model has a frozen part of its own, and exploits copy models between
trials. Content-addressed checkpoints upload each frozen part once, whatever the
exploits and the dozens of checkpoints (full copies would send it at every save), and
the collector leaves exactly the blobs the kept checkpoints name."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from orchestrator import Orchestrator, TrialState
from orchestrator.schedulers import PBT
from orchestrator.search import grid
from storage import open_storage

from ..support.servers import BUCKET, FlakyProxy, boto3_client, unique_prefix
from ..support.trainables import Climber

MiB = 1 << 20
BACKBONE = 12 * MiB  # three chunks
TRIALS = 4
CPU = {"cpu": 0.25}


class FrozenClimber(Climber):
    """A Climber whose checkpoint holds a frozen part: random at its first setup, then
    whatever checkpoint it loads (an exploit's donor's)."""

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        self.backbone = os.urandom(BACKBONE)

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        super().save_checkpoint(checkpoint_dir)
        Path(checkpoint_dir, "backbone.bin").write_bytes(self.backbone)

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        super().load_checkpoint(checkpoint_dir)
        self.backbone = Path(checkpoint_dir, "backbone.bin").read_bytes()


def blobs(moto_url: str, root: str) -> set[str]:
    s3 = boto3_client(moto_url)
    found: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=f"{root}/.blobs/"
    ):
        found |= {o["Key"].rsplit("/", 1)[1] for o in page.get("Contents", ())}
    return found


async def test_pbt_exploits_upload_no_frozen_part_again(
    moto_url: str, fake_ray: Any, proxy_to: list[FlakyProxy], tmp_path: Path
) -> None:
    proxy = FlakyProxy(target_port=int(moto_url.rsplit(":", 1)[1]))
    await proxy.start()
    proxy_to.append(proxy)
    prefix = unique_prefix()
    scheduler = PBT(
        perturbation_interval=4,
        hyperparam_mutations={"lr": [0.01, 0.1, 1.0, 10.0]},
        quantile_fraction=0.25,
        resample_probability=0.5,
        seed=1,
    )
    async with Orchestrator(
        storage=f"s3://{BUCKET}/{prefix}",
        name="pbt",
        storage_options={"endpoint_url": proxy.url},
        keep_checkpoints=1,
        progress=False,
        loggers=[],
        _ray_backend=fake_ray,
    ) as orch:
        result = await orch.sweep(
            FrozenClimber,
            {"lr": grid([0.01, 0.1, 1.0, 10.0]), "marks": str(tmp_path), "delay": 0.02},
            metric="score",
            mode="max",
            scheduler=scheduler,
            checkpoint_every=2,
            stop={"training_iteration": 24},
            resources=CPU,
        )
    assert all(t.state is TrialState.TERMINATED for t in result.trials)
    assert scheduler.lineage, "no exploit happened"
    saves = 12 * TRIALS
    # Each frozen part went up once: full copies would have sent it at each of the 48
    # saves (576 MiB); the rest (journal, manifests, scores, requests) is small.
    assert proxy.sent_up < TRIALS * BACKBONE + 6 * MiB, (proxy.sent_up, saves)
    # Exactly the blobs the kept checkpoints name are left (the collector's work runs
    # in the background: wait for it).
    root = f"{prefix}/pbt"
    async with open_storage(f"s3://{BUCKET}/{root}", endpoint_url=moto_url) as st:
        named: set[str] = set()
        for trial in result.trials:
            for ckpt in trial.checkpoints:
                named |= (await st.read_manifest(ckpt.key)).blobs()
    for _ in range(400):
        if blobs(moto_url, root) == named:
            break
        await asyncio.sleep(0.05)
    assert blobs(moto_url, root) == named
