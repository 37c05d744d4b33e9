"""The lease tells the truth (issue 31), on a local directory, S3 (moto_server) and GCS
(the emulator): a release waits for a renewal whose write is in flight; "taken over" is
said only when another holder's record is there, and a renewal whose write landed but
was answered with an error is this driver's, not a loss; the lease is renewed while Ray
starts.

The storage under the lease is the real driver, wrapped only to hold or fail the
*answer* of a conditional write after the write itself landed: what a cancel or a lost
connection does to a request in flight."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest

from orchestrator import Orchestrator
from orchestrator.api.lease import TTL_ENV, ExperimentLease, take_lease
from orchestrator.core.lease_record import LEASE_KEY, MIN_TTL_S, LeaseRecord
from storage import Storage, StorageError, open_storage

from ..support.servers import BUCKET, unique_prefix

#: Generous for a loaded 2-core machine: every wait below ends on an event long before.
WAIT_S = 60.0


class Where:
    """One backend: where experiments go, and the options to open them."""

    def __init__(self, uri: str, options: dict[str, Any]) -> None:
        self.uri, self.options = uri, options

    def open_root(self) -> Storage:
        options = {"create": True, **self.options} if "://" not in self.uri else self.options
        return open_storage(f"{self.uri}/exp", **options)

    async def stored(self) -> LeaseRecord | None:
        """The lease as stored, read through a driver of its own (not the lease's)."""
        async with open_storage(f"{self.uri}/exp", **self.options) as st:
            if not await st.exists(LEASE_KEY):
                return None
            return LeaseRecord.from_json(await st.read_bytes(LEASE_KEY))

    def stored_from_any_thread(self) -> LeaseRecord | None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, self.stored()).result()


