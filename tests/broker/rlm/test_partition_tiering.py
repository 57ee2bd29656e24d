"""A partition's tiering state on a broker (broker.rlm.partition_tiering): its events, the one
table of valid transitions, its round trip through the assignment journal's entries, and how
broker.tiering's driver hands it to the RemoteLogManager."""

from __future__ import annotations

import json
import uuid
from typing import cast

import pytest

from broker.hosted import HostedPartition, RestoredPartition, entry_from_journal
from broker.log import Log
from broker.rlm.manager import RemoteLogManager, TieredPartition
from broker.rlm.partition_tiering import (
    InvalidTieringTransition,
    PartitionTiering,
    TieringConfigs,
    TieringState,
)
from broker.tiering import TieringDriver
from tiered.api import RemoteStorageException, TopicIdPartition
from tiered.config import RemoteLogDisablePolicy, TopicConfig
from tiered.errors import ErrorCode

RETAIN = RemoteLogDisablePolicy.RETAIN
DELETE = RemoteLogDisablePolicy.DELETE
TIERED = TieringConfigs(remote_storage_enable=True, copy_disable=False, disable_policy=RETAIN)
PAUSED = TieringConfigs(remote_storage_enable=True, copy_disable=True, disable_policy=RETAIN)
DISABLED = TieringConfigs(remote_storage_enable=False, copy_disable=False, disable_policy=RETAIN)
DISABLED_DELETE = TieringConfigs(
    remote_storage_enable=False, copy_disable=False, disable_policy=DELETE
)


def tiering(epoch: int = 0, state: TieringState = TieringState.NOT_TIERED) -> PartitionTiering:
    return PartitionTiering(TopicIdPartition(uuid.uuid4(), "t", 0), epoch, state)


def at(t: PartitionTiering) -> tuple[TieringState, int]:
    return t.state, t.tiered_epoch


@pytest.mark.parametrize(
    ("epoch", "configs", "stop_before", "expected"),
    [
        (0, TIERED, None, (TieringState.COPYING, 0)),
        (0, PAUSED, None, (TieringState.COPY_PAUSED, 0)),
        (0, DISABLED, None, (TieringState.NOT_TIERED, 0)),  # never tiered: nothing remote
        (2, DISABLED, None, (TieringState.STOPPED_RETAIN, 2)),
        (2, DISABLED_DELETE, None, (TieringState.STOPPED_DELETE, 2)),
        (0, TIERED, (1, DELETE), (TieringState.STOPPED_DELETE, 1)),  # the stop acked first wins
        (1, TIERED, (1, RETAIN), (TieringState.COPYING, 1)),  # ...unless the configs are as new
    ],
)
def test_a_partition_hosted_anew_takes_the_topics_state(
    epoch: int,
    configs: TieringConfigs,
    stop_before: tuple[int, RemoteLogDisablePolicy] | None,
    expected: tuple[TieringState, int],
) -> None:
    t = tiering(epoch)
    t.handle_hosting(configs, stop_before)
    assert at(t) == expected


def test_assignments_start_pause_and_resume_copying_but_never_stop_it() -> None:
    t = tiering()
    assert not t.handle_assignment(DISABLED, 0)
    assert t.handle_assignment(TIERED, 0) and at(t) == (TieringState.COPYING, 0)
    assert t.handle_assignment(PAUSED, 0) and at(t) == (TieringState.COPY_PAUSED, 0)
    assert t.handle_assignment(TIERED, 0) and at(t) == (TieringState.COPYING, 0)
    # The disablement's configs arrive before DisableRemoteTopic: copying goes on at epoch 0.
    assert not t.handle_assignment(DISABLED, 1)
    assert at(t) == (TieringState.COPYING, 0)


def test_disable_remote_topic_stops_and_raises_the_epoch_and_older_stops_change_nothing() -> None:
    t = tiering(0, TieringState.COPYING)
    assert t.handle_disable_remote_topic(2, DELETE)
    assert at(t) == (TieringState.STOPPED_DELETE, 2) and t.delete_below_epoch == 2
    assert not t.handle_disable_remote_topic(2, DELETE)  # a repeat
    assert not t.handle_disable_remote_topic(1, RETAIN)  # older
    assert at(t) == (TieringState.STOPPED_DELETE, 2)
    # Configs older than the stop do not resume copying; the re-enable does, at the stop's epoch.
    assert not t.handle_assignment(TIERED, 1)
    assert not t.handle_assignment(PAUSED, 2)
    assert t.handle_assignment(TIERED, 2) and at(t) == (TieringState.COPYING, 2)
    # A later retain stop leaves the deleted epochs as they were.
    assert t.handle_disable_remote_topic(3, RETAIN)
    assert at(t) == (TieringState.STOPPED_RETAIN, 3) and t.delete_below_epoch == 2


def test_a_copy_pause_counts_as_a_stop_at_the_partitions_epoch() -> None:
    t = tiering(2, TieringState.COPY_PAUSED)
    assert not t.handle_disable_remote_topic(1, DELETE)
    assert t.handle_disable_remote_topic(2, DELETE)
    assert at(t) == (TieringState.STOPPED_DELETE, 2)


def test_reenable_takes_the_later_epoch_and_is_only_for_tiered_partitions() -> None:
    t = tiering(1, TieringState.STOPPED_RETAIN)
    assert t.handle_reenable(3) and at(t) == (TieringState.COPYING, 3)
    assert not t.handle_reenable(4)  # copying already
    with pytest.raises(InvalidTieringTransition) as raised:
        tiering().handle_reenable(1)
    message = str(raised.value)
    assert "reenable" in message and "NOT_TIERED" in message and "valid targets: none" in message


