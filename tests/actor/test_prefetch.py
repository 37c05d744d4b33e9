"""A restarting actor downloads the checkpoint it will restore beside the trainable's
setup: the restore that follows loads what was fetched (in-process, no Ray needed)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from ray import cloudpickle

from orchestrator.actor.trial_actor import TrialActor
from orchestrator.core.stopping import StopCondition
from storage import open_storage

from ..support.trainables import Counter


class SlowSetup(Counter):
    """Records when setup ran and what the restore found already fetched."""

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        import time

        time.sleep(0.3)  # a model being built: the download goes on meanwhile


async def committed(root: Path, count: int) -> dict[str, Any]:
    source = root / "src"
    source.mkdir()
    (source / "state.json").write_text(json.dumps({"count": count}))
    async with open_storage(root / "store", create=True) as store:
        manifest = await store.put_checkpoint(source, "t/checkpoint_000007")
    path = str(root / "store" / "t" / "checkpoint_000007")
    return {
        "trial_id": "t",
        "iteration": 7,
        "key": "t/checkpoint_000007",
        "uri": "file://" + path,
        "path": path,
        "metrics": {},
        "manifest": manifest.to_dict(),
    }


async def test_setup_starts_the_download_and_restore_uses_it(tmp_path: Path) -> None:
    checkpoint = await committed(tmp_path, 7)
    actor = TrialActor(str(tmp_path / "store"))
    payload = cloudpickle.dumps((SlowSetup, {}, StopCondition("t", None)))
    await asyncio.to_thread(actor.setup, "t", 1, payload, checkpoint)
    hosted = actor._trials["t"]
    try:
        assert hosted.prefetch is not None and hosted.prefetch[0] == "t/checkpoint_000007"
        prefetched = hosted.prefetch[1]
        hosted.prefetch[2].result(timeout=30)  # done during the 0.3 s of setup, or soon after
        assert os.path.isfile(os.path.join(prefetched, "state.json"))
        await asyncio.to_thread(actor.restore, "t", 1, checkpoint, None, True)
        assert hosted.require().count == 7  # type: ignore[attr-defined]
        assert not os.path.exists(prefetched)  # loaded, then removed
        assert hosted.prefetch is None
    finally:
        actor.drop("t", 1)
        actor.shutdown()


async def test_a_prefetch_for_another_checkpoint_is_not_used(tmp_path: Path) -> None:
    checkpoint = await committed(tmp_path, 7)
    actor = TrialActor(str(tmp_path / "store"))
    payload = cloudpickle.dumps((Counter, {}, StopCondition("t", None)))
    other = {**checkpoint, "key": "t/checkpoint_000099", "path": None}
    await asyncio.to_thread(actor.setup, "t", 1, payload, other)
    try:
        await asyncio.to_thread(actor.restore, "t", 1, checkpoint, None, True)
        assert actor._trials["t"].require().count == 7  # type: ignore[attr-defined]
    finally:
        actor.drop("t", 1)
        actor.shutdown()
