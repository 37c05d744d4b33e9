"""A resumed experiment on S3: an ``add_trial`` call before entering reads the journal
from the bucket at once (on a loop of its own, in a thread, while the test's loop
runs) and returns a trial with its final id. On the fake Ray: only the storage is the
subject here."""

from __future__ import annotations

from typing import Any

from orchestrator import Orchestrator, TrialState

from ..support.servers import BUCKET, unique_prefix
from ..support.trainables import Counter

CPU = {"cpu": 0.25}


async def test_a_call_before_entering_has_its_final_id_on_s3(moto_url: str, fake_ray: Any) -> None:
    where: dict[str, Any] = {
        "storage": f"s3://{BUCKET}/{unique_prefix()}",
        "name": "preview",
        "storage_options": {"endpoint_url": moto_url},
        "progress": False,
        "loggers": [],
        "_ray_backend": fake_ray,
    }
    async with Orchestrator(**where) as orch:
        first = orch.add_trial(Counter, {"n": 1}, stop={"training_iteration": 2}, resources=CPU)
        await orch.run()
    again = Orchestrator(**where, resume=True)
    adopted = again.add_trial(Counter, {"n": 1}, stop={"training_iteration": 2}, resources=CPU)
    new = again.add_trial(Counter, {"n": 2}, stop={"training_iteration": 2}, resources=CPU)
    assert adopted.id == first.id and new.id != first.id  # before entering
    new_id = new.id
    async with again:
        await again.run()
    assert adopted.id == first.id and new.id == new_id
    assert adopted.state is TrialState.TERMINATED and adopted.iteration == 2
    assert new.state is TrialState.TERMINATED
