"""``tiered-consumer-groups`` as an operator runs it (its own process) against a real cluster's
Kafka listeners, in both metadata modes, with a group member played on the wire: ``--list``
(with states), ``--describe --members --verbose`` and ``--state``, a reset refused while the
member is there; through the offsets APIs (OffsetCommit, OffsetFetch, DeleteGroups,
OffsetDelete): lag in ``--describe``, ``--reset-offsets --execute`` read back, a plan exported
and taken back with ``--from-file``, ``--delete-offsets`` and ``--delete``. The same over
SASL_SSL and SSL with ``tiered-cluster up --secure``'s files runs in
``cli/test_cluster_secure.py``."""

from __future__ import annotations

import contextlib
import datetime
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.leave_group.v3.request import MemberIdentity

from cli.kafka_client.client import KafkaClient
from tests.support.cluster import Cluster
from tests.support.group_requests import (
    HEARTBEAT,
    LEAVE,
    SYNC,
    assignment,
    group_request,
    join_member,
    subscription,
)
from tests.support.kafka_clients import confluent_produce, create_topic, sample
from tests.support.kafka_cluster import MODES, shared_cluster
from tests.support.kafka_wire import WireClient
from tests.support.polling import poll_until
from tests.support.processes import REPO

pytestmark = pytest.mark.processes
MOVED = (
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
)
PARTITIONS = 2
RECORDS = 6  # three a partition
TOOL = (sys.executable, "-m", "cli.consumer_groups")


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp(f"consumer-groups-{request.param}")
    settings = {"group.initial.rebalance.delay.ms": "100"}
    with shared_cluster(request, root, {1: settings}, brokers=1) as started:
        yield started


@pytest.fixture(scope="module")
def topic(cluster: Cluster) -> str:
    name = f"cg-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, name, PARTITIONS)
    confluent_produce(cluster, name, sample(RECORDS, PARTITIONS))
    return name


