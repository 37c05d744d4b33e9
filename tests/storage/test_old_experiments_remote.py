"""An experiment saved before content-addressed checkpoints (full copies, manifest
version 1: what ``TRIALFLOW_CHECKPOINT_DEDUP=0`` still writes) on S3 resumes with them
on: its trial restores a full copy, saves version-2 checkpoints from then on, and the
collector deletes the old full copies as it deletes any checkpoint, leaving exactly the
blobs the kept checkpoints name."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, TrialState
from storage import MANIFEST_NAME, open_storage
from storage.blobs import DEDUP_ENV

from ..support.servers import BUCKET, boto3_client, s3_runtime_env, unique_prefix
from ..support.trainables import Recorder, assert_failure_free_history

pytestmark = pytest.mark.usefixtures("ray_local")

CPU = {"cpu": 0.25}


def keys_under(moto_url: str, prefix: str) -> list[str]:
    s3 = boto3_client(moto_url)
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys += [o["Key"][len(prefix) :] for o in page.get("Contents", ())]
    return keys


async def test_an_experiment_of_full_copies_resumes_content_addressed(
    moto_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = unique_prefix()
    root = f"{prefix}/old/"
    options: dict[str, Any] = {
        "storage": f"s3://{BUCKET}/{prefix}",
        "name": "old",
        "keep_checkpoints": 2,
        "storage_options": {"endpoint_url": moto_url},
        "progress": False,
    }
    trial_options: dict[str, Any] = {
        "stop": {"training_iteration": 12},
        "checkpoint_every": 2,
        "resources": CPU,
        "trial_id": "t",
    }
    # Before: full copies (the driver's and the workers' environment say so).
    monkeypatch.setenv(DEDUP_ENV, "0")
    async with Orchestrator(**options, runtime_env=s3_runtime_env(**{DEDUP_ENV: "0"})) as orch:
        trial = orch.add_trial(Recorder, {"delay": 0.05}, **trial_options)
        running = asyncio.create_task(orch.run())
        while len(trial.checkpoints) < 2:
            await asyncio.sleep(0.05)
        await trial.pause()
        await running
    assert trial.state is TrialState.PAUSED
    old = [c.key for c in trial.checkpoints]
    keys = keys_under(moto_url, root)
    assert not [k for k in keys if k.startswith(".blobs/")]
    for key in old:
        manifest = json.loads(
            boto3_client(moto_url)
            .get_object(Bucket=BUCKET, Key=f"{root}{key}/{MANIFEST_NAME}")["Body"]
            .read()
        )
        assert manifest["version"] == 1
        assert f"{key}/{manifest['files'][0]['path']}" in keys  # the file under the key

    # After: content-addressed, resuming the same experiment.
    monkeypatch.delenv(DEDUP_ENV)
    async with Orchestrator(**options, resume=True, runtime_env=s3_runtime_env()) as orch:
        trial = orch.add_trial(Recorder, {"delay": 0.05}, **trial_options)
        assert trial.state is TrialState.PAUSED and [c.key for c in trial.checkpoints] == old
        await orch.run()
        await trial.resume()
        await trial.wait()
    assert trial.state is TrialState.TERMINATED, trial.error
    assert_failure_free_history(trial, 12)
    kept = [c.key for c in trial.checkpoints]
    assert kept == ["t/checkpoint_000010", "t/checkpoint_000012"]
    # The old full copies go (the collector works in the background), files and all;
    # the kept checkpoints are manifests naming blobs, and the bucket holds those blobs.
    for _ in range(600):
        keys = keys_under(moto_url, root)
        if not [k for k in keys if any(k.startswith(f"{key}/") for key in old)]:
            break
        await asyncio.sleep(0.05)
    for key in old:
        assert not [k for k in keys if k.startswith(f"{key}/")], key
    named: set[str] = set()
    async with open_storage(f"s3://{BUCKET}/{prefix}/old", endpoint_url=moto_url) as st:
        for key in kept:
            assert [k for k in keys if k.startswith(f"{key}/")] == [f"{key}/{MANIFEST_NAME}"]
            manifest = await st.get_checkpoint(key, tmp_path / key)
            assert manifest.version == 2
            named |= manifest.blobs()
    assert {k.rsplit("/", 1)[1] for k in keys if k.startswith(".blobs/")} == named
