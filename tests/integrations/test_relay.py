"""The relay from a helper process back to its trial (``orchestrator.integrations.relay``),
without Ray: messages arrive in order in the relay's thread, in the context of the
thread that made it; the sender waits for each answer; an unwound trial answers STOP,
an error the trial's text; a stranger's connection is ignored; the relay ends with the
thread that made it."""

from __future__ import annotations

import contextvars
import pickle
import queue
import socket
import threading
import time
from typing import Any

import pytest

from orchestrator.integrations.relay import GO, STOP, Relay, RelayClosed

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


class Unwind(BaseException):
    """What a trial's report() raises when the trial is being unwound."""


def test_messages_arrive_in_order_in_the_makers_context_and_are_answered() -> None:
    seen: list[tuple[Any, str, str]] = []
    WHO.set("the trial")
    relay = Relay(lambda m: seen.append((m, WHO.get(), threading.current_thread().name)))
    sender = pickle.loads(pickle.dumps(relay.sender))  # as the helper gets it
    assert [sender.send({"i": i}) for i in range(3)] == [GO, GO, GO]
    assert [m for m, _, _ in seen] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert {(who, name) for _, who, name in seen} == {("the trial", "trialflow-relay")}
    sender.close()
    relay.close()


def test_the_sender_waits_until_the_trial_took_the_message() -> None:
    gate: queue.SimpleQueue[None] = queue.SimpleQueue()
    relay = Relay(lambda m: gate.get())  # a report that waits for the next step
    answers: list[bytes] = []
    helper = threading.Thread(target=lambda: answers.append(relay.sender.send("r1")))
    helper.start()
    time.sleep(0.2)
    assert answers == [] and helper.is_alive()
    gate.put(None)
    helper.join(10)
    assert answers == [GO]
    relay.close()


def test_an_unwound_trial_answers_stop_and_ends_its_relay() -> None:
    def deliver(message: Any) -> None:
        raise Unwind

    relay = Relay(deliver)
    assert relay.sender.send("r1") == STOP
    deadline = time.monotonic() + 10
    while relay.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not relay.alive
    with pytest.raises(RelayClosed):
        pickle.loads(pickle.dumps(relay.sender)).send("r2")


def test_an_error_in_the_trial_comes_back_as_its_text() -> None:
    def deliver(message: Any) -> None:
        raise ValueError(f"bad metrics {message!r}")

    relay = Relay(deliver)
    with pytest.raises(RuntimeError, match="ValueError: bad metrics 'r1'"):
        relay.sender.send("r1")
    with pytest.raises(RuntimeError, match="'r2'"):  # the line stays open after an error
        relay.sender.send("r2")
    relay.close()


def test_a_connection_without_the_token_is_closed_unread() -> None:
    seen: list[Any] = []
    relay = Relay(seen.append)
    with socket.create_connection(relay.sender.address) as stranger:
        stranger.sendall(b"x" * len(relay.sender.token) + pickle.dumps("evil"))
        stranger.settimeout(10)
        try:
            assert stranger.recv(1) == b""  # closed, nothing delivered
        except ConnectionResetError:  # closed with our bytes unread
            pass
    assert relay.sender.send("fine") == GO and seen == ["fine"]
    relay.close()


def test_the_relay_ends_with_the_thread_that_made_it() -> None:
    made: list[Relay] = []
    maker = threading.Thread(target=lambda: made.append(Relay(lambda m: None)))
    maker.start()
    maker.join()
    deadline = time.monotonic() + 10
    while made[0].alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not made[0].alive
