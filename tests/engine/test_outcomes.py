"""Completions read into events and follow-ups (``engine/outcomes.py``), every kind.

A completion is a ``concurrent.futures.Future`` as Ray hands it over: resolved with the
actor's answer, or failed with Ray's own exception types (``ActorDiedError`` for a lost
process, ``RayTaskError(<cause>)`` for an exception raised in it).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

import pytest

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.events import (
    ActorReady,
    CheckpointUnavailable,
    ConfigRefused,
    Failure,
    Launch,
    RestoreDone,
    SaveDone,
    SaveFailed,
    TrainResult,
)
from orchestrator.core.placement import Host, resource_key
from orchestrator.core.wire import CONFIG_REFUSED, NOT_VISIBLE
from orchestrator.engine.outcomes import (
    CallKind,
    Collect,
    FetchPayload,
    HostDied,
    Kill,
    LoadStreamed,
    Outcomes,
    Payload,
    Pending,
    PersisterMaybeDied,
    Placed,
    RestorePayload,
    SavePayload,
    StartPersister,
    StopPayload,
    Stream,
    Unclean,
    Upload,
    WantSpare,
)
from orchestrator.engine.trial_runtime import TrialRuntime
from orchestrator.errors import (
    BlobCollected,
    TrainableExited,
    TrainableUnavailable,
    TrialError,
)
from storage import StorageFull, TransientError

from ..support.fake_engine import MakeRuntime
from ..support.fakeray import actor_died, task_error

MANIFEST = {"files": [{"path": "state.json", "size": 12}]}


def outcomes(*, remote: bool = False) -> Outcomes:
    return Outcomes(
        uri_for=lambda key: f"file:///store/{key}",
        local_path_for=lambda key: None if remote else f"/store/{key}",
        remote_storage=remote,
    )


def started(make: MakeRuntime, **options: Any) -> TrialRuntime:
    """A trial whose actor is being started (generation 1), on a host."""
    rt = make(**options)
    rt.machine.handle(Launch())
    rt.host = Host(resource_key(rt.spec.resources), rt.spec.resources, 1)
    return rt


def answered(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


def failed(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


def pending(rt: TrialRuntime, kind: CallKind, payload: Payload = None, *, stale: bool = False):
    generation = rt.machine.generation - (1 if stale else 0)
    return Pending(rt, kind, generation, payload)


def save_payload(rt: TrialRuntime, iteration: int = 5) -> SavePayload:
    key = f"{rt.id}/checkpoint_{iteration:06d}"
    return SavePayload(iteration, key, {"training_iteration": iteration}, "node-1", "fakehost")


def checkpoint(rt: TrialRuntime, iteration: int = 5) -> Checkpoint:
    key = f"{rt.id}/checkpoint_{iteration:06d}"
    return Checkpoint(rt.id, iteration, key, f"file:///store/{key}", f"/store/{key}")


# -- answers ------------------------------------------------------------------------------


def test_ready_records_the_node_and_asks_for_a_spare_and_an_uploader(runtime: MakeRuntime) -> None:
    rt = started(runtime, checkpoint_every=5, max_failures=2)
    event, follow = outcomes(remote=True).read(pending(rt, CallKind.READY), answered(("n1", "h1")))
    assert event == ActorReady(1)
    assert follow == [Placed("n1", "h1"), StartPersister("n1"), WantSpare(rt.spec.resources)]


def test_ready_of_a_trial_that_may_not_fail_and_never_saves_asks_for_nothing_more(
    runtime: MakeRuntime,
) -> None:
    rt = started(runtime)  # max_failures 0, no checkpoints
    event, follow = outcomes(remote=True).read(pending(rt, CallKind.READY), answered(("n1", "h1")))
    assert event == ActorReady(1) and follow == [Placed("n1", "h1")]
    rt = started(runtime, checkpoint_every=1)  # local storage: actors commit, no uploader
    _, follow = outcomes().read(pending(rt, CallKind.READY), answered(("n1", "h1")))
    assert follow == [Placed("n1", "h1")]


def test_the_names_of_a_trials_node_are_one_copy_for_all_its_trials(
    runtime: MakeRuntime,
) -> None:
    """A finished trial keeps where it ran; the names come from the actor as new strings
    each time, and are kept once (issue 36, item 3)."""
    reader = outcomes()
    placed = []
    for _ in range(2):
        node, host = "".join(["node-", "1"]), "".join(["host", "-a"])  # each its own
        _, follow = reader.read(pending(started(runtime), CallKind.READY), answered((node, host)))
        assert isinstance(follow[0], Placed)
        placed.append(follow[0])
    assert placed[0] == placed[1] == Placed("node-1", "host-a")
    assert placed[0].node_id is placed[1].node_id and placed[0].host is placed[1].host
    _, follow = reader.read(pending(started(runtime), CallKind.READY), answered(("n1", None)))
    assert follow == [Placed("n1", None)]


def test_a_train_answer_is_one_result_or_a_batch(runtime: MakeRuntime) -> None:
    rt = started(runtime)
    reader = outcomes()
    event, follow = reader.read(pending(rt, CallKind.TRAIN), answered({"count": 1}))
    assert event == TrainResult(1, ({"count": 1},)) and follow == []
    event, _ = reader.read(pending(rt, CallKind.TRAIN), answered([{"count": 2}, {"count": 3}]))
    assert event == TrainResult(1, ({"count": 2}, {"count": 3}))
    assert reader.results == 3


def test_a_committed_save_is_a_checkpoint_named_by_its_payload(runtime: MakeRuntime) -> None:
    rt = started(runtime)
    payload = save_payload(rt)
    event, follow = outcomes().read(pending(rt, CallKind.SAVE, payload), answered(MANIFEST))
    assert isinstance(event, SaveDone) and follow == []
    ckpt = event.checkpoint
    assert (ckpt.trial_id, ckpt.iteration, ckpt.key) == (rt.id, 5, payload.key)
    assert ckpt.uri == f"file:///store/{payload.key}" and ckpt.path == f"/store/{payload.key}"
    assert ckpt.metrics == {"training_iteration": 5} and ckpt.manifest == MANIFEST
    assert (ckpt.node_id, ckpt.host) == ("node-1", "fakehost")


def test_a_save_too_big_to_commit_in_place_is_handed_to_the_uploader(runtime: MakeRuntime) -> None:
    rt = started(runtime)
    save = pending(rt, CallKind.SAVE, save_payload(rt))
    event, follow = outcomes().read(save, answered("/scratch/checkpoint_000005-3"))
    assert event is None and follow == [Upload(save, "/scratch/checkpoint_000005-3")]


def test_a_save_committed_after_its_actor_was_given_up_is_collected(runtime: MakeRuntime) -> None:
    rt = started(runtime)
    event, follow = outcomes().read(
        pending(rt, CallKind.SAVE, save_payload(rt), stale=True), answered(MANIFEST)
    )
    assert event is None
    (collect,) = follow
    assert isinstance(collect, Collect) and collect.checkpoint.key == save_payload(rt).key


def test_an_empty_checkpoint_is_warned_about_once_per_trial(
    runtime: MakeRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    rt = started(runtime)
    reader = outcomes()
    with caplog.at_level(logging.WARNING, logger="orchestrator.engine.loop"):
        for iteration in (5, 10):
            save = pending(rt, CallKind.SAVE, save_payload(rt, iteration))
            event, _ = reader.read(save, answered({"files": []}))
            assert isinstance(event, SaveDone)
    assert caplog.text.count("wrote nothing into its directory") == 1


def test_restore_answers(runtime: MakeRuntime) -> None:
    rt = started(runtime)
    ckpt = checkpoint(rt)
    restore = pending(rt, CallKind.RESTORE, RestorePayload(ckpt))
    reader = outcomes()
    assert reader.read(restore, answered(None)) == (RestoreDone(1, ckpt), [])
    assert reader.read(restore, answered(NOT_VISIBLE)) == (None, [Stream(ckpt)])
    assert reader.read(restore, answered(CONFIG_REFUSED)) == (ConfigRefused(1, ckpt), [])


def test_a_streamed_checkpoint_is_loaded_by_the_actor_it_was_streamed_for(
    runtime: MakeRuntime,
) -> None:
    rt = started(runtime)
    ckpt = checkpoint(rt)
    payload = FetchPayload(ckpt, "/tmp/staged")
    reader = outcomes()
    rt.actor = object()
    assert reader.read(pending(rt, CallKind.FETCH, payload), answered(None)) == (
        None,
        [LoadStreamed(ckpt, "/tmp/staged")],
    )
    assert reader.read(pending(rt, CallKind.FETCH, payload, stale=True), answered(None)) == (
        None,
        [],
    )
    rt.actor = None  # its actor is gone meanwhile
    assert reader.read(pending(rt, CallKind.FETCH, payload), answered(None)) == (None, [])
    error = OSError("no node sees it")
    event, follow = reader.read(pending(rt, CallKind.FETCH, payload), failed(error))
    assert event == CheckpointUnavailable(1, ckpt, error) and follow == []


def test_stop_answers(runtime: MakeRuntime) -> None:
    rt = started(runtime)
    actor, host = object(), rt.host
    reader = outcomes()
    last = pending(rt, CallKind.STOP, StopPayload(actor=actor))
    assert reader.read(last, answered(None)) == (None, [Kill(actor)])
    assert reader.read(last, failed(actor_died())) == (None, [Kill(actor)])
    shared = pending(rt, CallKind.STOP, StopPayload(host=host))
    assert reader.read(shared, answered(True)) == (None, [])
    assert reader.read(shared, answered(False)) == (None, [Unclean(host)])  # a thread lingers
    assert reader.read(shared, failed(actor_died())) == (None, [])


# -- failures -----------------------------------------------------------------------------


def test_a_lost_actor_is_a_failure_that_marks_its_host_dead(runtime: MakeRuntime) -> None:
    rt = started(runtime)
    event, follow = outcomes().read(pending(rt, CallKind.TRAIN), failed(actor_died(why="killed")))
    assert isinstance(event, Failure) and event.actor_died and not event.permanent
    assert follow == [HostDied(rt)]
    assert f"trial {rt.id}" in str(event.error)
    assert "its actor or node died during Counter.step()" in str(event.error)
    # A loss reported for an actor given up already: its host is not this one's.
    _, follow = outcomes().read(pending(rt, CallKind.TRAIN, stale=True), failed(actor_died()))
    assert follow == []


def test_a_raising_step_is_a_failure_of_the_trial_not_of_its_process(
    runtime: MakeRuntime,
) -> None:
    rt = started(runtime)
    error = task_error(RuntimeError("planned failure at 3"), "TrialActor.train_sole")
    event, follow = outcomes().read(pending(rt, CallKind.TRAIN), failed(error))
    assert isinstance(event, Failure) and not event.actor_died and not event.permanent
    assert follow == []
    assert "Counter.step() raised RuntimeError: planned failure at 3" in str(event.error)
    assert isinstance(event.error, TrialError)
    assert isinstance(event.error.cause, RuntimeError)  # what the user's code raised


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        (CallKind.READY, "Counter.setup() or actor start-up"),
        (CallKind.RESTORE, "Counter.load_checkpoint() or its download"),
    ],
)
def test_a_failure_names_the_call_that_failed(
    runtime: MakeRuntime, kind: CallKind, what: str
) -> None:
    rt = started(runtime)
    payload = RestorePayload(checkpoint(rt)) if kind is CallKind.RESTORE else None
    error = task_error(ValueError("bad"), "TrialActor.x")
    event, _ = outcomes().read(pending(rt, kind, payload), failed(error))
    assert isinstance(event, Failure) and f"{what} raised ValueError: bad" in str(event.error)


def test_sys_exit_in_a_trainable_is_a_failure_that_says_so(runtime: MakeRuntime) -> None:
    rt = started(runtime)
    error = task_error(TrainableExited("it called sys.exit(3) (exit code 3)"))
    event, _ = outcomes().read(pending(rt, CallKind.TRAIN), failed(error))
    assert isinstance(event, Failure) and not event.actor_died
    assert "Counter.step() exited: it called sys.exit(3)" in str(event.error)


def test_a_trainable_its_worker_cannot_load_fails_for_good(runtime: MakeRuntime) -> None:
    rt = started(runtime, max_failures=5)
    error = task_error(TrainableUnavailable("module 'gone' is missing there"), "TrialActor.setup")
    event, _ = outcomes().read(pending(rt, CallKind.READY), failed(error))
    assert isinstance(event, Failure) and event.permanent
    assert "module 'gone' is missing there" in str(event.error)


def test_a_storage_error_of_a_save_pauses_the_trial_instead_of_failing_it(
    runtime: MakeRuntime,
) -> None:
    rt = started(runtime)
    payload = save_payload(rt, 10)
    full = task_error(StorageFull("no space left on device"), "TrialActor.save_and_commit")
    event, follow = outcomes().read(pending(rt, CallKind.SAVE, payload), failed(full))
    assert isinstance(event, SaveFailed) and event.iteration == 10
    assert follow == [PersisterMaybeDied(full)]
    message = str(event.error)
    assert "checkpoint at iteration 10 cannot be stored (retrying cannot help)" in message
    assert (
        "StorageFull: no space left on device" in message and "no checkpoint stored yet" in message
    )
    down = task_error(TransientError("503 slow down"), "CheckpointPersister.persist")
    event, _ = outcomes().read(pending(rt, CallKind.SAVE, payload), failed(down))
    assert isinstance(event, SaveFailed)
    assert "storage stayed unreachable for save_retry_for seconds" in str(event.error)


def test_a_save_whose_reused_blob_was_collected_is_dropped_and_the_trial_trains_on(
    runtime: MakeRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver's check of a save that raced with a blob's deletion (``check_save``):
    storage is fine, so neither "unreachable" nor a pause; the trial goes on."""
    rt = started(runtime)
    collected = BlobCollected("checkpoint s3://b/p/t/checkpoint_000010 reused blob ...")
    with caplog.at_level(logging.WARNING, "orchestrator"):
        event, follow = outcomes(remote=True).read(
            pending(rt, CallKind.SAVE, save_payload(rt, 10)), failed(collected)
        )
    assert isinstance(event, SaveFailed) and event.trains_on and event.iteration == 10
    assert follow == []  # no uploader died
    assert str(event.error) == f"trial {rt.id}: {collected}"
    assert caplog.messages == [str(event.error)]


def test_a_save_lost_with_its_process_is_a_failure_and_may_be_the_uploaders(
    runtime: MakeRuntime,
) -> None:
    rt = started(runtime)
    lost = actor_died("ab" * 16)
    event, follow = outcomes().read(pending(rt, CallKind.SAVE, save_payload(rt)), failed(lost))
    assert isinstance(event, Failure) and event.actor_died
    assert follow == [PersisterMaybeDied(lost), HostDied(rt)]


def test_a_function_trainable_is_named_as_a_function(runtime: MakeRuntime) -> None:
    from orchestrator import report

    def train(config: dict[str, Any]) -> None:
        report({"x": 1})

    rt = started(runtime, trainable=train)
    event, _ = outcomes().read(pending(rt, CallKind.TRAIN), failed(task_error(KeyError("k"))))
    assert isinstance(event, Failure) and "its function train raised KeyError" in str(event.error)
