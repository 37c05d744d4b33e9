"""Experiments end to end on the S3 and GCS emulators: each trial's actor uploads its
own checkpoints, restores download them, GC deletes from the bucket, and a storage
outage during saves loses nothing and never shows a half-written checkpoint."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from orchestrator import Orchestrator, Trial, TrialState
from storage import MANIFEST_NAME, RetryPolicy, open_storage

from ..support.servers import (
    BUCKET,
    FlakyProxy,
    boto3_client,
    s3_runtime_env,
    unique_prefix,
)
from ..support.trainables import (
    Counter,
    Recorder,
    assert_failure_free_history,
    counting,
    kill_worker,
)

pytestmark = pytest.mark.usefixtures("ray_local")

CPU = {"cpu": 0.25}


class KillOnce:
    """Kill the first trial's actor once it passed ``at`` (after a checkpoint; with
    ``persisted``, once one is persisted: then ``newest_persisted`` is its iteration)."""

    def __init__(self, at: int, persisted: bool = False) -> None:
        self.at, self.persisted = at, persisted
        self.victim: str | None = None
        self.newest_persisted: int | None = None

    async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
        if self.victim is None and result["training_iteration"] >= self.at:
            if self.persisted and not trial.checkpoints:
                return
            self.victim = trial.id
            if trial.checkpoints:
                self.newest_persisted = trial.checkpoints[-1].iteration
            kill_worker(result["pid"])


def s3_keys(moto_url: str, prefix: str) -> list[str]:
    s3 = boto3_client(moto_url)
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]]


def assert_ended_with_two_kept_on_s3(trials: list[Trial], keys: list[str], where: str) -> None:
    """Every trial TERMINATED with a failure-free history of 15, and exactly its
    checkpoints 12 and 15 committed under ``where`` (``<prefix>/<experiment>``)."""
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, trial.error
        assert_failure_free_history(trial, 15)
        assert [c.iteration for c in trial.checkpoints] == [12, 15]
        manifests = sorted(
            k for k in keys if k.startswith(f"{where}/{trial.id}/") and k.endswith(MANIFEST_NAME)
        )
        assert manifests == [
            f"{where}/{trial.id}/checkpoint_000012/{MANIFEST_NAME}",
            f"{where}/{trial.id}/checkpoint_000015/{MANIFEST_NAME}",
        ]


async def test_experiment_on_s3(moto_url: str) -> None:
    prefix = unique_prefix()
    killer = KillOnce(at=7)
    async with Orchestrator(
        storage=f"s3://{BUCKET}/{prefix}",
        name="exp",
        keep_checkpoints=2,
        max_failures=1,
        hooks=[killer],
        storage_options={"endpoint_url": moto_url},
        runtime_env=s3_runtime_env(),
    ) as orch:
        trials = [
            orch.add_trial(
                Recorder,
                {"delay": 0.02},
                stop={"training_iteration": 15},
                checkpoint_every=3,
                resources=CPU,
            )
            for _ in range(2)
        ]
        await orch.run()
        await asyncio.sleep(0.5)  # background GC
    keys = s3_keys(moto_url, prefix)
    assert_ended_with_two_kept_on_s3(trials, keys, f"{prefix}/exp")
    for ckpt in (c for trial in trials for c in trial.checkpoints):
        assert ckpt.uri == f"s3://{BUCKET}/{prefix}/exp/{ckpt.key}"
        assert ckpt.path is None
    assert killer.victim is not None
    victim = next(t for t in trials if t.id == killer.victim)
    assert victim.num_failures == 1  # restored from S3, history intact
    assert f"{prefix}/exp/experiment_state.json" in keys


async def test_function_trials_on_s3(moto_url: str) -> None:
    """A function's reported checkpoints go up to S3 (in the actor, and through the
    node's persister when too many files), old ones are collected, and a killed actor's
    function starts again from the newest one there."""
    prefix = unique_prefix()
    killer = KillOnce(at=7, persisted=True)
    async with Orchestrator(
        storage=f"s3://{BUCKET}/{prefix}",
        name="fn",
        keep_checkpoints=2,
        max_failures=1,
        hooks=[killer],
        storage_options={"endpoint_url": moto_url},
        runtime_env=s3_runtime_env(),
    ) as orch:
        trials = [
            orch.add_trial(
                counting,
                {"every": 3, "delay": 0.05, "padding_files": padding},
                stop={"count": 15},
                resources=CPU,
                trial_id=f"fn{padding}",
            )
            for padding in (0, 12)
        ]
        await orch.run()
        await asyncio.sleep(0.5)  # background GC
    assert_ended_with_two_kept_on_s3(trials, s3_keys(moto_url, prefix), f"{prefix}/fn")
    victim = next(t for t in trials if t.id == killer.victim)
    assert victim.num_failures == 1
    # The restarted function got a checkpoint from S3: the newest persisted when its actor
    # was killed, or one the node's persister finished after.
    assert killer.newest_persisted is not None and killer.newest_persisted >= 3
    resumed = victim.results[-1]["resumed_from"]
    assert resumed >= killer.newest_persisted and resumed % 3 == 0


async def test_experiment_on_gcs(gcs_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_url)
    prefix = unique_prefix()
    killer = KillOnce(at=5)
    async with Orchestrator(
        storage=f"gs://{BUCKET}/{prefix}",
        name="exp",
        keep_checkpoints=1,
        max_failures=1,
        hooks=[killer],
        runtime_env={"env_vars": {"STORAGE_EMULATOR_HOST": gcs_url}},
    ) as orch:
        trial = orch.add_trial(
            Recorder,
            {"delay": 0.02},
            stop={"training_iteration": 10},
            checkpoint_every=2,
            resources=CPU,
        )
        await orch.run()
        await asyncio.sleep(0.5)
    assert trial.state is TrialState.TERMINATED, trial.error
    assert trial.num_failures == 1
    assert_failure_free_history(trial, 10)
    assert [c.iteration for c in trial.checkpoints] == [10]
    listing = requests.get(  # noqa: ASYNC210 - one request to the emulator
        f"{gcs_url}/storage/v1/b/{BUCKET}/o", params={"prefix": f"{prefix}/exp/{trial.id}/"}
    ).json()
    names = sorted(item["name"] for item in listing.get("items", []))
    assert [n for n in names if n.endswith(MANIFEST_NAME)] == [
        f"{prefix}/exp/{trial.id}/checkpoint_000010/{MANIFEST_NAME}"
    ]


async def test_s3_outage_during_saves_loses_nothing(
    moto_url: str, proxy_to: list[FlakyProxy], tmp_path: Path
) -> None:
    """S3 becomes unreachable for a few seconds while trials save: training goes on,
    the saves are retried, every checkpoint ends up committed, none is half-visible."""
    proxy = FlakyProxy(target_port=int(moto_url.rsplit(":", 1)[1]))
    await proxy.start()
    proxy_to.append(proxy)
    prefix = unique_prefix()
    uri = f"s3://{BUCKET}/{prefix}"
    options = {"endpoint_url": proxy.url, "retry": RetryPolicy(attempts=2, base_delay=0.05)}
    async with Orchestrator(
        storage=uri,
        name="outage",
        storage_options=options,
        runtime_env=s3_runtime_env(),
        save_retry_for=60,
    ) as orch:
        trials = [
            orch.add_trial(
                Recorder,
                {"delay": 0.02},
                stop={"training_iteration": 300},
                checkpoint_every=4,
                resources=CPU,
            )
            for _ in range(2)
        ]
        runner = asyncio.create_task(orch.run())
        while min(len(t.checkpoints) for t in trials) < 3:
            await asyncio.sleep(0.05)
        proxy.drop_next = 10**9  # refuse every new connection...
        proxy.break_all()  # ...and cut the live ones
        during = [t.iteration for t in trials]
        # S3 stays down 3 s at least, and until both trials trained on meanwhile (a
        # loaded machine may run no step in 3 s: wait for the steps, not for a time).
        down_until, deadline = time.monotonic() + 3.0, time.monotonic() + 120
        while time.monotonic() < down_until or any(
            t.iteration <= it for t, it in zip(trials, during, strict=True)
        ):
            assert time.monotonic() < deadline, ("no step while S3 was down", during)
            await asyncio.sleep(0.05)
        assert all(t.state is TrialState.RUNNING for t in trials)
        proxy.drop_next = 0
        await asyncio.wait_for(runner, timeout=120)
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, trial.error
        assert_failure_free_history(trial, 300)
        assert [c.iteration for c in trial.checkpoints] == list(range(4, 301, 4))
    # Read back without the proxy: exactly the committed checkpoints, all intact.
    async with open_storage(uri, endpoint_url=moto_url) as st:
        for trial in trials:
            listed = await st.list_checkpoints(f"outage/{trial.id}")
            assert sorted(listed) == sorted(f"outage/{c.key}" for c in trial.checkpoints)
            await st.get_checkpoint(f"outage/{trial.checkpoints[-1].key}", tmp_path / trial.id)
    uploads = boto3_client(moto_url).list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)
    assert not uploads.get("Uploads")


async def test_a_remote_experiment_has_its_logs_too(moto_url: str, tmp_path: Path) -> None:
    prefix = unique_prefix()
    uri = f"s3://{BUCKET}/{prefix}"
    async with Orchestrator(
        storage=uri,
        name="remote",
        storage_options={"endpoint_url": moto_url},
        runtime_env=s3_runtime_env(),
        progress=False,
    ) as orch:
        trial = orch.add_trial(Counter, stop={"training_iteration": 5}, resources=CPU)
        await orch.run()
    async with open_storage(f"{uri}/remote", endpoint_url=moto_url) as store:
        keys = await store.list(trial.id)
        text = (await store.read_bytes(f"{trial.id}/result.json")).decode()
    assert {f"{trial.id}/result.json", f"{trial.id}/progress.csv"} <= set(keys)
    assert any("tfevents" in k for k in keys)
    its = [json.loads(line)["training_iteration"] for line in text.splitlines()]
    assert its == [1, 2, 3, 4, 5]