def test_the_table_refuses_what_it_does_not_list() -> None:
    t = tiering(1, TieringState.COPYING)
    with pytest.raises(InvalidTieringTransition, match="valid targets: none"):
        t.handle_restore(
            tiered=True, stopped_policy=RETAIN, delete_below_epoch=None, configs=TIERED
        )
    assert at(t) == (TieringState.COPYING, 1)  # nothing changed


def hosted_partition(t: PartitionTiering, configs: dict[str, str]) -> HostedPartition:
    return HostedPartition(
        t.topic_id_partition, cast(Log, None), TopicConfig.of(configs), configs, t
    )


@pytest.mark.parametrize(
    ("state", "configs"),
    [
        (TieringState.NOT_TIERED, {"remote.storage.enable": "false"}),
        (TieringState.COPYING, {"remote.storage.enable": "true"}),
        (
            TieringState.COPY_PAUSED,
            {"remote.storage.enable": "true", "remote.log.copy.disable": "true"},
        ),
        (TieringState.STOPPED_RETAIN, {"remote.storage.enable": "false"}),
        (TieringState.STOPPED_DELETE, {"remote.storage.enable": "false"}),
    ],
)
def test_every_state_comes_back_from_the_journal(
    state: TieringState, configs: dict[str, str]
) -> None:
    before = tiering(3, state)
    if state is TieringState.STOPPED_RETAIN:  # with epochs below 2 left to a bulk delete
        before = tiering(2, TieringState.STOPPED_DELETE)
        before.handle_reenable(2)
        before.handle_disable_remote_topic(3, RETAIN)
        assert before.delete_below_epoch == 2
    entry = json.loads(hosted_partition(before, configs).assignment_json())
    restored = entry_from_journal(entry)
    assert isinstance(restored, RestoredPartition)
    after = hosted_partition(PartitionTiering(before.topic_id_partition, 3), configs)
    restored.restore(after)
    assert (at(after.tiering), after.tiering.delete_below_epoch) == (
        at(before),
        before.delete_below_epoch,
    )


def test_entries_of_earlier_versions_restore() -> None:
    tp = TopicIdPartition(uuid.uuid4(), "t", 0)
    configs = {"remote.storage.enable": "false", "remote.log.disable.policy": "delete"}
    legacy: dict[str, object] = {
        "topic_id": str(tp.topic_id),
        "topic": tp.topic,
        "partition": 0,
        "configs": configs,
        "tiered_epoch": 2,
        "stopped_policy": None,
    }
    cases: list[tuple[dict[str, object], tuple[TieringState, int, int]]] = [
        ({}, (TieringState.STOPPED_DELETE, 2, 2)),  # no "tiered": as a partition hosted anew
        ({"tiered": True, "stopped_policy": "retain"}, (TieringState.STOPPED_RETAIN, 2, 0)),
        ({"tiered": False}, (TieringState.NOT_TIERED, 2, 0)),
    ]
    for extra, expected in cases:
        restored = entry_from_journal(legacy | extra)
        assert isinstance(restored, RestoredPartition)
        hosted = hosted_partition(PartitionTiering(tp, 2), configs)
        restored.restore(hosted)
        t = hosted.tiering
        assert (t.state, t.tiered_epoch, t.delete_below_epoch) == expected


class FakeRlm:
    """What the TieringDriver asks of a RemoteLogManager; ``failing`` stops fail."""

    def __init__(self) -> None:
        self.led: dict[TopicIdPartition, TieredPartition] = {}
        self.stops: list[tuple[TieringState, int]] = []
        self.resumed: list[TopicIdPartition] = []
        self.failing = False

    def is_leading(self, tp: TopicIdPartition) -> bool:
        return tp in self.led

    def on_leadership_change(self, leaders: list[TieredPartition]) -> None:
        self.led.update({p.topic_id_partition: p for p in leaders})

    def update_retention(self, tp: TopicIdPartition, retention: object) -> None:
        pass

    def apply_stop(self, tps: list[TopicIdPartition]) -> dict[TopicIdPartition, Exception | None]:
        tiering = self.led[tps[0]].tiering
        self.stops.append(at(tiering))
        return {tps[0]: RemoteStorageException("a copy still runs") if self.failing else None}

    def resume_copying(self, tps: list[TopicIdPartition]) -> None:
        self.resumed.extend(tp for tp in tps if tp in self.led)


def test_the_driver_leads_with_the_one_tiering_and_a_failed_stop_is_carried_out_again() -> None:
    rlm = FakeRlm()
    driver = TieringDriver(cast(RemoteLogManager, rlm))
    hosted = hosted_partition(tiering(), {"remote.storage.enable": "true"})
    tp = hosted.topic_id_partition
    driver.start(hosted, None)
    assert rlm.led[tp].tiering is hosted.tiering  # read by both, never copied
    rlm.failing = True
    (error,) = driver.stop([(hosted, 1, DELETE)])
    assert error is not None and error.code is ErrorCode.KAFKA_STORAGE_ERROR
    # The stop is recorded (the fence is up); the controller's repeat carries it out.
    assert at(hosted.tiering) == (TieringState.STOPPED_DELETE, 1)
    rlm.failing = False
    assert driver.stop([(hosted, 1, DELETE)]) == [None]
    assert rlm.stops == [(TieringState.STOPPED_DELETE, 1)] * 2
    # The re-enable resumes the copying the RemoteLogManager leads.
    hosted.config = TopicConfig.of({"remote.storage.enable": "true"})
    driver.reconfigure(hosted, 1)
    assert rlm.resumed == [tp] and at(hosted.tiering) == (TieringState.COPYING, 1)
