"""One route per fact, on a broker in-process (real logs, sqlite RLMM, a directory as remote
storage): DisableRemoteTopic alone stops tiering and raises a hosted partition's tiered epoch;
assignments (the controller's pushes and the KRaft metadata log alike) carry configs, the copy
pause and re-enables, and the topic's state for a partition hosted for the first time."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.assignment_journal import JOURNAL, SNAPSHOT, read_entries
from broker.broker import Broker
from broker.data_plane import PartitionLogDir
from broker.hosted import PartitionStop
from broker.rlm.manager import RemoteLogManager
from tests.rlmm_support import FailingCommit
from tests.support.batches import offsets, one_batch_each
from tests.support.in_process_broker import broker_config
from tests.support.polling import poll_until
from tiered.api import RemoteLogSegmentState, RemotePartitionDeleteState, TopicIdPartition
from tiered.config import RemoteLogDisablePolicy
from tiered.errors import ErrorCode, TieredError

RETAIN = RemoteLogDisablePolicy.RETAIN
DELETE = RemoteLogDisablePolicy.DELETE
TIERED = {"remote.storage.enable": "true", "segment.bytes": "2048"}
DISABLED = {**TIERED, "remote.storage.enable": "false"}


class Brokers:
    """Opens a broker on one directory, again after a 'restart'; closes what it opened."""

    def __init__(self, tmp_path: Path) -> None:
        self.log_dir = tmp_path / "logs"
        self.config = broker_config(tmp_path, **{"remote.log.manager.task.interval.ms": "50"})
        self.open: list[Broker] = []

    def start(self) -> Broker:
        broker = Broker(self.config)
        self.open.append(broker)
        return broker

    def restart(self, broker: Broker) -> Broker:
        self.open.remove(broker)
        broker.close()
        return self.start()

    def close(self) -> None:
        for broker in self.open:
            broker.close()


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Brokers]:
    b = Brokers(tmp_path)
    try:
        yield b
    finally:
        b.close()


def new_partition(topic: str = "orders") -> TopicIdPartition:
    return TopicIdPartition(uuid.uuid4(), topic, 0)


def assign(broker: Broker, tp: TopicIdPartition, configs: dict[str, str], epoch: int) -> None:
    assert broker.hosting.assign([(tp, configs, epoch)], controller_epoch=1) == [None]


def disable(
    broker: Broker, tp: TopicIdPartition, epoch: int, policy: RemoteLogDisablePolicy = RETAIN
) -> list[TieredError | None]:
    return broker.hosting.disable_remote_topic(
        1, [PartitionStop(tp.topic_id, tp.partition, epoch, policy)]
    )


def produce(broker: Broker, tp: TopicIdPartition, count: int) -> None:
    broker.data.produce(tp.topic_id, tp.partition, one_batch_each(b"v" * 100 for _ in range(count)))


def log_dir(broker: Broker, tp: TopicIdPartition) -> PartitionLogDir:
    return next(d for d in broker.data.describe_log_dirs() if d.topic_id_partition == tp)


def rlm(broker: Broker) -> RemoteLogManager:
    assert broker.rlm is not None
    return broker.rlm


def copies(broker: Broker, tp: TopicIdPartition) -> dict[int, int]:
    """Start offset -> tiered epoch stamped, of every finished copy."""
    return {
        m.start_offset: m.tiered_epoch
        for m in rlm(broker).rlmm.list_remote_log_segments(tp)
        if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
    }


def produce_and_copy(broker: Broker, tp: TopicIdPartition, count: int) -> dict[int, int]:
    """Produces ``count`` records and waits for every closed segment to be copied; returns the
    copies that were not there before."""
    before = copies(broker, tp)
    produce(broker, tp, count)
    poll_until(
        lambda: len(copies(broker, tp)) > len(before) and rlm(broker).copy_lag(tp) == [],
        timeout=30,
        what="the closed segments to be copied",
    )
    return {offset: e for offset, e in copies(broker, tp).items() if offset not in before}


def is_copying(broker: Broker, tp: TopicIdPartition, epoch: int) -> bool:
    d = log_dir(broker, tp)
    return d.copying and d.tiered_epoch == epoch


def is_stopped(broker: Broker, tp: TopicIdPartition, epoch: int) -> bool:
    d = log_dir(broker, tp)
    return not d.copying and d.tiered_epoch == epoch


def test_disabling_configs_before_disable_remote_topic_keep_copying_at_the_old_epoch(
    brokers: Brokers,
) -> None:
    broker = brokers.start()
    tp = new_partition()
    assign(broker, tp, TIERED, 0)
    assert set(produce_and_copy(broker, tp, 60).values()) == {0}
    # The metadata log (or a push) tells of the disablement at epoch 1 first: copies stamped 1
    # would survive the deletion of everything below 1, so copying goes on at epoch 0.
    assign(broker, tp, DISABLED, 1)
    assert is_copying(broker, tp, 0)
    assert set(produce_and_copy(broker, tp, 60).values()) == {0}
    # A restart in between restores exactly that.
    broker = brokers.restart(broker)
    assert is_copying(broker, tp, 0)
    assert set(produce_and_copy(broker, tp, 60).values()) == {0}
    # DisableRemoteTopic is what stops it, at its epoch, and that survives a restart too.
    assert disable(broker, tp, 1) == [None]
    assert is_stopped(broker, tp, 1)
    task = rlm(broker).copy_task(tp)
    assert task is not None and task.cancelled
    assert set(copies(broker, tp).values()) == {0}
    broker = brokers.restart(broker)
    assert is_stopped(broker, tp, 1)
    assert rlm(broker).copy_task(tp) is None


def test_reenable_resumes_at_the_stopped_epoch_and_older_configs_do_not(
    brokers: Brokers,
) -> None:
    broker = brokers.start()
    tp = new_partition()
    assign(broker, tp, TIERED, 0)
    produce_and_copy(broker, tp, 60)
    assert disable(broker, tp, 1) == [None]
    assign(broker, tp, DISABLED, 1)  # the controller's push after the stop: nothing changes
    assert is_stopped(broker, tp, 1)
    # Configs from before the disablement (a restarted broker replays the metadata log from
    # its start) do not resume copying.
    assign(broker, tp, TIERED, 0)
    assert is_stopped(broker, tp, 1)
    # The re-enable does, stamped with the epoch of the stop.
    assign(broker, tp, TIERED, 1)
    assert is_copying(broker, tp, 1)
    assert set(produce_and_copy(broker, tp, 60).values()) == {1}


def test_the_copy_pause_comes_through_assignments_and_keeps_the_epoch(brokers: Brokers) -> None:
    broker = brokers.start()
    tp = new_partition()
    assign(broker, tp, TIERED, 0)
    assign(broker, tp, {**TIERED, "remote.log.copy.disable": "true"}, 0)
    assert is_stopped(broker, tp, 0)
    assign(broker, tp, TIERED, 0)
    assert is_copying(broker, tp, 0)


def test_a_stop_acked_before_hosting_wins_over_older_configs(brokers: Brokers) -> None:
    broker = brokers.start()
    tp, other = new_partition("late"), new_partition("gone")
    # The controller's DisableRemoteTopic beats the partition's creation to this broker.
    assert disable(broker, tp, 1) == [None]
    assert disable(broker, other, 2) == [None]
    assert broker.hosting.remove_partitions(1, [(other.topic_id, other.partition)]) == [None]
    # A local call (controller epoch 0) keeps nothing: no controller counts its ack.
    local = PartitionStop(uuid.uuid4(), 0, 1, RETAIN)
    assert broker.hosting.disable_remote_topic(0, [local]) == [None]
    assert [e["stop_before_hosting"] for e in read_entries(brokers.log_dir)] == [
        {"tiered_epoch": 1, "policy": "retain"}
    ]
    broker = brokers.restart(broker)
    # Then the creation arrives, enabled at epoch 0 (as a metadata log replay shows it): hosting
    # it copying at 0 would copy past the stop, which the controller counted as acked.
    assign(broker, tp, TIERED, 0)
    assert is_stopped(broker, tp, 1)
    assert disable(broker, tp, 1) == [None]  # a repeat changes nothing
    assert is_stopped(broker, tp, 1)
    assert [e.get("stop_before_hosting") for e in read_entries(brokers.log_dir)] == [None]
    assign(broker, tp, TIERED, 1)  # enabled again
    assert is_copying(broker, tp, 1)


def test_a_partition_hosted_fresh_for_a_disabled_topic(brokers: Brokers) -> None:
    broker = brokers.start()
    never = new_partition("never")
    assign(broker, never, DISABLED, 0)  # never tiered: nothing to stop, expire or serve
    assert not rlm(broker).is_leading(never)
    # Remote data from before a disablement: a partition that tiered and expired locally...
    tp = new_partition()
    assign(broker, tp, {**TIERED, "local.retention.bytes": "2048"}, 0)
    produce_and_copy(broker, tp, 200)
    poll_until(
        lambda: log_dir(broker, tp).offsets.local_log_start_offset > 0,
        timeout=30,
        what="local expiry",
    )
    # ...that this broker hosts again without its assignments (they were lost): the topic is
    # DISABLED at epoch 1 with retain.
    broker.close()
    brokers.open.remove(broker)
    for name in (JOURNAL, SNAPSHOT):
        (brokers.log_dir / name).unlink(missing_ok=True)
    broker = brokers.start()
    assert broker.data.describe_log_dirs() == []
    assign(broker, tp, DISABLED, 1)
    assert is_stopped(broker, tp, 1)
    d = log_dir(broker, tp)
    assert d.remote_fetch_enabled and d.offsets.log_start_offset == 0
    read, remote = broker.data.fetch(tp.topic_id, tp.partition, 0, 1000)
    assert remote and read.records and offsets(read.records)[0] == 0
    assert rlm(broker).expiration_task(tp) is not None


def test_entries_written_before_the_tiering_state_restore_as_their_configs_say(
    brokers: Brokers,
) -> None:
    brokers.log_dir.mkdir(parents=True)
    tiered, disabled, never = new_partition("a"), new_partition("b"), new_partition("c")
    old = [
        (tiered, TIERED, 0),
        (disabled, {**DISABLED, "remote.log.disable.policy": "delete"}, 1),
        (never, DISABLED, 0),
    ]
    (brokers.log_dir / SNAPSHOT).write_text(
        json.dumps(
            [
                {
                    "topic_id": str(tp.topic_id),
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "configs": configs,
                    "tiered_epoch": epoch,
                    "stopped_policy": None,
                }
                for tp, configs, epoch in old
            ]
        )
    )
    broker = brokers.start()
    assert log_dir(broker, tiered).copying
    assert is_stopped(broker, disabled, 1) and not log_dir(broker, disabled).remote_fetch_enabled
    assert not rlm(broker).is_leading(never)


def test_invalid_stops_fail_only_their_entry_and_a_stale_controller_the_request(
    brokers: Brokers,
) -> None:
    broker = brokers.start()
    tp = new_partition()
    assign(broker, tp, TIERED, 0)
    outcomes = disable(broker, tp, 0)
    assert outcomes[0] is not None and outcomes[0].code is ErrorCode.INVALID_REQUEST
    assert broker.hosting.disable_remote_topic(2, []) == []
    with pytest.raises(TieredError) as raised:
        disable(broker, tp, 1)  # controller epoch 1 < 2
    assert raised.value.code is ErrorCode.STALE_CONTROLLER_EPOCH
    assert is_copying(broker, tp, 0)
    with pytest.raises(ValueError, match="partition must be >= 0"):
        PartitionStop(tp.topic_id, -1, 1, RETAIN)


def test_one_disable_remote_topic_marks_its_partitions_in_one_commit_or_none(
    brokers: Brokers, caplog: pytest.LogCaptureFixture
) -> None:
    """Under the delete policy every stopped partition is marked DELETE_PARTITION_MARKED before
    the ack: a request's marks are one RLMM commit, and a commit that fails fails every entry
    (the controller's repeat carries them out)."""
    broker = brokers.start()
    tps = [TopicIdPartition(uuid.uuid4(), f"t{i}", 0) for i in range(3)]
    for tp in tps:
        assign(broker, tp, TIERED, 0)
        produce_and_copy(broker, tp, 60)
    backend = rlm(broker).rlmm.backend  # type: ignore[attr-defined]
    commits = FailingCommit(backend._db)
    backend._db = commits
    stops = [PartitionStop(tp.topic_id, tp.partition, 1, DELETE) for tp in tps]
    outcomes = broker.hosting.disable_remote_topic(1, stops)
    assert [o is not None and o.code for o in outcomes] == [ErrorCode.KAFKA_STORAGE_ERROR] * 3
    assert {rlm(broker).rlmm.remote_partition_delete_state(tp) for tp in tps} == {None}

    caplog.set_level(logging.INFO, logger="broker.hosting")
    assert broker.hosting.disable_remote_topic(1, stops) == [None, None, None]
    assert (
        "DisableRemoteTopic of controller epoch 1: tiering stopped for 3 partitions at tiered "
        "epoch 1 with policy delete, 3 topics: t0 [0], t1 [0], t2 [0]"
    ) in caplog.messages
    assert {rlm(broker).rlmm.remote_partition_delete_state(tp) for tp in tps} == {
        RemotePartitionDeleteState.DELETE_PARTITION_MARKED
    }
    assert all(is_stopped(broker, tp, 1) for tp in tps)
