"""The experiment lease on S3 (moto_server) and GCS (the emulator): the same conditional
writes that the local tests exercise, through each driver's own preconditions."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator import ExperimentLocked, Orchestrator
from orchestrator.api.experiment import Experiment
from orchestrator.api.lease import acquire_lease
from orchestrator.core.lease_record import LEASE_KEY, LeaseRecord
from storage import open_storage

from ..support.servers import BUCKET, unique_prefix


@pytest.fixture(params=["s3", "gcs"])
def where(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    prefix = unique_prefix()
    if request.param == "s3":
        url = request.getfixturevalue("moto_url")
        return f"s3://{BUCKET}/{prefix}", {"endpoint_url": url}
    url = request.getfixturevalue("gcs_url")
    return f"gs://{BUCKET}/{prefix}", {"api_root": url}


async def holder_in_storage(uri: str, options: dict[str, Any]) -> LeaseRecord | None:
    async with open_storage(f"{uri}/exp", **options) as st:
        if not await st.exists(LEASE_KEY):
            return None
        return LeaseRecord.from_json(await st.read_bytes(LEASE_KEY))


async def test_one_driver_per_experiment_on_remote_storage(
    where: tuple[str, dict[str, Any]],
) -> None:
    uri, options = where

    def driver(**kw: Any) -> Experiment:
        return Orchestrator(storage=uri, name="exp", storage_options=options, **kw)._exp

    first = await acquire_lease(driver())
    try:
        assert (await holder_in_storage(uri, options)).holder == first.holder  # type: ignore[union-attr]
        with pytest.raises(ExperimentLocked, match=f"pid {first.holder.pid} on host"):
            await acquire_lease(driver())
        second = await acquire_lease(driver(take_over=True))
        try:
            assert (await holder_in_storage(uri, options)).holder == second.holder  # type: ignore[union-attr]
            assert first.lost is None  # it finds out at its next renewal
        finally:
            await second.release()
        assert await holder_in_storage(uri, options) is None
        third = await acquire_lease(driver())
        await third.release()
    finally:
        await first.release()  # the lease is not its own: it deletes nothing
    assert await holder_in_storage(uri, options) is None
