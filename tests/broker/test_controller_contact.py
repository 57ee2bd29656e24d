"""A broker says in its log when it stops hearing from the active controller, once per loss, and
when it hears again: in KRaft mode from heartbeats and metadata (``broker.controller_contact``),
in ZooKeeper mode from its session's state (``broker.zk_registration``)."""

from __future__ import annotations

import logging

import pytest
from kazoo.client import KazooState

from broker.controller_contact import SILENCE_HEARTBEATS, ControllerContact
from broker.zk_registration import BrokerZkRegistration
from tiered.cluster.model import BrokerRegistration


def logged(caplog: pytest.LogCaptureFixture, logger: str) -> list[tuple[int, str]]:
    found = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == logger]
    caplog.clear()
    return found


def test_a_silence_of_some_heartbeats_is_logged_once_and_the_end_of_it_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    contact = ControllerContact(heartbeat_interval_s=2.0, clock=lambda: now[0])
    silence_s = SILENCE_HEARTBEATS * 2.0
    with caplog.at_level(logging.INFO, logger="broker.controller_contact"):
        contact.heard("c:1")
        now[0] = silence_s
        contact.check()
        assert logged(caplog, "broker.controller_contact") == []  # not longer than the silence
        now[0] = silence_s + 0.5
        contact.check()
        now[0] = silence_s + 10
        contact.check()
        [(level, message)] = logged(caplog, "broker.controller_contact")
        assert level == logging.WARNING
        assert message.startswith("No answer from the active controller for 6.5s")
        assert "broker.session.timeout.ms" in message

        now[0] = 30.0
        contact.heard("c:2")
        contact.heard("c:2")
        assert logged(caplog, "broker.controller_contact") == [
            (logging.INFO, "Hearing from the active controller at c:2 again, after 30.0s without "
             "an answer"),
        ]  # fmt: skip
        now[0] = 30.0 + silence_s + 1
        contact.check()  # a second loss is logged again
        assert [level for level, _ in logged(caplog, "broker.controller_contact")] == [
            logging.WARNING
        ]


def test_a_broker_that_never_heard_from_a_controller_counts_its_silence_from_its_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    contact = ControllerContact(heartbeat_interval_s=1.0, clock=lambda: now[0])
    now[0] = 100.0 + SILENCE_HEARTBEATS + 1
    with caplog.at_level(logging.WARNING, logger="broker.controller_contact"):
        contact.check()
    assert "for 4.0s" in logged(caplog, "broker.controller_contact")[0][1]


def test_the_zookeeper_session_states_say_what_they_mean_for_the_broker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registration = BrokerZkRegistration(
        "127.0.0.1:1", BrokerRegistration(4, "h", 1), session_timeout_s=6.0
    )  # never started: its session's states are fed by hand, as kazoo's thread would
    logger = "broker.zk_registration"
    with caplog.at_level(logging.INFO, logger=logger):
        registration._on_state(KazooState.SUSPENDED)
        registration._on_state(KazooState.SUSPENDED)
        [(level, message)] = logged(caplog, logger)
        assert level == logging.WARNING and "holds until the session expires (6.0s" in message
        registration._on_state(KazooState.CONNECTED)
        assert logged(caplog, logger) == [
            (logging.INFO, f"{registration!r}: connected to ZooKeeper again (the session "
             "resumed: still registered)"),
        ]  # fmt: skip
        registration._on_state(KazooState.SUSPENDED)
        registration._on_state(KazooState.LOST)
        [_, (level, message)] = logged(caplog, logger)
        assert level == logging.WARNING
        assert "/brokers/ids/4 is gone" in message and "sends it nothing" in message
        registration._on_state(KazooState.CONNECTED)
        assert logged(caplog, logger)[0][1].endswith("(a new session: registering again)")