def tool(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TOOL, "--bootstrap-server", cluster.kafka_bootstrap, "--timeout", "30000", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@dataclass(frozen=True)
class WireMember:
    group: str
    member_id: str


MEMBER_SESSION = datetime.timedelta(minutes=2)


@contextlib.contextmanager
def member_of(cluster: Cluster, topic: str, group: str) -> Iterator[WireMember]:
    """A static member holding every partition of ``topic``, at the group's coordinator (found
    the way the tool finds it); it leaves at the end."""
    joined: list[Any] = []  # the connection and the answer of the join that took

    def join() -> bool:
        # A coordinator may still be loading its part of the group metadata: join again, at
        # the coordinator found again, as clients do.
        with KafkaClient(cluster.kafka_bootstrap) as client:
            coordinator = client.coordinator(group)
        wire = WireClient((coordinator.host, coordinator.port))
        answer = join_member(
            wire,
            5,
            group,
            protocols=(("range", subscription([topic])),),
            group_instance_id="w",
            # It heartbeats once: its session must outlast the tool runs of a test on a loaded
            # machine, or the group is Empty before the test describes it.
            session_timeout=MEMBER_SESSION,
        )
        if answer.error_code in MOVED:
            wire.close()
            return False
        joined[:] = [wire, answer]
        return True

    poll_until(join, timeout=30, what=f"a member joined group {group}")
    wire, answer = joined
    try:
        assert answer.error_code == ErrorCode.none and answer.leader == answer.member_id
        identity = {"group_id": group, "generation_id": answer.generation_id}
        identity |= {"member_id": answer.member_id, "group_instance_id": "w"}
        plan = assignment({topic: list(range(PARTITIONS))})
        synced = wire.call(
            group_request(SYNC, 3, **identity, assignments=((answer.member_id, plan),))
        )
        assert synced.error_code == ErrorCode.none
        assert wire.call(group_request(HEARTBEAT, 3, **identity)).error_code == ErrorCode.none
        yield WireMember(group, answer.member_id)
        leaving = MemberIdentity(member_id=answer.member_id, group_instance_id="w")
        left = wire.call(group_request(LEAVE, 3, group_id=group, members=(leaving,)))
        assert [m.error_code for m in left.members] == [ErrorCode.none]
    finally:
        wire.close()


@pytest.fixture
def group() -> str:
    return f"cg-group-{uuid.uuid4().hex[:6]}"


def test_list_and_describe_a_group_with_a_member(cluster: Cluster, topic: str, group: str) -> None:
    with member_of(cluster, topic, group) as member:
        listed = tool(cluster, "--list")
        assert listed.returncode == 0, listed.stderr
        assert group in listed.stdout.splitlines()
        stable = tool(cluster, "--list", "--state", "stable")
        assert stable.returncode == 0, stable.stderr
        assert [group, "Stable"] in [line.split() for line in stable.stdout.splitlines()]
        members = tool(cluster, "--describe", "--group", group, "--members", "--verbose")
        assert members.returncode == 0, members.stderr
        header, row = members.stdout.strip("\n").splitlines()
        assert header.split() == [
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "ASSIGNMENT",
        ]
        shown = [group, member.member_id, "w", "/127.0.0.1", "wire-test", "2", f"{topic}(0,1)"]
        assert row.split() == shown
        state = tool(cluster, "--describe", "--group", group, "--state", "--format", "json")
        assert state.returncode == 0, state.stderr
        (described,) = json.loads(state.stdout)
        assert described["state"] == "Stable" and described["members"] == 1
        assert described["assignment_strategy"] == "range"
        assert f"{described['coordinator']['host']}:{described['coordinator']['port']}" in (
            cluster.kafka_bootstrap.split(",")
        )
        refused = tool(
            cluster,
            "--reset-offsets",
            "--group",
            group,
            "--all-topics",
            "--to-earliest",
            "--execute",
        )
        assert refused.returncode == 1
        assert refused.stderr == (
            f"NON_EMPTY_GROUP: Assignments can only be reset if the group '{group}' is inactive, "
            "but the current state is Stable.\n"
        )
    empty = tool(cluster, "--describe", "--group", group, "--members")
    assert empty.returncode == 0, empty.stderr
    assert f"Consumer group '{group}' has no active members." in empty.stderr


def test_a_group_nobody_has_joined_does_not_exist(cluster: Cluster) -> None:
    missing = tool(cluster, "--describe", "--group", "never-joined", "--state")
    assert missing.returncode == 1
    assert missing.stderr == "GROUP_ID_NOT_FOUND: Consumer group 'never-joined' does not exist.\n"


def test_reset_describe_lag_delete_offsets_and_delete(
    cluster: Cluster, topic: str, group: str
) -> None:
    with member_of(cluster, topic, group):
        pass  # the group exists, Empty, without offsets
    plan = tool(cluster, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "1")
    assert plan.returncode == 0, plan.stderr
    assert "WARN: No action will be performed" in plan.stderr
    rows = [line.split() for line in plan.stdout.splitlines()[2:] if line]
    assert rows == [[group, topic, "0", "1"], [group, topic, "1", "1"]]
    assert "Consumer group" in tool(cluster, "--describe", "--group", group).stderr
    executed = tool(
        cluster, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-latest",
        "--execute",
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    described = tool(cluster, "--describe", "--group", group, "--format", "json")
    assert described.returncode == 0, described.stderr
    (offsets,) = json.loads(described.stdout)
    ((row,),) = [offsets["offsets"]]
    end = RECORDS // PARTITIONS
    assert (row["topic"], row["partition"], row["current_offset"]) == (topic, 1, end)
    assert (row["log_end_offset"], row["lag"], row["consumer_id"]) == (end, 0, None)
    shifted = tool(
        cluster, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--shift-by", "-2",
        "--execute",
    )  # fmt: skip
    assert shifted.returncode == 0, shifted.stderr
    text = tool(cluster, "--describe", "--group", group)
    (line,) = [r.split() for r in text.stdout.splitlines()[2:] if r]
    assert line == [group, topic, "1", str(end - 2), str(end), "2", "-", "-", "-"]
    deleted_offsets = tool(cluster, "--delete-offsets", "--group", group, "--topic", topic)
    assert deleted_offsets.returncode == 0, deleted_offsets.stderr
    deleted = tool(cluster, "--delete", "--group", group)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert group not in tool(cluster, "--list").stdout.splitlines()


def test_reset_exported_and_taken_back_from_a_file(
    cluster: Cluster, topic: str, group: str, tmp_path: Path
) -> None:
    with member_of(cluster, topic, group):
        pass  # the group exists, Empty, without offsets
    reset = ("--reset-offsets", "--group", group)
    exported = tool(cluster, *reset, "--topic", topic, "--to-latest", "--export", "--dry-run")
    assert exported.returncode == 0, exported.stderr
    end = RECORDS // PARTITIONS
    assert exported.stdout == f"{topic},0,{end}\n{topic},1,{end}\n\n"
    plan = tmp_path / "plan.csv"
    plan.write_text(exported.stdout.replace(f"{topic},1,{end}", f"{topic},1,1"))
    executed = tool(cluster, *reset, "--from-file", str(plan), "--execute")
    assert executed.returncode == 0, executed.stderr
    current = tool(cluster, *reset, "--topic", topic, "--to-current", "--export", "--dry-run")
    assert current.stdout == f"{topic},0,{end}\n{topic},1,1\n\n"


def test_a_group_with_a_member_is_not_deleted(cluster: Cluster, topic: str, group: str) -> None:
    with member_of(cluster, topic, group):
        refused = tool(cluster, "--delete", "--group", group)
        assert refused.returncode == 1
        assert refused.stdout == (
            f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP: The group is not "
            "empty.\n"
        )
        assert group in tool(cluster, "--list").stdout.splitlines()
        kept = tool(cluster, "--delete-offsets", "--group", group, "--topic", topic)
        assert kept.returncode == 1
        assert kept.stderr.startswith("GROUP_SUBSCRIBED_TO_TOPIC: ")