@pytest.fixture(params=["local", "s3", "gcs"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    if request.param == "local":
        return Where(str(tmp_path / "store"), {})
    prefix = unique_prefix()
    if request.param == "s3":
        url = request.getfixturevalue("moto_url")
        return Where(f"s3://{BUCKET}/{prefix}", {"endpoint_url": url})
    url = request.getfixturevalue("gcs_url")
    return Where(f"gs://{BUCKET}/{prefix}", {"api_root": url})


class Answers:
    """The real driver; its next conditional replace (a renewal) can have its answer
    held after the write landed (``hold_next``), or answered with an error
    (``fail_next``). ``landed`` is set once that write is in storage."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.hold_next = False
        self.fail_next = False
        self.landed = asyncio.Event()
        self.answer = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def uri(self) -> str:
        return self.inner.uri

    async def replace_bytes_if(self, key: str, data: bytes, version: str) -> str | None:
        new = await self.inner.replace_bytes_if(key, data, version)
        if self.hold_next:
            self.hold_next = False
            self.landed.set()
            await self.answer.wait()
        elif self.fail_next and new is not None:
            self.fail_next = False
            self.landed.set()
            raise StorageError("connection reset by peer (injected)", uri=self.uri, key=key)
        return new


async def take(store: Storage | Answers, **options: Any) -> ExperimentLease:
    return await take_lease(cast(Storage, store), name="exp", **options)


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT_S:.0f} s: {what}"
        await asyncio.sleep(0.05)


async def waited(aw: Awaitable[Any]) -> Any:
    return await asyncio.wait_for(aw, timeout=WAIT_S)


def untruths(caplog: pytest.LogCaptureFixture) -> list[str]:
    words = ("taken over", "lost its lease", "not renewed", "could not release")
    return [r.getMessage() for r in caplog.records if any(w in r.getMessage() for w in words)]


async def test_release_waits_for_a_renewal_in_flight(
    where: Where, caplog: pytest.LogCaptureFixture
) -> None:
    """Release cancelled the renewal while its write could still land: the lease was
    then at a version release did not know, so it was left behind, "taken over"."""
    store = Answers(where.open_root())
    store.hold_next = True
    lease = await take(store, ttl=MIN_TTL_S)
    with caplog.at_level(logging.WARNING, logger="orchestrator.api.lease"):
        await waited(store.landed.wait())  # a renewal is in storage, its answer held
        releasing = asyncio.create_task(lease.release())
        for _ in range(50):  # let release reach the renewal (the old code cancelled it)
            await asyncio.sleep(0)
        assert not releasing.done()
        store.answer.set()
        await waited(releasing)
    assert await where.stored() is None
    assert untruths(caplog) == []


async def test_a_renewal_answered_with_an_error_after_it_landed_is_still_ours(
    where: Where, caplog: pytest.LogCaptureFixture
) -> None:
    """The storage's answer to a renewal was lost (an error), but its write landed: the
    next renewal finds this driver's own record at another version, which is not a
    loss, and the release deletes it."""
    store = Answers(where.open_root())
    store.fail_next = True
    lease = await take(store, ttl=MIN_TTL_S)
    lost: list[BaseException] = []
    lease.on_lost(lost.append)
    with caplog.at_level(logging.WARNING, logger="orchestrator.api.lease"):
        await waited(store.landed.wait())
        assert lease.record is not None
        landed = await where.stored()
        assert landed is not None and landed.renewed_at > lease.record.renewed_at
        await until(
            lambda: bool(lost) or lease.record.renewed_at > landed.renewed_at,  # type: ignore[union-attr]
            "a renewal after the one answered with an error",
        )
        assert lost == [] and lease.lost is None
        await lease.release()
    assert await where.stored() is None
    assert [m for m in untruths(caplog) if "could not renew" not in m] == []


async def test_a_release_after_a_renewal_answered_with_an_error_deletes_its_write(
    where: Where, caplog: pytest.LogCaptureFixture
) -> None:
    """The last renewal's write landed but its answer was an error: the lease is at a
    version this driver never learnt. Its release reads the record back, finds its own,
    and deletes it (it said "taken over at exit" and left it)."""
    store = Answers(where.open_root())
    store.fail_next = True
    lease = await take(store, ttl=MIN_TTL_S)
    with caplog.at_level(logging.WARNING, logger="orchestrator.api.lease"):
        await waited(store.landed.wait())
        await lease.release()
    assert await where.stored() is None
    assert [m for m in untruths(caplog) if "could not renew" not in m] == []


async def test_taken_over_is_said_only_when_another_holders_record_is_there(
    where: Where, caplog: pytest.LogCaptureFixture
) -> None:
    first = await take(where.open_root(), ttl=300.0)  # renews long after this test
    second = await take(where.open_root(), ttl=300.0, take_over=True)
    try:
        with caplog.at_level(logging.WARNING, logger="orchestrator.api.lease"):
            await first.release()  # it has not renewed since: it learns at its release
        assert f"taken over before this driver exited, by pid {second.holder.pid}" in caplog.text
        stored = await where.stored()
        assert stored is not None and stored.holder == second.holder  # left to it
        caplog.clear()
    finally:
        await second.release()
    assert await where.stored() is None
    assert untruths(caplog) == []


@pytest.mark.usefixtures("ray_local")
async def test_the_lease_is_renewed_while_ray_starts(
    where: Where, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """ray.init ran on the loop, so no renewal could happen while Ray started: with a
    short ttl every start warned that the lease was not renewed. A start that lasts
    until it has seen the lease renewed (on the old code: never) proves it is not."""
    import orchestrator.engine.raystart as raystart

    seen: list[LeaseRecord] = []

    def slow_start(*args: object, **kwargs: object) -> bool:
        first = where.stored_from_any_thread()
        assert first is not None
        deadline = time.monotonic() + WAIT_S / 2
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = where.stored_from_any_thread()
            if now is not None and now.renewed_at > first.renewed_at:
                seen.append(now)
                break
        return False  # the session's Ray is up already: not this session's to shut down

    monkeypatch.setenv(TTL_ENV, str(MIN_TTL_S))
    monkeypatch.setattr(raystart, "ensure_ray", slow_start)
    with caplog.at_level(logging.WARNING, logger="orchestrator.api.lease"):
        async with Orchestrator(
            storage=where.uri, name="exp", storage_options=where.options, progress=False
        ):
            assert seen, "the lease was not renewed while Ray started"
    assert await where.stored() is None
    assert untruths(caplog) == []
